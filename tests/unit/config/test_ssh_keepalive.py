"""A node that freezes mid-run is given up after a bounded time: ssh runs with keep-alives.

Without ServerAliveInterval, ssh waits on a frozen peer for as long as TCP does (hours), and the
task, the play and the run wait with it. The test reads the ssh command line Ansible really runs
(-vvv prints it) against a port where nothing listens on 127.0.0.1, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def ssh_argv(tmp_path: Path, extra_vars: dict | None = None) -> list[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), HOME=str(tmp_path), PATH=f"{BIN}:{os.environ['PATH']}")
    extra = {"ansible_port": 1, "ansible_user": "nobody", **(extra_vars or {})}
    proc = subprocess.run([str(BIN / "ansible"), "all", "-i", "127.0.0.1,", "-e", json.dumps(extra),
                           "-m", "ansible.builtin.ping", "-vvv"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, check=False, timeout=120)
    line = next((line for line in proc.stdout.splitlines() if "SSH: EXEC ssh " in line), None)
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return shlex.split(line.split("SSH: EXEC ", 1)[1])


def options(argv: list[str]) -> dict[str, str]:
    """The -o options in the order ssh reads them; ssh keeps the first value it sees of each."""
    found: dict[str, str] = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "-o":
            key, _sep, setting = value.partition("=")
            found.setdefault(key, setting)
    return found


def test_ssh_gives_up_on_a_frozen_node_after_a_bounded_time(tmp_path):
    seen = options(ssh_argv(tmp_path))
    interval, count = int(seen["ServerAliveInterval"]), int(seen["ServerAliveCountMax"])
    assert 0 < interval * count <= 120, seen
    # The keep-alives come on top of connection sharing, not instead of it.
    assert seen["ControlMaster"] == "auto" and re.fullmatch(r"\d+s", seen["ControlPersist"]), seen
