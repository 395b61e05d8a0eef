# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""NVIDIA driver branch facts for the solver: releases, branch type, end of life, the release the
plan installs and the newest CUDA each runs (read from the sourced table, compat_facts.FACTS), and
the kernel-module flavour and fabric manager rules."""

from __future__ import annotations

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_facts import AS_OF, cite, rows
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_facts import AS_OF, cite, rows  # type: ignore


def _vkey(text):
    return tuple(int(p) for p in str(text).split("."))


def _ended(eol):
    """True when a branch's end of life (True: ended without a published date; "YYYY-MM") has come
    by the date the table was reviewed (compat_facts.AS_OF)."""
    return eol is True or (isinstance(eol, str) and eol <= AS_OF[:7])


def _branches():
    """Driver branch -> versions (ascending), recommended (the release the plan installs: the branch's
    newest unless a release note names one), max_cuda (full features), type (LTSB, PB, NFB or "" where
    no source named it), eol (True once ended as of AS_OF), eol_date ("YYYY-MM" where published)."""
    releases = {b: list(v) for b, v in rows("branch_releases").items()}
    for version, branch in rows("driver_release").items():
        releases.setdefault(branch, []).append(version)
    facts, max_cuda, recommended = rows("branch"), rows("branch_max_cuda"), rows("branch_recommended")
    out = {}
    for branch in sorted(facts, key=int):
        versions = sorted(releases[branch], key=_vkey)
        eol = facts[branch]["eol"]
        out[branch] = {
            "versions": versions,
            "recommended": recommended.get(branch, versions[-1]),
            "max_cuda": max_cuda[branch],
            "type": facts[branch]["type"],
            "eol": _ended(eol),
            "eol_date": eol if isinstance(eol, str) else None,
            "source": "; ".join(["type and end of life: " + cite("branch", branch),
                                 "releases: " + cite("branch_releases", branch),
                                 "max CUDA: " + cite("branch_max_cuda", branch)]),
        }
    return out


DRIVER_BRANCHES = _branches()

# The last branch that supports an architecture (newer branches dropped it), and the minimum
# driver NVIDIA lists per GPU model (gpu_models key).
LAST_BRANCH_FOR_ARCH = rows("arch_last_branch")
GPU_MIN_DRIVER = rows("gpu_min_driver")

# Open GPU kernel modules: shipped from R515; Turing and newer only; Maxwell,
# Pascal and Volta need the proprietary flavour; default flavour from R560;
# Grace Hopper and Blackwell support only the open flavour; from R620 NVIDIA ships only the open flavour.
KERNEL_MODULES = {
    "open_first_branch": "515",
    "open_min_cc": "7.5",
    "open_default_from_branch": "560",
    # Blackwell is every compute capability from 10.0; Grace Hopper shares 9.0 with H100,
    # so it is named by model key (gpu_models.MODELS).
    "open_required_min_cc": "10.0",
    "open_required_models": ["gh200", "gh200-144g"],
    "proprietary_removed_from_branch": rows("kernel_modules")["proprietary_removed_from_branch"],
    "source": ("NVIDIA Driver Installation Guide, Kernel Modules (docs.nvidia.com/datacenter/tesla/"
               "driver-installation-guide/kernel-modules.html): 'Starting in the 515 driver release series, two "
               "flavors ... Proprietary ... required for older GPUs from the Maxwell, Pascal, or Volta "
               "architectures ... Open-source ... only for Turing and newer architectures ... Starting in the 560 "
               "driver release series, the open kernel module flavor is the default'; open required: NVIDIA "
               "technical blog 'NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules' (2024): 'For "
               "cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the "
               "open-source GPU kernel modules. The proprietary drivers are unsupported on these platforms.'; "
               "proprietary flavour removed: " + cite("kernel_modules", "proprietary_removed_from_branch")),
}

FABRIC_MANAGER = {
    "service": "nvidia-fabricmanager",
    "dnf": {"module_profile": "nvidia-driver:{B}/fm"},
    "version_rule": "Fabric Manager version must equal the driver version exactly; install only on NVSwitch systems",
    "source": "NVIDIA/yum-packaging-fabric-manager README ('the version of fabricmanager must match the NVIDIA "
              "driver installed'; 'dnf module install nvidia-driver:${stream}/fm'); NVIDIA data-center driver "
              "release notes ('Fabric Manager: 535.216.03'); NVIDIA/deepops ubuntu-22.04 vars",
}
