"""The stack solver against NVIDIA's and PyTorch's published tables, plus
property tests over every GPU model x CUDA 11.7-13.0 x torch 2.0-2.9 x NVSwitch,
each plan re-checked by an independent checker."""

import json
import math
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import MODELS, lookup_model
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import (
    StackError, solve, vkey)

CUDAS = ["11.7", "11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0"]
TORCHES = ["2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.1", "2.2.2",
           "2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1",
           "2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1"]


def req(**kw):
    base = {"gpus": ["NVIDIA A100-SXM4-80GB"], "cuda": "12.2", "torch": "2.1.2", "os": "ubuntu22.04", "arch": "x86_64"}
    base.update(kw)
    return base


def refused(request):
    with pytest.raises(StackError) as info:
        solve(request)
    return info.value


# ------------------------------------------------------------------ the data itself

def test_required_ranges_are_complete():
    assert set(CUDAS) <= set(data.CUDA_TOOLKITS)
    assert set(TORCHES) <= set(data.TORCH_RELEASES)
    assert {"515", "520", "525", "530", "535", "545", "550", "560", "565", "570", "575", "580"} <= set(data.DRIVER_BRANCHES)


@pytest.mark.parametrize("name", ["CUDA_TOOLKITS", "CC_SUPPORT", "DRIVER_BRANCHES", "TORCH_RELEASES",
                                  "OS_PACKAGE_NAMES", "FABRIC_MANAGER", "KERNEL_MODULES", "WHEEL_DRIVER_FLOOR",
                                  "REPO_CUDA_RANGE", "FABRIC_MANAGER_PACKAGES"])
def test_every_entry_carries_a_source(name):
    table = getattr(data, name)
    if "source" in table:
        assert table["source"]
    else:
        for key, entry in table.items():
            assert entry.get("source"), "%s[%s] has no source" % (name, key)


@pytest.mark.parametrize("release, driver", [
    # NVIDIA CUDA Toolkit Release Notes, Table 3 (Linux x86_64)
    ("11.7.0", "515.43.04"), ("11.7.1", "515.48.07"), ("11.8.0", "520.61.05"),
    ("12.0.0", "525.60.13"), ("12.0.1", "525.85.12"), ("12.1.0", "530.30.02"), ("12.1.1", "530.30.02"),
    ("12.2.0", "535.54.03"), ("12.2.1", "535.86.09"), ("12.2.2", "535.104.05"),
    ("12.3.0", "545.23.06"), ("12.3.1", "545.23.08"), ("12.4.0", "550.54.14"), ("12.4.1", "550.54.15"),
    ("12.5.0", "555.42.02"), ("12.5.1", "555.42.06"), ("12.6.0", "560.28.03"), ("12.6.1", "560.35.03"),
    ("12.6.2", "560.35.03"), ("12.6.3", "560.35.05"), ("12.8.0", "570.26"), ("12.8.1", "570.124.06"),
    ("12.9.0", "575.51.03"), ("12.9.1", "575.57.08"), ("13.0.0", "580.65.06"), ("13.0.1", "580.82.07"),
    ("13.0.2", "580.95.05"),
])
def test_table3_minimum_driver(release, driver):
    key = ".".join(release.split(".")[:2])
    assert data.CUDA_TOOLKITS[key]["updates"][release] == driver
    plan = solve(req(cuda=release, gpus=[], torch=None))
    assert plan["driver_min_version_requested_release"] == driver
    # the floor is the update cuda-toolkit-X-Y really installs, never lower than the one asked for
    installed = data.CUDA_TOOLKITS[key]["full_version"]
    assert plan["driver_min_version"] == data.CUDA_TOOLKITS[key]["updates"][installed]
    assert vkey(plan["driver_min_version"]) >= vkey(driver)


@pytest.mark.parametrize("cuda, ga, installed, floor", [
    ("11.7", "515.43.04", "515.48.07", "450.80.02"), ("11.8", "520.61.05", "520.61.05", "450.80.02"),
    ("12.0", "525.60.13", "525.85.12", "525.60.13"), ("12.1", "530.30.02", "530.30.02", "525.60.13"),
    ("12.2", "535.54.03", "535.104.05", "525.60.13"), ("12.8", "570.26", "570.124.06", "525.60.13"),
    ("13.0", "580.65.06", "580.95.05", "580")])
def test_ga_minimum_installed_floor_and_minor_compat_floor(cuda, ga, installed, floor):
    assert data.CUDA_TOOLKITS[cuda]["driver_min"] == ga
    assert data.CUDA_TOOLKITS[cuda]["driver_min_minor_compat"] == floor
    plan = solve(req(cuda=cuda, torch=None, gpus=[]))
    assert plan["driver_min_version_ga"] == ga
    assert plan["driver_min_version"] == installed  # issue 11: 12.2 installs 12.2.2 -> 535.104.05
    assert plan["driver_min_version_minor_compat"] == floor
    assert solve(req(cuda=cuda, torch=None, gpus=[], driver_compat="minor"))["driver_min_version"] == floor


@pytest.mark.parametrize("torch, vision, audio, variants", [
    ("2.0.0", "0.15.1", "2.0.1", ["cu117", "cu118"]),
    ("2.0.1", "0.15.2", "2.0.2", ["cu117", "cu118"]),
    ("2.1.2", "0.16.2", "2.1.2", ["cu118", "cu121"]),
    ("2.2.2", "0.17.2", "2.2.2", ["cu118", "cu121"]),
    ("2.3.1", "0.18.1", "2.3.1", ["cu118", "cu121"]),
    ("2.4.1", "0.19.1", "2.4.1", ["cu118", "cu121", "cu124"]),
    ("2.5.1", "0.20.1", "2.5.1", ["cu118", "cu121", "cu124"]),
])
def test_torch_table(torch, vision, audio, variants):
    rel = data.TORCH_RELEASES[torch]
    assert (rel["torchvision"], rel["torchaudio"], rel["variants"]) == (vision, audio, variants)


@pytest.mark.parametrize("torch", [t for t in TORCHES if not t.startswith("2.0")])
def test_torchvision_rule_for_2_1_and_later(torch):
    _major, minor, patch = vkey(torch)
    assert data.TORCH_RELEASES[torch]["torchvision"] == "0.%d.%d" % (minor + 15, patch)
    assert data.TORCH_RELEASES[torch]["torchaudio"] == torch


def test_bundled_nccl_from_pypi_metadata():
    assert data.TORCH_RELEASES["2.0.1"]["bundled_nccl"] == "2.14.3"
    assert data.TORCH_RELEASES["2.1.2"]["bundled_nccl"] == "2.18.1"
    assert data.TORCH_RELEASES["2.5.1"]["bundled_nccl"] == "2.21.5"


@pytest.mark.parametrize("cuda", CUDAS)
def test_nccl_strings_are_built_for_their_cuda(cuda):
    assert data.CUDA_TOOLKITS[cuda]["nccl"].endswith("-1+cuda%s" % cuda)


@pytest.mark.parametrize("branch", sorted(data.DRIVER_BRANCHES))
def test_driver_branch_lists(branch):
    b = data.DRIVER_BRANCHES[branch]
    assert b["versions"] == sorted(b["versions"], key=vkey)
    assert all(v.startswith(branch + ".") for v in b["versions"])
    assert b["recommended"] in b["versions"]
    # max_cuda agrees with Table 3: the newest toolkit whose GA minimum the branch meets
    floors = {c: t["driver_min"] for c, t in data.CUDA_TOOLKITS.items() if t["driver_min"]}
    ok = [c for c in sorted(floors, key=vkey) if vkey(b["versions"][-1]) >= vkey(floors[c])]
    assert ok[-1] == b["max_cuda"]


# ------------------------------------------------------------------ plans

def test_example_plan_h100_hgx():
    plan = solve(req(gpus=["NVIDIA H100 80GB HBM3"] * 8, nvswitch=True))
    assert plan["cuda_version"] == "12.2"
    # R535 ended in June 2026: the newest supported LTSB/PB branch ubuntu2204's repository is seen to carry is
    # R595 (PB; R610 is a new-feature branch whose support has ended, R620 is not seen there)
    assert (plan["driver_branch"], plan["driver_branch_eol"]) == ("595", False)
    assert plan["driver_recommended_version"] == "595.91.07"
    assert plan["driver_min_version"] == "535.104.05"
    assert plan["toolkit_package"] == "cuda-toolkit-12-2"
    assert plan["packages"]["toolkit"] == ["cuda-toolkit-12-2"]
    assert plan["packages"]["nccl"] == ["libnccl2=2.19.3-1+cuda12.2", "libnccl-dev=2.19.3-1+cuda12.2"]
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabricmanager"]
    assert plan["packages"]["driver"] == ["nvidia-driver-pinning-595", "nvidia-open"]
    assert plan["nccl_version"] == "2.19.3"
    assert plan["kernel_modules"] == "open"
    assert plan["repository"] == "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
    assert plan["torch"] == dict(plan["torch"], version="2.1.2", variant="cu121",
                                 index_url="https://download.pytorch.org/whl/cu121",
                                 torchvision="0.16.2", torchaudio="2.1.2")
    assert plan["gpus"] == [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                             "architecture": "Hopper", "memory_gib": 80, "count": 8}]
    assert isinstance(plan["warnings"], list)
    assert vkey(plan["driver_recommended_version"]) >= vkey(plan["toolkit_driver_min_version"])


def test_fabricmanager_empty_without_nvswitch():
    assert solve(req())["packages"]["fabricmanager"] == []


def test_nvswitch_taken_from_gpu_info_facts():
    facts = {"status": "ok", "nvswitch": True,
             "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0"} for i in range(8)]}
    plan = solve(req(gpus=[facts]))
    assert plan["nvswitch"] is True
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabricmanager"]
    assert plan["gpus"][0]["count"] == 8


@pytest.mark.parametrize("cuda, torch, variant", [
    ("12.2", "2.1.2", "cu121"), ("11.8", "2.1.2", "cu118"), ("11.7", "2.0.1", "cu117"),
    ("11.8", "2.0.1", "cu118"), ("12.1", "2.5.1", "cu121"), ("12.2", "2.4.0", "cu121"), ("11.8", "2.5.1", "cu118"),
])
def test_variant_is_closest_same_major_not_newer(cuda, torch, variant):
    plan = solve(req(cuda=cuda, torch=torch))
    assert plan["torch"]["variant"] == variant
    assert plan["torch"]["index_url"] == "https://download.pytorch.org/whl/" + variant
    assert not any("minor-version compatibility" in w for w in plan["warnings"])


def test_variant_newer_minor_is_a_warning():
    plan = solve(req(cuda="12.0", torch="2.1.2"))
    assert plan["torch"]["variant"] == "cu121"
    assert any("cu121" in w and "12.0" in w for w in plan["warnings"])
    plan = solve(req(cuda="11.7", torch="2.3.1"))
    assert plan["torch"]["variant"] == "cu118"


def test_h100_with_cuda_11_7_is_refused_and_says_what_works():
    err = refused(req(gpus=["NVIDIA H100 80GB HBM3"], cuda="11.7", torch="2.0.1"))
    assert err.rule == "CC_NEEDS_NEWER_CUDA"
    msg = str(err)
    assert "H100" in msg and "9.0" in msg and "Hopper" in msg and "11.8 or newer" in msg and "11.7" in msg
    assert "Requests that work: cuda 11.8 with torch 2.0.1 (cu118)" in msg
    for alt in err.alternatives:
        solve(req(gpus=["NVIDIA H100 80GB HBM3"], cuda=alt["cuda"], torch=alt["torch"]))


@pytest.mark.parametrize("gpu", ["NVIDIA L4", "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "NVIDIA H200", "8.9", "sm_90"])
def test_ada_and_hopper_need_11_8(gpu):
    assert refused(req(gpus=[gpu], cuda="11.7", torch="2.0.1")).rule == "CC_NEEDS_NEWER_CUDA"
    assert solve(req(gpus=[gpu], cuda="11.8", torch="2.0.1"))["torch"]["variant"] == "cu118"


def test_wheel_must_cover_the_gpu():
    err = refused(req(gpus=["NVIDIA H100 80GB HBM3"], cuda="11.8", torch="2.0.1+cu117"))
    assert err.rule == "TORCH_WHEEL_LACKS_CC"
    assert "cu117" in str(err) and "11.8" in str(err)


def test_cuda_major_mismatch_refused_unless_allowed():
    err = refused(req(cuda="12.2", torch="2.0.1"))
    assert err.rule == "TORCH_CUDA_MAJOR_MISMATCH"
    assert "allow_cuda_major_mismatch" in str(err) and "cuda 12.2 with torch 2.1" in str(err)
    plan = solve(req(cuda="12.2", torch="2.0.1", allow_cuda_major_mismatch=True))
    assert plan["torch"]["variant"] == "cu118"
    assert plan["torch"]["cuda_major_mismatch"] is True and plan["torch"]["cuda_major_mismatch_allowed"] is True
    assert any("major" in w for w in plan["warnings"])
    assert refused(req(cuda="11.8", torch="2.5.1", torch_variant="cu124")).rule == "TORCH_CUDA_MAJOR_MISMATCH"


def test_pinned_variant_that_does_not_exist():
    err = refused(req(torch="2.1.2", torch_variant="cu124"))
    assert err.rule == "TORCH_NO_WHEEL_FOR_CUDA"
    assert "cu118, cu121" in str(err)


def test_explicit_branch_too_old_names_max_cuda_and_a_branch_that_works():
    err = refused(req(driver_branch="525"))
    assert err.rule == "DRIVER_BRANCH_TOO_OLD_FOR_CUDA"
    msg = str(err)
    assert "525" in msg and "12.0" in msg and "535" in msg and "driver_compat: minor" in msg
    plan = solve(req(driver_branch="525", driver_compat="minor"))
    assert plan["driver_branch"] == "525" and plan["driver_min_version"] == "525.60.13"
    assert any("minor-version compatibility" in w for w in plan["warnings"])
    assert refused(req(driver_branch="515", driver_compat="minor")).rule == "DRIVER_BRANCH_TOO_OLD_FOR_CUDA"


@pytest.mark.parametrize("branch, cuda", [("515", "11.7"), ("520", "11.8"), ("525", "12.0"), ("530", "12.1"), ("535", "12.2")])
def test_each_branch_runs_its_own_toolkit(branch, cuda):
    plan = solve(req(cuda=cuda, driver_branch=branch, torch=None))
    assert plan["driver_branch"] == branch
    assert plan["driver_recommended_version"] in data.DRIVER_BRANCHES[branch]["versions"]


def test_unknown_gpu_lists_known_models_unless_cc_given():
    err = refused(req(gpus=["Acme Tensor 9000"]))
    assert err.rule == "UNKNOWN_GPU"
    assert "Acme Tensor 9000" in str(err) and "NVIDIA H100 80GB HBM3" in str(err) and "compute capability" in str(err)
    plan = solve(req(gpus=[{"name": "Acme Tensor 9000", "compute_capability": "8.0"}]))
    assert plan["gpus"][0]["compute_capability"] == "8.0"
    assert solve(req(gpus=["8.6", 9.0, "sm_75"]))["kernel_modules"] == "open"


def test_kernel_modules():
    assert solve(req(gpus=["Tesla V100-SXM2-32GB"]))["kernel_modules"] == "proprietary"
    # R580 is the last branch for Volta; on Ubuntu it keeps the branch in its package names (renamed from R590)
    assert solve(req(gpus=["Tesla V100-SXM2-32GB"]))["packages"]["driver"] == ["cuda-drivers-580"]
    assert refused(req(gpus=["Tesla V100-SXM2-32GB"], kernel_modules="open")).rule == "OPEN_MODULES_NEED_TURING"
    assert solve(req(gpus=["Tesla T4"]))["kernel_modules"] == "open"
    assert solve(req(gpus=["Tesla T4"], kernel_modules="proprietary"))["kernel_modules"] == "proprietary"


@pytest.mark.parametrize("os_in, arch, distro, repo_arch, family", [
    ("ubuntu22.04", "x86_64", "ubuntu2204", "x86_64", "apt"),
    ("ubuntu2004", "aarch64", "ubuntu2004", "sbsa", "apt"),
    ("debian12", "x86_64", "debian12", "x86_64", "apt"),
    ("rhel9", "x86_64", "rhel9", "x86_64", "dnf"),
    ("rocky9.3", "aarch64", "rhel9", "sbsa", "dnf"),
    ("Rocky Linux 9", "x86_64", "rhel9", "x86_64", "dnf"),
    ({"id": "ubuntu", "version_id": "22.04", "family": "Debian"}, "x86_64", "ubuntu2204", "x86_64", "apt"),
])
def test_os_and_repository(os_in, arch, distro, repo_arch, family):
    plan = solve(req(os=os_in, arch=arch, cuda="12.4", torch="2.4.1"))
    assert plan["repository"] == "https://developer.download.nvidia.com/compute/cuda/repos/%s/%s/" % (distro, repo_arch)
    assert plan["package_family"] == family


def test_rhel_package_names():
    plan = solve(req(os="rhel9", gpus=["NVIDIA H100 80GB HBM3"], nvswitch=True))
    assert plan["packages"]["driver"] == ["@nvidia-driver:580-open"]
    assert plan["packages"]["nccl"] == ["libnccl-2.19.3-1+cuda12.2", "libnccl-devel-2.19.3-1+cuda12.2"]
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabricmanager"]
    assert plan["driver_module_stream"] == "nvidia-driver:580-open"
    assert plan["driver_module_profile"] == "nvidia-driver:580/fm"
    plan = solve(req(os="rhel9", gpus=["NVIDIA H100 80GB HBM3"], nvswitch=True, driver_branch="535"))
    assert plan["packages"]["fabricmanager"] == ["nvidia-fabric-manager"]  # the name before R580


@pytest.mark.parametrize("request_, rule, words", [
    ({"cuda": "12.7"}, "UNKNOWN_CUDA", ["12.7", "12.6, 12.8, 12.9"]),
    ({"cuda": "12.2.9"}, "UNKNOWN_CUDA", ["12.2.9", "12.2.0, 12.2.1, 12.2.2"]),
    ({"torch": "2.6.3"}, "UNKNOWN_TORCH", ["2.6.3", "2.6.0"]),
    ({"torch": "1.13.1"}, "UNKNOWN_TORCH", ["1.13.1", "2.0.0"]),
    ({"os": "windows11"}, "UNSUPPORTED_OS", ["windows11", "ubuntu22.04", "rhel9"]),
    ({"os": "sles15"}, "UNSUPPORTED_OS", ["sles15"]),
    ({"arch": "ppc64le"}, "UNSUPPORTED_OS", ["ppc64le", "aarch64"]),
    ({"driver_branch": "999"}, "UNKNOWN_DRIVER_BRANCH", ["999", "535"]),
    ({"nvswitch": "maybe"}, "BAD_REQUEST", ["nvswitch", "maybe"]),
    ({"driver_compat": "partial"}, "BAD_REQUEST", ["driver_compat", "partial"]),
    ({"kernel_modules": "closed"}, "BAD_REQUEST", ["kernel_modules", "closed"]),
    ({"cuda": "twelve"}, "BAD_REQUEST", ["cuda", "twelve"]),
    ({"gpus": [["nested"]]}, "BAD_REQUEST", ["gpus"]),
    ({"torch_variant": "cuda121"}, "BAD_REQUEST", ["torch_variant", "cuda121"]),
])
def test_bad_values_fail_clearly(request_, rule, words):
    err = refused(req(**request_))
    assert err.rule == rule
    for w in words:
        assert w in str(err), (w, str(err))


def test_not_a_mapping():
    assert refused("cuda=12.2").rule == "BAD_REQUEST"
    assert refused(None).rule == "BAD_REQUEST"


def test_versions_given_as_yaml_numbers_and_short_forms():
    plan = solve(req(cuda=12.2, torch="2.1", driver_branch=535))
    assert plan["cuda_version"] == "12.2" and plan["torch"]["version"] == "2.1.2" and plan["driver_branch"] == "535"
    assert solve(req(cuda=12.0, torch=None))["cuda_version"] == "12.0"


def test_unknown_keys_are_warned_not_ignored_silently():
    assert any("driver_brach" in w for w in solve(req(driver_brach="535"))["warnings"])


def test_mixed_models_warn_and_the_oldest_rules():
    plan = solve(req(gpus=["Tesla V100-SXM2-32GB", "NVIDIA H100 80GB HBM3"]))
    assert plan["kernel_modules"] == "proprietary"
    assert any("mixed" in w for w in plan["warnings"])


def test_blackwell_refused_with_no_toolkit_in_range():
    err = refused(req(gpus=["NVIDIA B200"], torch="2.5.1"))
    assert err.rule == "CC_NEEDS_NEWER_CUDA"
    assert "12.8" in str(err)


# ------------------------------------------------------------------ properties

# The checker below restates NVIDIA's rules from the data tables, independently of the
# solver's code: names per OS family as NVIDIA's guides give them (docs/compatibility.md).
_BLACKWELL_MIN_CC = (10, 0)


def expected_driver_packages(os_key, branch, flavour):
    b = int(branch)
    if os_key.startswith("rhel"):
        return ["@nvidia-driver:%s-%s" % (branch, "open" if flavour == "open" else "dkms")]
    debian = os_key.startswith("debian")
    if b >= (580 if debian else 590):
        return ["nvidia-driver-pinning-%s" % branch, "nvidia-open" if flavour == "open" else "cuda-drivers"]
    if b >= 570:
        return ["nvidia-open-%s" % branch] if flavour == "open" else ["cuda-drivers-%s" % branch]
    if flavour == "open":
        return ["nvidia-kernel-open-dkms" if debian else "nvidia-kernel-open-%s" % branch, "cuda-drivers-%s" % branch]
    return ["cuda-drivers-%s" % branch]


def expected_fabricmanager(os_key, branch):
    """NVIDIA renamed the fabric manager package at R580: nvidia-fabricmanager on apt and dnf alike
    (before: nvidia-fabricmanager-<branch> on apt, nvidia-fabric-manager on dnf)."""
    if int(branch) >= 580:
        return ["nvidia-fabricmanager"]
    return ["nvidia-fabric-manager"] if os_key.startswith("rhel") else ["nvidia-fabricmanager-%s" % branch]


def check_plan(plan, request):
    """Every rule in the data holds for a returned plan."""
    cuda = plan["cuda_version"]
    tk = data.CUDA_TOOLKITS[cuda]
    branch = data.DRIVER_BRANCHES[plan["driver_branch"]]
    rec = plan["driver_recommended_version"]
    assert rec in branch["versions"]
    compat = request.get("driver_compat") or "full"
    # the floor covers the update the repository installs (full) or the minor-version floor
    need = tk["updates"][tk["full_version"]] if compat == "full" else tk["driver_min_minor_compat"]
    assert vkey(plan["driver_min_version"]) >= vkey(need)
    assert vkey(rec) >= vkey(plan["driver_min_version"])
    if request.get("driver_branch") in (None, ""):
        assert vkey(rec) >= vkey(tk["updates"][tk["full_version"]])  # full features for what gets installed
    for g in plan["gpus"]:
        sup = data.CC_SUPPORT.get(g["compute_capability"])
        if sup:
            assert vkey(sup["first_cuda"]) <= vkey(cuda)
            assert sup["last_cuda"] is None or vkey(cuda) <= vkey(sup["last_cuda"])
    assert cuda in plan["repository_cuda_releases"]
    t = plan["torch"]
    if request.get("torch") == "none":  # an alternative without PyTorch (issue 34)
        assert t is None
    elif request.get("torch"):
        rel = data.TORCH_RELEASES[t["version"]]
        assert t["variant"] in rel["variants"]
        assert t["index_url"] == "https://download.pytorch.org/whl/" + t["variant"]
        assert (t["torchvision"], t["torchaudio"]) == (rel["torchvision"], rel["torchaudio"])
        wmajor, wminor = int(t["variant"][2:-1]), int(t["variant"][-1])
        if not request.get("allow_cuda_major_mismatch"):
            assert wmajor == vkey(cuda)[0]
        assert vkey(rec) >= vkey(data.WHEEL_DRIVER_FLOOR[str(wmajor)])
        for g in plan["gpus"]:
            sup = data.CC_SUPPORT.get(g["compute_capability"])
            if sup:
                assert (wmajor, wminor) >= vkey(sup["first_cuda"])[:2]
        same = [v for v in rel["variants"] if int(v[2:-1]) == wmajor and (int(v[2:-1]), int(v[-1])) <= vkey(cuda)[:2]]
        if same and not request.get("torch_variant"):
            assert t["variant"] == max(same)  # closest not newer
    assert plan["packages"]["toolkit"] == ["cuda-toolkit-%s" % cuda.replace(".", "-")]
    assert plan["nccl_package_version"] == tk["nccl"]
    assert all(tk["nccl"] in p for p in plan["packages"]["nccl"])
    assert all("+cuda%s" % cuda in p for p in plan["packages"]["nccl"])
    if plan["nvswitch"]:
        assert plan["packages"]["fabricmanager"] == expected_fabricmanager(plan["os"], plan["driver_branch"])
        assert plan["fabricmanager_version"] == rec
    else:
        assert plan["packages"]["fabricmanager"] == []
    km = plan["kernel_modules"]
    assert plan["packages"]["driver"] == expected_driver_packages(plan["os"], plan["driver_branch"], km)
    assert plan["driver_flavour_packages"][km] == plan["packages"]["driver"]
    other = "proprietary" if km == "open" else "open"
    assert plan["driver_flavour_packages"][other] == expected_driver_packages(plan["os"], plan["driver_branch"], other)
    assert plan["driver_flavour_switch"], "every OS in the data documents a flavour switch"
    assert all(step["action"] in ("remove", "install", "module-switch") and step["source"]
               for step in plan["driver_flavour_switch"])
    if km == "open":
        assert all(vkey(g["compute_capability"]) >= (7, 5) for g in plan["gpus"])
    if any(vkey(g["compute_capability"]) >= _BLACKWELL_MIN_CC or g["name"].startswith("NVIDIA GH200")
           for g in plan["gpus"]):
        assert km == "open"
    if branch.get("eol"):
        assert any("end of life" in w for w in plan["warnings"])
    assert set(plan["rules_checked"]) <= set(data.RULES)


def check_refusal(err, request):
    """Every refusal names a known rule, and the rule really applies."""
    assert err.rule in data.RULES
    assert err.rule in str(err)
    msg = str(err)
    assert msg.rstrip().endswith(".")
    gpu = request["gpus"][0]
    cc = next(m["compute_capability"] for m in MODELS if m["name"] == gpu)
    sup = data.CC_SUPPORT.get(cc)
    cuda, torch = request["cuda"], request["torch"]
    if err.rule == "CC_NEEDS_NEWER_CUDA":
        assert sup and vkey(cuda) < vkey(sup["first_cuda"])
        assert sup["first_cuda"] in msg
    elif err.rule == "CC_DROPPED_BY_CUDA":
        assert sup and sup["last_cuda"] and vkey(cuda) > vkey(sup["last_cuda"])
        assert sup["last_cuda"] in msg and "dropped" in msg
    elif err.rule == "TORCH_CUDA_MAJOR_MISMATCH":
        assert all(int(v[2:-1]) != vkey(cuda)[0] for v in data.TORCH_RELEASES[torch]["variants"])
        for v in data.TORCH_RELEASES[torch]["variants"]:
            assert v in msg  # the variants that exist are listed
    elif err.rule == "DRIVER_BRANCH_TOO_OLD_FOR_CUDA":
        b = data.DRIVER_BRANCHES[request["driver_branch"]]
        assert vkey(b["versions"][-1]) < vkey(data.CUDA_TOOLKITS[cuda]["driver_min"])
        assert b["max_cuda"] in msg
    elif err.rule == "TORCH_WHEEL_LACKS_CC":
        assert sup
        variants = data.TORCH_RELEASES[torch]["variants"]
        same = [v for v in variants if int(v[2:-1]) == vkey(cuda)[0]]
        assert same and any(vkey("%s.%s" % (v[2:-1], v[-1])) < vkey(sup["first_cuda"]) for v in same)
    elif err.rule == "TORCH_NO_WHEEL_FOR_PYTHON":
        python = data.OS_PYTHON[request.get("os") or "ubuntu22.04"]["python"]
        assert python not in data.TORCH_RELEASES[torch]["python"]["versions"]
        assert "no wheel for Python %s" % python in msg
    elif err.rule == "REPO_LACKS_CUDA":
        distro = data.REPO_DISTROS[request.get("os") or "ubuntu22.04"][0]
        rng = data.REPO_CUDA_RANGE[distro]
        assert ((rng["first"] and vkey(cuda) < vkey(rng["first"]))
                or (rng["last"] and vkey(cuda) > vkey(rng["last"])))
        assert distro in msg
    else:
        raise AssertionError("unexpected refusal %s" % err)
    assert "Requests that work" in msg or "No CUDA toolkit" in msg
    for alt in err.alternatives:  # every suggested alternative really works
        check_plan(solve(dict(request, **alt)), dict(request, **alt))


_GPU_NAMES = [m["name"] for m in MODELS]


@pytest.mark.parametrize("gpu", _GPU_NAMES)
def test_property_every_gpu_cuda_torch(gpu):
    counts = {"plans": 0, "refusals": 0}
    for cuda in CUDAS:
        for torch in TORCHES:
            for nvswitch in (False, True):
                request = {"gpus": [gpu] * 8, "cuda": cuda, "torch": torch, "os": "ubuntu22.04", "nvswitch": nvswitch}
                try:
                    plan = solve(request)
                except StackError as err:
                    check_refusal(err, request)
                    counts["refusals"] += 1
                else:
                    check_plan(plan, request)
                    counts["plans"] += 1
    assert counts["plans"] + counts["refusals"] == len(CUDAS) * len(TORCHES) * 2
    assert counts["plans"] > 0, "every model in the table has at least one stack that works"


@pytest.mark.parametrize("branch", sorted(data.DRIVER_BRANCHES))
@pytest.mark.parametrize("compat", ["full", "minor"])
def test_property_explicit_branches(branch, compat):
    for gpu in ("Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA B200"):
        for cuda in CUDAS:
            for torch in ("2.0.1", "2.1.2", "2.5.1", "2.7.0", "2.9.1"):
                request = {"gpus": [gpu], "cuda": cuda, "torch": torch, "driver_branch": branch,
                           "driver_compat": compat}
                try:
                    plan = solve(request)
                except StackError as err:
                    if err.rule == "DRIVER_BRANCH_TOO_OLD_FOR_CUDA":
                        b = data.DRIVER_BRANCHES[branch]
                        tk = data.CUDA_TOOLKITS[cuda]
                        need = tk["updates"][tk["full_version"]] if compat == "full" else tk["driver_min_minor_compat"]
                        assert vkey(b["versions"][-1]) < vkey(need)
                        assert branch in str(err)
                    elif err.rule == "DRIVER_TOO_OLD_FOR_WHEEL":
                        assert branch in str(err)
                    elif err.rule == "DRIVER_TOO_OLD_FOR_GPU":
                        need = data.GPU_MIN_DRIVER[lookup_model(gpu)["key"]]
                        assert vkey(data.DRIVER_BRANCHES[branch]["versions"][-1]) < vkey(need) and need in str(err)
                    elif err.rule == "BRANCH_DROPPED_GPU":
                        assert int(branch) > int(data.LAST_BRANCH_FOR_ARCH[lookup_model(gpu)["architecture"]])
                    else:
                        assert err.rule in ("CC_NEEDS_NEWER_CUDA", "CC_DROPPED_BY_CUDA", "TORCH_CUDA_MAJOR_MISMATCH",
                                            "TORCH_WHEEL_LACKS_CC"), str(err)
                else:
                    assert plan["driver_branch"] == branch
                    check_plan(plan, request)


def test_published_pairs_all_plan():
    """Every pair pytorch.org publishes (torch x its CUDA variant, toolkit = variant) plans on an A100
    and, from CUDA 12.8, on a B200."""
    planned = 0
    for torch, rel in data.TORCH_RELEASES.items():
        for v in rel["variants"]:
            cuda = "%s.%s" % (v[2:-1], v[-1])
            if cuda in data.CUDA_TOOLKITS:
                gpus = ["NVIDIA A100-SXM4-80GB"] + (["NVIDIA B200"] if vkey(cuda) >= (12, 8) else [])
                # The default OS's python3 (Ubuntu 22.04: 3.10) where the release has a wheel for it, else 24.04's 3.12.
                os_key = "ubuntu22.04" if "3.10" in rel["python"]["versions"] else "ubuntu24.04"
                for gpu in gpus:
                    plan = solve({"gpus": [gpu], "cuda": cuda, "torch": torch, "os": os_key})
                    assert plan["torch"]["variant"] == v
                    assert not math.isnan(float(vkey(plan["driver_recommended_version"])[0]))
                    planned += 1
    assert planned >= 40


# Every OS the solver plans (the one list; the others are refused: test_supported_os.py).
@pytest.mark.parametrize("os_key", sorted(data.SUPPORTED_OS))
def test_property_every_os(os_key):
    """Every OS x CUDA x a GPU per architecture family x torch: each plan holds every rule, with NVIDIA's
    package names for that OS; each refusal names a rule that applies and alternatives that solve."""
    counts = {"plans": 0, "refusals": 0}
    for cuda in CUDAS:
        for gpu in ("Tesla V100-SXM2-32GB", "Tesla T4", "NVIDIA H100 80GB HBM3", "NVIDIA GH200 480GB", "NVIDIA B200"):
            for torch in ("2.1.2", "2.7.1", "2.9.1"):
                request = {"gpus": [gpu] * 4, "cuda": cuda, "torch": torch, "os": os_key, "nvswitch": True}
                try:
                    plan = solve(request)
                except StackError as err:
                    check_refusal(err, request)
                    counts["refusals"] += 1
                else:
                    check_plan(plan, request)
                    assert plan["os"] == os_key
                    counts["plans"] += 1
    assert counts["plans"] > 0 and counts["refusals"] > 0


PYPI_TORCH_SNAPSHOT = (Path(__file__).resolve().parents[3] / "fixtures" / "compat-sources" / "pypi-torch.json")


@pytest.mark.parametrize("torch", sorted(json.loads(PYPI_TORCH_SNAPSHOT.read_text())["releases"], key=vkey))
@pytest.mark.parametrize("cuda", [None, "12.2", "13.0"])
def test_every_torch_2_release_on_pypi_plans_or_is_refused_by_a_specific_rule(torch, cuda):
    """Acceptance (issue 24): every torch 2.x release PyPI serves (the recorded snapshot) plans on an
    8x H100 node, or is refused with a rule other than UNKNOWN_TORCH and alternatives that plan."""
    request = {"gpus": ["NVIDIA H100 80GB HBM3"] * 8, "torch": torch, "os": "ubuntu22.04", "nvswitch": True}
    if cuda:
        request["cuda"] = cuda
    try:
        plan = solve(request)
    except StackError as err:
        assert err.rule != "UNKNOWN_TORCH", str(err)
        assert err.alternatives, str(err)
        for alt in err.alternatives:
            solve(dict(request, **alt))
    else:
        assert plan["torch"]["version"] == torch
        assert plan["torch"]["variant"] in data.TORCH_RELEASES[torch]["variants"]
