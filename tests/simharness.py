"""What the integration tests share about the simulated cluster: bring one up, reach it, tear it down.

A module of its own name (not conftest) so a test imports it unambiguously: several conftest.py
files live under tests/, and `from conftest import` resolves to whichever was imported last.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SIM_DIR = REPO_ROOT / "tests" / "sim"
SIMCLUSTER = SIM_DIR / "simcluster.py"
VENV_BIN = Path(sys.executable).parent
sys.path.insert(0, str(SIM_DIR))

from gfsim import cluster as simlib  # noqa: E402
from gfsim import network as simnet  # noqa: E402
from gfsim import util as simutil  # noqa: E402

_SIM_LOCK = None


def hold_sim_lock() -> None:
    """Take the host's simulator lock for the rest of this test session (once): no other test run,
    molecule or demo bring-up shares the simulator, or the CPUs the verdicts are judged on, with it."""
    global _SIM_LOCK  # pylint: disable=global-statement
    if _SIM_LOCK is None and not os.environ.get(simutil.SIM_LOCK_HELD_ENV):
        _SIM_LOCK = simutil.acquire_sim_lock(f"pytest {' '.join(sys.argv[1:])[:200]}")


def sim_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the simulated cluster needs root (network namespaces, overlay mounts, systemd-nspawn)"
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn is missing (apt-get install systemd-container)"
    if shutil.which("debootstrap") is None and not simlib.image.ROOTFS.exists():
        return "debootstrap is missing (apt-get install debootstrap) and no cached tree exists"
    return None


class SimCluster:
    """A running simulated cluster, as the tests see it."""

    def __init__(self, name: str, state: dict):
        self.name = name
        self.state = state
        self.inventory = Path(simlib.state_dir(name) / "inventory.yml")
        self.nodes = list(state["nodes"])

    def _cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SIMCLUSTER), *args], capture_output=True, text=True,
                              check=True, timeout=120)

    def fault(self, node: str, fault: str) -> None:
        self._cli("fault", "--name", self.name, node, fault)

    def clear(self, node: str, fault: str | None = None) -> None:
        self._cli("clear", "--name", self.name, node, *([fault] if fault else []))

    def ssh(self, node: str, cmd: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return simlib.ssh(self.state, node, cmd, timeout=timeout)

    def wait_rebooted(self, node: str, boot_id_before: str, limit_s: float = 300) -> None:
        """Until the node answers with another boot id and its systemd is up. The limit only bounds a
        hang; nothing is judged on how long it took."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                now = self.ssh(node, "cat /proc/sys/kernel/random/boot_id; systemctl is-system-running --wait",
                               timeout=60)
            except subprocess.TimeoutExpired:
                continue
            lines = now.stdout.split()
            if lines and lines[0] != boot_id_before.strip() and lines[-1] in ("running", "degraded"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{node} did not come back from its reboot within {limit_s:.0f}s")

    def ip(self, node: str) -> str:
        return self.state["nodes"][node]["ip"]

    def env(self) -> dict:
        env = dict(os.environ)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env["ANSIBLE_CONFIG"] = str(REPO_ROOT / "ansible.cfg")
        return env

    def playbook(self, path, *args: str, timeout: int = 1800, env: dict | None = None) -> subprocess.CompletedProcess:
        """ansible-playbook against this cluster; ``env`` adds to (or overrides) the cluster's environment."""
        return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(path), *args],
                              cwd=REPO_ROOT, env={**self.env(), **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def ansible(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(VENV_BIN / "ansible"), "-i", str(self.inventory), *args],
                              cwd=REPO_ROOT, env=self.env(), capture_output=True, text=True, timeout=timeout, check=False)


def bring_up(name: str, subnet: str, nodes: int, *, profile=(), preinstall=(), faults=(), captures=(),
             os: str | None = None, seed: Path | None = None, inventory: Path | None = None) -> SimCluster:
    hold_sim_lock()
    args = ["up", "--name", name, "--subnet", subnet, "--nodes", str(nodes)]
    if seed:
        args += ["--seed", str(seed)]
    if inventory:
        args += ["--inventory", str(inventory)]
    if os:
        args += ["--os", os]
    for p in profile:
        args += ["--profile", p]
    for p in preinstall:
        args += ["--preinstall", p]
    for f in faults:
        args += ["--fault", f]
    for c in captures:
        args += ["--capture", c]
    proc = subprocess.run([sys.executable, str(SIMCLUSTER), *args], capture_output=True, text=True, timeout=1200, check=False,
                          cwd=REPO_ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"simcluster up {name} failed rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return SimCluster(name, simlib.load_state(name))


def tear_down(name: str) -> None:
    subprocess.run([sys.executable, str(SIMCLUSTER), "down", "--name", name], capture_output=True, text=True,
                   timeout=300, check=False)


def free_subnet() -> str:
    """A /24 in 10.200.20-99 that no interface holds (10.200.0-19 are for named/dev clusters)."""
    for third in range(20, 100):
        subnet = f"10.200.{third}.0/24"
        if simnet.address_in_use(str(ipaddress.ip_network(subnet).network_address + 1)) is None:
            return subnet
    raise RuntimeError("no free 10.200.x.0/24 subnet for a simulated cluster")


def recap(output: str) -> dict:
    """PLAY RECAP counters per host, summed over the plays of the run."""
    totals: dict = {}
    for host, fields in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M):
        for key, value in re.findall(r"(\w+)=(\d+)", fields):
            totals.setdefault(host, {}).setdefault(key, 0)
            totals[host][key] += int(value)
    return totals


@contextmanager
def cluster(name: str, nodes: int, **options):
    """A simulated cluster for one module: skipped (saying why) where it cannot run, always torn down."""
    reason = sim_skip_reason()
    if reason:
        pytest.skip(reason)
    subnet = options.pop("subnet", None) or free_subnet()
    try:
        yield bring_up(name, subnet, nodes, **options)
    finally:
        tear_down(name)


def changed_on_nodes(output: str) -> dict:
    """{host: [task names]} of the tasks a run changed on the nodes themselves.

    Tasks delegated to the controller (reports written under the run's artifacts) are not counted:
    they change the controller's files, not the node.
    """
    changed: dict = {}
    seen: set = set()  # hosts with any changed line, delegated or not
    task = None
    for line in output.splitlines():
        header = re.match(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \**$", line)
        if header:
            task = header.group(1)
            continue
        hit = re.match(r"^changed: \[([^\]\s]+)(?: -> ([^\]]+))?\]", line)
        if hit and task:
            seen.add(hit.group(1))
            if hit.group(2) not in ("localhost", "127.0.0.1"):
                names = changed.setdefault(hit.group(1), [])
                if task not in names:
                    names.append(task)
    # A recap that counts changes this parser did not see means the output format moved under it:
    # an empty answer then would read as "nothing changed".
    unread = [h for h, counts in recap(output).items() if counts.get("changed", 0) > 0 and h not in seen]
    if unread:
        raise ValueError(f"the recap counts changes on {unread}, but no 'changed: [host]' line was read")
    return changed
