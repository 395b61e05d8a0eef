"""Paths, locking and process helpers shared by the simulator modules."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

SIM_DIR = Path(__file__).resolve().parent.parent          # tests/sim
REPO_ROOT = SIM_DIR.parent.parent                          # repository root
STANDINS_DIR = SIM_DIR / "standins"
STATE_ROOT = REPO_ROOT / ".sim"                            # per-cluster state (gitignored)
# The cache lives outside the clone so a second clone starts warm.
CACHE_ROOT = Path(os.environ.get("GPUFLEET_SIM_CACHE", "/var/cache/gpufleet-sim"))
FIXTURES_DIR = Path(os.environ.get("GPUFLEET_FIXTURES", REPO_ROOT / "tests" / "fixtures"))
DEBIAN_SUITE = "bookworm"

VERBOSE = bool(os.environ.get("GPUFLEET_SIM_VERBOSE"))

# One simulator job at a time on this host: two test runs sharing the two CPUs would judge each
# other's load, and two bring-ups could race for names and subnets. Host-wide, not per cache.
SIM_LOCK = Path(os.environ.get("GPUFLEET_SIM_LOCK", "/run/lock/gpufleet-sim.lock"))
# Set by the holder for its children (simcluster.py under pytest or molecule), which then do not
# wait for a lock their own parent holds.
SIM_LOCK_HELD_ENV = "GPUFLEET_SIM_LOCK_HELD"


def log(msg: str) -> None:
    print(f"[simcluster] {msg}", file=sys.stderr, flush=True)


def run(cmd, *, check=True, capture=False, input=None, env=None, cwd=None, timeout=None):
    """Run a command; on failure raise with its output so the caller sees why."""
    if VERBOSE:
        log("$ " + " ".join(shlex.quote(str(c)) for c in cmd))
    proc = subprocess.run(
        [str(c) for c in cmd], input=input, text=True, env=env, cwd=cwd, timeout=timeout,
        stdout=subprocess.PIPE if capture or not VERBOSE else None,
        stderr=subprocess.PIPE if capture or not VERBOSE else None,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"command failed (rc={proc.returncode}): {' '.join(map(str, cmd))}\n"
            f"stdout: {(proc.stdout or '')[-3000:]}\nstderr: {(proc.stderr or '')[-3000:]}")
    return proc


@contextlib.contextmanager
def file_lock(path: Path):
    """Exclusive advisory lock: two concurrent `up`s must not build the cache twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _lock_holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def acquire_sim_lock(purpose: str, say_every_s: float = 60.0):
    """Take the host's simulator lock for the rest of this process (returns the open file, or None
    when a parent already holds it). Waits, saying who holds it, until it is free."""
    if os.environ.get(SIM_LOCK_HELD_ENV):
        return None
    SIM_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fh = open(SIM_LOCK, "a+")  # noqa: SIM115 - held open for the lifetime of the job
    waited_since = time.monotonic()
    said = None
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if said is None or time.monotonic() - said >= say_every_s:
                log(f"waiting for the simulator lock {SIM_LOCK} ({time.monotonic() - waited_since:.0f}s), "
                    f"held by: {_lock_holder(SIM_LOCK)}")
                said = time.monotonic()
            time.sleep(1)
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}: {purpose}\n")
    fh.flush()
    os.environ[SIM_LOCK_HELD_ENV] = str(os.getpid())
    return fh


def release_sim_lock(fh) -> None:
    if fh is None:
        return
    os.environ.pop(SIM_LOCK_HELD_ENV, None)
    with contextlib.suppress(OSError):
        fh.seek(0)
        fh.truncate()
    fcntl.flock(fh, fcntl.LOCK_UN)
    fh.close()


@contextlib.contextmanager
def sim_lock(purpose: str):
    """The simulator lock for the duration of a block (a no-op under a parent that holds it)."""
    fh = acquire_sim_lock(purpose)
    try:
        yield
    finally:
        release_sim_lock(fh)


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, default=None):
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def proc_start_time(pid: int) -> str | None:
    """Start time of a PID (field 22 of /proc/PID/stat), so a recycled PID is never killed."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def pid_alive(pid: int, start_time: str | None) -> bool:
    current = proc_start_time(pid)
    if current is None:
        return False
    if start_time is not None and current != start_time:
        return False
    # A zombie is dead for our purposes; PID 1 here reaps late.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def terminate_pid(pid: int, start_time: str | None, grace: float = 10.0) -> None:
    """SIGTERM the recorded PID, wait, then SIGKILL: only ever the exact process we started."""
    import signal
    if not pid_alive(pid, start_time):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid, start_time):
            return
        time.sleep(0.1)
    if pid_alive(pid, start_time):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for _attempt in range(50):
            if not pid_alive(pid, start_time):
                return
            time.sleep(0.1)


def debian_mirror_uri() -> str:
    """The host's Debian mirror (only the cache build talks to it)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    return "http://deb.debian.org/debian"
