# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sourced compatibility data for the stack solver: one place, plain Python data.

Every entry carries ``source``. "Table 3" is NVIDIA's "CUDA Toolkit and
Corresponding Driver Versions" table in the CUDA Toolkit Release Notes
(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html and
https://docs.nvidia.com/cuda/archive/<ver>/cuda-toolkit-release-notes/); the
minor-version floor is NVIDIA's "CUDA Minor Version Compatibility" page
(https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).
Torch wheel facts are from pytorch.org's "Previous PyTorch Versions" page
(pytorch/pytorch.github.io ``_get_started/previous-versions.md``) and PyPI
wheel metadata. Facts that could not be checked against a published source
were left out; see docs/compatibility.md for the audit trail.

GPU model names live in ``gpu_models.py`` (not repeated here); this file keys
GPU support on compute capability only.
"""

from __future__ import annotations

_T3 = ("NVIDIA CUDA Toolkit Release Notes, Table 3 (Linux x86_64 toolkit driver); "
       "values cross-checked against verbatim public reproductions of the table")
_MVC = ("NVIDIA CUDA Compatibility guide, minor version compatibility: "
        "CUDA 11.x >= 450.80.02, CUDA 12.x >= 525.60.13")
_NCCL_SRC = ("libnccl2 version string as carried by NVIDIA's CUDA apt repository "
             "(pinned as libnccl2=<ver> in public install scripts against "
             "developer.download.nvidia.com/compute/cuda/repos/ubuntu2204); "
             "NCCL release notes list the CUDA versions each NCCL release is built for")

# CUDA toolkit -> drivers and NCCL.
#   updates:  Table 3 minimum per toolkit release (GA and updates).
#   driver_min:  Table 3 minimum for the GA release: the driver that runs every
#                update of that minor with full features is the *latest* update's
#                value; the plan reports the value for the release it installs
#                (full_version), see stack_solver.
#   driver_min_minor_compat:  the minor-version-compatibility floor.
#   nccl:  libnccl2/libnccl-dev version string in NVIDIA's repo for this CUDA.
CUDA_TOOLKITS = {
    "11.7": {
        "full_version": "11.7.1",
        "updates": {"11.7.0": "515.43.04", "11.7.1": "515.48.07"},
        "driver_min": "515.43.04",
        "driver_min_minor_compat": "450.80.02",
        "nccl": "2.14.3-1+cuda11.7",
        "source": (_T3 + "; 11.7.0 installer cuda_11.7.0_515.43.04_linux.run; " + _MVC
                   + "; nccl: " + _NCCL_SRC + " (2.14.3 is also the NCCL PyTorch's cu117 builds use)"),
    },
    "11.8": {
        "full_version": "11.8.0",
        "updates": {"11.8.0": "520.61.05"},
        "driver_min": "520.61.05",
        "driver_min_minor_compat": "450.80.02",
        "nccl": "2.16.5-1+cuda11.8",
        "source": _T3 + "; installer cuda_11.8.0_520.61.05_linux.run; " + _MVC + "; nccl: " + _NCCL_SRC,
    },
    "12.0": {
        "full_version": "12.0.1",
        "updates": {"12.0.0": "525.60.13", "12.0.1": "525.85.12"},
        "driver_min": "525.60.13",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.18.3-1+cuda12.0",
        "source": _T3 + "; " + _MVC + "; nccl: " + _NCCL_SRC + " (NCCL 2.18.3 release notes: CUDA 11.0, 12.0, 12.1, 12.2)",
    },
    "12.1": {
        "full_version": "12.1.1",
        "updates": {"12.1.0": "530.30.02", "12.1.1": "530.30.02"},
        "driver_min": "530.30.02",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.18.3-1+cuda12.1",
        "source": _T3 + "; installer cuda_12.1.1_530.30.02_linux.run; " + _MVC + "; nccl: " + _NCCL_SRC,
    },
    "12.2": {
        "full_version": "12.2.2",
        "updates": {"12.2.0": "535.54.03", "12.2.1": "535.86.09", "12.2.2": "535.104.05"},
        "driver_min": "535.54.03",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.18.3-1+cuda12.2",
        "source": _T3 + "; installer cuda_12.2.2_535.104.05_linux.run; " + _MVC + "; nccl: " + _NCCL_SRC,
    },
}

# Compute capability -> first CUDA toolkit that compiles for it natively, and the
# last one (None = still supported by the newest toolkit in CUDA_TOOLKITS).
_CC_SRC_FORUM = ("NVIDIA developer forum, 'minimum required CUDA version by GPU' "
                 "(forums.developer.nvidia.com/t/276955) and NVIDIA's CUDA GPUs list")
CC_SUPPORT = {
    "6.0": {"first_cuda": "8.0", "last_cuda": "12.9",
            "source": "NVIDIA CUDA 12.x release notes, Deprecated Architectures: Maxwell/Pascal/Volta "
                      "supported through CUDA 12.x, offline compilation removed in the next major "
                      "(quoted in pytorch/pytorch#157517); first CUDA: NVIDIA CUDA GPUs list"},
    "6.1": {"first_cuda": "8.0", "last_cuda": "12.9",
            "source": "as 6.0"},
    "7.0": {"first_cuda": "9.0", "last_cuda": "12.9",
            "source": "first: NVIDIA table 'CUDA SDK 9.0-9.2 support compute capability 3.0-7.0'; last: as 6.0 "
                      "(NVIDIA/cuDecomp#97: 'CUDA 13.0 dropped support for Volta (SM70)')"},
    "7.5": {"first_cuda": "10.0", "last_cuda": None,
            "source": "NVIDIA table 'CUDA SDK 10.0-10.2 support compute capability 3.0-7.5'"},
    "8.0": {"first_cuda": "11.0", "last_cuda": None, "source": _CC_SRC_FORUM},
    "8.6": {"first_cuda": "11.1", "last_cuda": None, "source": _CC_SRC_FORUM},
    "8.9": {"first_cuda": "11.8", "last_cuda": None,
            "source": _CC_SRC_FORUM + "; gromacs MR 3180 'Ada (89) and Hopper (90) support now exists in CUDA 11.8'"},
    "9.0": {"first_cuda": "11.8", "last_cuda": None,
            "source": _CC_SRC_FORUM + "; CUDA 11.7 fails with 'sm_90 is not compatible'"},
    "10.0": {"first_cuda": "12.8", "last_cuda": None,
             "source": "NVIDIA Blackwell Compatibility Guide (native Blackwell builds need CUDA 12.8); "
                       "pytorch/pytorch#141724 (Blackwell 10.0 for CUDA > 12.6)"},
    "10.3": {"first_cuda": "12.8", "last_cuda": None, "source": "as 10.0 (same guide)"},
    "12.0": {"first_cuda": "12.8", "last_cuda": None, "source": "as 10.0 (same guide)"},
}

# Driver branches. versions: ascending, from the keylase/nvidia-patch README table
# (snapshot 7b022ce1) plus the data-center releases NVIDIA's release notes name.
# max_cuda: the newest CUDA this branch runs with full features = the newest
# toolkit whose Table 3 minimum the branch's last release meets (agrees with the
# "CUDA Version" nvidia-smi prints: 515 -> 11.7, 525 -> 12.0, 535 -> 12.2 in the
# captures). recommended: the version the plan installs by default.
_KEYLASE = "keylase/nvidia-patch README driver table (snapshot 7b022ce1)"
DRIVER_BRANCHES = {
    "515": {
        "versions": ["515.43.04", "515.48.07", "515.57", "515.65.01", "515.76", "515.86.01", "515.105.01"],
        "recommended": "515.105.01",
        "max_cuda": "11.7",
        "source": _KEYLASE + "; max_cuda: nvidia-smi 515.x prints CUDA 11.7 (fixtures); Table 3",
    },
    "520": {
        "versions": ["520.56.06", "520.61.05"],
        "recommended": "520.61.05",
        "max_cuda": "11.8",
        "source": _KEYLASE + "; 520.61.05 is the CUDA 11.8 GA driver (Table 3)",
    },
    "525": {
        "versions": ["525.60.11", "525.60.13", "525.78.01", "525.85.05", "525.85.12", "525.89.02",
                     "525.105.17", "525.116.03", "525.116.04", "525.125.06", "525.147.05"],
        "recommended": "525.147.05",
        "max_cuda": "12.0",
        "eol": True,
        "source": (_KEYLASE + "; max_cuda: nvidia-smi 525.x prints CUDA 12.0 (fixtures); "
                   "end of life: docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html"),
    },
    "530": {
        "versions": ["530.30.02", "530.41.03"],
        "recommended": "530.41.03",
        "max_cuda": "12.1",
        "source": _KEYLASE + "; 530.30.02 is the CUDA 12.1/12.1.1 driver (Table 3)",
    },
    "535": {
        "versions": ["535.43.02", "535.54.03", "535.86.05", "535.86.10", "535.98", "535.104.05", "535.104.12",
                     "535.113.01", "535.129.03", "535.146.02", "535.154.05", "535.161.07", "535.161.08",
                     "535.171.04", "535.183.01", "535.183.06", "535.216.01", "535.216.03", "535.230.02",
                     "535.247.01", "535.261.03", "535.274.02", "535.288.01"],
        # A data-center release whose Fabric Manager NVIDIA's release notes list at
        # the same version ("Fabric Manager: 535.216.03"); newer point releases work too.
        "recommended": "535.216.03",
        "max_cuda": "12.2",
        "type": "LTSB",
        "source": (_KEYLASE + "; LTSB, max CUDA 12.x: docs.nvidia.com/datacenter/tesla/drivers/"
                   "supported-drivers-and-cuda-toolkit-versions.html; 535.216.03 with Fabric Manager 535.216.03: "
                   "NVIDIA data-center driver release notes"),
    },
}

# Branch preference when the request names none: the supported LTSB first (one
# branch runs every toolkit 11.7-12.2 with full features), then the others.
DEFAULT_BRANCH_PREFERENCE = ["535", "530", "525", "520", "515"]

# Open GPU kernel modules: shipped from R515; Turing and newer only; Maxwell,
# Pascal and Volta need the proprietary flavour; default flavour from R560.
KERNEL_MODULES = {
    "open_first_branch": "515",
    "open_min_cc": "7.5",
    "open_default_from_branch": "560",
    "source": "NVIDIA Driver Installation Guide, Kernel Modules (docs.nvidia.com/datacenter/tesla/"
              "driver-installation-guide/kernel-modules.html): 'Starting in the 515 driver release series, "
              "two flavors ... Proprietary ... required for older GPUs from the Maxwell, Pascal, or Volta "
              "architectures ... Open-source ... only for Turing and newer architectures, and this is what you "
              "should use if you have one of those architectures. Starting in the 560 driver release series, "
              "the open kernel module flavor is the default'",
}

# PyTorch releases: CUDA wheel variants on download.pytorch.org/whl/<variant>,
# the matching torchvision/torchaudio, and the NCCL the default PyPI wheel bundles.
_PREV = "pytorch.org/get-started/previous-versions (pytorch/pytorch.github.io _get_started/previous-versions.md)"
_PYPI = "PyPI wheel metadata (torch pins nvidia-nccl-cu1x)"
TORCH_RELEASES = {
    "2.0.0": {"variants": ["cu117", "cu118"], "default_variant": "cu117",
              "torchvision": "0.15.1", "torchaudio": "2.0.1", "source": _PREV},
    "2.0.1": {"variants": ["cu117", "cu118"], "default_variant": "cu117",
              "torchvision": "0.15.2", "torchaudio": "2.0.2", "bundled_nccl": "2.14.3",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.1.0": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.16.0", "torchaudio": "2.1.0", "source": _PREV},
    "2.1.1": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.16.1", "torchaudio": "2.1.1", "source": _PREV},
    "2.1.2": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.16.2", "torchaudio": "2.1.2", "bundled_nccl": "2.18.1",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.2.0": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.17.0", "torchaudio": "2.2.0", "source": _PREV},
    "2.2.1": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.17.1", "torchaudio": "2.2.1", "source": _PREV},
    "2.2.2": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.17.2", "torchaudio": "2.2.2", "bundled_nccl": "2.19.3",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.3.0": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.18.0", "torchaudio": "2.3.0", "source": _PREV},
    "2.3.1": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.18.1", "torchaudio": "2.3.1", "bundled_nccl": "2.20.5",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.4.0": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu121",
              "torchvision": "0.19.0", "torchaudio": "2.4.0",
              "source": _PREV + " (commit 6286469 'Release 2.4.1 update previous versions')"},
    "2.4.1": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu121",
              "torchvision": "0.19.1", "torchaudio": "2.4.1", "bundled_nccl": "2.20.5",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.5.0": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu124",
              "torchvision": "0.20.0", "torchaudio": "2.5.0",
              "source": _PREV + " (commit 3a3efc5 'Add 2.5.0 to previous-versions.md')"},
    "2.5.1": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu124",
              "torchvision": "0.20.1", "torchaudio": "2.5.1", "bundled_nccl": "2.21.5",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
}

TORCH_INDEX_URL = "https://download.pytorch.org/whl/{variant}"

# Minimum driver a wheel's bundled CUDA runtime needs: the minor-version floor of its major.
WHEEL_DRIVER_FLOOR = {
    "11": "450.80.02",
    "12": "525.60.13",
    "source": _MVC,
}

# NVIDIA CUDA repository layout.
CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
REPO_DISTROS = {
    # os id (normalised) -> (repo distro component, package family)
    "ubuntu20.04": ("ubuntu2004", "apt"),
    "ubuntu22.04": ("ubuntu2204", "apt"),
    "ubuntu24.04": ("ubuntu2404", "apt"),
    "debian11": ("debian11", "apt"),
    "debian12": ("debian12", "apt"),
    "rhel8": ("rhel8", "dnf"),
    "rhel9": ("rhel9", "dnf"),
}
# Clones that use the RHEL repository.
OS_ALIASES = {
    "rocky": "rhel", "almalinux": "rhel", "alma": "rhel", "centos": "rhel", "redhat": "rhel",
    "rocky linux": "rhel", "red hat enterprise linux": "rhel", "ol": "rhel", "oraclelinux": "rhel",
}
REPO_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa", "sbsa": "sbsa"}
REPO_SOURCE = ("NVIDIA/ansible-role-nvidia-driver defaults and vars/main.yml (aarch64 -> sbsa); "
               "stackhpc/ansible-slurm-appliance roles/cuda; repo URL pattern "
               "<base>/<distro>/<arch>/")

# Package names per package family. {B} = driver branch, {XY} = toolkit "12-2",
# {NCCL} = the CUDA_TOOLKITS nccl string.
OS_PACKAGE_NAMES = {
    "apt": {
        "driver": {"proprietary": ["nvidia-driver-{B}", "cuda-drivers-{B}"],
                   "open": ["nvidia-driver-{B}-open", "cuda-drivers-{B}"]},
        "toolkit": ["cuda-toolkit-{XY}"],
        "nccl": ["libnccl2={NCCL}", "libnccl-dev={NCCL}"],
        "fabricmanager": ["nvidia-fabricmanager-{B}"],
        "source": "cuda-drivers-<B>: NVIDIA/ansible-role-nvidia-driver; cuda-toolkit-X-Y: NVIDIA CUDA "
                  "installation guide pattern; libnccl2=<ver>: NVIDIA/deepops nccl-tests container; "
                  "nvidia-fabricmanager-<B>: NVIDIA/deepops ubuntu-22.04 vars; names match the "
                  "simulated repository",
    },
    "dnf": {
        "driver": {"proprietary": ["@nvidia-driver:{B}-dkms"],
                   "open": ["@nvidia-driver:{B}-open"]},
        "toolkit": ["cuda-toolkit-{XY}"],
        "nccl": ["libnccl-{NCCL}", "libnccl-devel-{NCCL}"],
        "fabricmanager": ["nvidia-fabricmanager-{B}"],
        "source": "dnf module streams <B>-dkms/<B>-open: NVIDIA/yum-packaging-fabric-manager README "
                  "and NVIDIA/ansible-role-nvidia-driver #75; libnccl-<ver>: linux-system-roles/hpc "
                  "vars/RedHat_9.yml; nvidia-fabricmanager-<B>: NVIDIA/yum-packaging-fabric-manager",
    },
}

FABRIC_MANAGER = {
    "apt": {"package": "nvidia-fabricmanager-{B}", "service": "nvidia-fabricmanager"},
    "dnf": {"package": "nvidia-fabricmanager-{B}", "service": "nvidia-fabricmanager",
            "module_profile": "nvidia-driver:{B}/fm"},
    "version_rule": "Fabric Manager version must equal the driver version exactly; install only on NVSwitch systems",
    "source": "NVIDIA/yum-packaging-fabric-manager README ('the version of fabricmanager must match the NVIDIA "
              "driver installed'; 'dnf module install nvidia-driver:${stream}/fm'); NVIDIA data-center driver "
              "release notes ('Fabric Manager: 535.216.03'); NVIDIA/deepops ubuntu-22.04 vars",
}

# Stable rule ids the solver checks and raises.
RULES = {
    "UNKNOWN_CUDA": "the CUDA toolkit is in CUDA_TOOLKITS",
    "UNKNOWN_TORCH": "the torch release is in TORCH_RELEASES",
    "UNKNOWN_GPU": "every GPU resolves to a compute capability",
    "UNSUPPORTED_OS": "the OS/arch has an NVIDIA CUDA repository",
    "UNKNOWN_DRIVER_BRANCH": "the driver branch is in DRIVER_BRANCHES",
    "BAD_REQUEST": "the request is a mapping of the documented keys and types",
    "CC_NEEDS_NEWER_CUDA": "the CUDA toolkit is at least the first one that supports every GPU's compute capability",
    "CC_DROPPED_BY_CUDA": "the CUDA toolkit is not newer than the last one that supports every GPU",
    "DRIVER_BRANCH_TOO_OLD_FOR_CUDA": "the driver branch meets Table 3 for the toolkit (or the minor-version floor when driver_compat is minor)",
    "DRIVER_TOO_OLD_FOR_WHEEL": "the driver meets the torch wheel's CUDA minor-version floor",
    "TORCH_NO_WHEEL_FOR_CUDA": "the requested torch wheel variant exists for that torch release",
    "TORCH_CUDA_MAJOR_MISMATCH": "the torch wheel's CUDA major equals the toolkit's (unless allow_cuda_major_mismatch)",
    "TORCH_WHEEL_LACKS_CC": "the torch wheel's CUDA is at least the first CUDA for every GPU's compute capability",
    "OPEN_MODULES_NEED_TURING": "open kernel modules only for Turing (7.5) and newer, from R515",
    "NCCL_MATCHES_CUDA": "the NCCL package is the one built for the toolkit's CUDA",
    "FABRIC_MANAGER_MATCHES_DRIVER": "fabric manager is the driver branch's, only when NVSwitch is present",
}
