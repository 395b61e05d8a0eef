# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Ending ansible-playbook and everything it started when a run is cancelled (SIGINT, SIGTERM).

ansible-playbook runs in a session and process group of its own (ansible-runner starts it on a
pseudo-terminal), so a Ctrl-C or a CI cancel reaches only gpufleet, which then ends the run in steps:
interrupt (Ansible's own SIGINT handling tells its workers and their SSH processes), wait, terminate,
wait, kill. Each Ansible worker leads a process group of its own (it calls setsid), and a worker whose
parent died is re-parented away, so before every step the whole tree under ansible-playbook is read
again and every group in it is signalled -- each process checked by its start time, so a reused
process id is never signalled.

ansible-playbook starts through a small launcher that records its process id (exec keeps it) and
gives up the pseudo-terminal as controlling terminal: a run is not interactive, so an SSH client must
refuse a host key it does not know rather than stop and ask on a terminal nobody reads (the run would
hang; Ansible 2.19's workers detach themselves, 2.17's do not).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# (signal, seconds to wait for the tree to end after sending it)
STEPS = ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
_POLL_S = 0.2


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a process from /proc, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and ')'
    return int(fields[1]), fields[0], fields[19]


def process_tree(roots: dict[int, str]) -> dict[int, str]:
    """{pid: start time} of the `roots` ({pid: start time, "" when not known yet}) and all their
    descendants; a root whose id now belongs to another process is left out (Linux /proc; the roots
    elsewhere)."""
    if not Path("/proc/self/stat").exists():
        return dict(roots)
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            info = _stat(int(entry.name))
            if info:
                children.setdefault(info[0], []).append(int(entry.name))
                started[int(entry.name)] = info[2]
    tree, todo = {}, [pid for pid, start in roots.items() if start in ("", started.get(pid))]
    while todo:
        pid = todo.pop()
        if pid in started and pid not in tree:
            tree[pid] = started[pid]
            todo.extend(children.get(pid, []))
    return tree


def alive(pid: int, start_time: str) -> bool:
    """The process still runs (not a zombie) and is the one first seen under that id."""
    info = _stat(pid)
    if info is None:
        if Path("/proc/self/stat").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return info[1] != "Z" and (not start_time or info[2] == start_time)


_LAUNCHER = """import fcntl, os, sys, termios
pid_file, playbook = sys.argv[1], sys.argv[2]
with open(pid_file, "w") as handle:
    handle.write(str(os.getpid()))
try:
    tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    fcntl.ioctl(tty, termios.TIOCNOTTY)  # the SIGHUP this sends is ignored: pexpect started us so
    os.close(tty)
except OSError:
    pass
os.execv(playbook, [playbook, *sys.argv[3:]])
"""


def write_launcher(directory: Path, playbook: Path) -> tuple[Path, Path]:
    """(an executable that runs `playbook` with its arguments, the file it writes its process id to)."""
    pid_file = directory / "ansible-playbook.pid"
    code = directory / "launch.py"
    code.write_text(_LAUNCHER)
    launcher = directory / "ansible-playbook"
    launcher.write_text("#!/bin/sh\n" + shlex.join(["exec", sys.executable, str(code), str(pid_file), str(playbook)])
                        + ' "$@"\n')
    launcher.chmod(0o700)
    return launcher, pid_file


@dataclass
class Cancellation:
    """Turns SIGINT/SIGTERM into a staged stop of ansible-playbook's process tree.

    `install()` while ansible-playbook runs (main thread only); `pid_file` is where the launcher writes
    ansible-playbook's process id; `finished()` is set once ansible-runner has returned."""

    pid_file: Path
    signal_name: str | None = None
    stopped_by: str | None = None  # the step that ended the tree: SIGINT, SIGTERM or SIGKILL
    _known: dict[int, str] = field(default_factory=dict)
    _hurry: threading.Event = field(default_factory=threading.Event)
    _finished: threading.Event = field(default_factory=threading.Event)
    _previous: dict = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._on_signal)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def finished(self) -> None:
        """ansible-runner returned: stop waiting for a process id and wait for the stop to end."""
        self._finished.set()
        if self._thread is not None:
            self._thread.join()

    def _on_signal(self, signum, _frame) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            self._thread = threading.Thread(target=self._stop, name="gpufleet-cancel", daemon=True)
            self._thread.start()
        else:
            self._hurry.set()  # a second Ctrl-C: skip the waiting

    def _leader(self) -> int | None:
        while not self._finished.is_set():
            try:
                return int(self.pid_file.read_text().strip())
            except (OSError, ValueError):
                self._finished.wait(_POLL_S)
        return None

    def _refresh(self, leader: int) -> None:
        """Adds what ansible-playbook and every process seen so far have started since (a worker whose
        parent died is no longer under ansible-playbook, but still under the worker seen before)."""
        self._known.update(process_tree({leader: self._known.get(leader, ""), **self._known}))

    def _signal_tree(self, leader: int, signum: int) -> None:
        if signum == signal.SIGINT:
            targets = [leader]  # Ansible passes the interrupt on to its workers itself
        else:
            targets = [pid for pid, started in self._known.items() if alive(pid, started)]
        for pid in targets:
            for send, target in ((os.killpg, pid), (os.kill, pid)):
                try:
                    send(target, signum)
                except (ProcessLookupError, PermissionError):
                    pass

    def _stop(self) -> None:
        leader = self._leader()
        if leader is None:
            return
        for signum, wait_s in STEPS:
            self._refresh(leader)
            if not any(alive(pid, started) for pid, started in self._known.items()):
                return
            self._signal_tree(leader, signum)
            self.stopped_by = signal.Signals(signum).name
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and not self._hurry.is_set():
                self._refresh(leader)
                if not any(alive(pid, started) for pid, started in self._known.items()):
                    return
                time.sleep(_POLL_S)
            self._hurry.clear()
