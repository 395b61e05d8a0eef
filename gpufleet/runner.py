"""Run a gpufleet stage through ansible-runner and turn its events into a per-node verdict.

ansible-runner is the interface automation controllers use; going through it (instead of scraping
ansible-playbook's terminal output) gives typed per-host events. It runs in a private temporary
directory, because it writes the process environment and the full command line there; only the
events and Ansible's output are copied into --artifacts, scrubbed of credentials.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from gpufleet import collection as collection_mod
from gpufleet.secrets import MASK, scrub_tree, secret_values

STAGE_PLAYBOOKS = {
    "preflight": "playbooks/preflight.yml",
    "stack": "playbooks/gpu_stack.yml",
    "fabric": "playbooks/fabric.yml",
    "validate": "playbooks/validate.yml",
    "smoke": "playbooks/smoke_test.yml",
    "site": "playbooks/site.yml",
}

# Stable exit codes: a pipeline branches on these, so they never change meaning.
EXIT_PASSED = 0
EXIT_NODES_FAILED = 1
EXIT_RUN_BROKEN = 2

# ansible-playbook's (TaskQueueManager's) bits for "hosts failed" (2), "hosts unreachable" (4) and
# "a play stopped on failures" (8); any other non-zero code means the run itself could not proceed.
_ANSIBLE_HOST_FAILURE_BITS = 2 | 4 | 8

# A progress line at least this often while a task runs (the issue asks for one every 15 s at most).
DEFAULT_PROGRESS_EVERY_S = 10.0


class RunBroken(Exception):
    """The run could not be carried out at all (bad input, inventory, missing playbook, runner error)."""


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
        for value in self.vault_ids:
            args += ["--vault-id", value]
        for value in self.vault_password_files:
            args += ["--vault-password-file", value]
        args += ["--check"] if self.check else []
        args += ["--diff"] if self.diff else []
        args += ["-" + "v" * self.verbosity] if self.verbosity else []
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
    first_failure: str | None = None
    failed_tasks: list = field(default_factory=list)

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
            "first_failure": self.first_failure,
        }


_NOT_EVIDENCE_ACTIONS = {"ansible.builtin.validate_argument_spec", "validate_argument_spec"}

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
    colour: bool = False
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
            if "ERROR" in (event.get("stdout") or ""):
                self._note_error(event.get("stdout", ""))
        return True  # keep the event on disk as well

    def _note_error(self, stdout: str) -> None:
        for line in stdout.splitlines():
            line = line.strip()
            if line.startswith(("[ERROR]:", "ERROR!")) and len(self.error_lines) < 5:
                self.error_lines.append(_one_line(line))

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
        # Role argument validation runs under every --tags; it checks input, not the node.
        if data.get("task_action") not in _NOT_EVIDENCE_ACTIONS and host not in self.hosts_checked:
            self.hosts_checked.append(host)
        tally = self.tallies[self._current_play].setdefault(host, PlayTally())
        result = data.get("res") or {}
        if kind == "runner_on_ok":
            tally.ok += 1
            tally.changed += 1 if result.get("changed") else 0
        elif kind == "runner_on_skipped":
            tally.skipped += 1
        elif kind == "runner_on_unreachable":
            tally.unreachable += 1
            tally.first_failure = tally.first_failure or _one_line(result.get("msg", "unreachable"))
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                tally.ignored += 1
            else:
                tally.failed += 1
                tally.failed_tasks.append(data.get("task", ""))
                if tally.first_failure is None:
                    task = data.get("task", "")
                    tally.first_failure = f"{task}: {_one_line(result.get('msg', ''))}".strip(": ")

    def heartbeat_line(self) -> str | None:
        """What is running now: the play, the task and the nodes still in it (None between tasks)."""
        with self.lock:
            if self._current_task is None or not self._task_running:
                return None
            now = time.monotonic()
            running = sorted(self._task_running)
            longest = max(now - t for t in self._task_running.values())
            shown = ", ".join(running[:8]) + (f" and {len(running) - 8} more" if len(running) > 8 else "")
            done = len(self._task_done)
            return (f"[{now - self.started:7.1f}s] {self._current_play} / {self._current_task}: "
                    f"still running on {shown} ({done} done, {longest:.0f}s so far)")

    def _finish_current_play(self) -> None:
        play = self._current_play
        if play is None or play in self._reported_plays:
            return
        self._reported_plays.add(play)
        elapsed = time.monotonic() - self.started
        for host, tally in sorted(self.tallies[play].items()):
            detail = f" changed={tally.changed}" if tally.changed else ""
            if tally.first_failure:
                detail += f" -- {tally.first_failure}"
            status = paint(tally.status, tally.status, self.colour)
            print(f"[{elapsed:7.1f}s] {play:<32} {host:<20} {status}{detail}", file=self.out, flush=True)

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
                print(line, file=self.tracker.out, flush=True)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def _one_line(text, limit: int = 300) -> str:
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
            return _one_line(message.strip() + (f" ({cause})" if cause else ""))
    return None


def _first_warning_cause(output: str) -> str | None:
    """Why the inventory did not parse: the cause of the first plugin failure Ansible warned about."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "<<< caused by >>>" in line and i + 2 < len(lines) and lines[i + 2].strip():
            return _one_line(lines[i + 2])
    return None


def target_hosts(inventory: str, limit: str | None, env: dict, cwd: Path) -> list[str]:
    """The hosts the inventory and --limit select, asked from Ansible itself; RunBroken otherwise.

    ANSIBLE_INVENTORY_UNPARSED_FAILED makes Ansible fail on a source it cannot parse instead of
    warning and carrying on with no hosts."""
    args = [str(Path(sys.executable).parent / "ansible"), "all", "-i", inventory, "--list-hosts"]
    if limit:
        args += ["--limit", limit]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RunBroken(f"could not list the inventory's hosts with {args[0]}: {exc}") from None
    output = proc.stderr + "\n" + proc.stdout
    if proc.returncode != 0:
        error = ansible_error(output) or _one_line(proc.stderr.strip().splitlines()[-1:] or ["unknown error"])
        if "no hosts to target" in output or "leaves us with no hosts" in output or "does not match any hosts" in output:
            where = f"--limit {limit!r}" if limit else "the inventory"
            raise RunBroken(f"{where} matches no host of inventory {inventory}: {error}")
        cause = _first_warning_cause(output)
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
        raise RunBroken(f"inventory {inventory} lists no hosts" + (f" matching --limit {limit!r}" if limit else ""))
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
                message = _one_line(" ".join(str(exc).splitlines()[:2]) or type(exc).__name__)
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


def _prepare_artifacts(artifacts: Path) -> tuple[Path, Path]:
    try:
        artifacts.mkdir(parents=True, exist_ok=True)
        reports = artifacts / "reports"
        reports.mkdir(parents=True, exist_ok=True)
        runner_copy = artifacts / "runner"
        if runner_copy.exists():
            shutil.rmtree(runner_copy)
        runner_copy.mkdir()
        probe = artifacts / ".gpufleet-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise RunBroken(f"artifacts directory {artifacts} is not writable: {exc.strerror or exc}") from None
    return reports, runner_copy


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


def run_stage(stage: str, inventory: str | Path, artifacts: Path, options: AnsibleOptions | None = None,
              out: TextIO = sys.stdout, runner: Callable | None = None, playbook: Path | None = None,
              baseline_dir: Path | None = None, progress_every: float = DEFAULT_PROGRESS_EVERY_S,
              secrets: list[str] | None = None) -> StageRun:
    """Runs one stage's playbook through ansible-runner; raises RunBroken when it cannot start.

    `playbook` replaces the stage's own playbook (tests use it to run small plays); `secrets` are
    values scrubbed from every artifact besides the secret-looking environment and -e values
    (see gpufleet.secrets)."""
    options = options or AnsibleOptions()
    if stage not in STAGE_PLAYBOOKS:
        raise RunBroken(f"unknown stage {stage!r}; stages: {', '.join(STAGE_PLAYBOOKS)}")
    cwd = Path.cwd()
    inventory = str(inventory)
    if Path(inventory).exists():
        inventory = str(Path(inventory).resolve())
    elif "," not in inventory:
        raise RunBroken(f"inventory {inventory} does not exist (give a file, a directory or a host list 'a,b,')")
    extra = check_extra_vars(options.extra_vars)
    found = collection_mod.locate()
    if playbook is not None:
        target = str(playbook)
    else:
        target = collection_mod.playbook_fqcn(STAGE_PLAYBOOKS[stage])
        if found is None:
            raise RunBroken("the gpufleet.cluster collection is neither beside this package (a clone) nor inside "
                            "it (a wheel); reinstall gpufleet with pip from a clone or a release")
    artifacts = artifacts.resolve()
    reports, runner_copy = _prepare_artifacts(artifacts)

    ansible_bin = Path(sys.executable).parent
    envvars = {
        **collection_mod.ansible_env(found),
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_FORCE_COLOR": "False",
        "GPUFLEET_REPORT_DIR": str(reports),
        "PATH": f"{ansible_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        # Baselines live outside the run's artifacts so the next run compares against them.
        "GPUFLEET_BASELINE_DIR": str((baseline_dir or Path("baselines")).resolve()),
    }
    hosts = target_hosts(inventory, options.limit, {**os.environ, **envvars}, cwd)

    tracker = EventTracker(out=out, colour=colour_enabled(out))
    if runner is None:
        import ansible_runner  # imported late: the CLI's --help works without it

        runner = ansible_runner.run
    args = options.args()
    private = Path(tempfile.mkdtemp(prefix="gpufleet-runner-"))  # 0700: runner's env dump stays private
    heartbeat = Heartbeat(tracker, progress_every)
    started = time.monotonic()
    try:
        heartbeat.start()
        result = runner(
            private_data_dir=str(private),
            # ansible-playbook runs in the user's directory, so relative paths (-e @vars.yml,
            # --private-key, an ./ansible.cfg) mean what they mean to ansible-playbook there.
            project_dir=str(cwd),
            playbook=target,
            inventory=inventory,
            cmdline=shlex.join(args),
            envvars=envvars,
            event_handler=tracker.handle,
            suppress_env_files=True,
            quiet=options.verbosity == 0,
            ident="run",
        )
        rc = result.rc if result.rc is not None else 250
        status = str(result.status)
    except Exception as exc:  # ansible-runner raises ConfigurationError and friends before Ansible starts
        raise RunBroken(f"ansible-runner could not start the playbook: {_one_line(exc)}") from None
    finally:
        heartbeat.stop()
        tracker.finish()
        shown = ["ansible-playbook", "-i", inventory, *options.shown_args(), target]
        _copy_runner_output(private, runner_copy, shown)
        shutil.rmtree(private, ignore_errors=True)
    output = ""
    for name in ("stdout", "stderr"):
        if (runner_copy / name).is_file():
            output += (runner_copy / name).read_text(errors="replace") + "\n"
    scrub_tree(artifacts, list(secrets or []) + secret_values(extra_vars=_plain(extra)))
    return StageRun(stage=stage, inventory=inventory, artifacts=artifacts, rc=rc, tracker=tracker,
                    hosts=hosts, duration_s=round(time.monotonic() - started, 2), runner_status=status,
                    stage_names=short_stage_names(found.root if found else None),
                    ansible_error=ansible_error(output) or (tracker.error_lines[0] if tracker.error_lines else None))


def classify(run: StageRun) -> tuple[int, str]:
    """Maps a finished run to (exit code, one-line reason)."""
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
        return EXIT_RUN_BROKEN, _one_line(f"every node was unreachable ({', '.join(sorted(seen))}): {first}")
    if failed and (run.rc == 0 or (run.rc & ~_ANSIBLE_HOST_FAILURE_BITS) == 0):
        return EXIT_NODES_FAILED, "nodes failed: " + ", ".join(sorted(failed))
    detail = f": {run.ansible_error}" if run.ansible_error else f" ({run.runner_status})"
    if not seen:
        return EXIT_RUN_BROKEN, _one_line(f"ansible-playbook exited {run.rc} before any node ran a task{detail}")
    return EXIT_RUN_BROKEN, _one_line(f"ansible-playbook exited {run.rc}{detail}")


def unreachable_hosts(run: StageRun) -> set[str]:
    return {host for per_host in run.tracker.tallies.values() for host, tally in per_host.items() if tally.unreachable}


def failed_hosts(run: StageRun) -> set[str]:
    failed = set()
    for per_host in run.tracker.tallies.values():
        for host, tally in per_host.items():
            if tally.failed or tally.unreachable:
                failed.add(host)
    return failed
