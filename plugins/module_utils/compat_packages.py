# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""OS package graphs for NVIDIA's CUDA repositories: which repository serves an OS, which CUDA
toolkits and driver branches it carries (from the sourced table, compat_facts.FACTS), and the
driver / fabric manager package names, install order and flavour-switch steps per OS family,
driver branch and kernel-module flavour.

Names are written without versions; ``{B}`` is the driver branch. Each rule carries
``source``; ``verified`` is False where the wording of NVIDIA's guide could not be
read here and the entry follows the guide's pattern (docs/compatibility.md lists them).
"""

from __future__ import annotations

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_facts import cite, rows
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_facts import cite, rows  # type: ignore

CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
# os id (normalised) -> (repo distro component, package family, package graph), from the sourced table.
REPO_DISTROS = {os_id: (r["distro"], r["family"], r["graph"]) for os_id, r in sorted(rows("repo").items())}
# Repositories whose driver package names were not read: they follow their graph's pattern (the plan warns).
REPO_PACKAGES_UNVERIFIED = sorted(r["distro"] for r in rows("repo").values() if r.get("packages_verified") is False)
# Names of RHEL and the clone NVIDIA's installation guide lists (Rocky Linux, compat_facts supported_os): they
# use the rhel repository. AlmaLinux, CentOS and Oracle Linux are not in the one OS list, so they are no alias
# and the solver refuses them with the list (the stack roles would refuse them on the node).
OS_ALIASES = {"rocky": "rhel", "redhat": "rhel", "rocky linux": "rhel", "red hat enterprise linux": "rhel"}
REPO_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa", "sbsa": "sbsa"}
REPO_SOURCE = cite("repo", "ubuntu22.04")


def _supported_os():
    """The one list of supported operating systems (issue 37): OS id -> name, os_family, package manager,
    default python3, NVIDIA repository, the roles' "<distribution> <version>" keys and the source that says
    NVIDIA supports it. Read by the solver, preflight, the stack roles (filter supported_os) and the docs."""
    pythons = rows("os_python")
    repos = rows("repo")
    return {os_id: dict(row, python=pythons[os_id], repository=repos[os_id]["distro"], source=cite("supported_os", os_id))
            for os_id, row in sorted(rows("supported_os").items())}


SUPPORTED_OS = _supported_os()
# OS ids with an NVIDIA repository that gpufleet refuses at plan time: id -> {reason, source}.
REFUSED_OS = {os_id: {"reason": reason, "source": cite("refused_os", os_id)}
              for os_id, reason in sorted(rows("refused_os").items())}
# An id outside SUPPORTED_OS (refused or unknown) is refused at plan time with the list (stack_solver UNSUPPORTED_OS).


def _repo_cuda_range():
    """Which CUDA toolkits (X.Y) each repository carries: every toolkit of the data between first and
    last (None = no bound sourced). ``verified`` names the sourced bounds; an unsourced side is assumed
    open and the plan says so."""
    sourced = rows("repo_cuda")
    out = {}
    for distro, _family, _graph in sorted(set(REPO_DISTROS.values())):
        rng = sourced.get(distro, {"first": None, "last": None})
        source = (cite("repo_cuda", distro) if distro in sourced
                  else "no published list of the toolkits this repository holds was read; open both ways")
        out[distro] = {"first": rng["first"], "last": rng["last"],
                       "verified": [side for side in ("first", "last") if rng[side] is not None],
                       "source": source}
    return out


REPO_CUDA_RANGE = _repo_cuda_range()


def _repo_branches():
    """Repository -> the driver branches whose packages were seen in it (sourced), ascending."""
    out = {distro: [] for distro, _f, _g in REPO_DISTROS.values()}
    for key in rows("repo_branch"):
        distro, branch = key.split(" R")
        out.setdefault(distro, []).append(branch)
    return {distro: sorted(branches, key=int) for distro, branches in sorted(out.items())}


REPO_BRANCHES = _repo_branches()

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
                       "(its ubuntu2204/ubuntu2404 package indexes); switch: " + _CUDA_GUIDE_SWITCH + " (pattern, text not re-read here)"),
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
            "verified": {"packages": True, "switch": False},
            "source": (_DRIVER_GUIDE_KM + " (branch form nvidia-open-<B>); nvidia-open-570 installed from NVIDIA's "
                       "ubuntu2204 repository ('apt install -y nvidia-open-570 cuda-12-8' after its cuda-keyring, "
                       "public node setup script, code index id 34346399783) at versions like 570.148.08-1ubuntu1 "
                       "(code index id 38926366888); switch: " + _DRIVER_GUIDE_SWITCH
                       + " (unversioned names in the guide; branch-suffixed here)"),
        },
        {
            # Ubuntu packages drop the branch from their names from R590 on; R580 keeps the R570 names.
            "from_branch": rows("apt_unversioned")["ubuntu"],
            "open": {"packages": ["nvidia-driver-pinning-{B}", "nvidia-open"],
                     "commands": ["apt install nvidia-driver-pinning-{B}", "apt install nvidia-open"],
                     "switch_to": [{"action": "install", "packages": ["nvidia-open", "nvidia-driver-open"],
                                    "options": ["--autoremove", "--purge"]}]},
            "proprietary": {"packages": ["nvidia-driver-pinning-{B}", "cuda-drivers"],
                            "commands": ["apt install nvidia-driver-pinning-{B}", "apt install cuda-drivers"],
                            "switch_to": [{"action": "install", "packages": ["cuda-drivers", "nvidia-driver"],
                                           "options": ["--autoremove", "--purge"]}]},
            "verified": {"packages": True, "switch": True},
            "source": (cite("apt_unversioned", "ubuntu") + "; 'apt install nvidia-driver-pinning-595; apt "
                       "install nvidia-open' from NVIDIA's ubuntu2404 repository (" + cite("repo_branch", "ubuntu2404 R595")
                       + "); switch: " + _DRIVER_GUIDE_SWITCH),
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
            "verified": {"packages": True, "switch": False},
            "source": (_DRIVER_GUIDE_KM + "; a public Debian 12 install script resolves nvidia-open-570 to "
                       "nvidia-kernel-open-dkms=570.158.01-1 + nvidia-driver=570.158.01-1 from NVIDIA's debian12 "
                       "repository (code index id 11630495126); switch: " + _DRIVER_GUIDE_SWITCH + " (unversioned names in the guide)"),
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

# Fabric manager package names (no versions). apt: per-branch name until R580, which renamed it to
# nvidia-fabricmanager; dnf: nvidia-fabric-manager until R580, nvidia-fabricmanager from R580 on.
FABRIC_MANAGER_PACKAGES = {
    "ubuntu": [{"from_branch": "515", "packages": ["nvidia-fabricmanager-{B}"]},
               {"from_branch": "580", "packages": ["nvidia-fabricmanager"]}],
    "debian": [{"from_branch": "515", "packages": ["nvidia-fabricmanager-{B}"]},
               {"from_branch": "580", "packages": ["nvidia-fabricmanager"]}],
    "rhel": [{"from_branch": "515", "packages": ["nvidia-fabric-manager"]},
             {"from_branch": "580", "packages": ["nvidia-fabricmanager"]}],
    "source": ("apt nvidia-fabricmanager-<B>: NVIDIA/deepops ubuntu-22.04 vars, AWS EC2 driver guide "
               "('apt install nvidia-fabricmanager-535'); apt nvidia-fabricmanager and dnf nvidia-fabricmanager from "
               "R580, nvidia-fabric-manager before: NVIDIA/gpu-driver-container at commit 06a208ca (2026-08-17, read "
               "2026-12-05), ubuntu22.04/precompiled/nvidia-driver ('if [ \"$DRIVER_BRANCH\" -ge \"580\" ]; then "
               "fabricmanager_package_name=nvidia-fabricmanager else nvidia-fabricmanager-${DRIVER_BRANCH}') and "
               "rhel9/precompiled/Dockerfile ('-ge 580: dnf install nvidia-fabricmanager-${DRIVER_VERSION}; else "
               "nvidia-fabric-manager-${DRIVER_VERSION}'); Azure/azhpc-images install_nvidia_fabric_manager.sh"),
}

# The NVLink packages beside the fabric manager (issue 27 item 5); which GPUs need them is in compat_facts
# (nvlink_subnet_manager, imex_domain). IMEX ships with every driver release and must run at exactly the driver's
# version, like the fabric manager; the names drop the branch from R580 as the fabric manager's do.
_GDC = ("NVIDIA/gpu-driver-container at commit 06a208ca (2026-08-17, read 2026-12-05), "
        "ubuntu22.04/precompiled/nvidia-driver ")
IMEX_PACKAGES = {
    "ubuntu": [{"from_branch": "550", "packages": ["nvidia-imex-{B}"]},
               {"from_branch": "580", "packages": ["nvidia-imex"]}],
    "debian": [{"from_branch": "550", "packages": ["nvidia-imex-{B}"]},
               {"from_branch": "580", "packages": ["nvidia-imex"]}],
    "rhel": [{"from_branch": "570", "packages": ["nvidia-imex-{B}"]},
             {"from_branch": "580", "packages": ["nvidia-imex"]}],
    "service": "nvidia-imex",
    "gpus": sorted(rows("imex_domain")),
    "source": (_GDC + "imex_install ('-ge 580: imex_package_name=nvidia-imex; elif -ge 550: nvidia-imex-"
               "${DRIVER_BRANCH}'; 'apt-get install ${imex_package_name}=${DRIVER_VERSION}*'; 'apt-mark hold') and "
               "rhel9/precompiled/Dockerfile ('-ge 580: dnf install nvidia-imex-${DRIVER_VERSION}; elif -ge 570: "
               "nvidia-imex-${DRIVER_BRANCH}-${DRIVER_VERSION}'); the service: NVIDIA/deepops roles/nvidia-dgx/vars/"
               "ubuntu-24.04.yml dgx_os7_imex_services [nvidia-imex.service]. Debian follows the Ubuntu names, as "
               "the fabric manager's do (no Debian build of the container)"),
}

# NVLSM is versioned by its own release date (nvlsm 2025.06.5-1, 2025.10.11-1, 2025.10.14-1), not by the driver:
# the plan names it unversioned, the repository check takes its newest release (or the operator's pin), and the
# role holds what it installed. The fabric manager starts it on NVLink 5 baseboards; it reaches the NVSwitches
# through the ib_umad kernel module.
NVLSM_PACKAGES = {
    "packages": ["nvlsm"],
    "kernel_modules": ["ib_umad"],
    "gpus": sorted(rows("nvlink_subnet_manager")),
    "source": (_GDC + "nvlink5_pkgs_install ('-ge 570: apt-get install nvlsm' and infiniband-diags, no version) and "
               "rhel9/install.sh ('dnf install -y infiniband-diags nvlsm'); the date versions: Amazon Linux 2023 "
               "release notes listing nvlsm-2025.06.5-1 beside the 580.65.06 driver packages (code index id "
               "70083269464) and nvlsm-2025.10.14-1 beside nvlink5-580-580.167.08 (code index id 70288762966); "
               "ib_umad before the fabric manager and NVLSM start: public HGX B200 setup notes ('modprobe ib_umad', "
               "then 'apt-get install nvlsm'; the fabric manager then logs 'Started \"Nvidia NVLink Subnet "
               "Manager\"', code index id 57713776942)"),
}

# DCGM 4 (issue 27 item 6): one host engine and tools package (-core) and one diagnostics package per CUDA major
# (-cuda11, -cuda12, -cuda13), both at the same DCGM release; the plan takes the CUDA major of its toolkit. DCGM
# is versioned on its own, not by the driver or the toolkit, so the release is a row of the sourced table
# (compat_facts kind dcgm_release: the newest one seen in a package listing) that the operator may override
# (gpufleet_dcgm_version). The 4.x packages conflict with
# DCGM 3's single datacenter-gpu-manager package, which the install replaces in the same transaction.
DCGM_PACKAGES = {
    "packages": ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda{MAJOR}"],
    "cuda_majors": ["11", "12", "13"],
    "version": {family: rows("dcgm_release")[family] for family in ("apt", "dnf")},
    "replaces": ["datacenter-gpu-manager"],
    "service": "nvidia-dcgm",
    "source": ("version: " + cite("dcgm_release", "dnf") + "; apt: " + cite("dcgm_release", "apt") + "; packages: "
               "Amazon Linux 2023 release notes, NVIDIA packages of the 2023.10.20260302 AMI (code index id 70178809999): "
               "datacenter-gpu-manager-4-core, -4-cuda11, -4-cuda12, -4-cuda13, -4-cuda-all, -4-proprietary(-cudaN), "
               "-4-devel, -4-multinode at 4.5.2-1; Azure/AgentBaker pull request 7855 (renovate, NVIDIA repository, "
               "Ubuntu 22.04 and 24.04): datacenter-gpu-manager-4-core 1:4.5.1-1 -> 1:4.5.2-1 (the epoch of the apt "
               "version, also 'datacenter-gpu-manager-4-core=1:4.4.0-1' from ubuntu2404/sbsa, code index id "
               "56447889209); Azure/azhpc-images install_dcgm.sh (code index id 22157867073): 'apt-get install "
               "datacenter-gpu-manager-4-cuda${CUDA_VERSION}=${DCGM_VERSION} datacenter-gpu-manager-4-core="
               "${DCGM_VERSION}', the CUDA major from nvidia-smi; NVIDIA/deepops pull request 1394: DGX OS 7 ships "
               "datacenter-gpu-manager-4-cuda13 (4.5.2), and the 3.x and 4.x series conflict (installing "
               "datacenter-gpu-manager removes the 4.x packages; 3.3.9 has cuda10/11/12 plugins only); the service "
               "nvidia-dcgm: the same install_dcgm.sh ('systemctl --now enable nvidia-dcgm')"),
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
