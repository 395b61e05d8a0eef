# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Every child gpufleet starts outside a stage run (the mirror's ansible-playbook, pip, apt and dnf; the plan's
ansible-inventory; the refresh's git) dies with gpufleet: a SIGKILL of gpufleet (the OOM killer, a CI runner past
its grace period) leaves none of them running with nobody to read them. A stage run's ansible-playbook has the
fuller path of gpufleet.cancel (its own launcher, which ends Ansible's whole process tree)."""

from __future__ import annotations

import ctypes
import signal
import subprocess

_PR_SET_PDEATHSIG = 1

try:  # resolved before any fork: the child only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: no parent-death signal to ask for
    _PRCTL = None


def die_with_parent() -> None:
    """In the forked child, before exec: the kernel sends SIGTERM when gpufleet's process ends."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def run(argv, check: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run, the child ended with gpufleet (die_with_parent)."""
    return subprocess.run(argv, preexec_fn=die_with_parent, check=check, **kwargs)  # noqa: PLW1509 - before exec
