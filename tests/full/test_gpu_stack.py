"""playbooks/gpu_stack.yml on the simulated cluster, for real: apt, dpkg, NVIDIA-shaped repositories built from
the sourced manifests in tests/sim/manifests (not from the roles' names), so a role that names a package NVIDIA
does not ship fails here.

Ubuntu 22.04 HGX H100 cluster, one life story (expected names and versions come from the solver's plan, the
repository from the manifest):
  1. first converge with gpufleet_reboot_ok=true: node1 fresh installs the plan's driver names
     (nvidia-kernel-open-535, cuda-drivers-535) and fabric manager at the plan's version; node2 names a driver
     package NVIDIA's repository does not carry and fails with the repository's candidates, its packages
     untouched; node3 has the older packaged 535.54.03 and is upgraded to the plan's version; node4 has a
     .run-installed driver and is reported with the choice, never overlaid;
  2. node2 (proprietary 535 at the plan's version) switches to the open modules by NVIDIA's steps; node1 and
     node3 re-run with changed=0;
  3. node1 moves R535 -> R570: driver and fabric manager in one transaction, held again, one reboot;
  4. a last run changes nothing.
Debian 12: one node converges from the debian12 manifest's Debian-style names and re-runs with changed=0, the roles
skipped on the converged-state record; each drift (a torch file edited, a package unheld, a version moved, a file
edited) runs the roles again and is corrected.

Where the solver's recommended release is beyond what the manifest's sources reach (each side is sourced;
tests/unit/sim/test_plan_against_manifests.py lists every such gap), the node pins a release the manifest
holds with gpufleet_driver_version, and the repository check verifies it like the plan's:
  - R570 on Ubuntu: plan 570.211.01, manifest up to 570.172.08;
  - R550 on Debian 12: plan 550.163.01, manifest up to 550.127.08.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from gfsim import manifest as simmanifest
from simharness import changed_on_nodes, cluster, recap, simlib

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import FilterModule

PLAYBOOK = "playbooks/gpu_stack.yml"
pytestmark = [pytest.mark.sim, pytest.mark.slow]
STACK_PLAN = FilterModule().filters()["stack_plan"]
H100 = ["NVIDIA H100 80GB HBM3"]
REQUEST = {"cuda": "12.2", "torch": "2.1.2"}
MANIFEST_NCCL_122 = "2.19.3-1+cuda12.2"
PACKAGE_GLOBS = "'nvidia-*' 'cuda-drivers*' 'libnvidia-*' 'cuda-toolkit-*' libnccl2 libnccl-dev"


def flat(output: str) -> str:
    """The run's output with whitespace runs folded, so messages the YAML callback wraps read as one line."""
    return re.sub(r"\s+", " ", output)


def dpkg(cluster, node: str) -> dict:
    out = cluster.ssh(node, f"dpkg-query -W -f='${{Package}} ${{Version}} ${{db:Status-Abbrev}}\\n' {PACKAGE_GLOBS} "
                            "2>/dev/null").stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2][1] == "i":
            found[parts[0]] = {"version": parts[1], "held": parts[2][0] == "h"}
    return found


def reboots(output: str, node: str) -> int:
    """How often the reboot role rebooted the node in this run."""
    return len(re.findall(r"TASK \[gpufleet\.cluster\.reboot : Reboot the node\][^\n]*\n(?:[^\n]+\n)*?changed: \["
                          + re.escape(node) + r"\]", output))


def upstream(version: str) -> str:
    return re.sub(r"-[^-]*$", "", re.sub(r"^\d+:", "", version))


def plan_for(os_name: str, **request) -> dict:
    return STACK_PLAN({**REQUEST, **request}, gpus=H100, os=os_name, arch="x86_64", nvswitch=True)


def write_inventory(path, hostvars: dict, nodes=("node1", "node2", "node3", "node4")) -> str:
    hostvars = {n: {"gpufleet_nccl_version": MANIFEST_NCCL_122, **hostvars.get(n, {})} for n in nodes}
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hostvars}}}}))
    return str(path)


@pytest.fixture(scope="module")
def ubuntu_cluster():
    with cluster("drvstack", 4, os="ubuntu22.04", profile=["hgx-h100"]) as running:
        yield running


def test_ubuntu_2204_converge_upgrade_run_file_switch_and_branch_upgrade(ubuntu_cluster, tmp_path):
    c = ubuntu_cluster
    plan = plan_for("ubuntu22.04")
    target, floor = plan["driver_recommended_version"], plan["driver_min_version"]
    assert plan["packages"]["driver"] == ["nvidia-kernel-open-535", "cuda-drivers-535"]
    assert floor == "535.104.05"
    manifest = simmanifest.for_os("ubuntu22.04")
    simlib.install_driver(c.state, "node2", manifest, target, "proprietary")
    simlib.install_driver(c.state, "node3", manifest, "535.54.03", "open")
    simlib.install_driver_runfile(c.state, "node4", "535.183.01", "open")
    node2_before = dpkg(c, "node2")
    assert "nvidia-dkms-535" in node2_before and "nvidia-kernel-open-535" not in node2_before
    reports = tmp_path / "reports"
    extra = write_inventory(tmp_path / "run1.yml", {
        # Canonical's name for the R535 open driver: NVIDIA's repository does not carry it.
        # Replacing is allowed, so the flavour decision lets it through to the repository check.
        "node2": {"gpufleet_driver_packages": ["nvidia-driver-535-open", "cuda-drivers-535"],
                  "nvidia_driver_allow_replace": True}})
    common = ["-e", json.dumps({"gpufleet_report_dir": str(reports), "gpufleet_reboot_ok": True})]

    # 1. First converge.
    first = c.playbook(PLAYBOOK, "-i", extra, *common)
    out = first.stdout + first.stderr
    counts = recap(out)
    text = flat(out)
    assert counts["node1"]["failed"] == 0 and counts["node3"]["failed"] == 0, out[-6000:]
    assert counts["node2"]["failed"] == 1 and counts["node4"]["failed"] == 1, out[-6000:]
    # node1: exactly the plan's names at the plan's version, with fabric manager, held.
    node1 = dpkg(c, "node1")
    for name in plan["packages"]["driver"] + plan["packages"]["fabricmanager"]:
        assert upstream(node1[name]["version"]) == target and node1[name]["held"], (name, node1.get(name))
    assert "nvidia-dkms-535-open" in node1 and "nvidia-dkms-535" not in node1
    assert "nvidia-driver-535-open" not in node1
    # node2: failed on the repository check, naming what the repository has, before any package moved.
    refusal = re.search(r"node2: the repository \S+ cannot serve the plan: (.{0,800})", text)
    node2_fatal = re.search(r"fatal: \[node2\].{0,2000}", out, re.S)
    assert refusal, node2_fatal.group(0) if node2_fatal else out[-6000:]
    assert re.search(r"nvidia-driver-535-open is not in the repository; it offers [^.]*nvidia-driver-535\b",
                     refusal.group(1)), refusal.group(0)
    assert "Nothing was installed on this node" in text
    assert dpkg(c, "node2") == node2_before
    # node3: the old 535.54.03 below the floor is upgraded, not kept.
    node3 = dpkg(c, "node3")
    assert upstream(node3["cuda-drivers-535"]["version"]) == target
    assert upstream(node3["nvidia-utils-535"]["version"]) == target
    assert re.search(r"node3: upgrading nvidia-utils-535 535\.54\.03 to " + re.escape(target), text), out[-6000:]
    # node4: the .run driver is reported with the choice and nothing is laid over it.
    assert re.search(r"node4: a driver that no package owns is installed .*nvidia-uninstall.*"
                     r"nvidia_driver_keep_unpackaged: true", text), out[-6000:]
    assert not [p for p in dpkg(c, "node4") if p.startswith(("nvidia-", "cuda-drivers"))]
    stack = {n["node"]: n for n in json.loads((reports / "stack.json").read_text())["nodes"]}
    assert stack["node1"]["installed"]["driver"] == target and stack["node3"]["installed"]["driver"] == target
    assert stack["node1"]["installed"]["driver_loaded"] == target, stack["node1"]["installed"]

    # 2. node2 switches proprietary -> open by NVIDIA's steps; node1 and node3 have nothing left to do.
    extra = write_inventory(tmp_path / "run2.yml", {"node2": {"nvidia_driver_allow_replace": True}})
    second = c.playbook(PLAYBOOK, "-i", extra, *common, "--limit", "node1,node2,node3")
    out = second.stdout + second.stderr
    counts = recap(out)
    assert second.returncode == 0, out[-6000:]
    changed = changed_on_nodes(out)
    assert not changed.get("node1") and not changed.get("node3"), changed
    assert "node2: switching nvidia-utils-535 " + target + " from proprietary to open kernel modules" in flat(out)
    node2 = dpkg(c, "node2")
    assert "nvidia-dkms-535" not in node2 and "nvidia-dkms-535-open" in node2
    assert node2["nvidia-kernel-open-535"]["held"] and upstream(node2["nvidia-kernel-open-535"]["version"]) == target

    # 3. R535 -> R570 on node1: driver and fabric manager together, held again, one reboot.
    plan570 = plan_for("ubuntu22.04", driver_branch="570")
    assert plan570["driver_branch"] == "570" and plan570["packages"]["fabricmanager"] == ["nvidia-fabricmanager-570"]
    assert plan570["packages"]["driver"] == ["nvidia-open-570"]
    # The plan's 570.211.01 is beyond what the manifest's sources reach: pin the newest it holds.
    target570 = "570.172.08"
    extra = write_inventory(tmp_path / "run3.yml", {"node1": {
        "gpufleet_stack_request": {**REQUEST, "driver_branch": "570"}, "nvidia_driver_allow_replace": True,
        "gpufleet_driver_version": target570}})
    third = c.playbook(PLAYBOOK, "-i", extra, *common, "--limit", "node1")
    out = third.stdout + third.stderr
    assert third.returncode == 0, out[-6000:]
    node1 = dpkg(c, "node1")
    for name in plan570["packages"]["driver"] + plan570["packages"]["fabricmanager"]:
        assert upstream(node1[name]["version"]) == target570 and node1[name]["held"], (name, node1.get(name))
    assert not [p for p in node1 if p.endswith("-535") or "-535-" in p], node1
    assert reboots(out, "node1") == 1, out[-4000:]
    stack = {n["node"]: n for n in json.loads((reports / "stack.json").read_text())["nodes"]}
    assert stack["node1"]["installed"]["driver"] == target570
    assert stack["node1"]["installed"]["driver_loaded"] == target570
    assert c.ssh("node1", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"

    # 4. Nothing left to do anywhere that converged.
    again = c.playbook(PLAYBOOK, "-i", extra, *common, "--limit", "node1,node2,node3")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert set(recap(out)) == {"node1", "node2", "node3"}, out[-4000:]
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)


@pytest.fixture(scope="module")
def debian_cluster():
    with cluster("drvdeb12", 1, os="debian12", profile=["hgx-h100"]) as running:
        yield running


def test_debian_12_converges_from_debian_style_names_and_reruns_unchanged(debian_cluster, tmp_path):
    c = debian_cluster
    # NVIDIA's debian12 repository starts at CUDA 12.3 / R545: ask for what it carries.
    request = {"cuda": "12.4", "torch": "2.4.1", "driver_branch": "550"}
    plan = STACK_PLAN(request, gpus=H100, os="debian12", arch="x86_64", nvswitch=True)
    assert plan["packages"]["driver"] == ["nvidia-kernel-open-dkms", "cuda-drivers-550"]
    target = "550.127.08"
    extra = write_inventory(tmp_path / "deb.yml", {"node1": {"gpufleet_stack_request": request,
                                                             "gpufleet_nccl_version": plan["nccl_package_version"],
                                                             "gpufleet_driver_version": target}}, nodes=("node1",))
    args = ["-i", extra, "-e", json.dumps({"gpufleet_report_dir": str(tmp_path / "r"), "gpufleet_reboot_ok": True})]
    first = c.playbook(PLAYBOOK, *args)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-6000:]
    installed = dpkg(c, "node1")
    for name in plan["packages"]["driver"] + plan["packages"]["fabricmanager"]:
        assert upstream(installed[name]["version"]) == target, (name, installed.get(name))
        assert installed[name]["held"], name
    again = c.playbook(PLAYBOOK, *args)
    out = again.stdout + again.stderr
    assert again.returncode == 0 and "node1" in recap(out), out[-6000:]
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)
    # The re-run found the node as recorded after its converge and skipped the roles (issue 17) ...
    why = re.findall(r"node1: running the stack roles:.{0,1500}", flat(out))
    assert re.search(r"TASK \[Run the stack roles\][^\n]*\nskipping: \[node1\]", out), why or out[-6000:]
    assert "TASK [gpufleet.cluster." not in out.split("PLAY [Find the nodes that need a reboot]")[0], out[-6000:]

    # ... but an edited torch file is a drift it must catch: the roles run, the import runs again and fails.
    torch_init = "$(ls /opt/gpufleet/venv/lib/python3*/site-packages/torch/__init__.py)"
    c.ssh("node1", f"echo 'raise ImportError(\"edited by the drift test\")' >> {torch_init}")
    edited = c.playbook(PLAYBOOK, *args)
    out = edited.stdout + edited.stderr
    assert edited.returncode != 0 and recap(out)["node1"]["failed"] == 1, out[-6000:]
    assert "node1: running the stack roles: 1 observation(s) moved since the record: venv /opt/gpufleet/venv" \
        in flat(out), out[-6000:]
    assert re.search(r"node1: torch in /opt/gpufleet/venv does not match the plan.{0,400}edited by the drift test",
                     flat(out)), out[-6000:]
    # Put back, the import runs again (the file's mtime moved), passes, and nothing else changes.
    c.ssh("node1", f"sed -i '$d' {torch_init}")
    restored = c.playbook(PLAYBOOK, *args)
    out = restored.stdout + restored.stderr
    assert restored.returncode == 0, out[-6000:]
    assert re.search(r"TASK \[gpufleet\.cluster\.pytorch : Ask torch what it is\][^\n]*\nok: \[node1\]", out), out[-6000:]
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)

    # Every other drift the roles correct is caught too, each named: a package unheld, a version moved,
    # a file edited. One run puts all three back; the run after it skips the roles again.
    nccl = dpkg(c, "node1")["libnccl2"]["version"]
    other = next(v for v in c.ssh("node1", "apt-cache madison libnccl2 | awk '{print $3}'").stdout.split()
                 if v != nccl)
    c.ssh("node1", "apt-mark unhold cuda-drivers-550 && "
                   f"apt-get install -y -q --allow-downgrades --allow-change-held-packages libnccl2={other} "
                   f"libnccl-dev={other} && echo '# edited by the drift test' >> /etc/profile.d/gpufleet-cuda.sh")
    assert not dpkg(c, "node1")["cuda-drivers-550"]["held"] and dpkg(c, "node1")["libnccl2"]["version"] == other
    drifted = c.playbook(PLAYBOOK, *args)
    out = drifted.stdout + drifted.stderr
    assert drifted.returncode == 0, out[-6000:]
    said = flat(out)
    for moved in ("package cuda-drivers-550: recorded hold ok installed", f"package libnccl2: recorded hold ok installed {nccl}",
                  "file /etc/profile.d/gpufleet-cuda.sh: recorded file"):
        assert moved in said, (moved, out[-6000:])
    assert changed_on_nodes(out).get("node1"), out[-4000:]
    after = dpkg(c, "node1")
    assert after["cuda-drivers-550"]["held"] and after["libnccl2"]["version"] == nccl and after["libnccl2"]["held"]
    assert "edited" not in c.ssh("node1", "cat /etc/profile.d/gpufleet-cuda.sh").stdout
    settled = c.playbook(PLAYBOOK, *args)
    out = settled.stdout + settled.stderr
    assert settled.returncode == 0 and changed_on_nodes(out) == {}, out[-6000:]
    assert re.search(r"TASK \[Run the stack roles\][^\n]*\nskipping: \[node1\]", out), out[-6000:]
