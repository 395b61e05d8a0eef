"""The cached Debian 12 tree every node's overlay sits on, and the wheel directory.

Both live under CACHE_ROOT and are built once, under a lock, into a staging
directory that is renamed into place only when complete, so an interrupted
build never leaves a half tree that later runs would trust.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import util
from .util import CACHE_ROOT, DEBIAN_SUITE, log, run

# Bump when the tree's contents change: a new directory is built and clusters
# still running on the old one keep their lower layer.
IMAGE_VERSION = "4"
ROOTFS = CACHE_ROOT / f"rootfs-v{IMAGE_VERSION}"
WHEELS = CACHE_ROOT / "wheels"
# The pytorch role installs numpy at an exact version (gpufleet_pytorch_numpy_version): the one the wheels hold.
NUMPY_VERSION = "2.4.6"
LOCK = CACHE_ROOT / ".build.lock"

# Preinstalled: what a booted, SSH-reachable, Ansible-manageable node needs,
# plus heavy packages the roles install (they are also in the local mirror).
BASE_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt",
    "iproute2", "procps", "kmod", "gnupg", "python3-venv", "python3-pip",
]

BOOT_UNIT = """\
[Unit]
Description=gpufleet simulator: apply pending GPU settings at boot (like the driver does)
DefaultDependencies=no
After=local-fs.target
Before=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/bin/python3 /usr/lib/gpufleet-sim/standins/nvidia_smi.py --gpufleet-sim-boot
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
"""

IBSTAT_HOOK = (
    'DPkg::Post-Invoke { "if [ -e /usr/sbin/ibstat.distrib ]; then '
    'ln -sfn /usr/lib/gpufleet-sim/standins/ibstat /usr/sbin/ibstat; '
    'elif [ -L /usr/sbin/ibstat ]; then rm -f /usr/sbin/ibstat; fi"; };\n'
)

SSHD_CONFIG = """\
# gpufleet simulator: one host key per node (generated at bring-up), key login only.
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
MaxStartups 100:30:200
MaxSessions 100
"""


def nspawn_run(root: Path, script: str, *, capture=False, bind_ro=()) -> subprocess.CompletedProcess:
    """Run a shell script inside the tree (not booted), on the host network.

    nspawn mounts /proc, /sys and /dev itself and removes them on exit, so no
    chroot mounts can leak."""
    cmd = ["systemd-nspawn", "-q", "--register=no", "--keep-unit", "-D", str(root),
           "--setenv=DEBIAN_FRONTEND=noninteractive"]
    for src, dst in bind_ro:
        cmd.append(f"--bind-ro={src}:{dst}")
    cmd += ["/bin/sh", "-ec", script]
    return run(cmd, capture=capture)


def _remove_tree(path: Path) -> None:
    if not path.exists():
        return
    # debootstrap mounts proc/sys inside its target; a killed build may leave them.
    mounts = run(["findmnt", "-rn", "-o", "TARGET"], capture=True).stdout.split()
    for target in sorted((m for m in mounts if m.startswith(str(path) + "/")), reverse=True):
        run(["umount", "-l", target], check=False)
    shutil.rmtree(path)


def build_rootfs() -> Path:
    """Build (once) the Debian tree: debootstrap minbase + the base packages."""
    if (ROOTFS / ".gpufleet-complete").exists():
        return ROOTFS
    with util.file_lock(LOCK):
        if (ROOTFS / ".gpufleet-complete").exists():
            return ROOTFS
        staging = CACHE_ROOT / f"rootfs-v{IMAGE_VERSION}.building"
        _remove_tree(staging)
        mirror = util.debian_mirror_uri()
        log(f"building the Debian {DEBIAN_SUITE} tree with debootstrap from {mirror} (once)")
        run(["debootstrap", "--variant=minbase", DEBIAN_SUITE, staging, mirror])
        nspawn_run(staging, "apt-get update -qq && apt-get install -y -qq --no-install-recommends "
                   + " ".join(BASE_PACKAGES) + " >/dev/null")
        _configure_tree(staging)
        nspawn_run(staging, "apt-get clean")
        (staging / ".gpufleet-complete").write_text(IMAGE_VERSION + "\n")
        os.rename(staging, ROOTFS)
    return ROOTFS


def _configure_tree(root: Path) -> None:
    # Each node gets its own host key at bring-up; the package's shared keys go.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/ssh/sshd_config.d/gpufleet-sim.conf").write_text(SSHD_CONFIG)
    # Each node writes its own machine-id at bring-up.
    (root / "etc/machine-id").write_text("")
    # Stand-in programs are bound read-only from the repository at boot; the
    # directory itself holds what the driver package installs (driver_version).
    (root / "usr/lib/gpufleet-sim/standins").mkdir(parents=True, exist_ok=True)
    (root / "etc/gpufleet-sim").mkdir(parents=True, exist_ok=True)
    (root / "opt/gpufleet-sim/wheels").mkdir(parents=True, exist_ok=True)
    unit = root / "etc/systemd/system/gpufleet-sim-boot.service"
    unit.write_text(BOOT_UNIT)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "gpufleet-sim-boot.service"
    if not link.is_symlink():
        link.symlink_to("/etc/systemd/system/gpufleet-sim-boot.service")
    # ibstat appears when infiniband-diags is installed, as on a real node, but
    # runs the stand-in: the package's binary is diverted aside and a dpkg hook
    # points /usr/sbin/ibstat at the stand-in whenever the package is present.
    nspawn_run(root, "dpkg-divert --local --rename --divert /usr/sbin/ibstat.distrib --add /usr/sbin/ibstat")
    (root / "etc/apt/apt.conf.d/99gpufleet-sim").write_text(IBSTAT_HOOK)
    # Nothing in a node may reach a real mirror: sources are written per cluster.
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    # Units that only make sense on hardware would fail and turn the node "degraded".
    for unit_name in ("systemd-timesyncd.service", "getty@tty1.service"):
        (root / f"etc/systemd/system/{unit_name}").unlink(missing_ok=True)
        (root / f"etc/systemd/system/{unit_name}").symlink_to("/dev/null")


# A machine's own wheel directory, looked in before any index (besides the ones PIP_FIND_LINKS names).
LOCAL_WHEELS = Path("/opt/wheels")
TORCH_VERSION = "2.13.0"
# The build the nodes run: PyPI's torch 2.13.0 is the CUDA build, so the pin carries the local label.
TORCH_CPU_PIN = f"torch=={TORCH_VERSION}+cpu"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CPU_WHEEL_GLOB = f"torch-{TORCH_VERSION}+cpu-cp311-*.whl"
# The nodes run Debian 12's python3.11, so wheels are chosen for cp311 on its platforms.
_PIP_TARGET = ["--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
               "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform", "any"]


def local_wheel_dirs(env: dict, opt_wheels: Path | None = None) -> list[Path]:
    """The local wheel directories pip is pointed at: /opt/wheels and the local ones in PIP_FIND_LINKS."""
    opt_wheels = opt_wheels or LOCAL_WHEELS
    links = [link[len("file://"):] if link.startswith("file://") else link for link in env.get("PIP_FIND_LINKS", "").split()]
    dirs = [opt_wheels] + [Path(link) for link in links if "://" not in link]
    return [d for i, d in enumerate(dirs) if d.is_dir() and d not in dirs[:i]]


def torch_wheel_plan(staging: Path, env: dict, opt_wheels: Path | None = None) -> tuple[str, list[list[str]], dict]:
    """Where the torch CPU wheel comes from, and the pip commands that collect it with its dependencies.

    A local wheel directory that holds the CPU build wins; otherwise torch alone comes from PyTorch's
    CPU wheel index and its dependencies from the configured index (PyPI). Either way the pin names
    the +cpu build, so a CUDA build can never stand in for it. Returns (source, argvs, env).
    """
    pip = [sys.executable, "-m", "pip", "download", "-q", *_PIP_TARGET, "-d", str(staging)]
    env = dict(env)
    dirs = local_wheel_dirs(env, opt_wheels)
    if dirs:  # pip looks in every local directory, /opt/wheels too, besides what PIP_FIND_LINKS already names
        env["PIP_FIND_LINKS"] = " ".join(dict.fromkeys(env.get("PIP_FIND_LINKS", "").split() + [str(d) for d in dirs]))
    rest = [TORCH_CPU_PIN, f"numpy=={NUMPY_VERSION}"]
    holding = [d for d in dirs if list(d.glob(TORCH_CPU_WHEEL_GLOB))]
    if holding:
        return f"the local wheel directory {holding[0]}", [pip + rest], env
    from_index = pip + ["--no-deps", "--index-url", TORCH_CPU_INDEX, TORCH_CPU_PIN]
    return f"PyTorch's CPU wheel index {TORCH_CPU_INDEX}", [from_index, pip + ["--find-links", str(staging)] + rest], env


def not_collected(staging: Path, env: dict, source: str, why: str, opt_wheels: Path | None = None) -> RuntimeError:
    """The error when the CPU build was not collected: both places looked in, and what would work."""
    opt_wheels = opt_wheels or LOCAL_WHEELS
    dirs = (", ".join(str(d) for d in local_wheel_dirs(env, opt_wheels))
            or f"none ({opt_wheels} is absent, PIP_FIND_LINKS names no local directory)")
    return RuntimeError(
        f"no torch {TORCH_VERSION}+cpu wheel (cp311) for the simulated nodes was collected in {staging}: {why}. "
        f"Looked in the local wheel directories [{dirs}] for {TORCH_CPU_WHEEL_GLOB}, then "
        + (f"asked PyTorch's CPU wheel index {TORCH_CPU_INDEX}" if source.startswith("PyTorch") else
           f"took it from {source} (PyTorch's CPU wheel index {TORCH_CPU_INDEX} was not needed)")
        + f". Put the wheel in {opt_wheels} or a directory named in PIP_FIND_LINKS, or let this machine reach {TORCH_CPU_INDEX}.")


def build_wheels() -> Path:
    """torch 2.13.0+cpu (cp311) with every dependency and numpy, as a wheel directory."""
    if (WHEELS / ".gpufleet-complete").exists():
        return WHEELS
    with util.file_lock(CACHE_ROOT / ".wheels.lock"):
        if (WHEELS / ".gpufleet-complete").exists():
            return WHEELS
        staging = CACHE_ROOT / "wheels.building"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        source, commands, env = torch_wheel_plan(staging, dict(os.environ))
        log(f"collecting the torch CPU wheel from {source}, and its dependencies (once)")
        try:
            for argv in commands:
                run(argv, env=env)
        except RuntimeError as exc:
            raise not_collected(staging, env, source, "pip failed: " + " ".join(str(exc).split())[-600:]) from exc
        if not list(staging.glob(TORCH_CPU_WHEEL_GLOB)):
            raise not_collected(staging, env, source, "pip finished without it")
        (staging / ".gpufleet-complete").write_text(f"torch from {source}\n")
        shutil.rmtree(WHEELS, ignore_errors=True)
        os.rename(staging, WHEELS)
    return WHEELS


def nspawn_run_rw(root: Path, script: str, *, bind=()) -> subprocess.CompletedProcess:
    """Run a script in a throwaway overlay of the tree, so the tree itself stays untouched."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="gfsim-ovl-", dir=CACHE_ROOT) as tmp:
        upper, work, merged = (Path(tmp) / d for d in ("upper", "work", "merged"))
        for d in (upper, work, merged):
            d.mkdir()
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={root},upperdir={upper},workdir={work}", merged])
        try:
            cmd = ["systemd-nspawn", "-q", "--register=no", "--keep-unit", "-D", str(merged),
                   "--setenv=DEBIAN_FRONTEND=noninteractive"]
            cmd += [f"--bind={src}:{dst}" for src, dst in bind]
            return run(cmd + ["/bin/sh", "-ec", script])
        finally:
            run(["umount", merged], check=False)
