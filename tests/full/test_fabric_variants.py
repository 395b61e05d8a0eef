"""fabric.yml on three kinds of node: /etc/nccl.conf on an IB node (exactly the Active HCAs), a RoCE node
(GID index) and a node without RDMA (socket fallback with a warning); a second run changes nothing; an
expected port that goes down fails that node only. (Health faults on one hardware kind are the fast
tier's: tests/integration/test_faults_health.py.)
"""

from __future__ import annotations

from pathlib import Path

from fixtures_path import FIXTURES
from simharness import recap
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import parse_ibstat

REPO = Path(__file__).resolve().parents[2]

NAME = "fabric"
ROCE_CAPTURE = FIXTURES / "ibstat" / "h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt"


def _conf(cluster, node: str) -> dict:
    text = cluster.ssh(node, "cat /etc/nccl.conf").stdout
    env = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {"text": text, "env": env}


def test_nccl_conf_on_ib_roce_and_no_rdma_nodes(sim_cluster_factory):
    cluster = sim_cluster_factory(NAME, nodes=3, preinstall=["driver=535.183.01"],
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
