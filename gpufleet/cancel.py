# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Ending ansible-playbook and everything it started when a run is cancelled (SIGINT, SIGTERM, SIGHUP)
or when gpufleet itself dies (SIGKILL, the OOM killer), and the private runner directory with it.

ansible-playbook runs in a session and process group of its own (ansible-runner starts it on a
pseudo-terminal), so a Ctrl-C, a CI cancel or a closed terminal reaches only gpufleet, which then ends
the run in steps: interrupt (Ansible's own SIGINT handling tells its workers and their SSH processes),
wait, terminate, wait, kill. Each Ansible worker leads a process group of its own (it calls setsid), so
before every step the whole tree is read again and every group in it is signalled -- each process
checked by its start time, so a reused process id is never signalled. A hang-up is a cancel like the
others (the terminal that went away gets no more output); a signal that comes once Ansible has ended
is only recorded, so the scrubbing and the summary that follow are never cut short.

ansible-playbook starts through a small launcher that stays its parent: it is a subreaper (a worker
whose parent died comes back to it, so the tree is always whole), it records both process ids, and it
gives up the pseudo-terminal as controlling terminal: a run is not interactive, so an SSH client must
refuse a host key it does not know rather than stop and ask on a terminal nobody reads (the run would
hang; Ansible 2.19's workers detach themselves, 2.17's do not). The launcher is also the watchdog: the
kernel tells it when gpufleet dies (PR_SET_PDEATHSIG), and it then ends the tree with the same steps and
removes the private directory. Should the launcher be killed too, ansible-playbook is sent SIGTERM (its
own parent-death signal), and the next run removes the directory left behind: identified by its name
and by an owner file naming a gpufleet process that is gone.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import signal
import stat
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.safe_files import open_existing, write_atomically

CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RUNNER_DIR_PREFIX = "gpufleet-runner-"
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


def _prctl(option: int, value: int) -> bool:
    """prctl(2) on Linux; False where there is none (the watchdog then has no parent-death signal)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
# The launcher's own parent-death signal: gpufleet is gone, so the launcher stops Ansible itself.
_GPUFLEET_GONE = signal.SIGUSR1


class _ParentGone(Exception):
    """gpufleet died (SIGKILL, the OOM killer) while ansible-playbook ran."""


def _on_parent_gone(_signum, _frame):
    raise _ParentGone()


def _give_up_terminal() -> None:
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        fcntl.ioctl(tty, termios.TIOCNOTTY)  # the SIGHUP this sends us is caught by launch()'s handler
        os.close(tty)
    except OSError:
        pass


def _exec_playbook(playbook: str, args: list[str], launcher: int, saved: dict) -> None:
    """In the forked child: ansible-playbook, told (SIGTERM, which Ansible handles) when the launcher dies."""
    try:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {_GPUFLEET_GONE})
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != launcher:  # the launcher died before the line above
            os._exit(143)
        os.execv(playbook, [playbook, *args])
    except OSError as exc:
        os.write(2, f"gpufleet launcher: could not start {playbook}: {exc}\n".encode())
    finally:
        os._exit(127)


def _exit_like(status: int) -> None:
    """Ends the launcher as ansible-playbook ended, so ansible-runner reports Ansible's own rc."""
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _wait_for(child: int, private: Path) -> int:
    """Reaps every child (orphaned workers come to us) until ansible-playbook ends; when gpufleet dies
    first, ends Ansible's whole tree with the cancel's steps and removes gpufleet's private directory."""
    while True:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {_GPUFLEET_GONE})  # blocked until now, see launch()
            pid, status = os.waitpid(-1, 0)
        except _ParentGone:
            TreeStop(leader=child, subreaper=os.getpid()).run()
            if private.name.startswith(RUNNER_DIR_PREFIX):
                shutil.rmtree(private, ignore_errors=True)
            continue
        except ChildProcessError:
            return 0
        if pid == child:
            return status


def launch(argv: list[str]) -> None:
    """The launcher ansible-runner starts instead of ansible-playbook: PIDFILE PARENT PLAYBOOK ARGS...

    It stays the parent of ansible-playbook and a subreaper, so every process Ansible starts -- a worker
    that called setsid, one whose parent died -- stays under it; it dies with nothing to do unless gpufleet
    (PARENT) dies first, which the kernel tells it (PR_SET_PDEATHSIG): then it is the watchdog."""
    pid_file, parent, playbook, args = Path(argv[0]), int(argv[1]), argv[2], argv[3:]
    saved = {signum: signal.getsignal(signum) for signum in CANCEL_SIGNALS}
    for signum in CANCEL_SIGNALS:  # gpufleet's cancel signals ansible-playbook; the launcher waits for it
        signal.signal(signum, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {_GPUFLEET_GONE})  # taken only once there is a tree to stop
    signal.signal(_GPUFLEET_GONE, _on_parent_gone)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, _GPUFLEET_GONE)
    _give_up_terminal()
    launcher = os.getpid()
    child = os.fork()
    if child == 0:
        _exec_playbook(playbook, args, launcher, saved)
    write_atomically(pid_file, f"{child} {launcher}\n", mode=0o600)
    if os.getppid() != parent:  # gpufleet died before the kernel was asked to say so
        os.kill(launcher, _GPUFLEET_GONE)
    _exit_like(_wait_for(child, pid_file.parent))


OWNER_FILE = "gpufleet.pid"  # in a private runner directory: "PID START-TIME" of the gpufleet that made it


def _start_time(pid: int) -> str:
    info = _stat(pid)
    return info[2] if info else ""


def clear_stale_runner_directories(parent: Path) -> list[Path]:
    """Removes the private runner directories (environment dump, unmasked -e) that killed runs left in
    `parent`: only ours (name prefix, a real directory of this user) and only those whose owner file
    names a gpufleet process that is gone; a directory without one is not known to be stale and stays."""
    cleared = []
    try:
        entries = [entry for entry in os.scandir(parent) if entry.name.startswith(RUNNER_DIR_PREFIX)]
    except OSError:
        return cleared
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            descriptor = open_existing(Path(entry.path) / OWNER_FILE)
            with os.fdopen(descriptor, encoding="utf-8") as handle:
                pid, started = handle.read().split()
            if alive(int(pid), started):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        cleared.append(Path(entry.path))
    return cleared


def make_runner_directory() -> Path:
    """A new private (0700) directory for ansible-runner, with its owner file; the stale ones killed runs
    left in the same temporary directory are cleared first."""
    clear_stale_runner_directories(Path(tempfile.gettempdir()))
    private = Path(tempfile.mkdtemp(prefix=RUNNER_DIR_PREFIX))
    write_atomically(private / OWNER_FILE, f"{os.getpid()} {_start_time(os.getpid())}\n", mode=0o600)
    return private


_LAUNCHER = """import sys
sys.path.insert(0, {root!r})
from gpufleet.cancel import launch
launch(sys.argv[1:])
"""


def write_launcher(directory: Path, playbook: Path) -> tuple[Path, Path]:
    """(an executable that runs `playbook` with its arguments, the file it writes its process id to)."""
    pid_file = directory / "ansible-playbook.pid"
    code = directory / "launch.py"
    code.write_text(_LAUNCHER.format(root=str(Path(__file__).resolve().parents[1])))
    launcher = directory / "ansible-playbook"
    launcher.write_text("#!/bin/sh\n" + shlex.join(["exec", sys.executable, str(code), str(pid_file), str(os.getpid()),
                                                    str(playbook)]) + ' "$@"\n')
    launcher.chmod(0o700)
    return launcher, pid_file


@dataclass
class TreeStop:
    """Ends ansible-playbook (`leader`) and every process it started, in STEPS; `subreaper`, when given,
    is a process every orphaned descendant comes back to (the launcher): its tree is Ansible's too."""

    leader: int
    subreaper: int | None = None
    hurry: threading.Event = field(default_factory=threading.Event)  # set: skip the current wait
    stopped_by: str | None = None  # the step that ended the tree: SIGINT, SIGTERM or SIGKILL
    _known: dict[int, str] = field(default_factory=dict)

    def _refresh(self) -> None:
        """Adds what ansible-playbook and every process seen so far have started since (a worker whose
        parent died is no longer under ansible-playbook, but still under the worker seen before, or
        under the subreaper)."""
        roots = {self.leader: self._known.get(self.leader, ""), **self._known}
        if self.subreaper is not None:
            roots[self.subreaper] = ""
        self._known.update(process_tree(roots))
        self._known.pop(self.subreaper, None)  # it ends by itself once ansible-playbook has

    def _any_alive(self) -> bool:
        self._refresh()
        return any(alive(pid, started) for pid, started in self._known.items())

    def _signal_tree(self, signum: int) -> None:
        if signum == signal.SIGINT:
            targets = [self.leader]  # Ansible passes the interrupt on to its workers itself
        else:
            targets = [pid for pid, started in self._known.items() if alive(pid, started)]
        for pid in targets:
            for send, target in ((os.killpg, pid), (os.kill, pid)):
                try:
                    send(target, signum)
                except (ProcessLookupError, PermissionError):
                    pass

    def run(self) -> None:
        for signum, wait_s in STEPS:
            if not self._any_alive():
                return
            self._signal_tree(signum)
            self.stopped_by = signal.Signals(signum).name
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and not self.hurry.is_set():
                if not self._any_alive():
                    return
                time.sleep(_POLL_S)
            self.hurry.clear()


@dataclass
class Cancellation:
    """Turns SIGINT/SIGTERM/SIGHUP into a staged stop of ansible-playbook's process tree.

    `install()` (main thread only) before ansible-playbook starts and `restore()` once its output is
    copied and scrubbed; `pid_file` is where the launcher writes ansible-playbook's and its own process
    id; `finished()` is called once ansible-runner has returned: a signal after that is only recorded
    (`late`), so the copying, scrubbing and summary that follow are never cut short."""

    pid_file: Path
    signal_name: str | None = None
    stopped_by: str | None = None  # the step that ended the tree: SIGINT, SIGTERM or SIGKILL
    late: bool = False  # the signal came after ansible-playbook had ended
    _hurry: threading.Event = field(default_factory=threading.Event)
    _finished: threading.Event = field(default_factory=threading.Event)
    _previous: dict = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def install(self) -> None:
        if guard is not None:
            guard.delegate = self
            return
        for signum in CANCEL_SIGNALS:
            self._previous[signum] = signal.signal(signum, self.on_signal)

    def restore(self) -> None:
        if guard is not None and guard.delegate is self:
            guard.delegate = None
            guard.ended = True
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def finished(self) -> None:
        """ansible-runner returned: stop waiting for a process id and wait for the stop to end."""
        self._finished.set()
        if self._thread is not None:
            self._thread.join()

    def on_signal(self, signum, _frame=None) -> None:
        if signum == signal.SIGHUP:
            detach_terminal()
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            if self._finished.is_set():
                self.late = True
                return
            self._thread = threading.Thread(target=self._stop, name="gpufleet-cancel", daemon=True)
            self._thread.start()
        else:
            self._hurry.set()  # a second Ctrl-C: skip the waiting

    def _ids(self) -> tuple[int, int | None] | None:
        """(ansible-playbook, the launcher) once the launcher has written them, None if Ansible never started."""
        while not self._finished.is_set():
            try:
                leader, _space, launcher = self.pid_file.read_text().strip().partition(" ")
                return int(leader), int(launcher) if launcher else None
            except (OSError, ValueError):
                self._finished.wait(_POLL_S)
        return None

    def _stop(self) -> None:
        ids = self._ids()
        if ids is None:
            return
        stop = TreeStop(leader=ids[0], subreaper=ids[1], hurry=self._hurry)
        stop.run()
        self.stopped_by = stop.stopped_by


def describe(signal_name: str) -> str:
    """A cancel signal as the reason names it."""
    return "SIGHUP (hung up: the terminal closed or the parent went away)" if signal_name == "SIGHUP" else signal_name


def detach_terminal() -> None:
    """After a hang-up, output to the terminal that went away would fail (EIO): send it nowhere instead."""
    for descriptor in (1, 2):
        try:
            if os.isatty(descriptor):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, descriptor)
                os.close(devnull)
        except OSError:
            pass


class Cancelled(Exception):
    """A cancel signal arrived before ansible-playbook started: there is nothing of Ansible's to stop."""


@dataclass
class SignalGuard:
    """The CLI's one handler of SIGINT, SIGTERM and SIGHUP for a whole run: before ansible-playbook starts
    a signal raises Cancelled; while it runs, the run's Cancellation (the `delegate`) stops its tree;
    after Ansible has ended (`ended`) a signal is recorded and nothing is cut short."""

    delegate: Cancellation | None = None
    ended: bool = False
    received: str | None = None
    _previous: dict = field(default_factory=dict)

    def install(self) -> None:
        global guard  # pylint: disable=global-statement
        for signum in CANCEL_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        guard = self

    def restore(self) -> None:
        global guard  # pylint: disable=global-statement
        guard = None
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _on_signal(self, signum, frame) -> None:
        if self.delegate is not None:
            self.delegate.on_signal(signum, frame)
            return
        if signum == signal.SIGHUP:
            detach_terminal()
        if self.ended:
            self.received = self.received or signal.Signals(signum).name
            return
        raise Cancelled(signal.Signals(signum).name)


guard: SignalGuard | None = None  # the CLI's, while a run is in progress
