# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""RPM plans (RHEL, Rocky): `dnf download --resolve --installroot` over a private root, indexed with
createrepo_c. RPMs carry NVIDIA's own signatures, which the mirror keeps: nodes keep checking them with
NVIDIA's RPM key (mirrored under keys/upstream/). This path needs dnf on the controller; where there is
none (a Debian or Ubuntu controller) it stops with an error that says so, it never skips the packages.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gpufleet import children
from gpufleet.mirror_apt import sha256_of
from gpufleet.mirror_targets import MirrorError, Target

NOT_HERE = ("dnf is not available on this machine: the plan for {nodes} ({os}) installs RPMs, which gpufleet "
            "mirror downloads with `dnf download --resolve --installroot`; run gpufleet mirror for these nodes on a "
            "RHEL or Rocky machine with dnf and createrepo_c (apt plans can be mirrored here)")


def repo_options(target: Target, root: Path, key: Path) -> list[str]:
    """The private root and the repositories (the CUDA repository and, when given, the OS archive), for the
    nodes' release and architecture; no repository of this machine."""
    options = [f"--installroot={root}", f"--releasever={target.major}", f"--forcearch={target.machine}",
               "--setopt=reposdir=/dev/null", "--setopt=install_weak_deps=False",
               f"--repofrompath=gpufleet-cuda,{target.cuda.url}", "--setopt=gpufleet-cuda.gpgcheck=1",
               f"--setopt=gpufleet-cuda.gpgkey=file://{key}"]
    if target.os_archive and target.os_archive.url:
        options += [f"--repofrompath=gpufleet-os,{target.os_archive.url}", "--setopt=gpufleet-os.gpgcheck=1"]
        if target.os_archive.keyring:
            options.append(f"--setopt=gpufleet-os.gpgkey=file://{target.os_archive.keyring}")
    return options


def dnf_argv(target: Target, root: Path, dest: Path, key: Path, names: list[str]) -> list[str]:
    """One `dnf download` that resolves every dependency from an empty root."""
    return ["dnf", "download", "--resolve", "--alldeps", "-y", f"--destdir={dest}",
            *repo_options(target, root, key), *names]


def rpm_requests(target: Target) -> tuple[list[str], list[str]]:
    """(module streams to enable, package specs): the plan's names at their versions, as the roles ask dnf."""
    stack = target.stack
    streams = [n[1:] for n in stack.driver_names if n.startswith("@")]
    names = [n for n in stack.driver_names if not n.startswith("@")]
    names += [f"{n}-{stack.nvlsm_version}" if stack.nvlsm_version else n for n in stack.nvlsm_names]
    names += list(stack.toolkit_names) + [f"{n}-{stack.nccl_version}" for n in stack.nccl_names]
    names += [f"{n}-{stack.dcgm_version}" for n in stack.dcgm_names]
    return streams, names + list(target.os_packages)


def fetch_rpms(target: Target, work: Path, key: Path) -> list[tuple[Path, str]]:
    """[(rpm file, sha256)] the plan installs with every dependency."""
    if not shutil.which("dnf"):
        raise MirrorError(NOT_HERE.format(nodes=", ".join(target.nodes), os=target.stack.os))
    root, dest = work / "root", work / "rpms"
    dest.mkdir(parents=True, exist_ok=True)
    streams, names = rpm_requests(target)
    for stream in streams:  # dnf hides a module stream's packages until it is enabled (in the private root)
        _run(["dnf", "module", "enable", "-y", *repo_options(target, root, key), stream],
             f"dnf cannot enable the module stream {stream} from {target.cuda.url}")
    _run(dnf_argv(target, root, dest, key, names), f"dnf cannot download {' '.join(names)} from {target.cuda.url}")
    return [(path, sha256_of(path)) for path in sorted(dest.glob("*.rpm"))]


def index_rpm_repo(directory: Path) -> None:
    if not shutil.which("createrepo_c"):
        raise MirrorError("createrepo_c is not installed on this machine; the RPM repository's index is made with it")
    _run(["createrepo_c", "--quiet", str(directory)], f"createrepo_c could not index {directory}")


def _run(argv: list[str], what: str) -> None:
    proc = children.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise MirrorError(f"{what}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
