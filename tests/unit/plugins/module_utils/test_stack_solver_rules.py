"""The solver's rule groups one by one (resolve -> hardware -> wheel -> driver -> packages
per OS), the acceptance cases of issues 11 and 12, and the plan contract the driver role
codes against (PLAN_CONTRACT.md)."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils import stack_solver
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import (
    StackError, choose_kernel_modules, default_cuda, driver_floor, driver_packages, fabricmanager_packages,
    open_modules_required, repository_cuda_releases, solve, vkey)


def refused(request):
    with pytest.raises(StackError) as info:
        solve(request)
    return info.value


def gpu(name, cc, arch):
    return {"name": name, "compute_capability": cc, "architecture": arch, "memory_gib": None, "count": 1}


# ------------------------------------------------------------------ acceptance (issue 12)

def test_b200_cuda_12_8_torch_2_7_0_plans_cu128_r570_or_later_open():
    plan = solve({"gpus": ["NVIDIA B200"] * 8, "cuda": "12.8", "torch": "2.7.0", "os": "ubuntu22.04",
                  "nvswitch": True})
    assert plan["torch"]["variant"] == "cu128"
    assert plan["torch"]["index_url"] == "https://download.pytorch.org/whl/cu128"
    assert (plan["torch"]["torchvision"], plan["torch"]["torchaudio"]) == ("0.22.0", "2.7.0")
    assert int(plan["driver_branch"]) >= 570
    assert vkey(plan["driver_min_version"]) >= vkey("570.124.06")  # 12.8.1 is what cuda-toolkit-12-8 installs
    assert plan["kernel_modules"] == "open"
    assert plan["packages"]["nccl"] == ["libnccl2=2.25.1-1+cuda12.8", "libnccl-dev=2.25.1-1+cuda12.8"]


def test_torch_2_8_with_cuda_11_8_is_refused_listing_the_variants_that_exist():
    err = refused({"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": "11.8", "torch": "2.8.0"})
    assert err.rule == "TORCH_CUDA_MAJOR_MISMATCH"
    for variant in ("cu126", "cu128", "cu129"):
        assert variant in str(err)
    assert err.alternatives
    for alt in err.alternatives:
        solve(dict({"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": "11.8", "torch": "2.8.0"}, **alt))


def test_volta_with_cuda_13_is_refused_naming_the_drop():
    err = refused({"gpus": ["Tesla V100-SXM2-32GB"], "cuda": "13.0", "torch": "2.9.1"})
    assert err.rule == "CC_DROPPED_BY_CUDA"
    msg = str(err)
    assert "Volta" in msg and "12.9" in msg and "dropped" in msg and "13.0" in msg
    for alt in err.alternatives:
        plan = solve(dict({"gpus": ["Tesla V100-SXM2-32GB"], "cuda": "13.0", "torch": "2.9.1"}, **alt))
        assert vkey(plan["cuda_version"]) <= (12, 9)


def test_blackwell_wheel_must_be_cu128_or_newer():
    err = refused({"gpus": ["NVIDIA B200"], "cuda": "12.8", "torch": "2.6.0"})
    assert err.rule == "TORCH_WHEEL_LACKS_CC"
    assert "cu126" in str(err) and "12.8" in str(err)


def test_cuda_13_wheel_needs_an_r580_driver():
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.0", "torch": "2.9.1"})
    assert plan["torch"]["variant"] == "cu130"
    assert int(plan["driver_branch"]) >= 580
    assert solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.0", "torch": "2.9.1", "driver_branch": "580"})
    err = refused({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.0", "torch": "2.9.1", "driver_branch": "570"})
    assert err.rule == "DRIVER_BRANCH_TOO_OLD_FOR_CUDA"
    assert "580" in str(err)


# ------------------------------------------------------------------ 1. resolve: default CUDA

@pytest.mark.parametrize("gpus, os_key, expected, words", [
    (["NVIDIA A100-SXM4-80GB"], "ubuntu22.04", "12.2", ["newest of the default range"]),
    (["Tesla V100-SXM2-32GB"], "rhel9", "12.2", ["newest of the default range"]),
    (["NVIDIA B200"], "ubuntu22.04", "12.8", ["no CUDA of the default range", "oldest newer"]),
    (["NVIDIA GeForce RTX 5090"], "debian12", "12.8", ["oldest newer"]),
    # ubuntu2404 carries no CUDA before 12.5
    (["NVIDIA A100-SXM4-80GB"], "ubuntu24.04", "12.5", ["oldest newer", "ubuntu2404"]),
])
def test_request_without_cuda_gets_the_mission_range_or_the_oldest_above(gpus, os_key, expected, words):
    plan = solve({"gpus": gpus, "os": os_key})
    assert plan["cuda_version"] == expected
    note = next(w for w in plan["warnings"] if w.startswith("cuda not given"))
    for word in words:
        assert word in note


def test_default_cuda_respects_the_torch_release():
    # torch 2.7's cu126 wheel runs on a 12.2 toolkit under minor-version compatibility
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "torch": "2.7.0"})
    assert (plan["cuda_version"], plan["torch"]["variant"]) == ("12.2", "cu126")
    # torch 2.0 ships only CUDA 11 wheels: the newest CUDA 11 of the range, not 12.2
    assert default_cuda(["8.0"], "ubuntu2204", "2.0.1")[0] == "11.8"
    # Blackwell with torch 2.7: nothing in the range, the oldest above that the cu128 wheel covers
    assert default_cuda(["10.0"], "ubuntu2204", "2.7.0")[0] == "12.8"


def test_default_cuda_with_nothing_that_fits_names_the_rule(monkeypatch):
    assert default_cuda(["7.0"], "ubuntu2404", None)[0] == "12.5"  # Volta (<= 12.9) on ubuntu2404 (>= 12.5)
    # a repository that carried only CUDA 13 would leave Volta nothing
    monkeypatch.setitem(data.REPO_CUDA_RANGE, "ubuntu2404", dict(data.REPO_CUDA_RANGE["ubuntu2404"], first="13.0"))
    stack_solver._repository_cuda_releases.cache_clear()
    try:
        with pytest.raises(StackError) as info:
            default_cuda(["7.0"], "ubuntu2404", None)
    finally:
        stack_solver._repository_cuda_releases.cache_clear()
    assert info.value.rule == "NO_CUDA_FOR_HARDWARE"
    assert "ubuntu2404" in str(info.value) and "7.0" in str(info.value)


# ------------------------------------------------------------------ 2. repository rule

def test_repository_cuda_releases_are_sourced_bounds():
    assert repository_cuda_releases("ubuntu2404")[0] == "12.5"
    assert repository_cuda_releases("ubuntu2004")[-1] == "12.9"
    assert "13.0" not in repository_cuda_releases("ubuntu2004")


def test_ubuntu_24_04_refuses_cuda_before_12_5_with_working_alternatives():
    # torch 2.4.1 has a wheel for Ubuntu 24.04's Python 3.12 (2.1.2 has none: refused first, issue 34)
    request = {"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.2", "torch": "2.4.1", "os": "ubuntu24.04"}
    err = refused(request)
    assert err.rule == "REPO_LACKS_CUDA"
    msg = str(err)
    assert "ubuntu2404" in msg and "12.2" in msg and "12.5" in msg and "ubuntu22.04" in msg
    assert err.alternatives
    for alt in err.alternatives:
        plan = solve(dict(request, **alt))
        assert plan["cuda_version"] in plan["repository_cuda_releases"]


def test_ubuntu_20_04_refuses_cuda_13():
    err = refused({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.0", "os": "ubuntu20.04"})
    assert err.rule == "REPO_LACKS_CUDA"
    assert "Ubuntu 20.04 has been dropped" in str(err)


# ------------------------------------------------------------------ 4. driver: floor, branch, flavour

@pytest.mark.parametrize("cuda, floor", [("12.2", "535.104.05"), ("11.7", "515.48.07"), ("12.0", "525.85.12")])
def test_driver_floor_is_the_installed_update(cuda, floor):
    assert driver_floor(cuda, cuda, "full")["minimum"] == floor
    plan = solve({"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": cuda})
    assert plan["driver_min_version"] == floor
    assert plan["toolkit_full_version"] == data.CUDA_TOOLKITS[cuda]["full_version"]


def test_a_node_on_535_54_03_is_below_the_cuda_12_2_floor():
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.2", "torch": "2.1.2"})
    assert vkey("535.54.03") < vkey(plan["driver_min_version"]) <= vkey(plan["driver_recommended_version"])


def test_driver_floor_raised_by_the_wheel():
    # CUDA 12.2 under minor compatibility (525.60.13) with a cu130 wheel is impossible (13.x needs 580),
    # so the wheel floor wins where it is higher
    floors = driver_floor("12.2", "12.2", "minor", "580")
    assert floors["minimum"] == "580" and floors["cuda_need"] == "525.60.13"


def test_r515_is_marked_end_of_life():
    assert data.DRIVER_BRANCHES["515"]["eol"] is True
    plan = solve({"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": "11.7", "torch": "2.0.1", "driver_branch": "515"})
    assert plan["driver_branch_eol"] is True
    eol = next(w for w in plan["warnings"] if "end of life" in w)
    assert "515" in eol and "R580" in eol


def test_branch_types_and_ceilings():
    assert data.DRIVER_BRANCHES["535"]["type"] == "LTSB" and data.DRIVER_BRANCHES["580"]["type"] == "LTSB"
    assert data.DRIVER_BRANCHES["580"]["max_cuda"] == "13.0" and data.DRIVER_BRANCHES["580"]["eol"] is False
    assert data.DRIVER_BRANCHES["570"]["max_cuda"] == "12.8"
    assert data.DRIVER_BRANCHES["550"]["max_cuda"] == "12.4"


@pytest.mark.parametrize("name", ["NVIDIA GH200 480GB", "NVIDIA B200", "NVIDIA GB200", "NVIDIA B300",
                                  "NVIDIA RTX PRO 6000 Blackwell", "NVIDIA GeForce RTX 5090"])
def test_grace_hopper_and_blackwell_refuse_proprietary_modules(name):
    cuda = "12.9"  # the first CUDA for every one of them (B300, compute capability 10.3, needs 12.9)
    err = refused({"gpus": [name], "cuda": cuda, "kernel_modules": "proprietary"})
    assert err.rule == "OPEN_MODULES_REQUIRED"
    assert "open" in str(err) and err.alternatives == [{"kernel_modules": "open"}]
    assert solve({"gpus": [name], "cuda": cuda})["kernel_modules"] == "open"


def test_h100_may_still_run_proprietary():
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.2", "kernel_modules": "proprietary"})
    assert plan["kernel_modules"] == "proprietary"
    assert plan["packages"]["driver"] == ["nvidia-driver-pinning-595", "cuda-drivers"]


def test_volta_and_blackwell_cannot_share_a_driver():
    volta, b200 = gpu("Tesla V100-SXM2-32GB", "7.0", "Volta"), gpu("NVIDIA B200", "10.0", "Blackwell")
    assert open_modules_required([volta, b200]) == [b200]
    with pytest.raises(StackError) as info:
        choose_kernel_modules({}, [volta, b200], ["7.0", "10.0"], "580")
    assert info.value.rule == "OPEN_MODULES_REQUIRED"


# ------------------------------------------------------------------ 5. packages per OS x flavour

# (os, branch, flavour) -> NVIDIA's documented driver packages, in install order (docs/compatibility.md); every OS
# the solver plans (Debian 11 and RHEL 8 are refused: test_supported_os.py)
DRIVER_CASES = [
    ("ubuntu22.04", "535", "open", ["nvidia-kernel-open-535", "cuda-drivers-535"]),
    ("ubuntu22.04", "535", "proprietary", ["cuda-drivers-535"]),
    ("ubuntu20.04", "535", "open", ["nvidia-kernel-open-535", "cuda-drivers-535"]),
    ("ubuntu20.04", "550", "open", ["nvidia-kernel-open-550", "cuda-drivers-550"]),
    ("ubuntu24.04", "570", "open", ["nvidia-open-570"]),
    ("ubuntu24.04", "570", "proprietary", ["cuda-drivers-570"]),
    ("ubuntu22.04", "580", "open", ["nvidia-open-580"]),
    ("ubuntu22.04", "580", "proprietary", ["cuda-drivers-580"]),
    ("ubuntu22.04", "595", "open", ["nvidia-driver-pinning-595", "nvidia-open"]),
    ("ubuntu22.04", "595", "proprietary", ["nvidia-driver-pinning-595", "cuda-drivers"]),
    ("debian12", "570", "open", ["nvidia-open-570"]),
    ("debian12", "580", "open", ["nvidia-driver-pinning-580", "nvidia-open"]),
    ("debian12", "580", "proprietary", ["nvidia-driver-pinning-580", "cuda-drivers"]),
    ("rhel9", "535", "open", ["@nvidia-driver:535-open"]),
    ("rhel9", "535", "proprietary", ["@nvidia-driver:535-dkms"]),
    ("rocky9", "580", "open", ["@nvidia-driver:580-open"]),
    ("rhel9", "580", "proprietary", ["@nvidia-driver:580-dkms"]),
]


@pytest.mark.parametrize("os_in, branch, flavour, names", DRIVER_CASES)
def test_every_os_and_flavour_plans_nvidias_names(os_in, branch, flavour, names):
    cuda = {"535": "12.2", "550": "12.4", "570": "12.8", "580": "12.8", "595": "12.8"}[branch]
    if os_in == "ubuntu24.04" and cuda == "12.2":
        cuda = "12.5"
    plan = solve({"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": cuda, "driver_branch": branch, "os": os_in,
                  "kernel_modules": flavour, "nvswitch": True})
    assert plan["packages"]["driver"] == names
    assert plan["driver_flavour_packages"][flavour] == names
    other = "proprietary" if flavour == "open" else "open"
    assert plan["driver_flavour_packages"][other] != names
    # never Canonical's archive names
    assert not any(n.startswith("nvidia-driver-%s" % branch) for n in plan["packages"]["driver"])
    steps = plan["driver_flavour_switch"]
    assert steps and all(s["source"] for s in steps)
    # the switch ends in the planned flavour, and only removes packages of the other flavour's graph
    assert steps[-1]["action"] in ("install", "module-switch")
    planned = set(names) | {n.lstrip("@") for n in names}
    assert set(steps[-1]["packages"]) & planned or steps[-1]["action"] == "module-switch"
    for s in steps:
        if s["action"] == "remove":
            assert not set(s["packages"]) & set(names)
    fm = plan["packages"]["fabricmanager"]
    if plan["package_family"] == "dnf":
        # renamed at R580 (NVIDIA/gpu-driver-container rhel9 Dockerfile)
        assert fm == (["nvidia-fabricmanager"] if int(branch) >= 580 else ["nvidia-fabric-manager"])
        assert steps[0]["action"] == "module-switch"
    else:
        assert fm == (["nvidia-fabricmanager"] if int(branch) >= 580 else ["nvidia-fabricmanager-%s" % branch])


def test_rhel_switch_is_the_documented_module_switch():
    steps = driver_packages("rhel", "535", "open")["switch"]
    assert steps == [dict(steps[0], action="module-switch", packages=["nvidia-driver:535-open"],
                          options=["-y", "--allowerasing"])]
    assert "module switch-to" in steps[0]["source"] and steps[0]["verified"] is True


def test_fabricmanager_names_follow_the_580_rename():
    assert fabricmanager_packages("ubuntu", "535") == ["nvidia-fabricmanager-535"]
    assert fabricmanager_packages("ubuntu", "575") == ["nvidia-fabricmanager-575"]
    assert fabricmanager_packages("debian", "580") == ["nvidia-fabricmanager"]
    assert fabricmanager_packages("rhel", "535") == ["nvidia-fabric-manager"]


# ------------------------------------------------------------------ the plan contract

CONTRACT_KEYS = {
    "os": str, "package_family": str, "repository": str, "driver_branch": str, "kernel_modules": str,
    "driver_min_version": str, "driver_recommended_version": str, "cuda_version": str,
    "nccl_package_version": str, "packages": dict, "driver_flavour_packages": dict,
    "driver_flavour_switch": list, "repository_cuda_releases": list, "warnings": list,
    "driver_branch_eol": bool, "driver_branch_type": str, "driver_install_commands": list,
}


@pytest.mark.parametrize("os_in", sorted(data.SUPPORTED_OS))
def test_plan_contract_keys_and_shapes(os_in):
    # torch 2.7.1 has no wheel for Ubuntu 20.04's Python 3.8; 2.4.1 does (TORCH_NO_WHEEL_FOR_PYTHON, issue 34).
    torch = "2.4.1" if str(os_in).startswith("ubuntu20") else "2.7.1"
    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.6", "torch": torch, "os": os_in,
                  "nvswitch": True})
    for key, kind in CONTRACT_KEYS.items():
        assert isinstance(plan[key], kind), key
    assert set(plan["packages"]) == {"driver", "toolkit", "nccl", "fabricmanager", "imex", "nvlsm", "dcgm"}
    assert set(plan["driver_flavour_packages"]) == {"open", "proprietary"}
    for names in list(plan["packages"]["driver"]) + list(plan["packages"]["fabricmanager"]):
        assert "=" not in names and not any(c.isspace() for c in names)  # names only, no versions
    for step in plan["driver_flavour_switch"]:
        assert set(step) >= {"action", "packages", "source"}
    assert plan["cuda_version"] in plan["repository_cuda_releases"]
