"""`gpufleet mirror`: reading plans (the one reader of the plan's keys), plan files and the targets they make."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import yaml

from gpufleet.mirror import apt_install_args
from gpufleet.mirror_targets import (MirrorError, Pins, PlanOptions, RoleValues, cuda_repository, load_plans,
                                     read_plan, targets_from_facts, targets_from_plans)

REPO = Path(__file__).resolve().parents[3]

# A plan as PLAN_CONTRACT.md documents it (Ubuntu 22.04, R535 open modules, NVSwitch, CUDA 12.2, torch 2.1.2).
PLAN = {
    "os": "ubuntu22.04", "package_family": "apt", "arch": "x86_64",
    "repository": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/",
    "cuda_version": "12.2", "driver_branch": "535", "driver_recommended_version": "535.216.03",
    "kernel_modules": "open", "nccl_version": "2.19.3", "nccl_package_version": "2.19.3-1+cuda12.2",
    "packages": {"driver": ["nvidia-kernel-open-535", "cuda-drivers-535"], "toolkit": ["cuda-toolkit-12-2"],
                 "nccl": ["libnccl2=2.19.3-1+cuda12.2", "libnccl-dev=2.19.3-1+cuda12.2"],
                 "fabricmanager": ["nvidia-fabricmanager-535"]},
    "driver_flavour_switch": [{"action": "remove", "packages": ["nvidia-kernel-source-535"]},
                              {"action": "install", "packages": ["nvidia-kernel-open-535"]}],
    "torch": {"version": "2.1.2", "variant": "cu121", "index_url": "https://download.pytorch.org/whl/cu121",
              "torchvision": "0.16.2", "torchaudio": "2.1.2"},
    "warnings": [],
}
DNF_PLAN = dict(PLAN, os="rhel9", package_family="dnf",
                repository="https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/",
                packages={"driver": ["@nvidia-driver:535-open"], "toolkit": ["cuda-toolkit-12-2"],
                          "nccl": ["libnccl-2.19.3-1+cuda12.2", "libnccl-devel-2.19.3-1+cuda12.2"],
                          "fabricmanager": ["nvidia-fabric-manager"]})


def test_the_plan_names_what_the_roles_install():
    stack = read_plan(PLAN)
    # Driver, fabric manager and the flavour switch's install step (the driver role asks the repository for all).
    assert stack.driver_names == ("nvidia-kernel-open-535", "cuda-drivers-535", "nvidia-fabricmanager-535")
    assert stack.driver_version == "535.216.03"
    assert stack.toolkit_names == ("cuda-toolkit-12-2",)
    assert stack.nccl_names == ("libnccl2", "libnccl-dev") and stack.nccl_version == "2.19.3-1+cuda12.2"
    assert stack.wheel_requirements == ("torch==2.1.2+cu121", "torchvision==0.16.2+cu121", "torchaudio==2.1.2+cu121")
    assert stack.wheel_index_url == "https://download.pytorch.org/whl/cu121"
    with_numpy = read_plan(PLAN, Pins(extra_wheels=("numpy==1.26.4",)))
    assert with_numpy.wheel_requirements[-1] == "numpy==1.26.4"


def test_the_inventorys_pins_replace_the_plans_values():
    pins = Pins(driver_version="535.183.01", driver_packages=("cuda-drivers-535",), nccl_version="2.18.3-1+cuda12.2",
                nccl_names=("libnccl2",), wheel_requirements=("torch==2.13.0+cpu", "numpy==1.26.4"),
                pytorch_index_url="http://mirror/simple/", extra_wheels=("ignored",), wheel_lock="torch==2.13.0+cpu ...")
    stack = read_plan(PLAN, pins)
    assert stack.driver_version == "535.183.01"
    assert stack.driver_names == ("cuda-drivers-535", "nvidia-fabricmanager-535", "nvidia-kernel-open-535")
    assert stack.nccl_names == ("libnccl2",) and stack.nccl_version == "2.18.3-1+cuda12.2"
    # The pytorch role's own pins (its override, numpy, extras) replace what the plan alone says.
    assert stack.wheel_requirements == ("torch==2.13.0+cpu", "numpy==1.26.4")
    assert stack.wheel_index_url == "http://mirror/simple/" and stack.wheel_lock == "torch==2.13.0+cpu ..."


def test_dnf_plans_name_nccl_without_the_version():
    stack = read_plan(DNF_PLAN)
    assert stack.nccl_names == ("libnccl", "libnccl-devel")
    assert stack.driver_names[0] == "@nvidia-driver:535-open"


@pytest.mark.parametrize("plan, words", [
    ({"error": "stack_plan: [REPO_LACKS_CUDA] no 12.2 on debian12"}, ["solver refused", "REPO_LACKS_CUDA"]),
    ({k: v for k, v in PLAN.items() if k != "driver_recommended_version"},
     ["driver_recommended_version", "PLAN_CONTRACT.md"]),
    (["not", "a", "plan"], ["not a stack plan"]),
])
def test_a_bad_plan_is_refused_naming_what_is_wrong(plan, words):
    with pytest.raises(MirrorError) as err:
        read_plan(plan)
    for word in words:
        assert word in str(err.value)


def test_the_solvers_own_output_reads(tmp_path):
    """read_plan takes what the stack_plan filter returns (the contract), whatever its data decides."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import solve

    plan = solve({"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "12.2", "torch": "2.1.2", "os": "ubuntu22.04",
                  "arch": "x86_64", "nvswitch": True})
    stack = read_plan(plan)
    assert set(plan["packages"]["driver"] + plan["packages"]["fabricmanager"]) <= set(stack.driver_names)
    assert stack.driver_version == plan["driver_recommended_version"]
    assert stack.wheel_requirements[0] == f"torch=={plan['torch']['version']}+{plan['torch']['variant']}"


def test_plan_files_hold_one_plan_a_list_or_plans_per_node(tmp_path):
    one, many, per_node = tmp_path / "plan.json", tmp_path / "list.json", tmp_path / "nodes.json"
    one.write_text(json.dumps(PLAN))
    many.write_text(json.dumps([PLAN, DNF_PLAN]))
    per_node.write_text(json.dumps({"node1": PLAN, "node2": DNF_PLAN}))
    labels = [label for label, _plan in load_plans([one, many, per_node])]
    assert labels == [str(one), f"{many}[0]", f"{many}[1]", f"{per_node}:node1", f"{per_node}:node2"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(MirrorError, match="not JSON"):
        load_plans([bad])
    with pytest.raises(MirrorError, match="cannot be read"):
        load_plans([tmp_path / "missing.json"])


def test_an_apt_plan_needs_the_nodes_kernel(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    with pytest.raises(MirrorError, match=r"--kernel \(`uname -r` on the nodes\)"):
        targets_from_plans([tmp_path / "plan.json"], PlanOptions(), REPO)


def test_a_plan_for_an_unknown_os_names_the_known_ones(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(dict(PLAN, os="plan9")))
    with pytest.raises(MirrorError, match="'plan9' is not one gpufleet mirror knows.*debian12"):
        targets_from_plans([tmp_path / "plan.json"], PlanOptions(kernel="6.1.0-1-amd64"), REPO)


def test_plan_mode_takes_the_roles_own_packages_and_merges_identical_nodes(tmp_path):
    (tmp_path / "plans.json").write_text(json.dumps({"node1": PLAN, "node2": PLAN}))
    targets = targets_from_plans([tmp_path / "plans.json"], PlanOptions(kernel="6.1.0-9-amd64"), REPO)
    assert len(targets) == 1 and len(targets[0].nodes) == 2
    target = targets[0]
    # The same values the roles' vars files give a Ubuntu node with that kernel.
    driver_vars = yaml.safe_load((REPO / "roles/nvidia_driver/vars/Debian.yml").read_text())
    pytorch_vars = yaml.safe_load((REPO / "roles/pytorch/vars/Debian.yml").read_text())
    expected = [item.replace("{{ ansible_facts['kernel'] }}", "6.1.0-9-amd64")
                for item in driver_vars["__nvidia_driver_build_packages"]] + pytorch_vars["__pytorch_system_packages"]
    assert list(target.os_packages) == expected and "linux-headers-6.1.0-9-amd64" in expected
    assert (target.codename, target.python, target.glibc) == ("jammy", "3.10", "2.35")
    numpy = yaml.safe_load((REPO / "roles/pytorch/vars/main.yml").read_text())["__pytorch_numpy_default"]
    assert target.stack.wheel_requirements[-1] == f"numpy=={numpy}"
    assert target.os_archive.url == "http://archive.ubuntu.com/ubuntu" and target.os_archive.suite == "jammy"
    assert target.cuda.url == PLAN["repository"] and target.repo_subdir == "ubuntu2204/x86_64"
    assert target.cuda.key_url == PLAN["repository"] + "3bf863cc.pub"
    assert target.base_status == b""


def test_a_site_repository_keeps_nvidias_layout_under_its_base():
    stack = read_plan(PLAN)
    repo = cuda_repository(stack, "http://mirror.site/nvidia/", "", "eb69 3b30 35cd 5710 e231 e123 a4b4 6996 3bf8 63cc")
    assert repo.url == "http://mirror.site/nvidia/ubuntu2204/x86_64/"
    assert repo.key_url == "http://mirror.site/nvidia/ubuntu2204/x86_64/3bf863cc.pub"
    assert repo.fingerprint == "EB693B3035CD5710E231E123A4B469963BF863CC"


def test_role_values_follow_the_role_files_for_rpm_systems():
    values = RoleValues.from_role_files(REPO, {"kernel": "5.14.0-1.el9", "architecture": "x86_64",
                                               "distribution": "RedHat", "distribution_major_version": "9",
                                               "os_family": "RedHat"})
    assert "kernel-devel-5.14.0-1.el9" in values.os_packages
    assert values.nccl_names == ("libnccl", "libnccl-devel")


def _record(**over):
    record = {
        "plan": PLAN,
        "facts": {"os_family": "Debian", "codename": "jammy", "major": "22", "kernel": platform.release()},
        "repository": {"url": "http://10.0.0.1:8765/compute/cuda/repos/ubuntu2204/x86_64",
                       "key_url": "http://10.0.0.1:8765/k.pub", "fingerprint": "ab" * 20},
        "debian_mirror_url": "http://10.0.0.1:8765/ubuntu",
        "roles": {"os_packages": ["dkms"], "nccl_names": ["libnccl2"], "wheels": ["torch==2.13.0+cpu", "numpy==1.26.4"],
                  "wheel_lock": ""},
        "pins": {"driver_version": "", "driver_packages": [], "nccl_version": "", "pytorch_index_url": "",
                 "pytorch_wheel_dir": "/opt/wheels"},
        "python": {"version": "3.11", "glibc": "2.36", "machine": "x86_64"},
        "dpkg_status": "UGFja2FnZTogYQo=",
    }
    record.update(over)
    return record


def test_inventory_records_become_targets_with_the_nodes_own_state():
    targets = targets_from_facts({"node1": _record(), "node2": _record()}, PlanOptions(os_keyring="/k.gpg"))
    assert len(targets) == 1 and targets[0].nodes == ("node1", "node2")
    target = targets[0]
    assert target.cuda.url == "http://10.0.0.1:8765/compute/cuda/repos/ubuntu2204/x86_64/"
    assert target.cuda.fingerprint == "AB" * 20
    assert target.os_archive.url == "http://10.0.0.1:8765/ubuntu" and target.os_archive.keyring == "/k.gpg"
    assert target.base_status == b"Package: a\n"
    assert target.stack.wheel_requirements == ("torch==2.13.0+cpu", "numpy==1.26.4")
    assert target.node_wheel_dir == "/opt/wheels" and target.python == "3.11"


def test_nodes_that_differ_are_resolved_apart():
    other = _record(dpkg_status="UGFja2FnZTogYgo=")
    assert len(targets_from_facts({"node1": _record(), "node2": other}, PlanOptions())) == 2


def test_a_command_line_repository_replaces_the_inventorys_under_the_same_layout():
    targets = targets_from_facts({"node1": _record()}, PlanOptions(cuda_repo_url="http://site/cuda"))
    assert targets[0].cuda.url == "http://site/cuda/ubuntu2204/x86_64/"


class _OfferingSandbox:
    """What apt-cache would say of a repository that carries R595 with its branch pinning package."""

    OFFERED = {"nvidia-driver-pinning-595": ["595"], "nvidia-open": ["595.91.07-1ubuntu1", "610.10-1ubuntu1"],
               "nvidia-fabricmanager": ["595.91.07-1"], "cuda-toolkit-13-2": ["13.2.0-1"],
               "libnccl2": ["2.29.7-1+cuda13.2"]}

    def offered(self, names):
        return {n: self.OFFERED[n] for n in names if n in self.OFFERED}

    def all_names(self):
        return list(self.OFFERED)

    def _where(self):
        return "the test repository"


def test_a_branch_pinning_package_is_asked_for_at_its_branch_as_the_driver_role_asks():
    """R590+ plans name nvidia-driver-pinning-<branch>, whose version is the branch, not the driver release."""
    plan = dict(PLAN, cuda_version="13.2", driver_branch="595", driver_recommended_version="595.91.07",
                nccl_package_version="2.29.7-1+cuda13.2", driver_flavour_switch=[],
                packages={"driver": ["nvidia-driver-pinning-595", "nvidia-open"], "toolkit": ["cuda-toolkit-13-2"],
                          "nccl": ["libnccl2=2.29.7-1+cuda13.2"], "fabricmanager": ["nvidia-fabricmanager"]})
    target = targets_from_facts({"node1": _record(plan=plan)}, PlanOptions(os_keyring="/k.gpg"))[0]
    args = apt_install_args(target, _OfferingSandbox())
    assert args[:3] == ["nvidia-driver-pinning-595=595", "nvidia-open=595.91.07-1ubuntu1",
                        "nvidia-fabricmanager=595.91.07-1"], args
    assert "libnccl2=2.29.7-1+cuda13.2" in args


# Blackwell's NVLink stack and DCGM 4 (issue 27): the roles install them from the plan, so the mirror holds them.

def _solved(gpu: str, os_name: str = "ubuntu22.04", arch: str = "x86_64") -> dict:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import solve

    return solve({"gpus": [gpu], "os": os_name, "arch": arch, "nvswitch": True, "torch": "2.7.0"})


class _BlackwellSandbox(_OfferingSandbox):
    """A repository with the R595 driver, NVLSM (versioned by its release date) and DCGM 4 builds."""

    OFFERED = dict(_OfferingSandbox.OFFERED, **{
        "nvidia-driver-open": ["595.91.07-1ubuntu1"],  # the flavour switch's install step
        "cuda-toolkit-12-8": ["12.8.1-1"], "libnccl2": ["2.25.1-1+cuda12.8"],
        "nvidia-imex": ["580.95.05-1", "595.91.07-1"], "nvlsm": ["2025.06.4-1", "2025.10.14-1"],
        "datacenter-gpu-manager-4-core": ["1:4.4.1-1", "1:4.5.2-1", "1:4.6.0-1"],
        "datacenter-gpu-manager-4-cuda12": ["1:4.4.1-1", "1:4.5.2-1", "1:4.6.0-1"]})


def test_a_b200_nvswitch_plan_mirrors_nvlsm_as_the_driver_role_installs_it():
    """The driver role installs the plan's NVLSM in the driver's transaction at the repository's newest build
    (NVLSM is versioned by its release date, not the driver's), so the mirror must hold that build."""
    plan = _solved("NVIDIA B200")
    assert plan["packages"]["nvlsm"] == ["nvlsm"], plan["packages"]
    stack = read_plan(plan)
    assert stack.nvlsm_names == ("nvlsm",) and stack.nvlsm_version == ""
    assert stack.driver_version == plan["driver_recommended_version"]
    target = targets_from_facts({"node1": _record(plan=plan)}, PlanOptions(os_keyring="/k.gpg"))[0]
    args = apt_install_args(target, _BlackwellSandbox())
    assert "nvlsm=2025.10.14-1" in args and "nvidia-fabricmanager=595.91.07-1" in args, args
    # An inventory pin (nvidia_driver_nvlsm_version) is asked for like the role asks for it.
    pinned = targets_from_facts({"node1": _record(plan=plan, pins=dict(_record()["pins"], nvlsm_version="2025.06.4"))},
                                PlanOptions(os_keyring="/k.gpg"))[0]
    assert "nvlsm=2025.06.4-1" in apt_install_args(pinned, _BlackwellSandbox())


def test_a_gb200_plan_mirrors_imex_at_the_drivers_version():
    plan = _solved("NVIDIA GB200")
    assert plan["packages"]["imex"] == ["nvidia-imex"], plan["packages"]
    stack = read_plan(plan)
    assert "nvidia-imex" in stack.driver_names and stack.driver_version == plan["driver_recommended_version"]
    target = targets_from_facts({"node1": _record(plan=dict(plan, arch="x86_64"))}, PlanOptions(os_keyring="/k.gpg"))[0]
    args = apt_install_args(target, _BlackwellSandbox())
    assert "nvidia-imex=595.91.07-1" in args, args


def test_a_plan_with_dcgm_mirrors_its_packages_at_the_dcgm_version():
    plan = _solved("NVIDIA B200")
    assert plan["packages"]["dcgm"] and plan["dcgm_version"], plan
    stack = read_plan(plan)
    assert stack.dcgm_names == tuple(plan["packages"]["dcgm"]) and stack.dcgm_version == plan["dcgm_version"]
    assert ("dcgm", plan["dcgm_version"]) in stack.summary
    target = targets_from_facts({"node1": _record(plan=plan)}, PlanOptions(os_keyring="/k.gpg"))[0]
    args = apt_install_args(target, _BlackwellSandbox())
    assert [a for a in args if a.startswith("datacenter-gpu-manager")] == [
        f"{name}={plan['dcgm_version']}" for name in plan["packages"]["dcgm"]], args
    # gpufleet_dcgm_version (inventory) replaces the plan's, as playbooks/validate.yml passes it.
    assert read_plan(plan, Pins(dcgm_version="1:4.4.1-1")).dcgm_version == "1:4.4.1-1"


def test_a_plan_without_the_nvlink_or_dcgm_keys_adds_nothing():
    """Older plan files and non-NVSwitch nodes: absent keys mean nothing to mirror, not an error."""
    stack = read_plan(PLAN)
    assert (stack.nvlsm_names, stack.dcgm_names, stack.dcgm_version) == ((), (), "")
    assert not any("imex" in name for name in stack.driver_names)
    empty = read_plan(dict(PLAN, packages=dict(PLAN["packages"], imex=[], nvlsm=[], dcgm=[]), dcgm_version=None))
    assert (empty.nvlsm_names, empty.dcgm_names, empty.dcgm_version) == ((), (), "")


@pytest.mark.parametrize("change, key", [
    ({"packages": dict(PLAN["packages"], nvlsm="nvlsm")}, "packages.nvlsm"),
    ({"packages": dict(PLAN["packages"], imex=[None])}, "packages.imex"),
    ({"packages": dict(PLAN["packages"], dcgm={"core": 1})}, "packages.dcgm"),
    ({"packages": dict(PLAN["packages"], dcgm=["datacenter-gpu-manager-4-core"])}, "dcgm_version"),
    ({"packages": dict(PLAN["packages"], dcgm=["datacenter-gpu-manager-4-core"]), "dcgm_version": 4}, "dcgm_version"),
])
def test_a_malformed_nvlink_or_dcgm_key_is_refused_naming_it(change, key):
    with pytest.raises(MirrorError) as err:
        read_plan(dict(PLAN, **change))
    assert key in str(err.value) and "PLAN_CONTRACT.md" in str(err.value)
