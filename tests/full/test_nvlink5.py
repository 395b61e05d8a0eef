"""playbooks/gpu_stack.yml on simulated HGX B200 nodes (issue 27 item 5): the plan names the fabric manager and
the NVLink Subnet Manager because gpu_info sees the NVSwitches the way a real B200 host does (no NVSwitch PCI
function; the ConnectX-7 bridge's Limited PFs, VPD SMDL=SW_MNG, Fabric Manager User Guide 2.3 §1.3.2), and the
nodes end with both installed and held, the fabric manager at exactly the driver's version, its unit enabled and
ib_umad loaded at boot for NVLSM; a second run changes nothing.

The request is one the B200 can run (compute capability 10.0 needs CUDA 12.8 or newer); the simulated cluster's
default ({torch: 2.1.2}) is refused for it by the solver. Expected names and versions come from the solver's plan.

Reboots are not allowed here: after a reboot the reboot role waits for `nvidia-smi -L` to answer, and the hgx-b200
profile has no nvidia-smi capture to answer with (none of a B200 was found, tests/sim/manifests/SOURCES.md), so a
rebooted node fails there, as its second run showed. The nodes record the reboot the driver needs instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from simharness import changed_on_nodes, recap

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import FilterModule

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "playbooks" / "gpu_stack.yml"
STACK_PLAN = FilterModule().filters()["stack_plan"]
NAME = "nvlink5"
REQUEST = {"cuda": "12.8", "torch": "2.7.0"}
NODES = ("node1", "node2")


def upstream(version: str) -> str:
    return re.sub(r"-[^-]*$", "", re.sub(r"^\d+:", "", version))


def package_state(cluster, node: str, name: str) -> tuple[str | None, bool]:
    """(installed version or None, held) from dpkg: selection 'h' (hold) in the status abbreviation."""
    out = cluster.ssh(node, f"dpkg-query -W -f='${{db:Status-Abbrev}}|${{Version}}' {name} 2>/dev/null").stdout
    status, version = (out.split("|", 1) + [""])[:2]
    return (version.strip() if status[1:2] == "i" else None), status[:1] == "h"


def test_hgx_b200_installs_and_holds_fabric_manager_and_nvlsm(sim_cluster_factory, tmp_path):
    plan = STACK_PLAN(REQUEST, gpus=["NVIDIA B200"], os="ubuntu22.04", arch="x86_64", nvswitch=True)
    target = plan["driver_recommended_version"]
    assert plan["kernel_modules"] == "open" and plan["fabricmanager_version"] == target
    fabric = plan["packages"]["fabricmanager"] + plan["packages"]["nvlsm"]
    assert plan["packages"]["nvlsm"] == ["nvlsm"] and len(plan["packages"]["fabricmanager"]) == 1, plan["packages"]

    cluster = sim_cluster_factory(NAME, nodes=len(NODES), os="ubuntu22.04", profile=["hgx-b200"])
    reports = tmp_path / "reports"
    extra = ["-e", json.dumps({"gpufleet_stack_request": REQUEST, "gpufleet_reboot_ok": False,
                               "gpufleet_report_dir": str(reports)})]
    first = cluster.playbook(PLAYBOOK, *extra)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-8000:]
    assert all(recap(out)[n]["failed"] == 0 for n in NODES), out[-8000:]

    # What the nodes planned from their own hardware facts: an NVSwitch system, seen through the CX7 bridge.
    stack = {n["node"]: n for n in json.loads((reports / "stack.json").read_text())["nodes"]}
    for node in NODES:
        facts = cluster.ansible(node, "-m", "gpufleet.cluster.gpu_info",
                                "-a", "pci_sysfs_path=/opt/gpufleet-sim/sys/bus/pci/devices include_topology=false")
        assert facts.returncode == 0, facts.stdout + facts.stderr
        for fact, value in (("pci_nvswitch_bridge_count", "2"), ("pci_nvswitch_count", "0"), ("nvswitch", "true")):
            assert re.search(r'\b%s"?:\s*%s\b' % (fact, value), facts.stdout), (fact, facts.stdout)
        assert cluster.ssh(node, "test -e /var/lib/gpufleet/reboot-required.d/driver-installed").returncode == 0
        node_plan = stack[node]["plan"]
        assert node_plan["fabricmanager"] is True and node_plan["kernel_modules"] == "open", node_plan
        assert [w for w in node_plan["warnings"] if "NVLink Subnet Manager (nvlsm" in w], node_plan["warnings"]

        installed = {name: package_state(cluster, node, name) for name in plan["packages"]["driver"] + fabric}
        assert all(version and held for version, held in installed.values()), (node, installed)
        fm = plan["packages"]["fabricmanager"][0]
        assert upstream(installed[fm][0]) == target and upstream(installed["nvidia-open"][0]) == target, (node, installed)
        holds = cluster.ssh(node, "apt-mark showhold").stdout.split()
        assert {fm, "nvlsm", "nvidia-open"} <= set(holds), (node, holds)
        assert cluster.ssh(node, "systemctl is-enabled nvidia-fabricmanager.service").stdout.strip() == "enabled"
        # NVLSM has no unit of its own: the fabric manager's start script launches it, through ib_umad.
        assert "ib_umad" in cluster.ssh(node, "cat /etc/modules-load.d/*nvlsm*").stdout

    # A second run changes nothing on the nodes.
    again = cluster.playbook(PLAYBOOK, *extra)
    assert again.returncode == 0, (again.stdout + again.stderr)[-8000:]
    assert changed_on_nodes(again.stdout) == {}, changed_on_nodes(again.stdout)
