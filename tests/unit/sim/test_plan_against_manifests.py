"""The solver's plans against the simulated repositories' sourced manifests.

Both sides are sourced independently (plugins/module_utils/compat_*.py and tests/sim/manifests);
this test is where they meet. Every package name a plan installs must exist in the manifest of
that OS. A planned version the manifest does not hold is listed in VERSION_GAPS with the reason,
so a new disagreement fails here, and so does a gap that has closed (the list must shrink with it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import FilterModule

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim"))
from gfsim import manifest as simmanifest  # noqa: E402

STACK_PLAN = FilterModule().filters()["stack_plan"]
H100 = ["NVIDIA H100 80GB HBM3"]

CASES = [
    ("ubuntu22.04", {"torch": "2.8.0"}),                    # the sample inventory's request: R595, CUDA 12.2
    ("ubuntu22.04", {"cuda": "12.2", "torch": "2.1.2"}),
    ("ubuntu22.04", {"cuda": "12.2", "torch": "2.1.2", "kernel_modules": "proprietary"}),
    ("ubuntu22.04", {"cuda": "12.2", "torch": "2.1.2", "driver_branch": "580"}),
    ("ubuntu22.04", {"cuda": "12.4", "torch": "2.4.1", "driver_branch": "550"}),
    ("ubuntu22.04", {"cuda": "12.8", "torch": "2.7.0", "driver_branch": "570"}),
    ("debian12", {"torch": "2.8.0"}),                       # the sample request: R580, CUDA 12.3
    ("debian12", {"cuda": "12.4", "torch": "2.4.1", "driver_branch": "550"}),
    ("debian12", {"cuda": "12.8", "torch": "2.7.0", "driver_branch": "570"}),
    ("ubuntu24.04", {"torch": "2.8.0"}),                    # the sample request: R595, CUDA 12.5
    ("ubuntu22.04", {"torch": "2.1.2"}),                    # the sample request before issue 34 (no cp312 wheel)
    ("ubuntu24.04", {"cuda": "13.0", "torch": "2.9.0"}),
    ("ubuntu24.04", {"cuda": "13.2", "torch": "2.12.0", "kernel_modules": "proprietary"}),
]

CASE_IDS = [f"{o}-{r.get('cuda', 'default')}-{r.get('driver_branch', 'default')}-{r.get('kernel_modules', 'open')}"
            for o, r in CASES]

# The solver's OS names and the manifest each is checked against (ubuntu2404 is data only: the
# simulator does not offer --os ubuntu24.04 yet, so it is loaded by repository name).
REPOSITORIES = {"ubuntu22.04": "ubuntu2204", "debian12": "debian12", "ubuntu24.04": "ubuntu2404"}

# (os, what, planned) -> why the manifest does not hold it. The repository check refuses these
# on the node, naming the candidates; operators pin a held version with gpufleet_driver_version.
VERSION_GAPS = {
    ("ubuntu22.04", "driver", "580.178.04"): "ubuntu2204 manifest sources reach 580.126.20",
    ("debian12", "driver", "580.178.04"): "debian12 manifest sources reach 580.126.16",
    ("ubuntu22.04", "driver", "550.163.01"): "ubuntu2204 manifest sources reach 550.144.03",
    ("ubuntu22.04", "driver", "570.211.01"): "ubuntu2204 manifest sources reach 570.172.08",
    ("debian12", "driver", "550.163.01"): "debian12 manifest sources reach 550.127.08",
    ("debian12", "driver", "570.211.01"): "debian12 manifest sources reach 570.195.03",
}


def _manifest(os_name: str):
    return simmanifest.load_all()[REPOSITORIES[os_name]]


def _plan(os_name: str, request: dict) -> dict:
    plan = STACK_PLAN(request, gpus=H100, os=os_name, arch="x86_64", nvswitch=True)
    assert not plan.get("errors"), plan.get("errors")
    return plan


@pytest.mark.parametrize("os_name,request_", CASES, ids=CASE_IDS)
def test_every_planned_package_name_is_in_the_manifest(os_name, request_):
    plan = _plan(os_name, request_)
    names = {e.name for e in _manifest(os_name).entries}
    planned = [p.split("=", 1)[0] for group in plan["packages"].values() for p in group]
    assert planned, plan
    missing = [p for p in planned if p not in names]
    assert not missing, f"{os_name}: the plan installs {missing}, which NVIDIA's repository (as sourced) does not hold"


@pytest.mark.parametrize("os_name,request_", CASES, ids=CASE_IDS)
def test_planned_versions_are_in_the_manifest_or_a_listed_gap(os_name, request_):
    plan = _plan(os_name, request_)
    manifest = _manifest(os_name)
    held = {(e.name, e.version) for e in manifest.entries}
    for spec in plan["packages"]["nccl"]:
        name, version = spec.split("=", 1)
        assert (name, version) in held, f"{os_name}: {spec} is not in the manifest"
    target = plan["driver_recommended_version"]
    in_manifest = target in manifest.driver_upstreams()
    gap = VERSION_GAPS.get((os_name, "driver", target))
    assert in_manifest != bool(gap), (
        f"{os_name}: planned driver {target}: in manifest={in_manifest}, listed gap={gap!r}; "
        f"the manifest holds {manifest.driver_upstreams()}")
    # The floor the plan installs at least must be something the repository can serve.
    floor = plan["driver_min_version"]
    offered = [v for v in manifest.driver_upstreams() if v.split(".")[0] == plan["driver_branch"]]
    assert offered, f"{os_name}: the manifest holds no R{plan['driver_branch']} driver at all"
    assert any(tuple(map(int, v.split("."))) >= tuple(map(int, floor.split("."))) for v in offered), (floor, offered)


# HGX B200 (issue 27 item 5): an NVSwitch system of NVLink 5 GPUs. The plan's driver, its fabric manager at exactly
# the driver's version and NVLSM must all be packages the OS's manifest holds; the open kernel modules are required.
B200_CASES = [("ubuntu22.04", {"cuda": "12.8", "torch": "2.7.0"}), ("ubuntu24.04", {"cuda": "13.0", "torch": "2.9.0"})]


@pytest.mark.parametrize("os_name,request_", B200_CASES, ids=[o for o, _r in B200_CASES])
def test_b200_plan_fabric_manager_and_nvlsm_are_in_the_manifest(os_name, request_):
    plan = STACK_PLAN(request_, gpus=["NVIDIA B200"] * 8, os=os_name, arch="x86_64", nvswitch=True)
    assert not plan.get("errors"), plan.get("errors")
    assert plan["kernel_modules"] == "open" and plan["fabricmanager_version"] == plan["driver_recommended_version"]
    manifest = _manifest(os_name)
    versions = {}
    for entry in manifest.entries:
        versions.setdefault(entry.name, set()).add(entry.version)
    target = plan["driver_recommended_version"]
    assert target in manifest.driver_upstreams(), (target, manifest.driver_upstreams())
    for name in plan["packages"]["driver"] + plan["packages"]["fabricmanager"] + plan["packages"]["nvlsm"]:
        assert name in versions, f"{os_name}: the plan installs {name}, which the manifest does not hold"
    (fabric_manager,) = plan["packages"]["fabricmanager"]
    assert any(v.split("-")[0] == target for v in versions[fabric_manager]), (fabric_manager, versions[fabric_manager])
    assert plan["packages"]["nvlsm"] == ["nvlsm"] and versions["nvlsm"], versions.get("nvlsm")
