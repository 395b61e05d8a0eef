# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sourced NVIDIA driver branch facts: releases, branch type, end of life,
the release the plan installs, kernel-module flavour rules, fabric manager."""

from __future__ import annotations

# versions: ascending, from the keylase/nvidia-patch README table (snapshot 7b022ce1,
# 2026-08-17) plus the data-center releases NVIDIA's release notes name. The table
# covers GeForce/XFree86 and some data-center builds, not every data-center point release.
# max_cuda: the newest toolkit whose Table 3 GA minimum the branch's last release meets
# (agrees with the "CUDA Version" nvidia-smi prints in the captures).
# type: NVIDIA's designation (LTSB = Long Term Support Branch, PB = Production Branch,
#   NFB = New Feature Branch), "" when no source named it.
# eol: True when NVIDIA's support matrix no longer lists the branch or its end-of-life
#   date has passed (as of 2026-12-03); eol_date where NVIDIA published one.
# recommended: the release the plan installs by default; fabric manager is installed at
#   exactly this version (FABRIC_MANAGER["version_rule"]).
_KEYLASE = "keylase/nvidia-patch README driver table (snapshot 7b022ce1)"
_SUPPORT = ("docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html "
            "(615 edition lists R535 LTSB EOL June 2026, R580 LTSB EOL June 2028, R595 PB EOL March 2027, "
            "R610 NFB; branches it no longer lists are out of support)")
_AKS = ("Azure/aks-gpu PR #113 (branch classification: production 515, 525, 550, 570; LTS 535; "
        "feature 520, 560, 565, 575)")
_NEWEST = "recommended: the newest release in the keylase table (no data-center release note with its fabric manager read)"
DRIVER_BRANCHES = {
    "515": {
        "versions": ["515.43.04", "515.48.07", "515.57", "515.65.01", "515.76", "515.86.01", "515.105.01"],
        "recommended": "515.105.01",
        "max_cuda": "11.7",
        "type": "PB",
        "eol": True,
        "source": (_KEYLASE + "; max_cuda: nvidia-smi 515.x prints CUDA 11.7 (fixtures); Table 3; type: " + _AKS
                   + "; end of life: not in " + _SUPPORT),
    },
    "520": {
        "versions": ["520.56.06", "520.61.05"],
        "recommended": "520.61.05",
        "max_cuda": "11.8",
        "type": "NFB",
        "eol": True,
        "source": _KEYLASE + "; 520.61.05 is the CUDA 11.8 GA driver (Table 3); type: " + _AKS + "; eol: not in " + _SUPPORT,
    },
    "525": {
        "versions": ["525.60.11", "525.60.13", "525.78.01", "525.85.05", "525.85.12", "525.89.02",
                     "525.105.17", "525.116.03", "525.116.04", "525.125.06", "525.147.05"],
        "recommended": "525.147.05",
        "max_cuda": "12.0",
        "type": "PB",
        "eol": True,
        "source": (_KEYLASE + "; max_cuda: nvidia-smi 525.x prints CUDA 12.0 (fixtures); type: " + _AKS
                   + "; end of life: " + _SUPPORT),
    },
    "530": {
        "versions": ["530.30.02", "530.41.03"],
        "recommended": "530.41.03",
        "max_cuda": "12.1",
        "type": "",
        "eol": True,
        "source": _KEYLASE + "; 530.30.02 is the CUDA 12.1/12.1.1 driver (Table 3); eol: not in " + _SUPPORT,
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
        "eol": True,
        "eol_date": "2026-06",
        "source": (_KEYLASE + "; LTSB, EOL June 2026, max CUDA 12.x: " + _SUPPORT + "; 535.216.03 with Fabric "
                   "Manager 535.216.03: NVIDIA data-center driver release notes"),
    },
    "545": {
        "versions": ["545.23.06", "545.23.08", "545.29.02", "545.29.06"],
        "recommended": "545.29.06",
        "max_cuda": "12.3",
        "type": "NFB",
        "eol": True,
        "source": (_KEYLASE + "; 545.23.06/545.23.08 are the CUDA 12.3 GA/U1 drivers (Table 3); type: nvidia.com/"
                   "object/Unix.html 'Latest New Feature Branch Version: 545.29.06'; eol: not in " + _SUPPORT
                   + "; " + _NEWEST),
    },
    "550": {
        "versions": ["550.40.07", "550.54.14", "550.54.15", "550.67", "550.76", "550.78", "550.90.07", "550.100",
                     "550.107.02", "550.120", "550.127.05", "550.135", "550.142", "550.163.01"],
        "recommended": "550.163.01",
        "max_cuda": "12.4",
        "type": "PB",
        "eol": True,
        "source": (_KEYLASE + "; 550.54.14/550.54.15 are the CUDA 12.4 GA/U1 drivers (Table 3); type: " + _AKS
                   + " and nvidia.com/object/Unix.html 'Latest Production Branch Version: 550.76'; eol: not in "
                   + _SUPPORT + "; " + _NEWEST),
    },
    "555": {
        "versions": ["555.42.02", "555.58", "555.58.02"],
        "recommended": "555.58.02",
        "max_cuda": "12.5",
        "type": "",
        "eol": True,
        "source": _KEYLASE + "; 555.42.02 is the CUDA 12.5 GA driver (Table 3); eol: not in " + _SUPPORT + "; " + _NEWEST,
    },
    "560": {
        "versions": ["560.28.03", "560.35.03", "560.35.05"],
        "recommended": "560.35.05",
        "max_cuda": "12.6",
        "type": "NFB",
        "eol": True,
        "source": (_KEYLASE + "; 560.28.03/560.35.03/560.35.05 are the CUDA 12.6 GA/U1-2/U3 drivers (Table 3); "
                   "type: " + _AKS + "; eol: not in " + _SUPPORT + "; " + _NEWEST),
    },
    "565": {
        "versions": ["565.57.01", "565.77"],
        "recommended": "565.77",
        "max_cuda": "12.6",
        "type": "NFB",
        "eol": True,
        "source": _KEYLASE + "; type: " + _AKS + "; eol: not in " + _SUPPORT + "; " + _NEWEST,
    },
    "570": {
        "versions": ["570.86.15", "570.86.16", "570.124.04", "570.124.06", "570.133.07", "570.133.20", "570.144",
                     "570.148.08", "570.153.02", "570.158.01", "570.169", "570.172.08", "570.195.03", "570.211.01"],
        "recommended": "570.211.01",
        "max_cuda": "12.8",
        "type": "PB",
        "eol": True,
        "eol_date": "2026-02",
        "source": (_KEYLASE + "; 570.124.06 is the CUDA 12.8 U1 driver (Table 3); Production Branch, EOL February "
                   "2026: NVIDIA supported-drivers page (earlier edition); " + _NEWEST),
    },
    "575": {
        "versions": ["575.51.02", "575.57.08", "575.64", "575.64.03", "575.64.05"],
        "recommended": "575.64.05",
        "max_cuda": "12.9",
        "type": "NFB",
        "eol": True,
        "source": (_KEYLASE + "; 575.57.08 is the CUDA 12.9 U1 driver (Table 3); type: " + _AKS
                   + "; eol: not in " + _SUPPORT + "; " + _NEWEST),
    },
    "580": {
        "versions": ["580.65.06", "580.76.05", "580.82.07", "580.82.09", "580.95.05", "580.105.08", "580.119.02",
                     "580.126.09", "580.142", "580.159.03", "580.159.04", "580.173.02", "580.178.04"],
        "recommended": "580.178.04",
        "max_cuda": "13.0",
        "type": "LTSB",
        "eol": False,
        "eol_date": "2028-06",
        "source": (_KEYLASE + "; 580.65.06/580.82.07/580.95.05 are the CUDA 13.0 GA/U1/U2 drivers (Table 3); "
                   "LTSB, EOL June 2028, max CUDA 13: " + _SUPPORT + "; " + _NEWEST),
    },
}

# Branch preference when the request names none: R535 (LTSB) runs every toolkit 11.7-12.2
# with full features; above 12.2 the supported LTSB R580 runs every toolkit to 13.0; the
# toolkit's own short-lived branch only when asked for.
DEFAULT_BRANCH_PREFERENCE = ["535", "580", "570", "575", "550", "560", "565", "555", "545", "530", "525", "520", "515"]

# Open GPU kernel modules: shipped from R515; Turing and newer only; Maxwell,
# Pascal and Volta need the proprietary flavour; default flavour from R560;
# Grace Hopper and Blackwell support only the open flavour.
KERNEL_MODULES = {
    "open_first_branch": "515",
    "open_min_cc": "7.5",
    "open_default_from_branch": "560",
    # Blackwell is every compute capability from 10.0; Grace Hopper shares 9.0 with H100,
    # so it is named by model key (gpu_models.MODELS).
    "open_required_min_cc": "10.0",
    "open_required_models": ["gh200"],
    "source": ("NVIDIA Driver Installation Guide, Kernel Modules (docs.nvidia.com/datacenter/tesla/"
               "driver-installation-guide/kernel-modules.html): 'Starting in the 515 driver release series, two "
               "flavors ... Proprietary ... required for older GPUs from the Maxwell, Pascal, or Volta "
               "architectures ... Open-source ... only for Turing and newer architectures ... Starting in the 560 "
               "driver release series, the open kernel module flavor is the default'; open required: NVIDIA "
               "technical blog 'NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules' (2024): 'For "
               "cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the "
               "open-source GPU kernel modules. The proprietary drivers are unsupported on these platforms.'"),
}

FABRIC_MANAGER = {
    "service": "nvidia-fabricmanager",
    "dnf": {"module_profile": "nvidia-driver:{B}/fm"},
    "version_rule": "Fabric Manager version must equal the driver version exactly; install only on NVSwitch systems",
    "source": "NVIDIA/yum-packaging-fabric-manager README ('the version of fabricmanager must match the NVIDIA "
              "driver installed'; 'dnf module install nvidia-driver:${stream}/fm'); NVIDIA data-center driver "
              "release notes ('Fabric Manager: 535.216.03'); NVIDIA/deepops ubuntu-22.04 vars",
}
