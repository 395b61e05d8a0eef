# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The one sourced table of facts that have no machine-readable source (issue 24).

``FACTS`` is a list of rows ``(kind, key, value, source)``; ``source`` names an entry of ``SOURCES``,
which says which document (and address) the row was read in and on what date. One source per row:
a fact read in two places is two rows of different kinds, never one row with two sources. Where a
fact could not be sourced there is no row, and the reader of the table (compat_cuda, compat_drivers,
compat_packages, gpu_models) says so. Release data that has a machine-readable source (PyPI, the
PyTorch build matrix) is not here: `gpufleet compat refresh` writes it to compat_release_data.py.

Kinds:
  cuda_release       CUDA X.Y.Z -> Table 3 Linux toolkit driver (None: the toolkit bundles none)
  cuda_minor_floor   CUDA major -> minimum driver under minor-version compatibility
  cuda_nccl          CUDA X.Y -> libnccl2/libnccl version NVIDIA's repository pairs with it
  cc_first_cuda      compute capability -> the first CUDA X.Y that builds for it
  cc_last_cuda       compute capability -> the last CUDA X.Y that builds for it (no row: still supported)
  arch_last_branch   architecture -> the last driver branch that supports it
  branch             driver branch -> {type: LTSB|PB|NFB|"", eol: "YYYY-MM" | True (ended, no date) | None}
  branch_max_cuda    driver branch -> newest CUDA X.Y it runs with full features
  branch_releases    driver branch -> its releases (a list)
  driver_release     one release -> its branch, for releases a list above lacks
  branch_recommended driver branch -> the release the plan installs when newer ones are not preferred
  gpu_cc             GPU model key (gpu_models.MODELS) -> compute capability
  gpu_min_driver     GPU model key -> minimum driver release
  repo               OS id -> {distro, family, graph, packages_verified} (NVIDIA's repository for it)
  repo_cuda          repository -> {first, last} CUDA X.Y it carries (None: that bound is not sourced)
  apt_unversioned    package graph (ubuntu) -> the first branch whose driver packages drop the branch from
                     their names (nvidia-open, nvidia-dkms-open, ... and nvidia-driver-pinning-<B>)
  repo_branch        "<repository> R<branch>" -> True: packages of the branch (driver, or the fabric manager
                     NVIDIA publishes with each driver release) were seen in it
  nvlink_subnet_manager  GPU model key -> True: its NVSwitch baseboard (NVLink 5) needs the NVLink Subnet Manager
                     (nvlsm) beside the fabric manager
  imex_domain        GPU model key -> True: its multi-node NVLink rack (NVL72) needs the IMEX service (nvidia-imex)
                     on every compute tray
  dcgm_release       packaging family (apt, dnf) -> the DCGM 4 package version the plan installs (apt's carries
                     DCGM's epoch 1:)
  kernel_modules     "proprietary_removed_from_branch" -> the first driver branch NVIDIA ships without the
                     proprietary kernel-module flavour
  os_python          OS id -> the Python X.Y its python3 package installs (what the pytorch role's venv runs)
  supported_os       OS id -> {name, os_family, package_manager, ansible: ["<distribution> <version>" as the roles
                     read Ansible's facts]}: NVIDIA supports it AND every stack role handles it (compat_packages
                     SUPPORTED_OS joins it with the repo and os_python rows; the one OS list, issue 37)
  refused_os         OS id -> why gpufleet refuses it although NVIDIA publishes a repository for it
"""

from __future__ import annotations

# The date this table was last reviewed as a whole: end of life is judged against it, so that a plan
# does not change with the calendar (`gpufleet compat show` says when a date in the table has passed).
AS_OF = "2026-12-06"

_NVIDIA_DOCS = "https://docs.nvidia.com"
_DC = _NVIDIA_DOCS + "/datacenter/tesla"

SOURCES = {
    # ------------------------------------------------------------ each OS's python3 (issue 34)
    "os-python-ubuntu2004": {
        "document": "Launchpad, binary package python-is-python3 in ubuntu focal, 3.8.2-4 (it links /usr/bin/python "
                    "to the release's default python3; stored copy)",
        "url": "https://launchpad.net/ubuntu/focal/+package/python-is-python3", "read": "2026-12-06"},
    "os-python-ubuntu2204": {
        "document": "Ubuntu Packages, jammy (22.04LTS), python3 (source python3-defaults): 3.10.6-1~22.04, 'default "
                    "python3 version', depends on python3.10 (stored copy)",
        "url": "https://packages.ubuntu.com/jammy/python3", "read": "2026-12-06"},
    "os-python-ubuntu2404": {
        "document": "Ubuntu Packages, noble (24.04LTS), python3 (source python3-defaults): 3.12.3-0ubuntu1, 'default "
                    "python3 version', depends on python3.12 (stored copy)",
        "url": "https://packages.ubuntu.com/noble/python3", "read": "2026-12-06"},
    "os-python-debian12": {
        "document": "Debian package tracker: python3-defaults 3.11.1-1 migrated to testing, the default python3 that "
                    "bookworm released with (its python3.11 is 3.11.2-6+deb12u6 on packages.debian.org; stored copies)",
        "url": "https://tracker.debian.org/news/1414484/python3-defaults-3111-1-migrated-to-testing/",
        "read": "2026-12-06"},
    "os-python-rhel9": {
        "document": "Red Hat Enterprise Linux 9, Installing and using dynamic programming languages, 1.1 'Python "
                    "versions': Python 3.9 is the default Python implementation in RHEL 9 (python3 in BaseOS), for the "
                    "whole life cycle; 3.11 and 3.12 are extra AppStream packages; Rocky and AlmaLinux 9 rebuild it "
                    "(stored copy)",
        "url": "https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/installing_and_using_dynamic_"
               "programming_languages/assembly_introduction-to-python_installing-and-using-dynamic-programming-languages",
        "read": "2026-12-06"},
    # ------------------------------------------------------------ supported operating systems (issue 37)
    "cuda-guide-12.8-distros": {
        "document": "NVIDIA CUDA Installation Guide for Linux 12.8, 1.1 System Requirements, Table 1 'Native Linux "
                    "Distribution Support in CUDA 12.8' (x86_64 rows RHEL 9.y, RHEL 8.y and Rocky Linux 8.y seen in a "
                    "stored copy of the table; its Rocky 9, Ubuntu 20.04/22.04/24.04 and Debian 12 rows were not "
                    "read verbatim here: re-read the table when refreshing this list)",
        "url": "https://docs.nvidia.com/cuda/archive/12.8.0/cuda-installation-guide-linux/index.html",
        "read": "2026-12-06"},
    "ansible-core-2.17-targets": {
        "document": "Ansible core 2.17 porting guide: 'Python 2.7 and Python 3.6 are no longer supported as target "
                    "interpreters' (the modules need Python 3.7+ on the node); RHEL 8's /usr/bin/python3 is 3.6 "
                    "(platform-python), and ansible.cfg sets interpreter_python = /usr/bin/python3",
        "url": "https://docs.ansible.com/ansible/latest/porting_guides/porting_guide_core_2.17.html",
        "read": "2026-12-06"},
    "gpufleet-roles-os": {
        "document": "gpufleet's own stack roles (nvidia_driver, cuda_toolkit, nccl, pytorch): no vars or tests for "
                    "this OS, and compat_facts has no os_python row for it (not a fact about NVIDIA: a limit of "
                    "this collection)",
        "url": "roles/nvidia_driver/tasks/set_vars.yml", "read": "2026-12-06"},
    # ------------------------------------------------------------ CUDA release notes
    "cuda-rn-13.2.2": {
        "document": "NVIDIA CUDA Toolkit Release Notes, CUDA 13.2 Update 2 edition: Table 3 'CUDA Toolkit and "
                    "Corresponding Driver Versions' (Linux x86_64, every release 7.0 to 13.2.2), Table 2 (minor-"
                    "version compatibility: 13.x >= 580, 12.x >= 525 < 580, 11.x >= 450 < 525) and the note "
                    "'Starting with CUDA 13.1, the Windows display driver is no longer bundled'; read in a stored "
                    "verbatim copy (code index id 70889381901)",
        "url": _NVIDIA_DOCS + "/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html",
        "read": "2026-12-05"},
    "cuda-rn-13.3.1": {
        "document": "NVIDIA CUDA Toolkit Release Notes, CUDA 13.3 Update 1 edition, Table 3 rows 'CUDA 13.3 GA "
                    ">=610.43.02', 'CUDA 13.3 Update 1 >=610.43.02' and 'CUDA 13.4 Developer Preview: N/A (unbundled)' "
                    "with the note 'Starting with CUDA 13.4 Developer Preview, the Linux driver is no longer bundled', "
                    "as quoted in a public compatibility note (code index id 54526236190, checked against NVIDIA's "
                    "docs on 2026-07-19)",
        "url": _NVIDIA_DOCS + "/cuda/archive/13.3.1/cuda-toolkit-release-notes/index.html",
        "read": "2026-12-05"},
    "cuda-rn-13.4": {
        "document": "CUDA Toolkit 13.4 Release Notes: 'The CUDA Toolkit 13.4 GA release is versioned 13.4.1 and "
                    "supersedes the 13.4.0 developer preview'",
        "url": _NVIDIA_DOCS + "/cuda/archive/13.4.1/cuda-toolkit-release-notes/index.html",
        "read": "2026-12-05"},
    "cuda-rn-13.4.2": {
        "document": "CUDA Toolkit 13.4 Update 1 Release Notes (archive 13.4.2; CUDA Runtime 13.4.92)",
        "url": _NVIDIA_DOCS + "/cuda/archive/13.4.2/cuda-toolkit-release-notes/index.html",
        "read": "2026-12-05"},
    "redist-620.70.06": {
        "document": "NVIDIA driver redistributable manifest redistrib_620.70.06.json: release_date 2026-11-04, "
                    "cuda_compat variant cuda13.5 (the CUDA forward-compatibility package of this driver is the "
                    "CUDA 13.5 one: the driver NVIDIA released with CUDA 13.5, which bundles no Linux driver)",
        "url": "https://developer.download.nvidia.com/compute/nvidia-driver/redist/redistrib_620.70.06.json",
        "read": "2026-12-05"},
    "redist-610.57.04": {
        "document": "NVIDIA driver redistributable manifest redistrib_610.57.04.json: release_date 2026-08-03, "
                    "cuda_compat variant cuda13.3",
        "url": "https://developer.download.nvidia.com/compute/nvidia-driver/redist/redistrib_610.57.04.json",
        "read": "2026-12-05"},
    "cuda-12.3.2-local-repo": {
        "document": "NVIDIA's local repository installer cuda-repo-debian12-12-3-local_12.3.2-545.23.08-1_amd64.deb "
                    "(CUDA 12.3 Update 2 with driver 545.23.08; public script, code index id 34438916108); Table 3 has "
                    "no 12.3.2 row",
        "url": "https://developer.download.nvidia.com/compute/cuda/12.3.2/local_installers/", "read": "2026-12-03"},
    "cuda-13.0-rn-arch": {
        "document": "NVIDIA CUDA 13.0 release notes, Deprecated Architectures: offline compilation and library "
                    "support for Maxwell, Pascal and Volta removed in CUDA 13.0; CUDA 12.x keeps building for them",
        "url": _NVIDIA_DOCS + "/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html",
        "read": "2026-12-03"},
    # ------------------------------------------------------------ NCCL per toolkit
    "nccl-container-pins": {
        "document": "NV_LIBNCCL_PACKAGE=libnccl2=<ver> in NVIDIA's CUDA container images (gitlab.com/nvidia/"
                    "container-images/cuda dist/<ver>/ubuntu2204/runtime): 11.7.1 2.13.4-1+cuda11.7, 11.8.0 "
                    "2.16.2-1+cuda11.8, 12.1.1 2.17.1-1+cuda12.1, 12.2.2 2.19.3-1+cuda12.2, 12.3 2.19.3-1+cuda12.3, "
                    "12.4 2.21.5-1+cuda12.4, 12.5 2.22.3-1+cuda12.5, 12.6.3 2.23.4-1+cuda12.6, 12.8.1 2.25.1-1+cuda12.8",
        "url": "https://gitlab.com/nvidia/container-images/cuda",
        "read": "2026-12-03"},
    "nccl-12.0-dockerfile": {
        "document": "public Dockerfile setting NCCL_VERSION=2.15.5-1+cuda12.0 against NVIDIA's ubuntu2204 repository "
                    "(code index id 40036691906)",
        "url": "code index id 40036691906", "read": "2026-12-03"},
    "nccl-12.9-hpc-role": {
        "document": "linux-system-roles/hpc vars/RedHat_9.yml: libnccl-2.27.5-1+cuda12.9",
        "url": "https://github.com/linux-system-roles/hpc/blob/main/vars/RedHat_9.yml", "read": "2026-12-03"},
    "nccl-13.0-pins": {
        "document": "public install notes pinning libnccl2=2.27.7-1+cuda13.0 from NVIDIA's repository",
        "url": "code index (install notes)", "read": "2026-12-03"},
    "nccl-13.1-pin": {
        "document": "public setup script pinning NCCL_VERSION 2.29.3-1+cuda13.1 from "
                    "developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64 (code index id 53045735223)",
        "url": "code index id 53045735223", "read": "2026-12-05"},
    "nccl-13.2-pin": {
        "document": "public notes installing libnccl2=2.30.4-1+cuda13.2 libnccl-dev=2.30.4-1+cuda13.2 from "
                    "NVIDIA's CUDA repository (code index id 58505663966)",
        "url": "code index id 58505663966", "read": "2026-12-05"},
    "nccl-13.3-pin": {
        "document": "public lab notes installing the hash-checked NCCL packages 2.31.2-1+cuda13.3 with CUDA 13.3.1 "
                    "(code index id 69368458360)",
        "url": "code index id 69368458360", "read": "2026-12-05"},
    "nccl-13.4-rpm": {
        "document": "a public CI definition installing libnccl-2.32.3-1+cuda13.4 from NVIDIA's rhel9 CUDA repository "
                    "beside cuda-compat-13-4-615.71.09 (code index id 70143730172)",
        "url": "code index id 70143730172", "read": "2026-12-05"},
    # ------------------------------------------------------------ compute capability
    "cuda-gpus": {
        "document": "NVIDIA CUDA GPUs list and legacy list (compute capability per product), as recorded in "
                    "shared/reference/compat-facts.md section 2",
        "url": "https://developer.nvidia.com/cuda-gpus", "read": "2026-12-02"},
    "forum-276955": {
        "document": "NVIDIA developer forum 'minimum required CUDA version by GPU' (R. Crovella): sm_80 CUDA 11.0, "
                    "sm_86 11.1, sm_89 and sm_90 11.8",
        "url": "https://forums.developer.nvidia.com/t/minimum-required-cuda-version-by-gpu/276955", "read": "2026-12-02"},
    "cuda-9-10-table": {
        "document": "NVIDIA table of CUDA SDK versions and compute capabilities ('9.0-9.2: 3.0-7.0', '10.0-10.2: "
                    "3.0-7.5'), as quoted in compat-facts.md",
        "url": "https://developer.nvidia.com/cuda-gpus", "read": "2026-12-02"},
    "blackwell-guide": {
        "document": "NVIDIA Blackwell Compatibility Guide (native Blackwell builds need CUDA 12.8) and "
                    "pytorch/pytorch#141724",
        "url": _NVIDIA_DOCS + "/cuda/blackwell-compatibility-guide/", "read": "2026-12-03"},
    "mig-deploy-620": {
        "document": "NVIDIA Multi-Instance GPU User Guide (620 edition), Deployment Considerations: minimum driver "
                    "per GPU (A100 R450 >= 450.80.02; A30 R460 >= 460.73.01; H100 R525 >= 525.85.12; H20 R535 >= "
                    "535.161.07; H200 R550 >= 550.90.07; B200, GB200 R570 >= 570.133.20; B300 CUDA 12.9, R580 >= "
                    "580.82.07; RTX PRO 6000 Blackwell (all editions) R575 >= 575.51.03; GB300 (DGX Station) CUDA 13, "
                    "R595 >= 595.58.03)",
        "url": _DC + "/mig-user-guide/620/deployment-considerations.html", "read": "2026-12-05"},
    "mig-gpus": {
        "document": "NVIDIA Multi-Instance GPU User Guide, Supported GPUs: product, compute capability and memory "
                    "(RTX PRO 6000 Blackwell 12.0 96GB; B200 10.0 180GB; GB200 10.0; H100 9.0; H100 on GH200 9.0 "
                    "96GB; H20 9.0 96GB; H200 9.0 141GB; A100 8.0; A30 8.0)",
        "url": _DC + "/mig-user-guide/supported-gpus.html", "read": "2026-12-05"},
    "b300-cluster-table": {
        "document": "a public cluster inventory listing 'NVIDIA B300 SXM6 AC | SM103 (10.3) | 275 GB HBM3e' and "
                    "'NVIDIA GH200 144G HBM3e | SM90 (9.0) | 144 GB HBM3e' (code index id 54129953460)",
        "url": "code index id 54129953460", "read": "2026-12-05"},
    # ------------------------------------------------------------ driver branches
    "dc-supported-620": {
        "document": "NVIDIA Data Center Drivers, Supported Drivers and CUDA Toolkit Versions (620 edition): R580 "
                    "Long Term Support Branch EOL June 2028, R595 Production Branch EOL March 2027, R620 Long Term "
                    "Support Branch EOL September 2029, all CUDA 13; 'Only Long Term Support and Production branches "
                    "are listed. New Feature Branches are short-lived and do not have an end-of-life date'",
        "url": _DC + "/drivers/620/supported-drivers-and-cuda-toolkit-versions.html", "read": "2026-12-05"},
    "dc-supported-615": {
        "document": "NVIDIA Data Center Drivers, Supported Drivers and CUDA Toolkit Versions (615 edition): R535 "
                    "LTSB EOL June 2026 (CUDA 12), R580 LTSB June 2028, R595 PB March 2027, R610 New Feature Branch "
                    "EOL August 2026 (CUDA 13)",
        "url": _DC + "/drivers/615/supported-drivers-and-cuda-toolkit-versions.html", "read": "2026-12-05"},
    "dc-supported-580": {
        "document": "NVIDIA Data Center Drivers, Supported Drivers and CUDA Toolkit Versions (580 edition): R535 "
                    "LTSB June 2026, R570 Production Branch February 2026, R580 LTSB; 'All other previous driver "
                    "branches not listed in the table above (such as R575, R565, R560, R550, R525, R515, R510, ...) "
                    "are end of life'",
        "url": _DC + "/drivers/supported-drivers-and-cuda-toolkit-versions.html", "read": "2026-12-05"},
    "dc-arch-matrix": {
        "document": "NVIDIA Data Center Drivers, CUDA Toolkit, Driver, and Architecture Matrix: Volta 7.0, Pascal "
                    "6.0/6.1 and Maxwell 5.x last CUDA toolkit 12.x, last driver R580; Kepler 3.5/3.7 R470",
        "url": _DC + "/drivers/cuda-toolkit-driver-and-architecture-matrix.html", "read": "2026-12-05"},
    "aks-gpu-113": {
        "document": "Azure/aks-gpu PR #113, branch classification: production 515, 525, 550, 570; LTS 535; feature "
                    "520, 560, 565, 575",
        "url": "https://github.com/Azure/aks-gpu/pull/113", "read": "2026-12-03"},
    "unix-drivers-page": {
        "document": "nvidia.com/object/Unix.html: 'Latest New Feature Branch Version: 545.29.06', 'Latest "
                    "Production Branch Version: 550.76'",
        "url": "https://www.nvidia.com/en-us/drivers/unix/", "read": "2026-12-03"},
    "forum-current-releases": {
        "document": "NVIDIA developer forum 'Current graphics driver releases': 'Current new feature branch "
                    "release: 590.48.01', 'Current production branch release: 580.126.09'",
        "url": "https://forums.developer.nvidia.com/t/current-graphics-driver-releases/28500", "read": "2026-12-05"},
    "keylase": {
        "document": "keylase/nvidia-patch README driver table (Linux releases per branch, GeForce/XFree86 and some "
                    "data-center builds) at commit 7b022ce1e016c6522d4075ba6ad13e99f7bbc9be (2026-08-17)",
        "url": "https://github.com/keylase/nvidia-patch/blob/7b022ce1e016c6522d4075ba6ad13e99f7bbc9be/README.md",
        "read": "2026-12-05"},
    "dc-rn-535.216.03": {
        "document": "NVIDIA Data Center GPU Driver release notes 535.216.03 (11/19/2024): 'Fabric Manager: "
                    "535.216.03', bundled CUDA 12.2.2",
        "url": _DC + "/tesla-release-notes-535-216-03/index.html", "read": "2026-12-03"},
    "debian-madison": {
        "document": "apt-cache madison against deb.debian.org: nvidia-driver 535.261.03-1 in bookworm "
                    "(shared/reference/compat-facts.md section 6)",
        "url": "https://deb.debian.org/debian/", "read": "2026-12-02"},
    # ------------------------------------------------------------ NVIDIA's repositories
    "repo-pattern": {
        "document": "NVIDIA/ansible-role-nvidia-driver defaults and vars/main.yml (aarch64 -> sbsa); stackhpc/"
                    "ansible-slurm-appliance roles/cuda; repository URL pattern <base>/<distro>/<arch>/",
        "url": "https://github.com/NVIDIA/ansible-role-nvidia-driver", "read": "2026-12-03"},
    "gdc-ubuntu2604": {
        "document": "NVIDIA/gpu-driver-container ubuntu26.04/install.sh at commit 06a208ca (2026-08-17): "
                    "cuda-keyring from compute/cuda/repos/ubuntu2604/<arch>",
        "url": "https://github.com/NVIDIA/gpu-driver-container/blob/06a208ca9747c82b1ba99b76ecdcf2469b0a0207/"
               "ubuntu26.04/install.sh", "read": "2026-12-05"},
    "gdc-rhel10": {
        "document": "NVIDIA/gpu-driver-container rhel10/install.sh at commit 06a208ca (2026-08-17): dnf config-manager "
                    "--add-repo compute/cuda/repos/rhel10/<arch>/cuda-rhel10.repo",
        "url": "https://github.com/NVIDIA/gpu-driver-container/blob/06a208ca9747c82b1ba99b76ecdcf2469b0a0207/"
               "rhel10/install.sh", "read": "2026-12-05"},
    "debian13-role": {
        "document": "a public Ansible role doc: 'Installs NVIDIA's cuda-keyring package, which adds the signing key "
                    "and the apt source for NVIDIA's Debian 13 repository ... Installs nvidia-driver-pinning-595 ... "
                    "nvidia-driver-cuda ... nvidia-kernel-open-dkms' (code index id 69492041430)",
        "url": "code index id 69492041430", "read": "2026-12-05"},
    "cuda13-drops-ubuntu2004": {
        "document": "NVIDIA CUDA 13.0 release notes, Dropped Operating Systems: 'Support for Ubuntu 20.04 has been "
                    "dropped starting with this release'",
        "url": _NVIDIA_DOCS + "/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html", "read": "2026-12-03"},
    "ubuntu2404-listing": {
        "document": "Index of /compute/cuda/repos/ubuntu2404/x86_64 (NVIDIA's repository, read against it): its "
                    "first cuda-toolkit is cuda-toolkit-12-5, no CUDA before 12.5",
        "url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/", "read": "2026-12-03"},
    "debian12-listing": {
        "document": "Index of /compute/cuda/repos/debian12/x86_64 (stored copy, Packages dated 2026-02-24): the first "
                    "toolkit packages are cuda-12-3_12.3.0-1 .. 12.3.2-1; nothing older",
        "url": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/", "read": "2026-12-05"},
    "ubuntu2204-r535": {
        "document": "nvidia-driver-local-repo-ubuntu2204-535.216.03 followed by apt-get install nvidia-kernel-open-535 "
                    "cuda-drivers-535 (public setup notes, code index id 44532534669)",
        "url": "code index id 44532534669", "read": "2026-12-03"},
    "ubuntu2204-r550": {
        "document": "nvidia-driver-local-repo-ubuntu2204-550.54.15 / 550.90.07 / 550.127.08 / 550.144.03 from "
                    "us.download.nvidia.com/tesla (public setup scripts, code index ids 56005329162, 28222638852)",
        "url": "code index id 56005329162", "read": "2026-12-03"},
    "ubuntu2204-r570": {
        "document": "apt install -y nvidia-open-570 cuda-12-8 after cuda-keyring from compute/cuda/repos/ubuntu2204/"
                    "x86_64 (public node setup script, code index id 34346399783)",
        "url": "code index id 34346399783", "read": "2026-12-03"},
    "ubuntu2204-r580": {
        "document": "https://us.download.nvidia.com/tesla/580.82.07/nvidia-driver-local-repo-ubuntu2204-580.82.07_"
                    "1.0-1_amd64.deb (public install script, code index id 10340168861)",
        "url": "code index id 10340168861", "read": "2026-12-05"},
    "ubuntu2204-r595": {
        "document": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/nvidia-fabricmanager_"
                    "595.91.07-1ubuntu1_amd64.deb, pinned by sha256 in public code (code index ids 70218713733, "
                    "70741208819); NVIDIA/gpu-driver-container at 06a208ca (2026-08-17) builds ubuntu22.04 images for "
                    "595.91.07 from this repository (versions.mk, ubuntu22.04/install.sh 'nvidia-fabricmanager="
                    "${DRIVER_VERSION}*')",
        "url": "code index id 70218713733", "read": "2026-12-05"},
    "ubuntu2204-r610": {
        "document": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/nvidia-fabricmanager_"
                    "610.57.04-1ubuntu1_amd64.deb (public offline-install notes, code index id 63328721233)",
        "url": "code index id 63328721233", "read": "2026-12-05"},
    "driver-guide-590-renames": {
        "document": "NVIDIA Driver Installation Guide, Recent Updates, 'Ubuntu 590 and later packages' and Table 4 "
                    "'Ubuntu 590 package renames': from branch 590 the Ubuntu packages drop the branch from their "
                    "names (nvidia-dkms-580-open -> nvidia-dkms-open, libnvidia-compute-580 -> libnvidia-compute, "
                    "cuda-drivers-580 removed, cuda-drivers unchanged); branch tracking by nvidia-driver-pinning-<B> "
                    "(text as mirrored at defichainwiki.com/recent-updates.html)",
        "url": _DC + "/driver-installation-guide/recent-updates.html", "read": "2026-12-05"},
    "ubuntu2404-r570": {
        "document": "apt install -y nvidia-open-570 from NVIDIA's ubuntu2404 repository (code index id 51907256881)",
        "url": "code index id 51907256881", "read": "2026-12-03"},
    "ubuntu2404-r580": {
        "document": "cuda-keyring from compute/cuda/repos/ubuntu2404/x86_64, then 'apt install nvidia-driver-"
                    "pinning-580 && apt install nvidia-open cuda-toolkit-13-0' (public script, code index id "
                    "70096732811)",
        "url": "code index id 70096732811", "read": "2026-12-05"},
    "ubuntu2404-r595": {
        "document": "'sudo apt install nvidia-driver-pinning-595; sudo apt install nvidia-open' after cuda-keyring, "
                    "following NVIDIA's CUDA 13.1 download page for Ubuntu 24.04 (public setup notes, code index id "
                    "62727897253)",
        "url": "code index id 62727897253", "read": "2026-12-05"},
    "debian12-driver-policy": {
        "document": "apt-cache policy nvidia-driver on Debian 12 with NVIDIA's repository (elFarto/nvidia-vaapi-"
                    "driver issue 312, 2024-08-20): 560.28.03-1, 555.42.06-1, 555.42.02-1, 550.90.07-1, 550.54.15-1, "
                    "550.54.14-1, 545.23.08-1, 545.23.06-1 from compute/cuda/repos/debian12/x86_64",
        "url": "https://github.com/elFarto/nvidia-vaapi-driver/issues/312", "read": "2026-12-03"},
    "debian12-r570": {
        "document": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-drivers-570_"
                    "570.124.06-1_amd64.deb (driver table in public code, code index id 2799945846)",
        "url": "code index id 2799945846", "read": "2026-12-03"},
    "debian12-r580": {
        "document": "a public installer adding compute/cuda/repos/debian12/x86_64 and running 'apt install -y nvidia-"
                    "driver-pinning-580; apt install -y cuda-drivers-580' (code index id 58433852591); cuda-drivers-"
                    "580's Depends in the Debian repository (NVIDIA developer forum thread 353805)",
        "url": "code index id 58433852591", "read": "2026-12-05"},
    "ubuntu2604-r595": {
        "document": "nvidia-kernel-source-open_595.71.05-1ubuntu1 and nvidia-dkms-open_595.71.05-1ubuntu1 from "
                    "compute/cuda/repos/ubuntu2604/x86_64, pinned by sha256 in a public build script (code index id "
                    "62299004223)",
        "url": "code index id 62299004223", "read": "2026-12-05"},
    "ubuntu2604-r610": {
        "document": "a public survey of compute/cuda/repos/ubuntu2604/x86_64: 'HTTP 200, 722 files, incl. "
                    "cuda-drivers_610.57.04, nvidia-driver-open_610.57.04, cuda-13-3' (code index id 59675034244)",
        "url": "code index id 59675034244", "read": "2026-12-05"},
    "rhel9-module-list": {
        "document": "dnf module list nvidia-driver on RHEL 9 with NVIDIA's repository: streams 535, 535-dkms, "
                    "535-open (tests/fixtures/repo/dnf-module-list-nvidia-driver-rhel9-preview.txt)",
        "url": "tests/fixtures/repo/SOURCES.md", "read": "2026-12-02"},
    "driver-guide-rhel-580": {
        "document": "NVIDIA Driver Installation Guide, Kernel Modules, RHEL 8/9: 'dnf module enable "
                    "nvidia-driver:580-open; dnf install nvidia-open'",
        "url": _DC + "/driver-installation-guide/kernel-modules.html", "read": "2026-12-03"},
    # ------------------------------------------------------------ NVLink 5 / multi-node NVLink (issue 27 item 5)
    "deepops-dgx-os7": {
        "document": "NVIDIA/deepops roles/nvidia-dgx/vars/ubuntu-24.04.yml (DGX OS 7) at commit 03e19e95: platforms "
                    "'DGX B200' and 'DGX B300' nvswitch: true, nvlink5: true, imex: false; 'DGX GB200' and 'DGX GB300' "
                    "nvswitch: false, nvlink5: false, imex: true; dgx_os7_nvlink5_packages [nvlsm, libnvsdm], "
                    "dgx_os7_imex_packages [nvidia-imex], dgx_os7_imex_services [nvidia-imex.service]",
        "url": "https://github.com/NVIDIA/deepops/blob/03e19e9582852da024edc88e8345baec79377155/roles/nvidia-dgx/"
               "vars/ubuntu-24.04.yml",
        "read": "2026-12-05"},
    "fm-guide-2.3": {
        "document": "NVIDIA Fabric Manager User Guide, Release 2.3 (May 06, 2025): 1.3.2 'Systems Using Fourth "
                    "Generation NVSwitches', 1.5 'What is NVLink Subnet Manager?', 1.6.4 'NVIDIA HGX B200/B100 GPU "
                    "Baseboard' (the NVLink Subnet Manager runs with Fabric Manager on these baseboards)",
        "url": _DC + "/pdf/fabric-manager-user-guide.pdf",
        "read": "2026-12-05"},
    # ------------------------------------------------------------ DCGM, kernel-module flavours (issue 35)
    "al2023-relnotes-20260706": {
        "document": "Amazon Linux 2023 release notes, version 2023.12.20260706, 'Nvidia Updated Packages' (NVIDIA's "
                    "packages as AL2023 ships them): datacenter-gpu-manager-4-core-4.6.0-1, -4-cuda11-4.6.0-1, "
                    "-4-cuda12-4.6.0-1, -4-cuda13-4.6.0-1, -4-cuda-all, -4-devel, -4-multinode, -4-proprietary "
                    "at 4.6.0-1 (stored copy, code index id 70356922989); NVIDIA's DCGM Exporter release notes date "
                    "the release: '4.6.0-4.8.3 Released 2026-07-15 ... with DCGM 4.6.0' "
                    "(docs.nvidia.com/datacenter/dcgm/latest/release-notes/dcgm-exporter.html)",
        "url": "https://docs.aws.amazon.com/linux/al2023/release-notes/relnotes-2023.12.20260706.html",
        "read": "2026-12-06"},
    "dcgm-apt-epoch": {
        "document": "the apt version of NVIDIA's DCGM 4 packages carries epoch 1 on every 4.x release seen "
                    "(datacenter-gpu-manager-4-core 1:4.4.0-1, 1:4.5.1-1 -> 1:4.5.2-1 in Azure/AgentBaker pull "
                    "request 7855 against NVIDIA's ubuntu2204/ubuntu2404 repositories; code index id 56447889209): "
                    "the apt version of 4.6.0-1 is that epoch with the release of the AL2023 listing (inferred: no "
                    "apt listing of 4.6.0 was read)",
        "url": "https://github.com/Azure/AgentBaker/pull/7855", "read": "2026-12-06"},
    "driver-guide-620": {
        "document": "NVIDIA Driver Installation Guide, Release 620 (Nov 09, 2026), section 4.1 'Proprietary Kernel "
                    "Modules Removed' (Recent Updates); its Kernel Modules page describes one flavour only: 'The "
                    "kernel modules are open source and dual licensed MIT/GPLv2' (the 610 edition still lists the "
                    "Proprietary and Open-source flavours)",
        "url": _DC + "/driver-installation-guide/620/pdf/Driver_Installation_Guide.pdf", "read": "2026-12-06"},
}


def _rows(kind, source, pairs):
    return [(kind, key, value, source) for key, value in pairs]


_T3 = [("11.7.0", "515.43.04"), ("11.7.1", "515.48.07"), ("11.8.0", "520.61.05"), ("12.0.0", "525.60.13"),
       ("12.0.1", "525.85.12"), ("12.1.0", "530.30.02"), ("12.1.1", "530.30.02"), ("12.2.0", "535.54.03"),
       ("12.2.1", "535.86.09"), ("12.2.2", "535.104.05"), ("12.3.0", "545.23.06"), ("12.3.1", "545.23.08"),
       ("12.4.0", "550.54.14"), ("12.4.1", "550.54.15"), ("12.5.0", "555.42.02"), ("12.5.1", "555.42.06"),
       ("12.6.0", "560.28.03"), ("12.6.1", "560.35.03"), ("12.6.2", "560.35.03"), ("12.6.3", "560.35.05"),
       ("12.8.0", "570.26"), ("12.8.1", "570.124.06"), ("12.9.0", "575.51.03"), ("12.9.1", "575.57.08"),
       ("13.0.0", "580.65.06"), ("13.0.1", "580.82.07"), ("13.0.2", "580.95.05"), ("13.1.0", "590.44.01"),
       ("13.1.1", "590.48.01"), ("13.2.0", "595.45.04"), ("13.2.1", "595.58.03"), ("13.2.2", "595.71.05")]

_KEYLASE_RELEASES = {
    "515": ["515.43.04", "515.48.07", "515.57", "515.65.01", "515.76", "515.86.01", "515.105.01"],
    "520": ["520.56.06", "520.61.05"],
    "525": ["525.60.11", "525.60.13", "525.78.01", "525.85.05", "525.85.12", "525.89.02", "525.105.17", "525.116.03",
            "525.116.04", "525.125.06", "525.147.05"],
    "530": ["530.30.02", "530.41.03"],
    "535": ["535.43.02", "535.54.03", "535.86.05", "535.86.10", "535.98", "535.104.05", "535.104.12", "535.113.01",
            "535.129.03", "535.146.02", "535.154.05", "535.161.07", "535.161.08", "535.171.04", "535.183.01",
            "535.183.06", "535.216.01", "535.230.02", "535.247.01", "535.274.02", "535.288.01"],
    "545": ["545.23.06", "545.23.08", "545.29.02", "545.29.06"],
    "550": ["550.40.07", "550.54.14", "550.54.15", "550.67", "550.76", "550.78", "550.90.07", "550.100",
            "550.107.02", "550.120", "550.127.05", "550.135", "550.142", "550.163.01"],
    "555": ["555.42.02", "555.58", "555.58.02"],
    "560": ["560.28.03", "560.35.03", "560.35.05"],
    "565": ["565.57.01", "565.77"],
    "570": ["570.86.15", "570.86.16", "570.124.04", "570.124.06", "570.133.07", "570.133.20", "570.144", "570.148.08",
            "570.153.02", "570.158.01", "570.169", "570.172.08", "570.195.03", "570.211.01"],
    "575": ["575.51.02", "575.57.08", "575.64", "575.64.03", "575.64.05"],
    "580": ["580.65.06", "580.76.05", "580.82.07", "580.82.09", "580.95.05", "580.105.08", "580.119.02", "580.126.09",
            "580.142", "580.159.03", "580.159.04", "580.173.02", "580.178.04"],
    "590": ["590.44.01", "590.48.01"],
    "595": ["595.45.04", "595.58.03", "595.71.05", "595.80", "595.84", "595.91.07"],
    "610": ["610.43.02", "610.43.03", "610.57.04"],
}

# Per-GPU minimum drivers of the MIG user guide, by gpu_models key.
_MIG_MIN_DRIVER = {
    "450.80.02": ["a100-sxm4-40gb", "a100-pcie-40gb", "a100-sxm4-80gb", "a100-pcie-80gb", "a100"],
    "460.73.01": ["a30"],
    "525.85.12": ["h100-sxm5-80gb", "h100-pcie", "h100-nvl", "h100"],
    "535.161.07": ["h20"],
    "550.90.07": ["h200", "h200-nvl"],
    "570.133.20": ["b200", "gb200"],
    "580.82.07": ["b300"],
    "575.51.03": ["rtx-pro-6000-blackwell"],
}

_CC_BY_SOURCE = {
    "cuda-gpus": {
        "6.0": ["p100-pcie-16gb", "p100-pcie-12gb", "p100-sxm2-16gb"], "6.1": ["p40", "p4"],
        "7.0": ["v100-sxm2-16gb", "v100-pcie-16gb", "v100-sxm2-32gb", "v100-pcie-32gb", "v100-sxm3-32gb",
                "v100s-pcie-32gb", "titan-v"],
        "7.5": ["t4", "quadro-rtx-8000", "quadro-rtx-6000", "quadro-rtx-5000", "quadro-rtx-4000", "rtx-2080-ti",
                "rtx-2080-super", "rtx-2080", "rtx-2070", "titan-rtx"],
        "8.0": ["a800-sxm4-80gb", "a800-pcie-80gb"],
        "8.6": ["a40", "a10", "a10g", "a16", "a2", "rtx-a6000", "rtx-a5000", "rtx-a4500", "rtx-a4000", "rtx-3090-ti",
                "rtx-3090", "rtx-3080-ti", "rtx-3080", "rtx-3070", "rtx-3060"],
        "8.9": ["l4", "l40", "l40s", "l20", "rtx-6000-ada", "rtx-5000-ada", "rtx-4500-ada", "rtx-4000-ada",
                "rtx-4000-sff-ada", "rtx-4090", "rtx-4080-super", "rtx-4080", "rtx-4070-ti", "rtx-4070"],
        "9.0": ["h800", "h800-pcie"],
        "10.0": ["b100"],
        "12.0": ["rtx-5090", "rtx-5080", "rtx-5070-ti", "rtx-5070"],
    },
    "mig-gpus": {
        "8.0": ["a100-sxm4-40gb", "a100-pcie-40gb", "a100-sxm4-80gb", "a100-pcie-80gb", "a100", "a30"],
        "9.0": ["h100-sxm5-80gb", "h100-pcie", "h100-nvl", "h100", "h20", "h200", "h200-nvl", "gh200", "gh200-144g"],
        "10.0": ["b200", "gb200"],
        "12.0": ["rtx-pro-6000-blackwell"],
    },
    "b300-cluster-table": {"10.3": ["b300", "gb300"]},
}

FACTS = (
    _rows("cuda_release", "cuda-rn-13.2.2", _T3)
    + _rows("cuda_release", "cuda-12.3.2-local-repo", [("12.3.2", "545.23.08")])
    + _rows("cuda_release", "cuda-rn-13.3.1", [("13.3.0", "610.43.02"), ("13.3.1", "610.43.02")])
    + _rows("cuda_release", "cuda-rn-13.4", [("13.4.1", None)])
    + _rows("cuda_release", "cuda-rn-13.4.2", [("13.4.2", None)])
    + _rows("cuda_release", "redist-620.70.06", [("13.5.0", "620.70.06")])
    + _rows("cuda_minor_floor", "cuda-rn-13.2.2", [("11", "450.80.02"), ("12", "525.60.13"), ("13", "580")])
    + _rows("cuda_nccl", "nccl-container-pins", [
        ("11.7", "2.13.4-1+cuda11.7"), ("11.8", "2.16.2-1+cuda11.8"), ("12.1", "2.17.1-1+cuda12.1"),
        ("12.2", "2.19.3-1+cuda12.2"), ("12.3", "2.19.3-1+cuda12.3"), ("12.4", "2.21.5-1+cuda12.4"),
        ("12.5", "2.22.3-1+cuda12.5"), ("12.6", "2.23.4-1+cuda12.6"), ("12.8", "2.25.1-1+cuda12.8")])
    + _rows("cuda_nccl", "nccl-12.0-dockerfile", [("12.0", "2.15.5-1+cuda12.0")])
    + _rows("cuda_nccl", "nccl-12.9-hpc-role", [("12.9", "2.27.5-1+cuda12.9")])
    + _rows("cuda_nccl", "nccl-13.0-pins", [("13.0", "2.27.7-1+cuda13.0")])
    + _rows("cuda_nccl", "nccl-13.1-pin", [("13.1", "2.29.3-1+cuda13.1")])
    + _rows("cuda_nccl", "nccl-13.2-pin", [("13.2", "2.30.4-1+cuda13.2")])
    + _rows("cuda_nccl", "nccl-13.3-pin", [("13.3", "2.31.2-1+cuda13.3")])
    + _rows("cuda_nccl", "nccl-13.4-rpm", [("13.4", "2.32.3-1+cuda13.4")])
    + _rows("cc_first_cuda", "cuda-gpus", [("6.0", "8.0"), ("6.1", "8.0")])
    + _rows("cc_first_cuda", "cuda-9-10-table", [("7.0", "9.0"), ("7.5", "10.0")])
    + _rows("cc_first_cuda", "forum-276955", [("8.0", "11.0"), ("8.6", "11.1"), ("8.9", "11.8"), ("9.0", "11.8")])
    + _rows("cc_first_cuda", "blackwell-guide", [("10.0", "12.8"), ("12.0", "12.8")])
    + _rows("cc_first_cuda", "mig-deploy-620", [("10.3", "12.9")])
    + _rows("cc_last_cuda", "cuda-13.0-rn-arch", [("6.0", "12.9"), ("6.1", "12.9"), ("7.0", "12.9")])
    + _rows("arch_last_branch", "dc-arch-matrix", [("Maxwell", "580"), ("Pascal", "580"), ("Volta", "580")])
    + _rows("branch", "aks-gpu-113", [("515", {"type": "PB", "eol": True}), ("520", {"type": "NFB", "eol": True}),
                                      ("525", {"type": "PB", "eol": True}), ("560", {"type": "NFB", "eol": True}),
                                      ("565", {"type": "NFB", "eol": True}), ("575", {"type": "NFB", "eol": True})])
    + _rows("branch", "dc-supported-580", [("530", {"type": "", "eol": True}), ("555", {"type": "", "eol": True}),
                                           ("570", {"type": "PB", "eol": "2026-02"})])
    + _rows("branch", "unix-drivers-page", [("545", {"type": "NFB", "eol": True}), ("550", {"type": "PB", "eol": True})])
    + _rows("branch", "dc-supported-615", [("535", {"type": "LTSB", "eol": "2026-06"}),
                                           ("610", {"type": "NFB", "eol": "2026-08"})])
    + _rows("branch", "forum-current-releases", [("590", {"type": "NFB", "eol": True})])
    + _rows("branch", "dc-supported-620", [("580", {"type": "LTSB", "eol": "2028-06"}),
                                           ("595", {"type": "PB", "eol": "2027-03"}),
                                           ("620", {"type": "LTSB", "eol": "2029-09"})])
    + _rows("branch_max_cuda", "cuda-rn-13.2.2", [
        ("515", "11.7"), ("520", "11.8"), ("525", "12.0"), ("530", "12.1"), ("535", "12.2"), ("545", "12.3"),
        ("550", "12.4"), ("555", "12.5"), ("560", "12.6"), ("565", "12.6"), ("570", "12.8"), ("575", "12.9"),
        ("580", "13.0"), ("590", "13.1"), ("595", "13.2")])
    + _rows("branch_max_cuda", "redist-610.57.04", [("610", "13.3")])
    + _rows("branch_max_cuda", "redist-620.70.06", [("620", "13.5")])
    + _rows("branch_releases", "keylase", sorted(_KEYLASE_RELEASES.items()))
    + _rows("branch_releases", "redist-620.70.06", [("620", ["620.70.06"])])
    + _rows("driver_release", "dc-rn-535.216.03", [("535.216.03", "535")])
    + _rows("driver_release", "debian-madison", [("535.261.03", "535")])
    + _rows("branch_recommended", "dc-rn-535.216.03", [("535", "535.216.03")])
    + [("gpu_cc", key, cc, source) for source, by_cc in _CC_BY_SOURCE.items()
       for cc, keys in by_cc.items() for key in keys]
    + [("gpu_min_driver", key, driver, "mig-deploy-620") for driver, keys in _MIG_MIN_DRIVER.items() for key in keys]
    + _rows("repo", "repo-pattern", [
        ("ubuntu20.04", {"distro": "ubuntu2004", "family": "apt", "graph": "ubuntu"}),
        ("ubuntu22.04", {"distro": "ubuntu2204", "family": "apt", "graph": "ubuntu"}),
        ("ubuntu24.04", {"distro": "ubuntu2404", "family": "apt", "graph": "ubuntu"}),
        ("debian11", {"distro": "debian11", "family": "apt", "graph": "debian"}),
        ("debian12", {"distro": "debian12", "family": "apt", "graph": "debian"}),
        ("rhel8", {"distro": "rhel8", "family": "dnf", "graph": "rhel"}),
        ("rhel9", {"distro": "rhel9", "family": "dnf", "graph": "rhel"})])
    # Newer repositories: driver package names not read for them (the plan says so).
    + _rows("repo", "gdc-ubuntu2604", [("ubuntu26.04", {"distro": "ubuntu2604", "family": "apt", "graph": "ubuntu",
                                                        "packages_verified": False})])
    + _rows("repo", "debian13-role", [("debian13", {"distro": "debian13", "family": "apt", "graph": "debian",
                                                    "packages_verified": False})])
    + _rows("repo", "gdc-rhel10", [("rhel10", {"distro": "rhel10", "family": "dnf", "graph": "rhel",
                                               "packages_verified": False})])
    + _rows("repo_cuda", "cuda13-drops-ubuntu2004", [("ubuntu2004", {"first": None, "last": "12.9"})])
    + _rows("repo_cuda", "ubuntu2404-listing", [("ubuntu2404", {"first": "12.5", "last": None})])
    + _rows("repo_cuda", "debian12-listing", [("debian12", {"first": "12.3", "last": None})])
    + _rows("repo_branch", "ubuntu2204-r535", [("ubuntu2204 R535", True)])
    + _rows("repo_branch", "ubuntu2204-r550", [("ubuntu2204 R550", True)])
    + _rows("repo_branch", "ubuntu2204-r570", [("ubuntu2204 R570", True)])
    + _rows("repo_branch", "ubuntu2204-r580", [("ubuntu2204 R580", True)])
    + _rows("apt_unversioned", "driver-guide-590-renames", [("ubuntu", "590")])
    + _rows("repo_branch", "ubuntu2204-r595", [("ubuntu2204 R595", True)])
    + _rows("repo_branch", "ubuntu2204-r610", [("ubuntu2204 R610", True)])
    + _rows("repo_branch", "ubuntu2404-r570", [("ubuntu2404 R570", True)])
    + _rows("repo_branch", "ubuntu2404-r580", [("ubuntu2404 R580", True)])
    + _rows("repo_branch", "ubuntu2404-r595", [("ubuntu2404 R595", True)])
    + _rows("repo_branch", "debian12-driver-policy", [("debian12 R545", True), ("debian12 R550", True),
                                                      ("debian12 R555", True), ("debian12 R560", True)])
    + _rows("repo_branch", "debian12-r570", [("debian12 R570", True)])
    + _rows("repo_branch", "debian12-r580", [("debian12 R580", True)])
    + _rows("repo_branch", "debian13-role", [("debian13 R595", True)])
    + _rows("repo_branch", "ubuntu2604-r595", [("ubuntu2604 R595", True)])
    + _rows("repo_branch", "ubuntu2604-r610", [("ubuntu2604 R610", True)])
    + _rows("repo_branch", "rhel9-module-list", [("rhel9 R535", True)])
    + _rows("repo_branch", "driver-guide-rhel-580", [("rhel9 R580", True)])
    + _rows("nvlink_subnet_manager", "deepops-dgx-os7", [("b200", True), ("b300", True)])
    + _rows("nvlink_subnet_manager", "fm-guide-2.3", [("b100", True)])
    + _rows("imex_domain", "deepops-dgx-os7", [("gb200", True), ("gb300", True)])
    + _rows("dcgm_release", "al2023-relnotes-20260706", [("dnf", "4.6.0-1")])
    + _rows("dcgm_release", "dcgm-apt-epoch", [("apt", "1:4.6.0-1")])
    + _rows("kernel_modules", "driver-guide-620", [("proprietary_removed_from_branch", "620")])
    + _rows("os_python", "os-python-ubuntu2004", [("ubuntu20.04", "3.8")])
    + _rows("os_python", "os-python-ubuntu2204", [("ubuntu22.04", "3.10")])
    + _rows("os_python", "os-python-ubuntu2404", [("ubuntu24.04", "3.12")])
    + _rows("os_python", "os-python-debian12", [("debian12", "3.11")])
    + _rows("os_python", "os-python-rhel9", [("rhel9", "3.9")])
    + _rows("supported_os", "cuda-guide-12.8-distros", [
        ("ubuntu20.04", {"name": "Ubuntu 20.04 LTS", "os_family": "Debian", "package_manager": "apt",
                         "ansible": ["Ubuntu 20.04"]}),
        ("ubuntu22.04", {"name": "Ubuntu 22.04 LTS", "os_family": "Debian", "package_manager": "apt",
                         "ansible": ["Ubuntu 22.04"]}),
        ("ubuntu24.04", {"name": "Ubuntu 24.04 LTS", "os_family": "Debian", "package_manager": "apt",
                         "ansible": ["Ubuntu 24.04"]}),
        ("debian12", {"name": "Debian 12", "os_family": "Debian", "package_manager": "apt", "ansible": ["Debian 12"]}),
        ("rhel9", {"name": "RHEL 9 / Rocky Linux 9", "os_family": "RedHat", "package_manager": "dnf",
                   "ansible": ["RedHat 9", "Rocky 9"]})])
    + _rows("refused_os", "ansible-core-2.17-targets", [
        ("rhel8", "its python3 is 3.6, which ansible-core 2.17 and later cannot run modules with; use RHEL/Rocky 9, "
                  "or install python3.9+ on the nodes and set ansible_python_interpreter (not tested by gpufleet)")])
    + _rows("refused_os", "gpufleet-roles-os", [
        ("debian11", "the stack roles do not handle it (no Python row, no role vars); use Debian 12"),
        ("debian13", "NVIDIA's driver package names for it were not read and the stack roles do not handle it; "
                     "use Debian 12"),
        ("ubuntu26.04", "NVIDIA's driver package names for it were not read and the stack roles do not handle it; "
                        "use Ubuntu 24.04"),
        ("rhel10", "NVIDIA's RHEL 10 method (no driver module streams, 620 guide) is not sourced here and the driver "
                   "role installs module streams; use RHEL/Rocky 9")])
)


def rows(kind):
    """{key: value} of one kind of row."""
    return {key: value for k, key, value, _source in FACTS if k == kind}


def source_of(kind, key):
    """The SOURCES entry a row was read in."""
    return next(SOURCES[s] for k, row_key, _v, s in FACTS if k == kind and row_key == key)


def cite(kind, key):
    """One line naming a row's source and the date it was read."""
    return cite_source(next(s for k, row_key, _v, s in FACTS if k == kind and row_key == key))


def cite_source(name):
    """One line naming a SOURCES entry and the date it was read."""
    src = SOURCES[name]
    return "%s (%s; read %s)" % (src["document"], src["url"], src["read"])
