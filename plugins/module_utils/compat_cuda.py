# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sourced CUDA toolkit facts: Table-3 driver floors, minor-version floors,
NCCL packages per toolkit, and which compute capabilities each toolkit builds for.

Every entry carries ``source``; docs/compatibility.md has the audit trail and
the list of facts left out because they could not be sourced.
"""

from __future__ import annotations

_T3 = ("NVIDIA CUDA Toolkit Release Notes, Table 3 'CUDA Toolkit and Corresponding Driver Versions' "
       "(docs.nvidia.com/cuda/cuda-toolkit-release-notes/, Linux x86_64 column; read in the CUDA 13.2 "
       "Update 2 edition, which lists every release from 7.0 to 13.2.2)")
_MVC = ("NVIDIA CUDA Toolkit Release Notes, Table 2 / CUDA Compatibility guide, minor version compatibility: "
        "CUDA 13.x >= 580, CUDA 12.x >= 525 (< 580; 525.60.13 is the first 525 release that qualifies), "
        "CUDA 11.x >= 450 (< 525; 450.80.02)")
_NCCL_PIN = ("NVIDIA's CUDA container images pin libnccl2=<ver> beside the toolkit (11.7.1: 2.13.4-1+cuda11.7; "
             "11.8.0: 2.16.2-1+cuda11.8; 12.1.1: 2.17.1-1+cuda12.1; 12.2.2: 2.19.3-1+cuda12.2; "
             "gitlab.com/nvidia/container-images/cuda dist/<ver>/ubuntu2204/runtime, NV_LIBNCCL_PACKAGE) and a public "
             "Dockerfile sets NCCL_VERSION=2.15.5-1+cuda12.0 against NVIDIA's ubuntu2204 repository; the simulated "
             "repository's manifest cites the same pins (tests/sim/manifests/SOURCES.md)")
_NCCL_IMAGE = ("NV_LIBNCCL_PACKAGE=libnccl2=<ver> in NVIDIA's CUDA container images (nvidia/cuda, "
               "gitlab.com/nvidia/container-images/cuda), the NCCL NVIDIA pairs with that toolkit in its repo")

# CUDA toolkit -> drivers and NCCL.
#   full_version: the update NVIDIA's repository installs for cuda-toolkit-X-Y (the newest update).
#   updates:  Table 3 minimum per toolkit release (GA and updates).
#   driver_min:  Table 3 minimum for the GA release.
#   driver_min_minor_compat:  the minor-version-compatibility floor.
#   nccl:  libnccl2/libnccl-dev version string in NVIDIA's repo for this CUDA.
CUDA_TOOLKITS = {
    "11.7": {
        "full_version": "11.7.1",
        "updates": {"11.7.0": "515.43.04", "11.7.1": "515.48.07"},
        "driver_min": "515.43.04",
        "driver_min_minor_compat": "450.80.02",
        "nccl": "2.13.4-1+cuda11.7",
        "source": (_T3 + "; 11.7.0 installer cuda_11.7.0_515.43.04_linux.run; " + _MVC
                   + "; nccl: " + _NCCL_PIN),
    },
    "11.8": {
        "full_version": "11.8.0",
        "updates": {"11.8.0": "520.61.05"},
        "driver_min": "520.61.05",
        "driver_min_minor_compat": "450.80.02",
        "nccl": "2.16.2-1+cuda11.8",
        "source": _T3 + "; installer cuda_11.8.0_520.61.05_linux.run; " + _MVC + "; nccl: " + _NCCL_PIN,
    },
    "12.0": {
        "full_version": "12.0.1",
        "updates": {"12.0.0": "525.60.13", "12.0.1": "525.85.12"},
        "driver_min": "525.60.13",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.15.5-1+cuda12.0",
        "source": _T3 + "; " + _MVC + "; nccl: " + _NCCL_PIN,
    },
    "12.1": {
        "full_version": "12.1.1",
        "updates": {"12.1.0": "530.30.02", "12.1.1": "530.30.02"},
        "driver_min": "530.30.02",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.17.1-1+cuda12.1",
        "source": _T3 + "; installer cuda_12.1.1_530.30.02_linux.run; " + _MVC + "; nccl: " + _NCCL_PIN,
    },
    "12.2": {
        "full_version": "12.2.2",
        "updates": {"12.2.0": "535.54.03", "12.2.1": "535.86.09", "12.2.2": "535.104.05"},
        "driver_min": "535.54.03",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.19.3-1+cuda12.2",
        "source": _T3 + "; installer cuda_12.2.2_535.104.05_linux.run; " + _MVC + "; nccl: " + _NCCL_PIN,
    },
    "12.3": {
        # Table 3 lists 12.3 GA and Update 1; 12.3.2 shipped with 545.23.08 (NVIDIA's local repo
        # package cuda-repo-debian12-12-3-local_12.3.2-545.23.08-1_amd64.deb).
        "full_version": "12.3.2",
        "updates": {"12.3.0": "545.23.06", "12.3.1": "545.23.08", "12.3.2": "545.23.08"},
        "driver_min": "545.23.06",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.19.3-1+cuda12.3",
        "source": _T3 + "; 12.3.2: local repo package name 12.3.2-545.23.08; " + _MVC + "; nccl: " + _NCCL_IMAGE,
    },
    "12.4": {
        "full_version": "12.4.1",
        "updates": {"12.4.0": "550.54.14", "12.4.1": "550.54.15"},
        "driver_min": "550.54.14",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.21.5-1+cuda12.4",
        "source": _T3 + "; " + _MVC + "; nccl: " + _NCCL_IMAGE,
    },
    "12.5": {
        "full_version": "12.5.1",
        "updates": {"12.5.0": "555.42.02", "12.5.1": "555.42.06"},
        "driver_min": "555.42.02",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.22.3-1+cuda12.5",
        "source": _T3 + "; " + _MVC + "; nccl: " + _NCCL_IMAGE,
    },
    "12.6": {
        "full_version": "12.6.3",
        "updates": {"12.6.0": "560.28.03", "12.6.1": "560.35.03", "12.6.2": "560.35.03", "12.6.3": "560.35.05"},
        "driver_min": "560.28.03",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.23.4-1+cuda12.6",
        "source": _T3 + "; " + _MVC + "; nccl: " + _NCCL_IMAGE + " (image CUDA 12.6.3)",
    },
    "12.8": {
        "full_version": "12.8.1",
        "updates": {"12.8.0": "570.26", "12.8.1": "570.124.06"},
        "driver_min": "570.26",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.25.1-1+cuda12.8",
        "source": _T3 + "; " + _MVC + "; nccl: " + _NCCL_IMAGE + " (image CUDA_VERSION=12.8.1)",
    },
    "12.9": {
        "full_version": "12.9.1",
        "updates": {"12.9.0": "575.51.03", "12.9.1": "575.57.08"},
        "driver_min": "575.51.03",
        "driver_min_minor_compat": "525.60.13",
        "nccl": "2.27.5-1+cuda12.9",
        "source": (_T3 + "; " + _MVC + "; nccl: linux-system-roles/hpc vars/RedHat_9.yml "
                   "(libnccl-2.27.5-1+cuda12.9)"),
    },
    "13.0": {
        "full_version": "13.0.2",
        "updates": {"13.0.0": "580.65.06", "13.0.1": "580.82.07", "13.0.2": "580.95.05"},
        "driver_min": "580.65.06",
        # NVIDIA states the 13.x floor as the branch ">= 580" with no point release.
        "driver_min_minor_compat": "580",
        "nccl": "2.27.7-1+cuda13.0",
        "source": (_T3 + "; " + _MVC + "; nccl: public install notes pinning "
                   "libnccl2=2.27.7-1+cuda13.0 from NVIDIA's repository"),
    },
}

# Compute capability -> first CUDA toolkit that compiles for it natively, and the
# last one (None = still supported by the newest toolkit in CUDA_TOOLKITS).
_CC_SRC_FORUM = ("NVIDIA developer forum, 'minimum required CUDA version by GPU' "
                 "(forums.developer.nvidia.com/t/276955) and NVIDIA's CUDA GPUs list")
_CUDA13_DROP = ("NVIDIA CUDA 13.0 release notes, Deprecated Architectures: 'Architecture support for Maxwell, "
                "Pascal, and Volta is considered feature-complete. Offline compilation and library support for "
                "these architectures have been removed in CUDA Toolkit 13.0 major version release. The use of "
                "CUDA Toolkits through the 12.x series to build applications for these architectures will "
                "continue to be supported'")
CC_SUPPORT = {
    "6.0": {"first_cuda": "8.0", "last_cuda": "12.9",
            "source": _CUDA13_DROP + "; first CUDA: NVIDIA CUDA GPUs list"},
    "6.1": {"first_cuda": "8.0", "last_cuda": "12.9", "source": "as 6.0"},
    "7.0": {"first_cuda": "9.0", "last_cuda": "12.9",
            "source": "first: NVIDIA table 'CUDA SDK 9.0-9.2 support compute capability 3.0-7.0'; last: "
                      + _CUDA13_DROP},
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

# The request that names no CUDA gets the newest toolkit of this range the hardware
# runs (the mission's range), else the oldest one above it that it does.
MISSION_CUDA_RANGE = ("11.7", "12.2")

# Minimum driver a wheel's bundled CUDA runtime needs: the minor-version floor of its major.
WHEEL_DRIVER_FLOOR = {
    "11": "450.80.02",
    "12": "525.60.13",
    "13": "580",
    "source": _MVC,
}
