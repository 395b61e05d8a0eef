"""Helpers for running `gpufleet` as a user would: a separate process, from a directory outside the clone,
against local-connection inventories (no simulated cluster needed)."""

import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


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
