"""fabric.yml and validate.yml --tags health on the simulated cluster.

Faults go into one node per GPU/port problem while another node stays healthy; each is found with
the right code on the right node, the healthy nodes pass and finish, and a second run changes
nothing. /etc/nccl.conf is checked on an IB node (exactly the Active HCAs), a RoCE node (GID index)
and a node without RDMA (socket fallback with a warning).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fixtures_path import FIXTURES
from simharness import recap
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import parse_ibstat

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.sim, pytest.mark.slow]

NAME = "fabric"
SUBNET = "10.200.12.0/24"
ROCE_CAPTURE = FIXTURES / "ibstat" / "h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt"


def health(cluster, report_dir: Path, *args):
    proc = cluster.playbook(REPO / "playbooks" / "validate.yml", "--tags", "health",
                            "-e", f"gpufleet_report_dir={report_dir}", *args)
    assert (report_dir / "health.json").exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc, json.loads((report_dir / "health.json").read_text())


def node_fails(report: dict, node: str) -> list[dict]:
    return [f for f in report["nodes"][node]["findings"] if f["severity"] == "fail"]


def gpus_of(cluster, node: str) -> list[dict]:
    proc = cluster.ansible(node, "-m", "gpufleet.cluster.gpu_info", "-o")
    data = json.loads(proc.stdout.split("=>", 1)[1])
    return data["gpus"]


def wait_for_ssh(cluster, node: str, timeout: int = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if cluster.ssh(node, "systemctl is-system-running --wait || true", timeout=60).returncode == 0:
                return
        except Exception:  # noqa: BLE001 - the node is rebooting; ssh fails until sshd is back
            pass
        time.sleep(3)
    raise AssertionError(f"{node} did not come back within {timeout}s")


@pytest.fixture
def cluster(sim_cluster_factory):
    return sim_cluster_factory(NAME, nodes=3, subnet=SUBNET, preinstall=["driver=535.183.01"])


def test_health_finds_each_fault_on_its_node_and_healthy_nodes_pass(cluster, tmp_path):
    # the fabric stage installs infiniband-diags (ibstat) as validate expects it to have
    proc = cluster.playbook(REPO / "playbooks" / "fabric.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    # baseline: nobody fails, every node finishes
    proc, report = health(cluster, tmp_path / "r0")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["nodes_failed"] == [] and set(report["nodes"]) == set(cluster.nodes)

    bus = {n: [g["pci_bus_id"] for g in gpus_of(cluster, n)] for n in ("node1", "node2")}
    rounds = [
        # (faults, expectations {node: [(code, gpu_index or None, counter or None)]})
        ({"node1": "ecc-uncorrectable", "node2": "remap-pending"},
         {"node1": [("ECC_UNCORRECTABLE_VOLATILE", 0, "ecc.errors.uncorrected.volatile.total"),
                    ("ECC_UNCORRECTABLE_AGGREGATE", 0, "ecc.errors.uncorrected.aggregate.total")],
          "node2": [("ROW_REMAP_PENDING", 0, "remapped_rows.pending")]}),
        ({"node2": "gpu-missing", "node1": "remap-failure"},
         {"node2": [("GPU_MISSING_FROM_DRIVER", None, "driver_gpu_count")],
          "node1": [("ROW_REMAP_FAILURE", 0, "remapped_rows.failure")]}),
        ({"node3": "ib-port-down"},
         {"node3": [("IB_PORT_DOWN", None, None)]}),
    ]
    for i, (faults, expect) in enumerate(rounds, start=1):
        for node, fault in faults.items():
            cluster.fault(node, fault)
        try:
            proc, report = health(cluster, tmp_path / f"r{i}")
        finally:
            for node in faults:
                cluster.clear(node)
        rc = recap(proc.stdout)
        assert proc.returncode != 0, proc.stdout[-6000:]
        assert sorted(report["nodes_failed"]) == sorted(expect), report["lines"]
        for node in cluster.nodes:
            if node in expect:
                assert rc[node]["failed"] == 1
                fails = node_fails(report, node)
                for code, gpu, counter in expect[node]:
                    hit = [f for f in fails if f["code"] == code]
                    assert hit, (node, code, report["nodes"][node]["lines"])
                    f = hit[0]
                    assert f["node"] == node
                    if gpu is not None:
                        assert f["gpu_index"] == gpu and f["gpu_bus_id"] == bus[node][gpu]
                        assert f["value"] not in (None, 0, False)
                        assert f["gpu_bus_id"] in report["nodes"][node]["lines"][fails.index(f)]
                    if counter:
                        assert f["counter"] == counter
                per_node = json.loads((tmp_path / f"r{i}" / "health" / f"{node}.json").read_text())
                assert per_node == report["nodes"][node]
            else:
                assert rc[node]["failed"] == 0, (node, proc.stdout[-3000:])
                assert node_fails(report, node) == []
        if "node2" in expect and expect["node2"][0][0] == "GPU_MISSING_FROM_DRIVER":
            f = node_fails(report, "node2")[0]
            assert f["value"] == 7 and f["threshold"] == 8
        if "node3" in expect:
            down = node_fails(report, "node3")[0]
            assert down["ca"] == "mlx5_0" and down["value"] == "Down/Disabled"


def test_ecc_disabled_is_enabled_pending_until_reboot_then_current(cluster, tmp_path):
    cluster.fault("node2", "ecc-disabled")
    # validate is an audit by default: it reports ECC off and changes nothing.
    proc, report = health(cluster, tmp_path / "r0")
    assert "ECC_MODE_DISABLED" in {f["code"] for f in node_fails(report, "node2")}
    assert {n: r["changed"] for n, r in recap(proc.stdout).items()} == {n: 0 for n in cluster.nodes}
    assert cluster.ssh("node2", "test -e /var/lib/gpufleet/reboot-required.d/ecc-mode").returncode != 0
    # Asked by name (a string from -e, typed by the role), it enables ECC pending the reboot.
    proc, report = health(cluster, tmp_path / "r1", "-e", "gpu_health_ecc_enable=true")
    assert proc.returncode == 0, proc.stdout[-3000:]  # pending reboot is a warn, not a fail
    codes = {f["code"] for f in report["nodes"]["node2"]["findings"]}
    assert "ECC_ENABLE_PENDING_REBOOT" in codes and "ECC_MODE_DISABLED" not in codes
    assert report["nodes"]["node2"]["ecc_enabled_now"] == list(range(8))
    assert recap(proc.stdout)["node2"]["changed"] >= 1
    request = cluster.ssh("node2", "cat /var/lib/gpufleet/reboot-required.d/ecc-mode")
    assert request.returncode == 0 and "ECC mode enabled" in request.stdout
    for node in ("node1", "node3"):
        assert not [f for f in report["nodes"][node]["findings"] if f["code"].startswith("ECC")]

    # a second run changes nothing anywhere, and the request stays
    proc, report = health(cluster, tmp_path / "r2", "-e", "gpu_health_ecc_enable=true")
    assert {n: r["changed"] for n, r in recap(proc.stdout).items()} == {n: 0 for n in cluster.nodes}
    assert "ECC_ENABLE_PENDING_REBOOT" in {f["code"] for f in report["nodes"]["node2"]["findings"]}

    # the batched reboot makes it current
    cluster.ssh("node2", "rm -f /var/lib/gpufleet/reboot-required.d/ecc-mode; systemctl reboot", timeout=60)
    time.sleep(5)
    wait_for_ssh(cluster, "node2")
    cluster.clear("node2")
    proc, report = health(cluster, tmp_path / "r3")
    assert proc.returncode == 0
    assert not [f for f in report["nodes"]["node2"]["findings"] if f["code"].startswith("ECC")]
    assert {g["ecc_mode"]["current"] for g in gpus_of(cluster, "node2")} == {"enabled"}
    assert recap(proc.stdout)["node2"]["changed"] == 0


def _conf(cluster, node: str) -> dict:
    text = cluster.ssh(node, "cat /etc/nccl.conf").stdout
    env = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {"text": text, "env": env}


def test_nccl_conf_on_ib_roce_and_no_rdma_nodes(sim_cluster_factory):
    cluster = sim_cluster_factory(NAME, nodes=3, subnet=SUBNET, preinstall=["driver=535.183.01"],
                                  profile=["node3=rtx4090-workstation"],
                                  captures=[f"node2={ROCE_CAPTURE}"])
    proc = cluster.playbook(REPO / "playbooks" / "fabric.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]

    # IB node: exactly the Active InfiniBand HCAs the node's ibstat shows, BF3 bond left out
    cas = parse_ibstat(cluster.ssh("node1", "ibstat").stdout)
    active_ib = sorted(f"{c['ca']}:{p['port']}" for c in cas for p in c["ports"]
                       if p["state"] == "Active" and p["link_layer"] == "InfiniBand")
    conf = _conf(cluster, "node1")
    assert conf["text"].splitlines()[1] == "# Ansible managed"
    assert sorted(conf["env"]["NCCL_IB_HCA"].lstrip("=").split(",")) == active_ib
    assert "NCCL_IB_GID_INDEX" not in conf["env"] and conf["env"]["NCCL_SOCKET_IFNAME"] == "eth0"

    # RoCE node: the 400G CX-7 group, with a GID index (no sysfs GID table here: default 3, warned)
    conf = _conf(cluster, "node2")
    cx7 = sorted(f"{c['ca']}:1" for c in parse_ibstat(ROCE_CAPTURE.read_text()) if c["ca_type"] == "MT4129")
    assert sorted(conf["env"]["NCCL_IB_HCA"].lstrip("=").split(",")) == cx7
    assert conf["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert "# WARNING: RoCE GID table not readable" in conf["text"]

    # no RDMA: sockets, with the cost spelled out
    conf = _conf(cluster, "node3")
    assert conf["env"] == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}
    assert "# WARNING: No Active RDMA port: NCCL falls back to TCP sockets" in conf["text"]

    # memlock and the honest peermem report (no kernel modules here)
    limits = cluster.ssh("node1", "cat /etc/security/limits.d/90-gpufleet-rdma.conf").stdout
    assert "* hard memlock unlimited" in limits
    assert "nvidia_peermem could not be loaded" in proc.stdout
    assert cluster.ssh("node1", "test -e /etc/modules-load.d/nvidia-peermem.conf").returncode != 0

    # second run: nothing changes
    again = cluster.playbook(REPO / "playbooks" / "fabric.yml")
    assert again.returncode == 0
    assert {n: r["changed"] for n, r in recap(again.stdout).items()} == {n: 0 for n in cluster.nodes}

    # an expected port that goes down is named and fails that node only
    cluster.fault("node1", "ib-port-down")
    down = cluster.playbook(REPO / "playbooks" / "fabric.yml")
    rc = recap(down.stdout)
    assert rc["node1"]["failed"] == 1 and rc["node2"]["failed"] == 0 and rc["node3"]["failed"] == 0
    assert "IB_PORT_DOWN" in down.stdout and "mlx5_0:1" in down.stdout
