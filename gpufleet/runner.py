"""Run a gpufleet stage through ansible-runner and turn its events into a per-node verdict.

ansible-runner is the interface automation controllers use; going through it (instead of scraping
ansible-playbook's terminal output) gives typed per-host events. It runs in a private temporary
directory, because it writes the process environment and the full command line there; only the
events and Ansible's output are copied into --artifacts, scrubbed of credentials. The settings the
collection needs are merged with the user's (gpufleet.settings); a cancelled run ends Ansible's whole
process tree before it is judged (gpufleet.cancel).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from gpufleet import artifacts as artifacts_mod
from gpufleet import collection as collection_mod
from gpufleet import console, settings
from gpufleet.cancel import Cancellation, make_runner_directory, write_launcher
from gpufleet.cancel import describe as describe_signal
from gpufleet.secrets import MASK, scrub_text, scrub_tree, secret_values

# The stages in the order `site` runs them: (playbook, what it does in one line).
STAGES = {
    "preflight": ("playbooks/preflight.yml",
                  "facts and checks per node and across the cluster, then the software plan"),
    "stack": ("playbooks/gpu_stack.yml", "install the planned driver, CUDA, NCCL and PyTorch; one batched reboot"),
    "fabric": ("playbooks/fabric.yml", "configure RDMA and write the NCCL environment from the HCAs that are up"),
    "validate": ("playbooks/validate.yml", "health checks, diagnostics, bandwidth, then the smoke training job"),
    "smoke": ("playbooks/smoke_test.yml", "only the multi-node smoke training job and its bandwidth sweep"),
    "site": ("playbooks/site.yml", "all of the above, in this order"),
}
STAGE_PLAYBOOKS = {name: playbook for name, (playbook, _what) in STAGES.items()}
# The stages whose playbook runs the smoke job (validate.yml ends with it; site.yml imports validate.yml).
SMOKE_STAGES = {"validate", "smoke", "site"}

# Stable exit codes: a pipeline branches on these, so they never change meaning.
EXIT_PASSED = 0
EXIT_NODES_FAILED = 1
EXIT_RUN_BROKEN = 2

# ansible-playbook's (TaskQueueManager's) bits for "hosts failed" (2), "hosts unreachable" (4) and
# "a play stopped on failures" (8); any other non-zero code means the run itself could not proceed.
_ANSIBLE_HOST_FAILURE_BITS = 2 | 4 | 8

# How much of a one-line reason a list of node names may take (the rest is "and N more").
REASON_NAMES_WIDTH = 200

# A progress line at least this often while a task runs (the issue asks for one every 15 s at most).
DEFAULT_PROGRESS_EVERY_S = 10.0


class RunBroken(Exception):
    """The run could not be carried out at all (bad input, inventory, missing playbook, runner error)."""


class ConfigurationError(RunBroken):
    """Configuration errors found before ansible-playbook started: `problems`, one `[CODE] ...` line each."""

    def __init__(self, problems: list[str]):
        super().__init__(" | ".join(problems))
        self.problems = problems


@dataclass
class AnsibleOptions:
    """ansible-playbook options passed through unchanged."""

    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    extra_vars: list[str] = field(default_factory=list)  # raw -e values, as the user wrote them
    check: bool = False
    diff: bool = False
    verbosity: int = 0
    forks: int | None = None
    user: str | None = None
    private_key: str | None = None
    vault_ids: list[str] = field(default_factory=list)
    vault_password_files: list[str] = field(default_factory=list)

    def args(self) -> list[str]:
        args: list[str] = []
        for flag, value in (("--limit", self.limit), ("--tags", self.tags), ("--skip-tags", self.skip_tags),
                            ("--forks", self.forks), ("--user", self.user), ("--private-key", self.private_key)):
            if value is not None:
                args += [flag, str(value)]
        for value in self.extra_vars:
            args += ["--extra-vars", value]
        args += self.vault_args()
        args += ["--check"] if self.check else []
        args += ["--diff"] if self.diff else []
        args += ["-" + "v" * self.verbosity] if self.verbosity else []
        return args

    def vault_args(self) -> list[str]:
        args: list[str] = []
        for value in self.vault_ids:
            args += ["--vault-id", value]
        for value in self.vault_password_files:
            args += ["--vault-password-file", value]
        return args

    def shown_args(self) -> list[str]:
        """args() with every -e value masked, for the artifacts."""
        args = self.args()
        return [MASK if i and args[i - 1] == "--extra-vars" else a for i, a in enumerate(args)]


@dataclass
class PlayTally:
    """Task results of one host within one play."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    unreachable: int = 0
    ignored: int = 0
    rescued: int = 0  # failures a block's rescue handled (Ansible's stats did not count them)
    first_failure: str | None = None
    failed_tasks: list = field(default_factory=list)
    failure_texts: list = field(default_factory=list)  # "task: message" of each failed task, in order
    unreachable_text: str | None = None

    def forgive(self, count: int) -> int:
        """The first `count` failures of this host were rescued (Ansible's stats say so): they no longer
        fail it. Returns how many of them were in this play."""
        forgiven = min(count, self.failed)
        self.failed -= forgiven
        self.rescued += forgiven
        del self.failed_tasks[:forgiven]
        del self.failure_texts[:forgiven]
        self.first_failure = (self.failure_texts or [self.unreachable_text])[0]
        return forgiven

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        if self.changed:
            return "changed"
        if self.ok:
            return "ok"
        return "skipped"

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "ok": self.ok,
            "changed": self.changed,
            "failed": self.failed,
            "skipped": self.skipped,
            "unreachable": self.unreachable,
            "rescued": self.rescued,
            "first_failure": self.first_failure,
        }


_NOT_EVIDENCE_ACTIONS = {"ansible.builtin.validate_argument_spec", "validate_argument_spec"}
# playbooks/preflight.yml's first task: it checks the configuration on the controller, not the node.
CONFIG_CHECK_TASK = "Stop on a configuration error"


def config_error(message) -> str | None:
    """The configuration error a failed task's message carries (a `[CODE] ...` line, see the collection's
    plugins/module_utils/request_schema.py), Ansible's wrapper cut off; None for a node's own failure."""
    from gpufleet.mirror_targets import module_utils

    try:
        schema = module_utils("request_schema")
    except Exception:  # no collection, no codes: the failure stays the node's
        return None
    lines = [schema.config_error(line) for line in str(message or "").splitlines()]
    found = [line for line in lines if line]
    return " | ".join(found) if found else None


def _argument_spec_error(data: dict, result: dict) -> str:
    """A role's argument validation failure as one configuration-error line naming the role's variables."""
    errors = result.get("argument_errors") or [result.get("msg") or "invalid arguments"]
    role = (data.get("role") or "").split(".")[-1] or "a role"
    return one_line(f"[BAD_VARIABLE] the {role} role's variables: " + "; ".join(str(e) for e in errors), 2000)


_COLOURS = {"failed": "31", "unreachable": "31", "changed": "33", "ok": "32", "passed": "32"}


def colour_enabled(out: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR (no-color.org) or TERM=dumb says no."""
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, status: str, enabled: bool) -> str:
    code = _COLOURS.get(status)
    return f"\x1b[{code}m{text}\x1b[0m" if enabled and code else text


@dataclass
class EventTracker:
    """Folds ansible-runner events into per-play, per-host tallies and prints progress lines.

    Runs in ansible-runner's thread; the heartbeat thread reads the running task through `lock`."""

    out: TextIO = sys.stdout
    started: float = field(default_factory=time.monotonic)
    plays: list[str] = field(default_factory=list)
    tallies: dict[str, dict[str, PlayTally]] = field(default_factory=dict)
    hosts_seen: list[str] = field(default_factory=list)
    hosts_checked: list[str] = field(default_factory=list)  # hosts that ran a task about the node itself
    error_lines: list[str] = field(default_factory=list)
    config_errors: list[str] = field(default_factory=list)  # "[CODE] ..." lines: the input was wrong, not a node
    colour: bool = False
    secrets: list[str] = field(default_factory=list)  # masked in every printed line (gpufleet.secrets)
    finished_playbook: bool = False  # Ansible reached its recap: the run was not cut short
    stream: bool = False  # also print Ansible's own output (-v), masked like everything else printed
    lock: threading.Lock = field(default_factory=threading.Lock)
    _current_play: str | None = None
    _current_task: str | None = None
    _task_running: dict[str, float] = field(default_factory=dict)  # host -> when it started the task
    _task_done: set = field(default_factory=set)
    _reported_plays: set = field(default_factory=set)

    def handle(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        with self.lock:
            if kind == "playbook_on_play_start":
                self._finish_current_play()
                name = data.get("play") or data.get("name") or f"play {len(self.plays) + 1}"
                # Plays of the same name (site.yml imports) stay apart.
                if name in self.tallies:
                    name = f"{name} #{sum(1 for p in self.plays if p.startswith(name)) + 1}"
                self.plays.append(name)
                self.tallies[name] = {}
                self._current_play = name
                self._start_task(None)
            elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
                self._start_task(data.get("task") or data.get("name") or "")
            elif kind == "runner_on_start":
                host = data.get("host")
                if host:
                    self._task_running.setdefault(host, time.monotonic())
            elif kind.startswith("runner_on_") or kind.startswith("runner_item_on_"):
                self._count(kind, data)
            elif kind == "playbook_on_stats":
                self._finish_current_play()
                self._start_task(None)
                self._apply_stats(data)
            if "ERROR" in (event.get("stdout") or ""):
                self._note_error(event.get("stdout", ""))
            if self.stream and event.get("stdout"):
                self.emit(event["stdout"])
        return True  # keep the event on disk as well

    def _apply_stats(self, stats: dict) -> None:
        """Ansible's own recap decides which hosts failed: a failure a block's rescue handled shows up
        as a failed-task event but is counted under `rescued`, not `failures`. A host stops at a failure
        nothing rescues, so the rescued ones are its first failures."""
        self.finished_playbook = True
        failures, rescued = stats.get("failures") or {}, stats.get("rescued") or {}
        for host, count in rescued.items():
            events = sum(per_host[host].failed for per_host in self.tallies.values() if host in per_host)
            to_forgive = min(int(count or 0), events - int(failures.get(host) or 0))
            for play in self.plays:
                tally = self.tallies[play].get(host)
                if tally is not None and to_forgive > 0:
                    to_forgive -= tally.forgive(to_forgive)

    def emit(self, line: str) -> None:
        print(scrub_text(line, self.secrets), file=self.out, flush=True)

    def _note_error(self, stdout: str) -> None:
        for line in stdout.splitlines():
            line = line.strip()
            if line.startswith(("[ERROR]:", "ERROR!")) and len(self.error_lines) < 5:
                self.error_lines.append(one_line(line))

    def _start_task(self, name: str | None) -> None:
        self._current_task = name
        self._task_running = {}
        self._task_done = set()

    def _count(self, kind: str, data: dict) -> None:
        host = data.get("host")
        if not host or self._current_play is None or kind.startswith("runner_item_on_"):
            return
        if kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"):
            self._task_running.pop(host, None)
            self._task_done.add(host)
        if host not in self.hosts_seen:
            self.hosts_seen.append(host)
        # Role argument validation and the configuration check run under every --tags; they check input,
        # not the node.
        checks_input = data.get("task_action") in _NOT_EVIDENCE_ACTIONS or data.get("task") == CONFIG_CHECK_TASK
        if not checks_input and host not in self.hosts_checked:
            self.hosts_checked.append(host)
        tally = self.tallies[self._current_play].setdefault(host, PlayTally())
        result = data.get("res") or {}
        if kind == "runner_on_failed" and not data.get("ignore_errors") and self._note_config_error(data, result):
            return
        if kind == "runner_on_ok":
            tally.ok += 1
            tally.changed += 1 if result.get("changed") else 0
        elif kind == "runner_on_skipped":
            tally.skipped += 1
        elif kind == "runner_on_unreachable":
            tally.unreachable += 1
            tally.unreachable_text = tally.unreachable_text or console.clip_middle(
                one_line(result.get("msg", "unreachable"), 100_000), 300)
            tally.first_failure = tally.first_failure or tally.unreachable_text
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                tally.ignored += 1
            else:
                task = data.get("task", "")
                tally.failed += 1
                tally.failed_tasks.append(task)
                # The cause is at the message's end (ssh's "port 22: Connection refused"): cut its middle.
                message = console.clip_middle(one_line(result.get("msg", ""), 100_000), 300)
                tally.failure_texts.append(f"{task}: {message}".strip(": "))
                tally.first_failure = tally.first_failure or tally.failure_texts[-1]

    def _note_config_error(self, data: dict, result: dict) -> bool:
        """Keeps a configuration error (once, however many hosts report it); True when the failure was one."""
        if data.get("task_action") in _NOT_EVIDENCE_ACTIONS:
            error = _argument_spec_error(data, result)
        else:
            error = config_error(result.get("msg", ""))
        if error is None:
            return False
        if error not in self.config_errors:
            self.config_errors.append(error)
        return True

    def heartbeat_line(self, width: int | None = None) -> str | None:
        """What is running now, in `width` columns: the play, the task and the nodes still in it (None
        between tasks). The task name is cut before a node name is; when not even one node name fits
        beside it, the nodes follow on a line of their own."""
        width = width or console.width()
        with self.lock:
            if self._current_task is None or not self._task_running:
                return None
            now = time.monotonic()
            running = sorted(self._task_running)
            longest = max(now - t for t in self._task_running.values())
            head = f"[{now - self.started:7.1f}s] "
            tail = f" ({len(self._task_done)} done, {longest:.0f}s)"
            play, current = self._current_play or "", self._current_task
            fixed = len(head) + len(": still running on ") + len(tail)
            fewest = len(running[0]) + (len(f" and {len(running) - 1} more") if len(running) > 1 else 0)
            if width - fixed - fewest >= 12:
                task = console.play_and_task(play, current, width - fixed - fewest)
                return f"{head}{task}: still running on {console.names(running, width - fixed - len(task))}{tail}"
            nodes = f"{len(running)} node{'s' if len(running) > 1 else ''}"
            task = console.play_and_task(play, current,
                                         max(10, width - len(head) - len(f": still running on {nodes}{tail}")))
            return (f"{head}{task}: still running on {nodes}{tail}\n"
                    f"    {console.names(running, max(1, width - 4))}")

    def _finish_current_play(self) -> None:
        play = self._current_play
        if play is None or play in self._reported_plays:
            return
        self._reported_plays.add(play)
        elapsed = time.monotonic() - self.started
        width = console.width()
        for host, tally in sorted(self.tallies[play].items()):
            for line in self._play_lines(play, host, tally, elapsed, width):
                self.emit(line)

    def _play_lines(self, play: str, host: str, tally: PlayTally, elapsed: float, width: int) -> list[str]:
        """A node's result in one play, in `width` columns: the host and status whole, the play name cut
        to fit, a failure on the same line when it fits and on up to two lines of its own when not."""
        changed = f" changed={tally.changed}" if tally.changed else ""
        status = paint(tally.status, tally.status, self.colour)
        stamp = f"[{elapsed:7.1f}s] "
        head = f"{stamp}{console.clip(play, 32):<32} {host:<20} "
        if len(head) + len(tally.status) + len(changed) > width:  # narrow: the play name gives way first
            room = width - len(f"{stamp}{host} {tally.status}{changed}") - 1
            head = f"{stamp}{console.clip(play, room)} {host} " if room >= 8 else f"{stamp}{host} "
        line = f"{head}{status}{changed}"
        if not tally.first_failure:
            return [line]
        visible = len(head) + len(tally.status) + len(changed)
        if visible + 4 + len(tally.first_failure) <= width:
            return [f"{line} -- {tally.first_failure}"]
        # Two lines at most, the middle cut: what failed starts the text and why ends it.
        wrapped = textwrap.wrap(console.clip_middle(tally.first_failure, 2 * (width - 7) - 8), width - 7) or [""]
        if len(wrapped) > 2:
            wrapped = [wrapped[0], console.clip_middle(" ".join(wrapped[1:]), width - 7)]
        return [line, *("    -- " + w if i == 0 else "       " + w for i, w in enumerate(wrapped))]

    def finish(self) -> None:
        with self.lock:
            self._finish_current_play()


class Heartbeat(threading.Thread):
    """Prints the running task and its nodes every `every` seconds while a task runs."""

    def __init__(self, tracker: EventTracker, every: float):
        super().__init__(name="gpufleet-heartbeat", daemon=True)
        self.tracker, self.every, self.stopped = tracker, every, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            line = self.tracker.heartbeat_line()
            if line:
                self.tracker.emit(line)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def one_line(text, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def ansible_error(output: str) -> str | None:
    """The first error Ansible printed ("[ERROR]: ..." in 2.19, "ERROR! ..." before), with its cause."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("[ERROR]:", "ERROR!")):
            message = line.split(":", 1)[1] if line.startswith("[ERROR]:") else line[len("ERROR!"):]
            cause = next((lines[j + 1].strip() for j in range(i + 1, min(i + 8, len(lines) - 1))
                          if "<<< caused by >>>" in lines[j] and lines[j + 1].strip()), None)
            if cause is None:
                cause = next((lines[j + 1].strip() for j in range(i + 1, min(i + 8, len(lines) - 1))
                              if not lines[j].strip() and lines[j + 1].strip()
                              and not lines[j + 1].startswith(("[WARNING]", "Origin", "[ERROR]"))), None)
            return one_line(message.strip() + (f" ({cause})" if cause else ""))
    return None


def _first_warning_cause(output: str) -> str | None:
    """Why the inventory did not parse: the cause of the first plugin failure Ansible warned about."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "<<< caused by >>>" in line and i + 2 < len(lines) and lines[i + 2].strip():
            return one_line(lines[i + 2])
    return None


def _origin(output: str) -> str | None:
    """Where Ansible says the first inventory error is, as "FILE line L column C" (None when it does not say)."""
    found = re.search(r"^Origin: (?P<file>[^<\n][^\n]*?):(?P<line>\d+):(?P<column>\d+)\s*$", output, re.MULTILINE)
    return f"{found['file']} line {found['line']} column {found['column']}" if found else None


def _not_utf8(output: str) -> str | None:
    """The inventory file Ansible could not read as UTF-8 (it warns, then fails on escaped bytes or reads them)."""
    found = re.search(r"File '(?P<file>[^']+)' could not be decoded as 'utf-8'", output)
    return found["file"] if found else None


def inventory_groups(inventory: str, env: dict, cwd: Path) -> list[str]:
    """The inventory's groups (Ansible's own "all" and "ungrouped" left out), or [] when they cannot be read."""
    args = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", inventory, "--list"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=True)
        return sorted(name for name in json.loads(proc.stdout) if name not in ("_meta", "all", "ungrouped"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return []


def _no_hosts(inventory: str, limit: str | None, pattern: str, env: dict, cwd: Path) -> RunBroken:
    if limit:
        return RunBroken(f"inventory {inventory} lists no hosts matching --limit {limit!r}")
    if pattern == "all":
        return RunBroken(f"inventory {inventory} lists no hosts")
    groups = inventory_groups(inventory, env, cwd)
    close = difflib.get_close_matches(pattern, groups, n=1)
    hint = f"is its group {close[0]!r} a typo of it? " if close else ""
    return RunBroken(f"inventory {inventory} has no hosts in group {pattern!r}, which the stage's plays run on; "
                     f"{hint}its groups: {', '.join(groups) or 'none'}. Name the group {pattern} in the inventory, "
                     "or pass -e gpufleet_hosts=GROUP")


def target_hosts(inventory: str, limit: str | None, env: dict, cwd: Path, pattern: str = "all") -> list[str]:
    """The hosts of `pattern` the inventory and --limit select, asked from Ansible itself; RunBroken
    otherwise.

    ANSIBLE_INVENTORY_UNPARSED_FAILED makes Ansible fail on a source it cannot parse instead of
    warning and carrying on with no hosts."""
    args = [str(Path(sys.executable).parent / "ansible"), pattern, "-i", inventory, "--list-hosts"]
    if limit:
        args += ["--limit", limit]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RunBroken(f"could not list the inventory's hosts with {args[0]}: {exc}") from None
    output = proc.stderr + "\n" + proc.stdout
    if _not_utf8(output):
        raise RunBroken(f"inventory file {_not_utf8(output)} is not UTF-8 text: save it as UTF-8")
    if proc.returncode != 0:
        error = ansible_error(output) or one_line(proc.stderr.strip().splitlines()[-1:] or ["unknown error"])
        if "no hosts to target" in output or "leaves us with no hosts" in output or "does not match any hosts" in output:
            where = f"--limit {limit!r}" if limit else "the inventory"
            raise RunBroken(f"{where} matches no host of inventory {inventory}: {error}")
        cause, origin = _first_warning_cause(output), _origin(output)
        if cause and origin:  # the first plugin's error, where it is: Ansible's own file, line and column
            raise RunBroken(f"inventory {inventory} could not be parsed: {cause} (at {origin})")
        raise RunBroken(f"inventory {inventory} could not be parsed: {error}"
                        + (f" ({cause})" if cause and cause not in error else ""))
    hosts = []
    in_list = False
    for line in proc.stdout.splitlines():
        if line.strip().startswith("hosts (") and line.strip().endswith("):"):
            in_list = True
        elif in_list and line.strip():
            hosts.append(line.strip())
    if not hosts:
        raise _no_hosts(inventory, limit, pattern, env, cwd)
    return sorted(hosts)


def check_extra_vars(items: list[str]) -> dict:
    """Parses every -e value as ansible-playbook will (JSON/YAML, @FILE, KEY=VALUE) and returns them merged.

    A value Ansible would reject -- or a bare word, which Ansible silently ignores -- is a RunBroken
    whose message never repeats the value (it may hold a credential)."""
    from ansible import context
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.utils.vars import load_extra_vars

    merged: dict = {}
    saved = context.CLIARGS
    try:
        for number, item in enumerate(items, 1):
            context.CLIARGS = ImmutableDict(extra_vars=(item,))
            load_extra_vars.extra_vars = None  # Ansible caches the first result on the function
            kind = "@FILE" if item.startswith("@") else "JSON/YAML" if item.lstrip()[:1] in "{[" else "KEY=VALUE"
            try:
                parsed = load_extra_vars(DataLoader())
            except Exception as exc:  # Ansible raises several error types here; all mean the same to us
                message = one_line(" ".join(str(exc).splitlines()[:2]) or type(exc).__name__)
                if "vault" in message.lower():
                    continue  # encrypted @FILE: Ansible decrypts it with the --vault-* options passed through
                if not item.startswith("@"):
                    message = message.replace(item, "VALUE")  # never echo a value: it may be a credential
                shown = f"{item} " if item.startswith("@") else ""
                raise RunBroken(f"-e argument {number} {shown}({kind}) is not valid: {message}; "
                                "give KEY=VALUE pairs, a JSON or YAML mapping, or @FILE") from None
            if "_raw_params" in parsed:
                raise RunBroken(f"-e argument {number} has a word without '=' (Ansible would ignore it); "
                                "give KEY=VALUE pairs, a JSON or YAML mapping, or @FILE")
            merged.update(parsed)
    finally:
        context.CLIARGS = saved
        load_extra_vars.extra_vars = None
    return merged


_FILE_KINDS = ((stat.S_ISFIFO, "a pipe (FIFO)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def refuse_unbounded_extra_vars_files(items: list[str], cwd: Path) -> None:
    """Refuses `-e @FILE` where FILE is not a regular file: reading a pipe, /dev/stdin or a device would
    wait with no bound before anything starts (a missing file is left to Ansible's own message)."""
    for number, item in enumerate(items, 1):
        if not item.startswith("@"):
            continue
        path = Path(item[1:]).expanduser()
        try:
            mode = os.stat(path if path.is_absolute() else cwd / path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
            raise RunBroken(f"-e argument {number} {item} names {kind}, not a regular file: reading it could wait "
                            "forever; write the variables to a file and give -e @FILE")


# gpufleet_report_dir and each role's <role>_report_dir (preflight_report_dir, smoke_test_report_dir, ...).
_REPORT_DIR_VARIABLE = re.compile(r"(^|_)report_dir$")


def refuse_report_dir_override(extra: dict) -> None:
    """A run's reports belong under --artifacts, where gpufleet scrubs credentials out of them and counts
    their findings; an -e report directory would move them where neither happens, so it is refused (a
    playbook run without gpufleet still takes gpufleet_report_dir)."""
    moved = sorted(name for name in extra if _REPORT_DIR_VARIABLE.search(str(name)))
    if moved:
        raise RunBroken(f"-e {', '.join(moved)} would write the reports outside --artifacts, where gpufleet "
                        "neither scrubs credentials from them nor counts their findings; leave it out and give "
                        "--artifacts DIR instead (the reports go to DIR/reports)")


def _plain(value):
    """Ansible's parsed values (tagged strings in 2.19) as plain JSON-able data."""
    return json.loads(json.dumps(value, default=str))


def short_stage_names(root: Path | None) -> dict[str, str]:
    """Play name -> short stage name (its most specific tag), read from the collection's playbooks."""
    import yaml

    names: dict[str, str] = {}
    if root is None:
        return names
    for path in sorted((root / "playbooks").glob("*.yml")):
        try:
            plays = yaml.safe_load(path.read_text()) or []
        except (OSError, yaml.YAMLError):
            continue
        for play in plays if isinstance(plays, list) else []:
            if isinstance(play, dict) and play.get("name") and play.get("tags"):
                tags = play["tags"] if isinstance(play["tags"], list) else [play["tags"]]
                names.setdefault(play["name"], str(tags[-1]))
    return names


@dataclass
class StageRun:
    stage: str
    inventory: str
    artifacts: Path
    rc: int
    tracker: EventTracker
    hosts: list[str]
    duration_s: float
    runner_status: str
    stage_names: dict[str, str] = field(default_factory=dict)
    ansible_error: str | None = None
    cancelled: str | None = None  # the signal that cancelled the run ("SIGTERM"), None when it was not
    stopped_by: str | None = None  # the last signal the cancel had to send to end Ansible's processes
    cancelled_late: bool = False  # the cancel came after ansible-playbook had ended
    settings: list = field(default_factory=list)  # the needed settings in force (gpufleet.settings.Effective)


@dataclass
class _Plan:
    """What one run was asked to do, checked before anything is written."""

    stage: str
    inventory: str
    target: str  # the playbook: the stage's FQCN, or a path a test gave
    options: AnsibleOptions
    extra: dict  # the -e variables, parsed as Ansible parses them
    found: collection_mod.Collection | None
    cwd: Path
    stage_playbook: bool = True  # the stage's own playbook (not one a test gave)


def _check_extra_config(extra: dict) -> None:
    """The -e values checked here, before ansible-playbook starts, for every stage: a request the schema refuses
    or a near-miss of one of gpufleet's variable names (preflight's first play checks the inventory's too)."""
    from gpufleet.mirror_targets import module_utils

    try:
        schema = module_utils("request_schema")
        from ansible_collections.gpufleet.cluster.plugins.filter.preflight_checks import known_variables
    except Exception:  # no collection: the playbook's own checks remain
        return
    plain = _plain(extra)
    problems = schema.variable_problems(list(plain), known_variables())
    if "gpufleet_stack_request" in plain:
        problems += schema.request_problems(plain["gpufleet_stack_request"])
    if problems:
        raise ConfigurationError(problems)


# Stages whose playbook checks the inventory's configuration in a first play of its own (playbooks/preflight.yml).
_STAGES_WITH_CONFIG_PLAY = ("preflight", "site")


def inventory_config_problems(plan: _Plan, env: dict, hosts: list[str]) -> list[str]:
    """The configuration errors of the selected hosts' inventory variables (with -e over them), checked as
    preflight's first play checks them: the stack request, the profile, near-miss variable names. [] when the
    collection or the inventory's variables cannot be read (the playbook's own checks remain)."""
    try:
        from ansible_collections.gpufleet.cluster.plugins.filter.preflight_checks import preflight_config_problems
        args = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", plan.inventory, "--list",
                *plan.options.vault_args()]
        proc = subprocess.run(args, capture_output=True, text=True, cwd=plan.cwd, env=env, timeout=300, check=True)
        hostvars = json.loads(proc.stdout).get("_meta", {}).get("hostvars", {})
    except Exception:  # noqa: BLE001 - no collection, no ansible-inventory, vault, anything: not a verdict here
        return []
    problems: list[str] = []
    for host in hosts:
        merged = {**hostvars.get(host, {}), **_plain(plan.extra)}
        for problem in preflight_config_problems(
                merged.get("preflight_stack_request", merged.get("gpufleet_stack_request")),
                profile=merged.get("preflight_profile", merged.get("gpufleet_profile", "training")),
                builtin_profiles=merged.get("preflight_profiles"),
                custom_profiles=merged.get("preflight_custom_profiles", merged.get("gpufleet_custom_profiles", {})),
                variables=list(merged)):
            if problem not in problems:
                problems.append(problem)
    return problems


def _plan(stage: str, inventory: str | Path, options: AnsibleOptions, playbook: Path | None) -> _Plan:
    if stage not in STAGE_PLAYBOOKS:
        raise RunBroken(f"unknown stage {stage!r}; stages: {', '.join(STAGE_PLAYBOOKS)}")
    inventory = str(inventory)
    if Path(inventory).exists():
        inventory = str(Path(inventory).resolve())
    elif "," not in inventory:
        raise RunBroken(f"inventory {inventory} does not exist (give a file, a directory or a host list 'a,b,')")
    refuse_unbounded_extra_vars_files(options.extra_vars, Path.cwd())
    extra = check_extra_vars(options.extra_vars)
    refuse_report_dir_override(extra)
    _check_extra_config(extra)
    found = collection_mod.locate()
    if playbook is not None:
        target = str(playbook)
    else:
        target = collection_mod.playbook_fqcn(STAGE_PLAYBOOKS[stage])
        if found is None:
            raise RunBroken("the gpufleet.cluster collection is neither beside this package (a clone) nor installed "
                            "with it (site-packages/ansible_collections); reinstall gpufleet with pip")
    return _Plan(stage, inventory, target, options, extra, found, Path.cwd(), stage_playbook=playbook is None)


def _environment(plan: _Plan, claimed: artifacts_mod.ArtifactsDir, baseline_dir: Path | None):
    """(the environment ansible-playbook runs with, the needed settings in force)."""
    collection_cfg = plan.found.root / "ansible.cfg" if plan.found else None
    try:
        merged, effective = settings.merge(collection_cfg, plan.options.forks)
    except Exception as exc:  # Ansible raises AnsibleOptionsError and friends for a bad ansible.cfg
        raise RunBroken(f"Ansible's configuration could not be read: {one_line(exc)}") from None
    envvars = {
        **collection_mod.ansible_env(plan.found),
        **merged,
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_FORCE_COLOR": "False",
        "GPUFLEET_REPORT_DIR": str(claimed.reports),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # Baselines live outside the run's artifacts so the next run compares against them.
        "GPUFLEET_BASELINE_DIR": str((baseline_dir or Path("baselines")).resolve()),
        # -v shows results as YAML (multi-line values readable), not one escaped JSON string; the user's
        # own choice wins.
        "ANSIBLE_CALLBACK_RESULT_FORMAT": os.environ.get("ANSIBLE_CALLBACK_RESULT_FORMAT", "yaml"),
        "PYTHONWARNINGS": child_warning_filters(),
    }
    return envvars, effective


# ansible-core 2.19 imports cryptography's DSA names (its ssh-agent client); cryptography 51 warns about DSA on that
# import, in every Ansible process, on every run. Nothing a user can act on, so it is filtered by its message --
# other deprecations still show -- rather than by pinning cryptography below 51, which would hold back its security
# fixes. PYTHONWARNINGS reaches ansible-playbook, its workers, ansible-inventory and ansible (gpufleet.settings
# filters the same warning in the CLI's own process).
DSA_WARNING_FILTER = "ignore:DSA is deprecated"


def child_warning_filters() -> str:
    """PYTHONWARNINGS for Ansible's processes: the user's filters, and the DSA one after them."""
    own = os.environ.get("PYTHONWARNINGS", "")
    return ",".join(item for item in (own, DSA_WARNING_FILTER) if item)


def _smoke_selected(options: AnsibleOptions) -> bool:
    tags = {t.strip() for t in (options.tags or "").split(",") if t.strip()}
    skipped = {t.strip() for t in (options.skip_tags or "").split(",") if t.strip()}
    return "smoke" not in skipped and (not tags or bool(tags & {"smoke", "all"}))


def _inventory_launcher(plan: _Plan, env: dict, host: str) -> str | None:
    """smoke_test_launcher as the inventory sets it for `host` ("torchrun", the role's default, when it
    does not), or None when the inventory's variables cannot be read."""
    args = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", plan.inventory, "--host", host,
            *plan.options.vault_args()]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=plan.cwd, env=env, timeout=300, check=True)
        return str(json.loads(proc.stdout).get("smoke_test_launcher", "torchrun"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _check_smoke_forks(plan: _Plan, env: dict, effective: list, out: TextIO) -> None:
    """Refuses, before anything runs, a torchrun smoke job on more nodes than forks (the smoke role
    would refuse it too, but only when the job starts, at the end of a long run)."""
    if plan.stage not in SMOKE_STAGES or not _smoke_selected(plan.options):
        return
    forks = next(item for item in effective if item.label == "forks")
    try:
        hosts = target_hosts(plan.inventory, plan.options.limit, env, plan.cwd,
                             pattern=str(plan.extra.get("gpufleet_hosts", "gpu_nodes")))
    except RunBroken:
        return  # the smoke play matches no host: there is no job to fit
    problem = settings.forks_problem(len(hosts), int(forks.value), forks.source)
    if problem is None:
        return
    launcher = plan.extra.get("smoke_test_launcher") or _inventory_launcher(plan, env, hosts[0])
    if launcher is None:
        print("gpufleet: forks not checked before the run (the inventory's smoke_test_launcher could not be read); "
              "the smoke role checks them when the job starts", file=out, flush=True)
    elif launcher == "torchrun":
        raise RunBroken(problem)


def _copy_runner_output(private: Path, runner_copy: Path, shown_command: list[str]) -> None:
    """Copies the events and Ansible's output, not runner's env dump (`command`) or its env/ inputs."""
    run_dir = private / "artifacts" / "run"
    for name in ("job_events", "stdout", "stderr", "rc", "status"):
        source = run_dir / name
        if source.is_dir():
            shutil.copytree(source, runner_copy / name)
        elif source.is_file():
            shutil.copy2(source, runner_copy / name)
    (runner_copy / "command").write_text(json.dumps({"command": shown_command}, indent=2) + "\n")


def _run_playbook(plan: _Plan, envvars: dict, claimed: artifacts_mod.ArtifactsDir, tracker: EventTracker,
                  runner: Callable, progress_every: float) -> tuple[int, str, Cancellation]:
    """Runs ansible-playbook through ansible-runner in a private directory, removed on every path. The
    returned Cancellation still holds the cancel signals: the caller restores it once the artifacts are
    scrubbed, so a late cancel cannot cut the scrubbing short."""
    private = make_runner_directory()  # 0700: runner's env dump stays private
    try:
        launcher, pid_file = write_launcher(private, Path(sys.executable).parent / "ansible-playbook")
        cancellation = Cancellation(pid_file)
        in_main_thread = threading.current_thread() is threading.main_thread()
        heartbeat = Heartbeat(tracker, progress_every)
        error = None
        rc, status = 250, "failed"
        try:
            heartbeat.start()
            if in_main_thread:  # signal handlers can only be set there
                cancellation.install()
            result = runner(
                private_data_dir=str(private),
                # ansible-playbook runs in the user's directory, so relative paths (-e @vars.yml,
                # --private-key, an ./ansible.cfg) mean what they mean to ansible-playbook there.
                project_dir=str(plan.cwd),
                binary=str(launcher),
                cmdline=shlex.join([*plan.options.args(), plan.target]),
                inventory=plan.inventory,
                envvars=envvars,
                event_handler=tracker.handle,
                # Without a callback ansible-runner installs its own SIGINT/SIGTERM handlers, which
                # SIGKILL ansible-playbook alone and orphan its workers; gpufleet.cancel ends them all.
                cancel_callback=lambda: False,
                suppress_env_files=True,
                quiet=True,  # with -v the tracker prints Ansible's output, masked
                ident="run",
            )
            rc = result.rc if result.rc is not None else 250
            status = str(result.status)
        except Exception as exc:  # ansible-runner raises ConfigurationError and friends before Ansible starts
            error = RunBroken(f"ansible-runner could not start the playbook: {one_line(exc)}")
        finally:
            cancellation.finished()  # waits until a cancel has ended every process it found
            heartbeat.stop()
            tracker.finish()
        try:
            shown = ["ansible-playbook", "-i", plan.inventory, *plan.options.shown_args(), plan.target]
            try:
                _copy_runner_output(private, claimed.runner_copy, shown)
            except OSError as exc:
                raise error or RunBroken(f"ansible-runner's output could not be copied into {claimed.runner_copy}: "
                                         f"{one_line(exc.strerror or exc)}") from None
            if error is not None:
                raise error
        except BaseException:
            cancellation.restore()
            raise
        return rc, status, cancellation
    finally:
        shutil.rmtree(private, ignore_errors=True)


def run_stage(stage: str, inventory: str | Path, artifacts: Path | artifacts_mod.ArtifactsDir,
              options: AnsibleOptions | None = None, out: TextIO = sys.stdout, runner: Callable | None = None,
              playbook: Path | None = None, baseline_dir: Path | None = None,
              progress_every: float = DEFAULT_PROGRESS_EVERY_S, secrets: list[str] | None = None) -> StageRun:
    """Runs one stage's playbook through ansible-runner; raises RunBroken when it cannot start.

    `artifacts` is a directory (claimed here for the run, gpufleet.artifacts) or one the caller
    claimed; `playbook` replaces the stage's own playbook (tests use it to run small plays); `secrets`
    are values scrubbed from every artifact and printed line besides the secret-looking environment
    and -e values (see gpufleet.secrets)."""
    plan = _plan(stage, inventory, options or AnsibleOptions(), playbook)
    if isinstance(artifacts, artifacts_mod.ArtifactsDir):
        return _run_claimed(plan, artifacts, out, runner, baseline_dir, progress_every, secrets)
    try:
        claimed = artifacts_mod.claim(Path(artifacts))
    except (artifacts_mod.ArtifactsRefused, artifacts_mod.ArtifactsUnwritable) as exc:
        raise RunBroken(str(exc)) from None
    with claimed:
        return _run_claimed(plan, claimed, out, runner, baseline_dir, progress_every, secrets)


def _run_claimed(plan: _Plan, claimed: artifacts_mod.ArtifactsDir, out: TextIO, runner: Callable | None,
                 baseline_dir: Path | None, progress_every: float, secrets: list[str] | None) -> StageRun:
    envvars, effective = _environment(plan, claimed, baseline_dir)
    width = console.width()
    for line in settings.describe(effective):
        wrapped = textwrap.wrap(f"gpufleet: {line}", width, subsequent_indent="    ", break_on_hyphens=False,
                                break_long_words=False)
        print("\n".join(wrapped), file=out, flush=True)
    # The stage's own playbooks run every play on gpufleet_hosts (-e), else gpu_nodes; a test's playbook on all.
    pattern = str(plan.extra.get("gpufleet_hosts", "gpu_nodes")) if plan.stage_playbook else "all"
    hosts = target_hosts(plan.inventory, plan.options.limit, {**os.environ, **envvars}, plan.cwd, pattern=pattern)
    if plan.stage_playbook and plan.stage not in _STAGES_WITH_CONFIG_PLAY:
        problems = inventory_config_problems(plan, {**os.environ, **envvars}, hosts)
        if problems:
            raise ConfigurationError(problems)
    _check_smoke_forks(plan, {**os.environ, **envvars}, effective, out)
    masked = list(secrets or []) + secret_values(extra_vars=_plain(plan.extra))
    tracker = EventTracker(out=out, colour=colour_enabled(out), secrets=masked, stream=plan.options.verbosity > 0)
    if runner is None:
        import ansible_runner  # imported late: the CLI's --help works without it

        runner = ansible_runner.run
    started = time.monotonic()
    rc, status, cancellation = _run_playbook(plan, envvars, claimed, tracker, runner, progress_every)
    try:
        output = ""
        for name in ("stdout", "stderr"):
            if (claimed.runner_copy / name).is_file():
                output += (claimed.runner_copy / name).read_text(errors="replace") + "\n"
        scrub_tree(claimed.path, masked)
    finally:
        cancellation.restore()  # only now: a cancel while scrubbing is recorded, never half a scrub
    return StageRun(stage=plan.stage, inventory=plan.inventory, artifacts=claimed.path, rc=rc, tracker=tracker,
                    hosts=hosts, duration_s=round(time.monotonic() - started, 2), runner_status=status,
                    stage_names=short_stage_names(plan.found.root if plan.found else None),
                    ansible_error=ansible_error(output) or (tracker.error_lines[0] if tracker.error_lines else None),
                    cancelled=cancellation.signal_name, stopped_by=cancellation.stopped_by,
                    cancelled_late=cancellation.late, settings=effective)


def classify(run: StageRun) -> tuple[int, str]:
    """Maps a finished run to (exit code, one-line reason)."""
    if run.cancelled and run.cancelled_late:
        return EXIT_RUN_BROKEN, (f"cancelled by {describe_signal(run.cancelled)} after ansible-playbook ended (its "
                                 "events are in the artifacts); no node is counted ready")
    if run.cancelled:
        how = {"SIGINT": "interrupted", "SIGTERM": "terminated",
               "SIGKILL": "killed"}.get(run.stopped_by or "", "already gone")
        return EXIT_RUN_BROKEN, (f"cancelled by {describe_signal(run.cancelled)}: ansible-playbook and the processes "
                                 f"it started were {how}; the nodes it had not finished are not_run")
    if run.tracker.config_errors:  # the input was wrong: no node is to blame, whatever else failed
        return EXIT_RUN_BROKEN, run.tracker.config_errors[0]
    failed = failed_hosts(run)
    unreachable = unreachable_hosts(run)
    seen = set(run.tracker.hosts_seen)
    if run.rc == 0 and not run.tracker.hosts_checked:
        # Nothing was checked (e.g. --tags or --skip-tags left no task): no evidence is no pass.
        return EXIT_RUN_BROKEN, "no task ran on any node (do --tags/--skip-tags/--limit leave anything to run?)"
    if run.rc == 0 and not failed:
        return EXIT_PASSED, "all nodes passed"
    if seen and unreachable == seen:
        first = next(t.first_failure for per_host in run.tracker.tallies.values() for t in per_host.values()
                     if t.unreachable)
        return EXIT_RUN_BROKEN, one_line(f"every node was unreachable ({', '.join(sorted(seen))}): {first}")
    if failed and (run.rc == 0 or (run.rc & ~_ANSIBLE_HOST_FAILURE_BITS) == 0):
        return EXIT_NODES_FAILED, "nodes failed: " + console.names(sorted(failed), REASON_NAMES_WIDTH)
    detail = f": {run.ansible_error}" if run.ansible_error else f" ({run.runner_status})"
    if not seen:
        return EXIT_RUN_BROKEN, one_line(f"ansible-playbook exited {run.rc} before any node ran a task{detail}")
    return EXIT_RUN_BROKEN, one_line(f"ansible-playbook exited {run.rc}{detail}")


def unreachable_hosts(run: StageRun) -> set[str]:
    return {host for per_host in run.tracker.tallies.values() for host, tally in per_host.items() if tally.unreachable}


def failed_hosts(run: StageRun) -> set[str]:
    failed = set()
    for per_host in run.tracker.tallies.values():
        for host, tally in per_host.items():
            if tally.failed or tally.unreachable:
                failed.add(host)
    return failed
