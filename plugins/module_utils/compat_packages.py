# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sourced OS package graphs for NVIDIA's CUDA repositories: which repository
serves an OS, which CUDA toolkits it carries, and the driver / fabric manager
package names, install order and flavour-switch steps per OS family, driver
branch and kernel-module flavour.

Names are written without versions; ``{B}`` is the driver branch. Each rule carries
``source``; ``verified`` is False where the wording of NVIDIA's guide could not be
read here and the entry follows the guide's pattern (docs/compatibility.md lists them).
"""

from __future__ import annotations

CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
REPO_DISTROS = {
    # os id (normalised) -> (repo distro component, package family, package graph)
    "ubuntu20.04": ("ubuntu2004", "apt", "ubuntu"),
    "ubuntu22.04": ("ubuntu2204", "apt", "ubuntu"),
    "ubuntu24.04": ("ubuntu2404", "apt", "ubuntu"),
    "debian11": ("debian11", "apt", "debian"),
    "debian12": ("debian12", "apt", "debian"),
    "rhel8": ("rhel8", "dnf", "rhel"),
    "rhel9": ("rhel9", "dnf", "rhel"),
}
# Clones that use the RHEL repository.
OS_ALIASES = {
    "rocky": "rhel", "almalinux": "rhel", "alma": "rhel", "centos": "rhel", "redhat": "rhel",
    "rocky linux": "rhel", "red hat enterprise linux": "rhel", "ol": "rhel", "oraclelinux": "rhel",
}
REPO_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa", "sbsa": "sbsa"}
REPO_SOURCE = ("NVIDIA/ansible-role-nvidia-driver defaults and vars/main.yml (aarch64 -> sbsa); "
               "stackhpc/ansible-slurm-appliance roles/cuda; repo URL pattern <base>/<distro>/<arch>/")

# Which CUDA toolkits (X.Y) each repository carries: every toolkit of the data between
# first and last (None = no bound known). ``verified`` says which bound has a source;
# an unverified side is assumed open and the plan says so.
REPO_CUDA_RANGE = {
    "ubuntu2004": {"first": None, "last": "12.9", "verified": ["last"],
                   "source": "NVIDIA CUDA 13.0 release notes, Dropped Operating Systems: 'Support for Ubuntu 20.04 "
                             "has been dropped starting with this release'"},
    "ubuntu2204": {"first": None, "last": None, "verified": [],
                   "source": "no published list of the toolkits this repository holds was read; open both ways"},
    "ubuntu2404": {"first": "12.5", "last": None, "verified": ["first"],
                   "source": "issue 11 (maintainers, against NVIDIA's ubuntu2404 repository): 'ubuntu2404 has no "
                             "CUDA before 12.5'"},
    "debian11": {"first": None, "last": None, "verified": [],
                 "source": "no published list read; open both ways"},
    "debian12": {"first": None, "last": None, "verified": [],
                 "source": "no published list read; open both ways"},
    "rhel8": {"first": None, "last": None, "verified": [],
              "source": "no published list read; open both ways"},
    "rhel9": {"first": None, "last": None, "verified": [],
              "source": "no published list read; open both ways"},
}

_CUDA_GUIDE_12 = ("NVIDIA CUDA Installation Guide for Linux 12.x, section 5 'NVIDIA Open GPU Kernel Modules' "
                  "(docs.nvidia.com/cuda/archive/12.x/cuda-installation-guide-linux/)")
_CUDA_GUIDE_SWITCH = ("NVIDIA CUDA Installation Guide for Linux 12.x, section 17 'Switching between Driver "
                      "Module Flavors'")
_DRIVER_GUIDE_KM = ("NVIDIA Driver Installation Guide, Kernel Modules, Table 'Open GPU kernel module "
                    "installation' ('All releases beyond driver version 570 will use these packaging "
                    "conventions'; docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html)")
_DRIVER_GUIDE_SWITCH = ("NVIDIA Driver Installation Guide, Advanced Options, 'Switching between Driver Module "
                        "Flavors' (docs.nvidia.com/datacenter/tesla/driver-installation-guide/advanced-options.html): "
                        "RHEL 8/9 '# dnf -y module switch-to nvidia-driver:<stream> --allowerasing'; Debian 12 "
                        "'# apt install --autoremove --purge nvidia-open' / '... cuda-drivers'; Ubuntu 22.04/24.04 "
                        "'# apt install --autoremove --purge nvidia-open nvidia-driver-open' / "
                        "'... cuda-drivers nvidia-driver'")

# Driver package graphs. Each rule applies from ``from_branch`` (inclusive) until the next
# rule's; per flavour: ``packages`` (install order, no versions) and ``switch_to`` (steps
# that go from the other flavour to this one). ``{B}`` is the branch.
DRIVER_PACKAGE_GRAPHS = {
    "ubuntu": [
        {
            "from_branch": "515",
            "open": {"packages": ["nvidia-kernel-open-{B}", "cuda-drivers-{B}"],
                     "commands": ["apt-get install -y nvidia-kernel-open-{B}", "apt-get install -y cuda-drivers-{B}"],
                     "switch_to": [
                         {"action": "remove", "packages": ["nvidia-kernel-source-{B}"], "options": ["--purge"]},
                         {"action": "install", "packages": ["nvidia-kernel-open-{B}"], "options": []},
                         {"action": "install", "packages": ["cuda-drivers-{B}"], "options": []}]},
            "proprietary": {"packages": ["cuda-drivers-{B}"],
                            "commands": ["apt-get install -y cuda-drivers-{B}"],
                            "switch_to": [
                                {"action": "remove", "packages": ["nvidia-kernel-open-{B}"], "options": ["--purge"]},
                                {"action": "install", "packages": ["cuda-drivers-{B}"], "options": []}]},
            "verified": {"packages": True, "switch": False},
            "source": (_CUDA_GUIDE_12 + " (Ubuntu: 'apt-get install -y nvidia-kernel-open-XXX' then "
                       "'apt-get install -y cuda-drivers-XXX'); quoted for R535 in AWS EC2 'Install NVIDIA GRID/"
                       "Tesla drivers' (nvidia-kernel-open-535 + cuda-drivers-535) and NVIDIA's Grace unattended "
                       "install note; NVIDIA's repository does not carry Canonical's nvidia-driver-<B>-open "
                       "(issue 11); switch: " + _CUDA_GUIDE_SWITCH + " (pattern, text not re-read here)"),
        },
        {
            "from_branch": "570",
            "open": {"packages": ["nvidia-open-{B}"],
                     "commands": ["apt install nvidia-open-{B}"],
                     "switch_to": [{"action": "install", "packages": ["nvidia-open-{B}"],
                                    "options": ["--autoremove", "--purge"]}]},
            "proprietary": {"packages": ["cuda-drivers-{B}"],
                            "commands": ["apt install cuda-drivers-{B}"],
                            "switch_to": [{"action": "install", "packages": ["cuda-drivers-{B}"],
                                           "options": ["--autoremove", "--purge"]}]},
            "verified": {"packages": False, "switch": False},
            "source": (_DRIVER_GUIDE_KM + " (branch form nvidia-open-<B>; public install notes hold "
                       "'nvidia-open-570 cuda-drivers-570'); switch: " + _DRIVER_GUIDE_SWITCH
                       + " (unversioned names in the guide; branch-suffixed here)"),
        },
        {
            "from_branch": "580",
            "open": {"packages": ["nvidia-driver-pinning-{B}", "nvidia-open"],
                     "commands": ["apt install nvidia-driver-pinning-{B}", "apt install nvidia-open"],
                     "switch_to": [{"action": "install", "packages": ["nvidia-open", "nvidia-driver-open"],
                                    "options": ["--autoremove", "--purge"]}]},
            "proprietary": {"packages": ["nvidia-driver-pinning-{B}", "cuda-drivers"],
                            "commands": ["apt install nvidia-driver-pinning-{B}", "apt install cuda-drivers"],
                            "switch_to": [{"action": "install", "packages": ["cuda-drivers", "nvidia-driver"],
                                           "options": ["--autoremove", "--purge"]}]},
            "verified": {"packages": False, "switch": True},
            "source": (_DRIVER_GUIDE_KM + "; branch lock by nvidia-driver-pinning-<B> (seen for 580 in public "
                       "Ubuntu install notes and for 590/595 in GoogleCloudPlatform/ops-agent PR #2426); switch: "
                       + _DRIVER_GUIDE_SWITCH),
        },
    ],
    "debian": [
        {
            "from_branch": "515",
            "open": {"packages": ["nvidia-kernel-open-dkms", "cuda-drivers-{B}"],
                     "commands": ["apt-get install -y nvidia-kernel-open-dkms", "apt-get install -y cuda-drivers-{B}"],
                     "switch_to": [
                         {"action": "remove", "packages": ["nvidia-kernel-dkms"], "options": ["--purge"]},
                         {"action": "install", "packages": ["nvidia-kernel-open-dkms"], "options": []},
                         {"action": "install", "packages": ["cuda-drivers-{B}"], "options": []}]},
            "proprietary": {"packages": ["cuda-drivers-{B}"],
                            "commands": ["apt-get install -y cuda-drivers-{B}"],
                            "switch_to": [
                                {"action": "remove", "packages": ["nvidia-kernel-open-dkms"], "options": ["--purge"]},
                                {"action": "install", "packages": ["cuda-drivers-{B}"], "options": []}]},
            # The guide's Debian commands name unversioned cuda-drivers; the branch-pinned
            # cuda-drivers-<B> follows the Ubuntu repository's pattern and was not seen for Debian.
            "verified": {"packages": False, "switch": False},
            "source": ("NVIDIA CUDA downloads page, Debian 12 network install, 'Driver Installer': 'To install the "
                       "open kernel module flavor: sudo apt-get install -y nvidia-kernel-open-dkms; sudo apt-get "
                       "install -y cuda-drivers' (quoted verbatim in public setup notes for CUDA 12.3-12.5); "
                       "Debian-style names: NVIDIA/debian-packaging-nvidia-driver branch 535 debian/control "
                       "(nvidia-driver, nvidia-kernel-dkms) and Debian's nvidia-open-gpu-kernel-modules source "
                       "(nvidia-open-kernel-dkms); branch-pinned cuda-drivers-<B> as on Ubuntu; switch: "
                       + _CUDA_GUIDE_SWITCH + " (pattern, text not re-read here)"),
        },
        {
            "from_branch": "570",
            "open": {"packages": ["nvidia-open-{B}"],
                     "commands": ["apt install nvidia-open-{B}"],
                     "switch_to": [{"action": "install", "packages": ["nvidia-open-{B}"],
                                    "options": ["--autoremove", "--purge"]}]},
            "proprietary": {"packages": ["cuda-drivers-{B}"],
                            "commands": ["apt install cuda-drivers-{B}"],
                            "switch_to": [{"action": "install", "packages": ["cuda-drivers-{B}"],
                                           "options": ["--autoremove", "--purge"]}]},
            "verified": {"packages": False, "switch": False},
            "source": (_DRIVER_GUIDE_KM + "; a public Debian 12 install script resolves nvidia-open-570 to "
                       "nvidia-kernel-open-dkms=570.158.01-1 + nvidia-driver=570.158.01-1 from NVIDIA's debian12 "
                       "repository; switch: " + _DRIVER_GUIDE_SWITCH + " (unversioned names in the guide)"),
        },
        {
            "from_branch": "580",
            "open": {"packages": ["nvidia-driver-pinning-{B}", "nvidia-open"],
                     "commands": ["apt install nvidia-driver-pinning-{B}", "apt install nvidia-open"],
                     "switch_to": [{"action": "install", "packages": ["nvidia-open"],
                                    "options": ["--autoremove", "--purge"]}]},
            "proprietary": {"packages": ["nvidia-driver-pinning-{B}", "cuda-drivers"],
                            "commands": ["apt install nvidia-driver-pinning-{B}", "apt install cuda-drivers"],
                            "switch_to": [{"action": "install", "packages": ["cuda-drivers"],
                                           "options": ["--autoremove", "--purge"]}]},
            "verified": {"packages": False, "switch": True},
            "source": (_DRIVER_GUIDE_KM + "; Debian branch lock nvidia-driver-pinning-<B> (public Debian notes: "
                       "'nvidia-driver-pinning-610 + cuda-drivers-610', 'nvidia-driver-pinning-590'); switch: "
                       + _DRIVER_GUIDE_SWITCH),
        },
    ],
    "rhel": [
        {
            "from_branch": "515",
            "open": {"packages": ["@nvidia-driver:{B}-open"],
                     "commands": ["dnf module install nvidia-driver:{B}-open"],
                     "switch_to": [{"action": "module-switch", "packages": ["nvidia-driver:{B}-open"],
                                    "options": ["-y", "--allowerasing"]}]},
            "proprietary": {"packages": ["@nvidia-driver:{B}-dkms"],
                            "commands": ["dnf module install nvidia-driver:{B}-dkms"],
                            "switch_to": [{"action": "module-switch", "packages": ["nvidia-driver:{B}-dkms"],
                                           "options": ["-y", "--allowerasing"]}]},
            "verified": {"packages": True, "switch": True},
            "source": ("dnf module streams <B>-dkms / <B>-open: NVIDIA/yum-packaging-fabric-manager README and "
                       "NVIDIA/ansible-role-nvidia-driver #75; " + _DRIVER_GUIDE_KM + " (RHEL 8/9: 'dnf module "
                       "enable nvidia-driver:580-open; dnf install nvidia-open'); switch: " + _DRIVER_GUIDE_SWITCH),
        },
    ],
}

# Fabric manager package names (no versions). apt: per-branch name until R580, which
# renamed it; dnf: one name, versioned by the driver module stream.
FABRIC_MANAGER_PACKAGES = {
    "ubuntu": [{"from_branch": "515", "packages": ["nvidia-fabricmanager-{B}"]},
               {"from_branch": "580", "packages": ["nvidia-fabricmanager"]}],
    "debian": [{"from_branch": "515", "packages": ["nvidia-fabricmanager-{B}"]},
               {"from_branch": "580", "packages": ["nvidia-fabricmanager"]}],
    "rhel": [{"from_branch": "515", "packages": ["nvidia-fabric-manager"]}],
    "source": ("apt nvidia-fabricmanager-<B>: NVIDIA/deepops ubuntu-22.04 vars, AWS EC2 driver guide "
               "('apt install nvidia-fabricmanager-535'); renamed nvidia-fabricmanager from 580: Azure/azhpc-images "
               "components/install_nvidia_fabric_manager.sh and NVIDIA/deepops DGX OS 7 vars; dnf "
               "nvidia-fabric-manager: NVIDIA/yum-packaging-fabric-manager (spec Name)"),
}

# Other packages per family. {XY} = toolkit "12-2", {NCCL} = the CUDA_TOOLKITS nccl string.
OS_PACKAGE_NAMES = {
    "apt": {
        "toolkit": ["cuda-toolkit-{XY}"],
        "nccl": ["libnccl2={NCCL}", "libnccl-dev={NCCL}"],
        "source": "cuda-toolkit-X-Y: NVIDIA CUDA installation guide pattern; libnccl2=<ver>: NVIDIA/deepops "
                  "nccl-tests container",
    },
    "dnf": {
        "toolkit": ["cuda-toolkit-{XY}"],
        "nccl": ["libnccl-{NCCL}", "libnccl-devel-{NCCL}"],
        "source": "libnccl-<ver>: linux-system-roles/hpc vars/RedHat_9.yml",
    },
}
