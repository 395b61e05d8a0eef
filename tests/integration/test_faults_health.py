"""Health faults on the converged fleet: each fault goes into one node while the others stay healthy;
each is found with the right code on the right node, the healthy nodes pass and finish, and every
fault is cleared again. ECC switched off is reported (audit), enabled when asked (pending a reboot), and
with reboots allowed made current in the same validate run (that node alone rebooted, health run again).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fleet as fleet_lib
from simharness import REPO_ROOT, recap

pytestmark = pytest.mark.sim
CONVERGED = list(fleet_lib.CONVERGED)


def health(fleet, report_dir: Path, *args):
    proc = fleet.playbook(REPO_ROOT / "playbooks" / "validate.yml", "--tags", "health", "--limit", "converged",
                          "-e", f"gpufleet_report_dir={report_dir}", *args)
    assert (report_dir / "health.json").exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc, json.loads((report_dir / "health.json").read_text())


def node_fails(report: dict, node: str) -> list[dict]:
    return [f for f in report["nodes"][node]["findings"] if f["severity"] == "fail"]


def gpus_of(fleet, node: str) -> list[dict]:
    proc = fleet.sim.ansible(node, "-m", "gpufleet.cluster.gpu_info", "-o")
    return json.loads(proc.stdout.split("=>", 1)[1])["gpus"]


ROUNDS = {
    # ecc-disabled rides here too: validate is an audit by default, so it is reported and nothing changes (the
    # ECC test below goes on from there: enabled when asked, made current by validate's own reboot).
    "ecc-and-remap": ({"node1": "ecc-uncorrectable", "node2": "remap-pending", "node3": "ecc-disabled"},
                      {"node1": [("ECC_UNCORRECTABLE_VOLATILE", 0, "ecc.errors.uncorrected.volatile.total"),
                                 ("ECC_UNCORRECTABLE_AGGREGATE", 0, "ecc.errors.uncorrected.aggregate.total")],
                       "node2": [("ROW_REMAP_PENDING", 0, "remapped_rows.pending")],
                       "node3": [("ECC_MODE_DISABLED", 0, "ecc.mode.current")]}),
    "gpu-missing-and-remap-failure": ({"node2": "gpu-missing", "node1": "remap-failure"},
                                      {"node2": [("GPU_MISSING_FROM_DRIVER", None, "driver_gpu_count")],
                                       "node1": [("ROW_REMAP_FAILURE", 0, "remapped_rows.failure")]}),
    # fabric-incomplete rides in this round (node2 stays healthy) rather than a round of its own: each costs ~12 s.
    "ib-port-down": ({"node3": "ib-port-down", "node1": "fabric-incomplete"},
                     {"node3": [("IB_PORT_DOWN", None, None)],
                      "node1": [("FABRIC_STATE_FAILURE", 0, "fabric.state")]}),
}


@pytest.mark.parametrize("round_name", list(ROUNDS))
def test_each_fault_is_found_on_its_node_and_healthy_nodes_pass(fleet, tmp_path, round_name):
    faults, expect = ROUNDS[round_name]
    bus = {n: [g["pci_bus_id"] for g in gpus_of(fleet, n)] for n in expect}
    for node, fault in faults.items():
        fleet.sim.fault(node, fault)
    try:
        proc, report = health(fleet, tmp_path)
        if "ecc-disabled" in faults.values():
            # The audit asks for no reboot: ECC is reported, not changed.
            node = next(n for n, f in faults.items() if f == "ecc-disabled")
            assert fleet.sim.ssh(node, "test -e /var/lib/gpufleet/reboot-required.d/ecc-mode").returncode != 0
    finally:
        for node in faults:
            fleet.sim.clear(node)
    rc = recap(proc.stdout)
    # Health only reads: nothing changed on any node, faulted or not.
    assert {n: r["changed"] for n, r in rc.items()} == {n: 0 for n in CONVERGED}, proc.stdout[-3000:]
    assert proc.returncode != 0, proc.stdout[-6000:]
    assert sorted(report["nodes_failed"]) == sorted(expect), report["lines"]
    for node in CONVERGED:
        if node not in expect:
            assert rc[node]["failed"] == 0, (node, proc.stdout[-3000:])
            assert node_fails(report, node) == []
            continue
        assert rc[node]["failed"] == 1
        fails = node_fails(report, node)
        for code, gpu, counter in expect[node]:
            hit = [f for f in fails if f["code"] == code]
            assert hit, (node, code, report["nodes"][node]["lines"])
            finding = hit[0]
            assert finding["node"] == node
            if gpu is not None:
                assert finding["gpu_index"] == gpu and finding["gpu_bus_id"] == bus[node][gpu]
                assert finding["value"] not in (None, 0, False)
                assert finding["gpu_bus_id"] in report["nodes"][node]["lines"][fails.index(finding)]
            if counter:
                assert finding["counter"] == counter
        assert json.loads((tmp_path / "health" / f"{node}.json").read_text()) == report["nodes"][node]
    if round_name == "gpu-missing-and-remap-failure":
        finding = node_fails(report, "node2")[0]
        assert finding["value"] == 7 and finding["threshold"] == 8
    if round_name == "ib-port-down":
        down = node_fails(report, "node3")[0]
        assert down["ca"] == "mlx5_0" and down["value"] == "Down/Disabled"


def _boot_id(fleet, node: str) -> str:
    return fleet.sim.ssh(node, "cat /proc/sys/kernel/random/boot_id", timeout=30).stdout.strip()


def test_ecc_disabled_is_reported_then_enabled_pending_a_reboot_then_current(fleet, tmp_path):
    fleet.sim.fault("node2", "ecc-disabled")
    try:
        # That validate only reports ECC off by default is the first health round's (ROUNDS["ecc-and-remap"]).
        # Asked by name (a string from -e, typed by the role), it enables ECC pending the reboot; without
        # gpufleet_reboot_ok nothing is rebooted.
        proc, report = health(fleet, tmp_path / "r1", "-e", "gpu_health_ecc_enable=true")
        assert proc.returncode == 0, proc.stdout[-3000:]  # a pending reboot is a warn, not a fail
        codes = {f["code"] for f in report["nodes"]["node2"]["findings"]}
        assert "ECC_ENABLE_PENDING_REBOOT" in codes and "ECC_MODE_DISABLED" not in codes
        assert report["nodes"]["node2"]["ecc_enabled_now"] == list(range(8))
        assert recap(proc.stdout)["node2"]["changed"] >= 1
        request = fleet.sim.ssh("node2", "cat /var/lib/gpufleet/reboot-required.d/ecc-mode")
        assert request.returncode == 0 and "ECC mode enabled" in request.stdout
        for node in ("node1", "node3"):
            assert not [f for f in report["nodes"][node]["findings"] if f["code"].startswith("ECC")]
        # A second run changes nothing anywhere, and the request stays.
        proc, report = health(fleet, tmp_path / "r2", "-e", "gpu_health_ecc_enable=true")
        assert {n: r["changed"] for n, r in recap(proc.stdout).items()} == {n: 0 for n in CONVERGED}
        assert "ECC_ENABLE_PENDING_REBOOT" in {f["code"] for f in report["nodes"]["node2"]["findings"]}
        # With reboots allowed, the same validate run reboots node2 alone, once, and health judges it again:
        # ECC is current, and the verdict says so.
        boots = {node: _boot_id(fleet, node) for node in CONVERGED}
        proc, report = health(fleet, tmp_path / "r3", "-e", "gpu_health_ecc_enable=true", "-e", "gpufleet_reboot_ok=true")
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert "Check GPU node health again after the ECC reboot" in proc.stdout
        after = {node: _boot_id(fleet, node) for node in CONVERGED}
        assert [n for n in CONVERGED if after[n] != boots[n]] == ["node2"], (boots, after)
        assert not [f for f in report["nodes"]["node2"]["findings"] if f["code"].startswith("ECC")], \
            report["nodes"]["node2"]["findings"]
        assert fleet.sim.ssh("node2", "test -e /var/lib/gpufleet/reboot-required.d/ecc-mode").returncode != 0
        assert {g["ecc_mode"]["current"] for g in gpus_of(fleet, "node2")} == {"enabled"}
    finally:
        fleet.sim.clear("node2")
