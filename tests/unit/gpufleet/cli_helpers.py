"""Helpers for running `gpufleet` as a user would: a separate process, from a directory outside the clone,
against local-connection inventories (no simulated cluster needed)."""

import contextlib
import getpass
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[3]


def clean_env(**extra) -> dict:
    """The test process's environment without Ansible settings the developer may have exported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUFLEET_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str
    cwd: Path

    def summary_path(self, artifacts: Path | None = None) -> Path:
        """summary.json: in --artifacts, else where stderr says it went (the fallback for unwritable ones)."""
        if artifacts is not None and (artifacts / "summary.json").is_file():
            return artifacts / "summary.json"
        found = re.search(r"summary: (\S+summary\.json)", self.stderr + self.stdout)
        assert found, f"no summary path in output:\n{self.stdout}\n{self.stderr}"
        path = Path(found.group(1))
        return path if path.is_absolute() else self.cwd / path

    def summary(self, artifacts: Path | None = None) -> dict:
        return json.loads(self.summary_path(artifacts).read_text())


def run_cli(args, cwd: Path, env: dict | None = None, pythonpath: Path = REPO, timeout: int = 300) -> CliResult:
    env = clean_env(PYTHONPATH=str(pythonpath)) if env is None else env
    proc = subprocess.run([sys.executable, "-m", "gpufleet", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, cwd)


def local_inventory(path: Path, hosts=("n1", "n2"), group="gpu_nodes", **hostvars) -> Path:
    """A YAML inventory of local-connection hosts that use this test's Python."""
    entries = {name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **hostvars}
               for name in hosts}
    path.write_text(json.dumps({group: {"hosts": entries}}))
    return path


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released), for unreachable-host tests."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Out:
    """A text stream that keeps what is written (run_stage's `out`)."""

    def __init__(self, tty=False):
        self.parts, self.tty = [], tty

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def isatty(self):
        return self.tty

    @property
    def text(self):
        return "".join(self.parts)


def process_ids_with(text: str) -> list[int]:
    """Processes whose command line holds `text` (a path unique to one test), this process excluded."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (read from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def end_processes(pids) -> None:
    """Ends the given processes (by PID) that still run, and reaps them if they are ours."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Sshd:
    """A private sshd on 127.0.0.1: its own host key, config and log; `login` lets this user in."""

    port: int
    host_key_pub: str
    client_key: Path
    log: Path
    proc: subprocess.Popen

    def accepted_logins(self) -> list[str]:
        return [line for line in self.log.read_text(errors="replace").splitlines() if "Accepted publickey" in line]

    def inventory(self, path: Path, known_hosts: Path, host="n1") -> Path:
        common = (f"-o UserKnownHostsFile={known_hosts} -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes "
                  "-F /dev/null")
        path.write_text(
            "[gpu_nodes]\n"
            f"{host} ansible_host=127.0.0.1 ansible_port={self.port} ansible_connection=ssh "
            f"ansible_user={getpass.getuser()} ansible_ssh_private_key_file={self.client_key} "
            f"ansible_python_interpreter={sys.executable} ansible_ssh_common_args='{common}'\n")
        return path


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-test", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


@contextlib.contextmanager
def private_sshd(work: Path):
    """Starts sshd -D on a free loopback port (ended by its PID, with every session it forked)."""
    sshd_bin = Path("/usr/sbin/sshd")
    if not sshd_bin.is_file() or not shutil.which("ssh-keygen"):
        pytest.skip("openssh-server is not installed")
    work.mkdir(parents=True, exist_ok=True)
    host_pub = keygen(work / "host_key")
    client_pub = keygen(work / "client_key")
    (work / "authorized_keys").write_text(client_pub + "\n")
    port = closed_port()
    config = work / "sshd_config"
    config.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_key'}\nPidFile none\n"
                      f"AuthorizedKeysFile {work / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
                      "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
                      "PermitRootLogin prohibit-password\nLogLevel VERBOSE\n")
    privsep = Path("/run/sshd")  # sshd started by root insists on its privilege-separation directory
    made_privsep = os.geteuid() == 0 and not privsep.exists()
    if made_privsep:
        privsep.mkdir(mode=0o755)
    log = work / "sshd.log"
    proc = subprocess.Popen([str(sshd_bin), "-D", "-E", str(log), "-f", str(config)], start_new_session=True)
    try:
        for _attempt in range(100):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail(f"sshd exited {proc.returncode}: {log.read_text(errors='replace')}")
            time.sleep(0.1)
        yield Sshd(port, host_pub, work / "client_key", log, proc)
    finally:
        sessions = descendants(proc.pid)  # the per-connection sshd processes and what they run
        proc.terminate()
        proc.wait(timeout=10)
        end_processes(sessions)
        if made_privsep:
            shutil.rmtree(privsep, ignore_errors=True)


class Tarpit:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte (an SSH server that hangs)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                continue

    def close(self):
        self.stopped.set()
        self.thread.join(timeout=5)
        for conn in self.held:
            conn.close()
        self.sock.close()


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def hanging_inventory(path: Path, tarpit: Tarpit, hung=("hung1", "hung2"), local=("quick",)) -> Path:
    """Nodes whose SSH server is the tarpit (they hang), and local-connection nodes that answer."""
    path.write_text("[gpu_nodes]\n"
                    + "".join(f"{name} ansible_host=127.0.0.1 ansible_port={tarpit.port} ansible_connection=ssh\n"
                              for name in hung)
                    + "".join(f"{name} ansible_connection=local ansible_python_interpreter={sys.executable}\n"
                              for name in local))
    return path


def start_cli(args, cwd: Path, env: dict) -> subprocess.Popen:
    """`gpufleet ARGS` in the background (its own session), output in cwd/stdout and cwd/stderr."""
    with open(cwd / "stdout", "w") as out, open(cwd / "stderr", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "gpufleet", *map(str, args)], cwd=cwd, env=env, stdout=out,
                                stderr=err, start_new_session=True)
