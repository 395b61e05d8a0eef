"""playbooks/gpu_stack.yml on the simulated cluster, for real: apt, dpkg, NVIDIA-shaped repositories built from
the sourced manifests in tests/sim/manifests (not from the roles' names), so a role that names a package NVIDIA
does not ship fails here.

Ubuntu 22.04 HGX H100 cluster, one life story (expected names and versions come from the solver's plan for the
simulated cluster's request, {torch: 2.1.2} with CUDA left to the solver: CUDA 12.2 on the supported R595, by
NVIDIA's R590+ names; the repository from the manifest):
  1. first converge with gpufleet_reboot_ok=true: node1 fresh installs the plan's driver names
     (nvidia-driver-pinning-595 at its branch version, nvidia-open) and fabric manager at the plan's version; node2
     (R595 proprietary) names a driver package NVIDIA's repository does not carry and fails with the repository's
     candidates, its packages untouched; node3 has the older packaged 535.54.03, names the end-of-life R535 (planned
     with a warning) and is upgraded to that branch's release; node4 has a .run-installed driver and is reported with
     the choice, never overlaid;
  2. node2 switches proprietary -> open by NVIDIA's R590+ steps; node1 and node3 re-run with changed=0;
  3. node3 moves R535 -> R595: driver and fabric manager (nvidia-fabricmanager-535 -> nvidia-fabricmanager) in one
     transaction, every R535 package gone, held again, one reboot;
  4. a last run changes nothing.
Debian 12: one node converges the default plan (CUDA 12.3 on R580: pinning package, nvidia-open and the other
Debian-style names) and re-runs with changed=0, the roles skipped on the converged-state record; each drift (a torch
file edited, a package unheld, a version moved, a file edited) runs the roles again and is corrected.

Where the solver's recommended release is beyond what the manifest's sources reach (each side is sourced;
tests/unit/sim/test_plan_against_manifests.py lists every such gap), the node pins a release the manifest
holds with gpufleet_driver_version, and the repository check verifies it like the plan's:
  - R580 on Debian 12: plan 580.178.04, manifest up to 580.126.16.
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
# The simulated cluster's request (tests/sim/gfsim/cluster.py), as the sample inventory's: CUDA left to the solver.
REQUEST = {"torch": "2.1.2"}
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


def assert_installed(installed: dict, plan: dict, target: str) -> None:
    """Every driver and fabric manager name of the plan installed and held: at the driver's version, a branch
    pinning package at a version of its branch (NVIDIA versions it 595-1, not by driver release)."""
    for name in plan["packages"]["driver"] + plan["packages"]["fabricmanager"]:
        assert name in installed and installed[name]["held"], (name, installed.get(name))
        if name.startswith("nvidia-driver-pinning-"):
            assert installed[name]["version"].startswith(plan["driver_branch"] + "-"), (name, installed[name])
        else:
            assert upstream(installed[name]["version"]) == target, (name, installed[name])


def write_inventory(path, hostvars: dict, nodes=("node1", "node2", "node3", "node4")) -> str:
    hostvars = {n: hostvars.get(n, {}) for n in nodes}
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hostvars}}}}))
    return str(path)


@pytest.fixture(scope="module")
def ubuntu_cluster():
    with cluster("drvstack", 4, os="ubuntu22.04", profile=["hgx-h100"]) as running:
        yield running


def test_ubuntu_2204_converge_upgrade_run_file_switch_and_branch_upgrade(ubuntu_cluster, tmp_path):
    c = ubuntu_cluster
    plan = plan_for("ubuntu22.04")
    target = plan["driver_recommended_version"]
    assert plan["driver_branch"] == "595" and not plan["driver_branch_eol"]
    assert plan["packages"]["driver"] == ["nvidia-driver-pinning-595", "nvidia-open"]
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabricmanager"]
    plan535 = plan_for("ubuntu22.04", driver_branch="535")
    assert plan535["driver_branch_eol"] and plan535["driver_min_version"] == "535.104.05"
    target535 = plan535["driver_recommended_version"]
    manifest = simmanifest.for_os("ubuntu22.04")
    simlib.install_driver(c.state, "node2", manifest, target, "proprietary")
    simlib.install_driver(c.state, "node3", manifest, "535.54.03", "open")
    simlib.install_driver_runfile(c.state, "node4", "535.183.01", "open")
    node2_before = dpkg(c, "node2")
    assert "nvidia-dkms" in node2_before and "nvidia-open" not in node2_before
    reports = tmp_path / "reports"
    node3_request = {"gpufleet_stack_request": {**REQUEST, "driver_branch": "535"}}
    extra = write_inventory(tmp_path / "run1.yml", {
        # A Canonical-style name for the R595 open driver: NVIDIA's repository does not carry it.
        # Replacing is allowed, so the flavour decision lets it through to the repository check.
        "node2": {"gpufleet_driver_packages": ["nvidia-driver-pinning-595", "nvidia-driver-595-open"],
                  "nvidia_driver_allow_replace": True},
        "node3": node3_request})
    common = ["-e", json.dumps({"gpufleet_report_dir": str(reports), "gpufleet_reboot_ok": True})]

    # 1. First converge.
    first = c.playbook(PLAYBOOK, "-i", extra, *common)
    out = first.stdout + first.stderr
    counts = recap(out)
    text = flat(out)
    assert counts["node1"]["failed"] == 0 and counts["node3"]["failed"] == 0, out[-6000:]
    assert counts["node2"]["failed"] == 1 and counts["node4"]["failed"] == 1, out[-6000:]
    # node1: exactly the plan's names at the plan's version (the pinning package at its branch), with fabric
    # manager, held; the open kernel module of R595's unversioned names.
    node1 = dpkg(c, "node1")
    assert_installed(node1, plan, target)
    assert "nvidia-dkms-open" in node1 and "nvidia-dkms" not in node1
    assert not [p for p in node1 if re.search(r"-5\d\d(-open)?$", p) and not p.startswith("nvidia-driver-pinning-")], node1
    # node2: failed on the repository check, naming what the repository has, before any package moved.
    refusal = re.search(r"node2: the repository \S+ cannot serve the plan: (.{0,800})", text)
    node2_fatal = re.search(r"fatal: \[node2\].{0,2000}", out, re.S)
    assert refusal, node2_fatal.group(0) if node2_fatal else out[-6000:]
    assert re.search(r"nvidia-driver-595-open is not in the repository; it offers [^.]*nvidia-driver-open\b",
                     refusal.group(1)), refusal.group(0)
    assert "Nothing was installed on this node" in text
    assert dpkg(c, "node2") == node2_before
    # node3: the named end-of-life R535 is planned with a warning; its 535.54.03 below the floor is upgraded.
    assert re.search(r"node3: (?:(?!node\d: ).)*driver branch 535 is end of life", text), out[-6000:]
    node3 = dpkg(c, "node3")
    assert_installed(node3, plan535, target535)
    assert upstream(node3["nvidia-utils-535"]["version"]) == target535
    assert re.search(r"node3: upgrading nvidia-utils-535 535\.54\.03 to " + re.escape(target535), text), out[-6000:]
    # node4: the .run driver is reported with the choice and nothing is laid over it.
    assert re.search(r"node4: a driver that no package owns is installed .*nvidia-uninstall.*"
                     r"nvidia_driver_keep_unpackaged: true", text), out[-6000:]
    assert not [p for p in dpkg(c, "node4") if p.startswith(("nvidia-", "cuda-drivers"))]
    stack = {n["node"]: n for n in json.loads((reports / "stack.json").read_text())["nodes"]}
    assert stack["node1"]["installed"]["driver"] == target and stack["node3"]["installed"]["driver"] == target535
    assert stack["node1"]["installed"]["driver_loaded"] == target, stack["node1"]["installed"]

    # 2. node2 switches proprietary -> open by NVIDIA's R590+ steps; node1 and node3 have nothing left to do.
    extra = write_inventory(tmp_path / "run2.yml", {"node2": {"nvidia_driver_allow_replace": True}, "node3": node3_request})
    second = c.playbook(PLAYBOOK, "-i", extra, *common, "--limit", "node1,node2,node3")
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-6000:]
    changed = changed_on_nodes(out)
    assert not changed.get("node1") and not changed.get("node3"), changed
    assert "node2: switching nvidia-utils " + target + " from proprietary to open kernel modules" in flat(out)
    node2 = dpkg(c, "node2")
    assert "nvidia-dkms" not in node2 and "nvidia-dkms-open" in node2 and "nvidia-driver" not in node2
    assert_installed(node2, plan, target)

    # 3. R535 -> R595 on node3: driver and fabric manager together, held again, one reboot.
    extra = write_inventory(tmp_path / "run3.yml", {"node3": {"nvidia_driver_allow_replace": True}})
    third = c.playbook(PLAYBOOK, "-i", extra, *common, "--limit", "node3")
    out = third.stdout + third.stderr
    assert third.returncode == 0, out[-6000:]
    assert "node3: replacing nvidia-utils-535 " + target535 + " with nvidia-driver-pinning-595 nvidia-open " \
           "nvidia-fabricmanager " + target in flat(out), out[-6000:]
    node3 = dpkg(c, "node3")
    assert_installed(node3, plan, target)
    assert not [p for p in node3 if p.endswith("-535") or "-535-" in p], node3
    assert reboots(out, "node3") == 1, out[-4000:]
    stack = {n["node"]: n for n in json.loads((reports / "stack.json").read_text())["nodes"]}
    assert stack["node3"]["installed"]["driver"] == target
    assert stack["node3"]["installed"]["driver_loaded"] == target
    assert c.ssh("node3", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"

    # 4. Nothing left to do anywhere that converged.
    extra = write_inventory(tmp_path / "run4.yml", {})
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
    # The default plan there: NVIDIA's debian12 repository starts at CUDA 12.3, the driver is the supported R580.
    plan = plan_for("debian12")
    assert plan["cuda_version"] == "12.3" and plan["driver_branch"] == "580"
    assert plan["packages"]["driver"] == ["nvidia-driver-pinning-580", "nvidia-open"]
    # The plan's 580.178.04 is beyond what the manifest's sources reach: pin the newest R580 it holds.
    target = max(simmanifest.for_os("debian12").driver_upstreams(), key=lambda v: [int(x) for x in v.split(".")])
    assert target.startswith("580.")
    extra = write_inventory(tmp_path / "deb.yml", {"node1": {"gpufleet_driver_version": target}}, nodes=("node1",))
    args = ["-i", extra, "-e", json.dumps({"gpufleet_report_dir": str(tmp_path / "r"), "gpufleet_reboot_ok": True})]
    first = c.playbook(PLAYBOOK, *args)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-6000:]
    installed = dpkg(c, "node1")
    assert_installed(installed, plan, target)
    # The pinning package at the newest revision of its branch the repository holds: what apt installs.
    pinning = simmanifest.for_os("debian12").versions("nvidia-driver-pinning-580")
    assert installed["nvidia-driver-pinning-580"]["version"] == max(pinning, key=lambda v: int(v.split("-")[1]))
    assert "nvidia-kernel-open-dkms" in installed and "nvidia-smi" in installed
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
    c.ssh("node1", "apt-mark unhold nvidia-open && "
                   f"apt-get install -y -q --allow-downgrades --allow-change-held-packages libnccl2={other} "
                   f"libnccl-dev={other} && echo '# edited by the drift test' >> /etc/profile.d/gpufleet-cuda.sh")
    assert not dpkg(c, "node1")["nvidia-open"]["held"] and dpkg(c, "node1")["libnccl2"]["version"] == other
    drifted = c.playbook(PLAYBOOK, *args)
    out = drifted.stdout + drifted.stderr
    assert drifted.returncode == 0, out[-6000:]
    said = flat(out)
    for moved in ("package nvidia-open: recorded hold ok installed", f"package libnccl2: recorded hold ok installed {nccl}",
                  "file /etc/profile.d/gpufleet-cuda.sh: recorded file"):
        assert moved in said, (moved, out[-6000:])
    assert changed_on_nodes(out).get("node1"), out[-4000:]
    after = dpkg(c, "node1")
    assert after["nvidia-open"]["held"] and after["libnccl2"]["version"] == nccl and after["libnccl2"]["held"]
    assert "edited" not in c.ssh("node1", "cat /etc/profile.d/gpufleet-cuda.sh").stdout
    settled = c.playbook(PLAYBOOK, *args)
    out = settled.stdout + settled.stderr
    assert settled.returncode == 0 and changed_on_nodes(out) == {}, out[-6000:]
    assert re.search(r"TASK \[Run the stack roles\][^\n]*\nskipping: \[node1\]", out), out[-6000:]


@pytest.fixture(scope="module")
def noble_cluster():
    with cluster("drvnoble", 3, os="ubuntu24.04", profile=["hgx-h100"]) as running:
        yield running


def test_ubuntu_2404_cuda_13_torch_2_13_side_by_side_toolkits_and_a_missing_wheel(noble_cluster, tmp_path):
    """Ubuntu 24.04 nodes (the simulator's Debian 12 tree with Ubuntu 24.04's identity, on NVIDIA's ubuntu2404
    repository as its manifest holds it): CUDA 13.2 with torch 2.13 converges and re-runs with changed=0. The torch
    the simulator installs is its labelled CPU build, 2.13.0+cpu (gpufleet_pytorch_override in its inventory):
    the CUDA wheels cannot be reached here. node2 installs CUDA 12.5 and 13.2 side by side, each with its NCCL;
    node3 asks for a torch the wheel directory lacks and stops before anything moves."""
    c = noble_cluster
    request = {"cuda": "13.2", "torch": "2.13.0"}
    plan = STACK_PLAN(request, gpus=H100, os="ubuntu24.04", arch="x86_64", nvswitch=True)
    assert plan["cuda_version"] == "13.2" and plan["torch"]["version"] == "2.13.0" and not plan["driver_branch_eol"]
    both = STACK_PLAN({**request, "cuda": ["12.5", "13.2"]}, gpus=H100, os="ubuntu24.04", arch="x86_64", nvswitch=True)
    older = both["toolkits"][0]
    assert older["cuda_version"] == "12.5" and both["driver_recommended_version"] == plan["driver_recommended_version"]
    target = plan["driver_recommended_version"]
    extra = write_inventory(tmp_path / "noble.yml", {
        "node1": {"gpufleet_stack_request": request},
        "node2": {"gpufleet_stack_request": {**request, "cuda": ["12.5", "13.2"]}},
        "node3": {"gpufleet_stack_request": request, "gpufleet_pytorch_override": {"version": "2.12.0", "variant": "cpu"}}},
        nodes=("node1", "node2", "node3"))
    args = ["-i", extra, "-e", json.dumps({"gpufleet_report_dir": str(tmp_path / "r"), "gpufleet_reboot_ok": True})]
    first = c.playbook(PLAYBOOK, *args)
    out = first.stdout + first.stderr
    counts = recap(out)
    assert counts["node1"]["failed"] == 0 and counts["node2"]["failed"] == 0, out[-6000:]
    # node3: the wheel directory is asked before anything moves; what it offers is named.
    assert counts["node3"]["failed"] == 1, out[-6000:]
    assert re.search(r"node3: the wheel directory \S+ has no torch 2\.12\.0\+cpu for cp3\d+ on x86_64; it offers cpu "
                     r"2\.13\.0\+cpu\. Nothing was installed on this node\.", flat(out)), out[-6000:]
    assert not [p for p in dpkg(c, "node3") if p.startswith(("nvidia-", "cuda-", "libnccl"))]
    for node in ("node1", "node2"):
        installed = dpkg(c, node)
        assert_installed(installed, plan, target)
        assert installed["libnccl2"]["version"] == plan["nccl_package_version"] and installed["libnccl2"]["held"]
        assert "release 13.2," in c.ssh(node, "/usr/local/cuda/bin/nvcc --version").stdout
        assert c.ssh(node, "/opt/gpufleet/venv/bin/python -c 'import torch; print(torch.__version__)'").stdout.strip() \
            == "2.13.0+cpu"
    # node2: both toolkits, 13.2 the default; the 12.5 toolkit's NCCL build unpacked beside the system one.
    node2 = dpkg(c, "node2")
    assert node2["cuda-toolkit-12-5"]["held"] and node2["cuda-toolkit-13-2"]["held"]
    assert "release 12.5," in c.ssh("node2", "/usr/local/cuda-12.5/bin/nvcc --version").stdout
    nccl_dir = f"/opt/gpufleet/nccl/cuda-{older['cuda_version']}"
    assert c.ssh("node2", f"cat {nccl_dir}/VERSION").stdout.strip() == older["nccl_package_version"]
    assert f"built for CUDA {older['cuda_version']}" in c.ssh(
        "node2", f"cat {nccl_dir}/usr/lib/x86_64-linux-gnu/libnccl.so.2").stdout
    stack = {n["node"]: n for n in json.loads((tmp_path / "r" / "stack.json").read_text())["nodes"]}
    assert stack["node2"]["installed"]["cuda_toolkits"] == ["12.5", "13.2"], stack["node2"]["installed"]
    assert stack["node1"]["installed"]["driver_loaded"] == target

    # Re-run: nothing changes on the converged nodes.
    again = c.playbook(PLAYBOOK, *args, "--limit", "node1,node2")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-6000:]
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)
    # And with the roles made to run (no converged-state skip), still nothing changes.
    full = c.playbook(PLAYBOOK, *args, "--limit", "node1,node2", "-e", "gpufleet_stack_full=true")
    out = full.stdout + full.stderr
    assert full.returncode == 0, out[-6000:]
    assert "TASK [gpufleet.cluster.nvidia_driver : Report the decision]" in out, out[-4000:]
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)


def test_ubuntu_2404_a_request_without_torch_plans_one_converges_and_reruns_unchanged(noble_cluster, tmp_path):
    """{"cuda": "13.0"} with no torch (issue 34): it once installed CUDA and NCCL on every node, then crashed on the
    missing torch. The plan now names the torch it chose for CUDA 13.0 and Ubuntu 24.04's Python, and why; node3
    (left bare by the test above: its request stopped before anything moved) converges and re-runs with changed=0.
    The torch installed is the simulator's labelled CPU build (gpufleet_pytorch_override), as above."""
    c = noble_cluster
    request = {"cuda": "13.0"}
    plan = STACK_PLAN(request, gpus=H100, os="ubuntu24.04", arch="x86_64", nvswitch=True)
    assert plan["cuda_version"] == "13.0" and plan["torch"]["version"], plan.get("torch")
    assert "torch" in plan["reasons"] and plan["reasons"]["torch"], plan["reasons"]
    assert not [p for p in dpkg(c, "node3") if p.startswith(("nvidia-", "cuda-", "libnccl"))]
    extra = write_inventory(tmp_path / "cuda-only.yml", {"node3": {"gpufleet_stack_request": request}}, nodes=("node3",))
    args = ["-i", extra, "-e", json.dumps({"gpufleet_report_dir": str(tmp_path / "r"), "gpufleet_reboot_ok": True}),
            "--limit", "node3"]
    first = c.playbook(PLAYBOOK, *args)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-6000:]
    installed = dpkg(c, "node3")
    assert_installed(installed, plan, plan["driver_recommended_version"])
    assert installed["libnccl2"]["version"] == plan["nccl_package_version"] and installed["libnccl2"]["held"]
    assert "release 13.0," in c.ssh("node3", "/usr/local/cuda/bin/nvcc --version").stdout
    assert c.ssh("node3", "/opt/gpufleet/venv/bin/python -c 'import torch; print(torch.__version__)'").stdout.strip() \
        == "2.13.0+cpu"
    again = c.playbook(PLAYBOOK, *args)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-6000:]
    assert changed_on_nodes(out) == {}, changed_on_nodes(out)
