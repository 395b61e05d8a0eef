"""One node: its overlay root, its files, and its supervised, booted container."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import hardware, util
from .util import STANDINS_DIR, run

SUPERVISOR = Path(__file__).with_name("supervisor.py")
WHEELS_MOUNT = "/opt/gpufleet-sim/wheels"
STANDINS_MOUNT = "/usr/lib/gpufleet-sim/standins"
MIRROR_KEYRING = "/usr/share/keyrings/gpufleet-sim-debian-mirror.gpg"


class NodePaths:
    def __init__(self, state_dir: Path, node: str):
        self.root = state_dir / "nodes" / node
        self.upper = self.root / "upper"
        self.work = self.root / "work"
        self.merged = self.root / "merged"
        self.log = self.root / "console.log"
        self.nspawn_pid = self.root / "nspawn.pid"


def is_mounted(path: Path) -> bool:
    return run(["findmnt", "-rn", "--mountpoint", str(path)], check=False, capture=True).returncode == 0


def mount_overlay(paths: NodePaths, lowers: list[Path]) -> None:
    for d in (paths.upper, paths.work, paths.merged):
        d.mkdir(parents=True, exist_ok=True)
    if is_mounted(paths.merged):
        return
    lowerdir = ":".join(str(p) for p in lowers)
    run(["mount", "-t", "overlay", f"gfsim-{paths.root.name}", "-o",
         f"lowerdir={lowerdir},upperdir={paths.upper},workdir={paths.work}", paths.merged])


def os_release(os_info: dict) -> str:
    """/etc/os-release for the OS the node claims to be (from the repository manifest's `os`)."""
    if os_info["id"] == "ubuntu":
        return (f'PRETTY_NAME="{os_info["pretty_name"]}"\nNAME="Ubuntu"\nVERSION_ID="{os_info["version_id"]}"\n'
                f'VERSION="{os_info["version"]}"\n'
                f'VERSION_CODENAME={os_info["codename"]}\nID=ubuntu\nID_LIKE=debian\n'
                'HOME_URL="https://www.ubuntu.com/"\nSUPPORT_URL="https://help.ubuntu.com/"\n'
                'BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
                f'UBUNTU_CODENAME={os_info["codename"]}\n')
    return ""   # Debian: the tree's own os-release is the truth


def write_os_identity(merged: Path, os_info: dict) -> None:
    """Make the Debian 12 tree claim another OS: os-release, lsb-release, issue. Only what
    facts and tools read; the packages stay Debian's (see docs/simulated-cluster.md)."""
    text = os_release(os_info)
    if not text:
        return
    for rel in ("etc/os-release", "usr/lib/os-release"):
        path = merged / rel
        if path.is_symlink() or path.exists():
            path.unlink()
        path.write_text(text)
    (merged / "etc/lsb-release").write_text(
        f'DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE={os_info["version_id"]}\nDISTRIB_CODENAME={os_info["codename"]}\n'
        f'DISTRIB_DESCRIPTION="{os_info["pretty_name"]}"\n')
    (merged / "etc/issue").write_text(f"{os_info['pretty_name']} \\n \\l\n\n")


def write_node_files(merged: Path, *, node: str, hosts: str, pubkey: str, mirror_url: str,
                     keyring: bytes, hw: dict, faults: list[str], os_info: dict) -> None:
    """Everything that makes this tree this node; written into its upper layer."""
    (merged / "etc/hostname").write_text(node + "\n")
    (merged / "etc/hosts").write_text(hosts)
    mid = merged / "etc/machine-id"
    if not mid.read_text().strip():
        mid.write_text(secrets.token_hex(16) + "\n")
    hostkey = merged / "etc/ssh/ssh_host_ed25519_key"
    if not hostkey.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{node}", "-f", hostkey])
    ssh_dir = merged / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(pubkey)
    (ssh_dir / "authorized_keys").chmod(0o600)
    (merged / MIRROR_KEYRING.lstrip("/")).write_bytes(keyring)
    write_os_identity(merged, os_info)
    sources_name = "ubuntu.sources" if os_info["id"] == "ubuntu" else "debian.sources"
    (merged / "etc/apt/sources.list.d" / sources_name).write_text(
        "Types: deb\n"
        f"URIs: {mirror_url}\n"
        f"Suites: {os_info['codename']}\nComponents: main\n"
        f"Signed-By: {MIRROR_KEYRING}\n")
    if not (merged / hardware.NODE_ETC / "node.json").exists():
        hardware.write_node_hardware(merged, node, hw, faults)


def nspawn_command(paths: NodePaths, node: str, netns: str, wheels: Path) -> list[str]:
    return ["systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit",
            f"--network-namespace-path=/run/netns/{netns}", "--directory", str(paths.merged),
            f"--machine={node}", "--hostname", node, "--console=read-only",
            "--resolv-conf=off", "--timezone=off", "--link-journal=no",
            f"--bind-ro={STANDINS_DIR}:{STANDINS_MOUNT}", f"--bind-ro={wheels}:{WHEELS_MOUNT}"]


def start_supervisor(paths: NodePaths, command: list[str]) -> tuple[int, str]:
    with open(paths.log, "ab") as log:
        proc = subprocess.Popen([sys.executable, str(SUPERVISOR), str(paths.nspawn_pid), str(paths.log), "--",
                                 *command], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    return proc.pid, util.proc_start_time(proc.pid)


def nspawn_pid(paths: NodePaths) -> tuple[int, str | None] | None:
    try:
        pid = int(paths.nspawn_pid.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid, util.proc_start_time(pid)


def wait_port(ip: str, port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((ip, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def ssh_command(key: Path, ip: str, command: str, known_hosts: Path, connect_timeout: int = 5) -> list[str]:
    """ssh to a node, checking its host key against the sim's known_hosts (written from the keys
    generated at bring-up), as Ansible does through the inventory."""
    return ["ssh", "-i", str(key), "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}",
            f"root@{ip}", command]


def wait_ssh(key: Path, ip: str, timeout: float, known_hosts: Path) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if wait_port(ip, 22, deadline):
            proc = subprocess.run(ssh_command(key, ip, "true", known_hosts), capture_output=True, text=True,
                                  timeout=30, check=False)
            if proc.returncode == 0:
                return
            last = proc.stderr
        time.sleep(0.2)
    raise TimeoutError(f"{ip}: no SSH login within {timeout:.0f}s {last.strip()}")
