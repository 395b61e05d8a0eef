# -*- coding: utf-8 -*-
"""gpufleet.children: a child gpufleet starts (the mirror's pip and ansible-playbook, the plan's ansible-inventory,
the refresh's git) does not outlive a gpufleet that was SIGKILLed (issue 35: nothing a run starts outlives it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# A stand-in for gpufleet: starts a long child (which prints its own pid, then becomes sleep) and waits on it,
# through gpufleet.children or through plain subprocess.
PARENT = """
import subprocess, sys
from gpufleet import children
run = children.run if sys.argv[1] == "children" else subprocess.run
run(["sh", "-c", "echo $$; exec sleep 300"])
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _child_of_killed_parent(mode: str, polls: int = 150) -> tuple[int, bool]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, mode], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    for poll in range(polls):  # up to 15 s for the kernel's signal to end it; the verdict is "gone", not "fast"
        if not _alive(child):
            return child, False
        time.sleep(0.1)
    return child, True


def test_a_child_started_through_children_ends_with_a_killed_gpufleet():
    child, still_running = _child_of_killed_parent("children")
    if still_running:
        os.kill(child, signal.SIGKILL)
    assert not still_running, f"sleep {child} outlived its SIGKILLed parent"


def test_without_it_the_child_would_outlive_its_parent():
    """The other side, so the test above can fail: a plain subprocess outlives a SIGKILLed parent."""
    child, still_running = _child_of_killed_parent("plain", polls=10)  # it would sleep 300 s
    if still_running:
        os.kill(child, signal.SIGKILL)
    assert still_running
