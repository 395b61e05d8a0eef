# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Sourced compatibility data for the stack solver, gathered from its parts:

- ``compat_cuda``: CUDA toolkits (Table 3 and minor-version floors, NCCL), compute capability support;
- ``compat_drivers``: driver branches, kernel-module flavour rules, fabric manager;
- ``compat_torch``: PyTorch wheel variants and their torchvision/torchaudio;
- ``compat_packages``: NVIDIA repositories per OS, the CUDA and branches each carries, package graphs.

The first three and the repository facts read two files: compat_facts.py, the one sourced table of
facts with no machine-readable source (one source per row), and compat_release_data.py, which
`gpufleet compat refresh` generates from PyPI and PyTorch's build matrix. docs/compatibility.md
renders both and lists what could not be sourced. GPU model names live in ``gpu_models.py``.
"""

from __future__ import annotations

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_cuda import (  # noqa: F401
        CC_SUPPORT, CUDA_TOOLKITS, MISSION_CUDA_RANGE, WHEEL_DRIVER_FLOOR)
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_drivers import (  # noqa: F401
        DRIVER_BRANCHES, FABRIC_MANAGER, GPU_MIN_DRIVER, KERNEL_MODULES, LAST_BRANCH_FOR_ARCH)
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_torch import (  # noqa: F401
        OS_PYTHON, TORCH_INDEX_URL, TORCH_RELEASES)
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_packages import (  # noqa: F401
        CUDA_REPO_BASE, DCGM_PACKAGES, DRIVER_PACKAGE_GRAPHS, FABRIC_MANAGER_PACKAGES, IMEX_PACKAGES, NVLSM_PACKAGES,
        OS_ALIASES, OS_PACKAGE_NAMES, REPO_ARCHES, REPO_BRANCHES, REPO_CUDA_RANGE, REPO_DISTROS, REPO_PACKAGES_UNVERIFIED, REPO_SOURCE,
        REFUSED_OS, SUPPORTED_OS)
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_cuda import CC_SUPPORT, CUDA_TOOLKITS, MISSION_CUDA_RANGE, WHEEL_DRIVER_FLOOR  # type: ignore # noqa: F401
    from compat_drivers import (DRIVER_BRANCHES, FABRIC_MANAGER, GPU_MIN_DRIVER,  # type: ignore # noqa: F401
                                KERNEL_MODULES, LAST_BRANCH_FOR_ARCH)
    from compat_torch import OS_PYTHON, TORCH_INDEX_URL, TORCH_RELEASES  # type: ignore # noqa: F401
    from compat_packages import (CUDA_REPO_BASE, DCGM_PACKAGES, DRIVER_PACKAGE_GRAPHS, FABRIC_MANAGER_PACKAGES,  # type: ignore # noqa: F401
                                 IMEX_PACKAGES, NVLSM_PACKAGES, OS_ALIASES, OS_PACKAGE_NAMES, REPO_ARCHES, REPO_BRANCHES, REPO_CUDA_RANGE,
                                 REPO_DISTROS, REPO_PACKAGES_UNVERIFIED, REPO_SOURCE, REFUSED_OS, SUPPORTED_OS)

__all__ = [
    "CC_SUPPORT", "CUDA_TOOLKITS", "MISSION_CUDA_RANGE", "WHEEL_DRIVER_FLOOR",
    "DRIVER_BRANCHES", "FABRIC_MANAGER", "GPU_MIN_DRIVER", "KERNEL_MODULES",
    "LAST_BRANCH_FOR_ARCH",
    "OS_PYTHON", "TORCH_INDEX_URL", "TORCH_RELEASES",
    "CUDA_REPO_BASE", "DCGM_PACKAGES", "DRIVER_PACKAGE_GRAPHS", "FABRIC_MANAGER_PACKAGES", "IMEX_PACKAGES", "NVLSM_PACKAGES",
    "OS_ALIASES", "OS_PACKAGE_NAMES",
    "REPO_ARCHES", "REPO_BRANCHES", "REPO_CUDA_RANGE", "REPO_DISTROS", "REPO_PACKAGES_UNVERIFIED", "REPO_SOURCE",
    "REFUSED_OS", "SUPPORTED_OS",
    "RULES",
]

# Stable rule ids the solver checks and raises.
RULES = {
    "UNKNOWN_CUDA": "the CUDA toolkit is in CUDA_TOOLKITS",
    "UNKNOWN_TORCH": "the torch release is in TORCH_RELEASES",
    "UNKNOWN_GPU": "every GPU resolves to a compute capability",
    "UNSUPPORTED_OS": "the OS/arch has an NVIDIA CUDA repository",
    "REPO_LACKS_CUDA": "NVIDIA's repository for the OS carries the CUDA toolkit (REPO_CUDA_RANGE)",
    "UNKNOWN_DRIVER_BRANCH": "the driver branch is in DRIVER_BRANCHES",
    "BAD_REQUEST": "the request is a mapping of the documented keys and types",
    "NO_CUDA_FOR_HARDWARE": "some CUDA toolkit in the data (and the OS repository) supports every GPU when none is requested",
    "CC_NEEDS_NEWER_CUDA": "the CUDA toolkit is at least the first one that supports every GPU's compute capability",
    "CC_DROPPED_BY_CUDA": "the CUDA toolkit is not newer than the last one that supports every GPU",
    "NO_SUPPORTED_BRANCH": "without a named branch, a supported (not end-of-life) long-term or production branch runs "
                           "the GPUs, the toolkit and the wheel (an end-of-life branch is planned only when named)",
    "BRANCH_DROPPED_GPU": "the driver branch still supports every GPU's architecture (R580 is the last for Maxwell, "
                          "Pascal and Volta)",
    "DRIVER_TOO_OLD_FOR_GPU": "the driver meets the minimum NVIDIA lists for every GPU (MIG user guide)",
    "DRIVER_BRANCH_TOO_OLD_FOR_CUDA": "the driver branch meets Table 3 for the toolkit (or the minor-version floor when driver_compat is minor)",
    "DRIVER_TOO_OLD_FOR_WHEEL": "the driver meets the torch wheel's CUDA minor-version floor",
    "TORCH_NO_WHEEL_FOR_CUDA": "the requested torch wheel variant exists for that torch release",
    "TORCH_NO_WHEEL_FOR_PYTHON": "the torch release has a wheel for the OS's python3 (PyPI's cp tags and Requires-Python)",
    "TORCH_CUDA_MAJOR_MISMATCH": "the torch wheel's CUDA major equals the toolkit's (unless allow_cuda_major_mismatch)",
    "TORCH_WHEEL_LACKS_CC": "the torch wheel's CUDA is at least the first CUDA for every GPU's compute capability",
    "OPEN_MODULES_NEED_TURING": "open kernel modules only for Turing (7.5) and newer, from R515",
    "OPEN_MODULES_REQUIRED": "Grace Hopper and Blackwell GPUs run only the open kernel modules",
    "PROPRIETARY_MODULES_REMOVED": "from R620 NVIDIA ships only the open kernel modules (Driver Installation Guide 620): "
                                   "the plan takes them there, and a proprietary request on R620 or later is refused",
    "NCCL_MATCHES_CUDA": "the NCCL package is the one built for the toolkit's CUDA",
    "FABRIC_MANAGER_MATCHES_DRIVER": "fabric manager is the driver branch's, only when NVSwitch is present",
    "NVLINK5_NEEDS_NVLSM": "an NVSwitch system of NVLink 5 GPUs (HGX B200/B300) gets the NVLink Subnet Manager beside the "
                           "fabric manager",
    "MNNVL_NEEDS_IMEX": "a multi-node NVLink GPU (GB200/GB300 NVL72) gets the IMEX service at exactly the driver's version",
    "DCGM_MATCHES_CUDA": "DCGM 4 is the -core package with the diagnostics package of the toolkit's CUDA major "
                         "(datacenter-gpu-manager-4-cuda<major>), both at one DCGM release; a CUDA major without one "
                         "gets no DCGM, with the reason in the warnings",
}
