"""Run a gpufleet stage through ansible-runner and turn its events into a per-node verdict.

ansible-runner is the interface automation controllers use; going through it (instead of scraping
ansible-playbook's terminal output) gives typed per-host events and an artifacts directory that a
pipeline can keep.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

REPO_ROOT = Path(__file__).resolve().parent.parent

STAGE_PLAYBOOKS = {
    "preflight": "playbooks/preflight.yml",
    "stack": "playbooks/gpu_stack.yml",
    "fabric": "playbooks/fabric.yml",
    "validate": "playbooks/validate.yml",
    "smoke": "playbooks/smoke_test.yml",
    "site": "site.yml",
}

# Stable exit codes: a pipeline branches on these, so they never change meaning.
EXIT_PASSED = 0
EXIT_NODES_FAILED = 1
EXIT_RUN_BROKEN = 2

# ansible-playbook's codes for "hosts failed" (2), "hosts unreachable" (4) and "a play stopped on
# failures" (8); anything else non-zero means the run itself could not proceed.
_ANSIBLE_HOST_FAILURE_CODES = {2, 4, 8}


class RunBroken(Exception):
    """The run could not be carried out at all (bad inventory, missing playbook, runner error)."""


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


@dataclass
class EventTracker:
    """Folds ansible-runner events into per-play, per-host tallies and prints progress lines."""

    out: TextIO = sys.stdout
    started: float = field(default_factory=time.monotonic)
    plays: list[str] = field(default_factory=list)
    tallies: dict[str, dict[str, PlayTally]] = field(default_factory=dict)
    hosts_seen: list[str] = field(default_factory=list)
    _current_play: str | None = None
    _reported_plays: set = field(default_factory=set)

    def handle(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self._finish_current_play()
            name = data.get("play") or data.get("name") or f"play {len(self.plays) + 1}"
            # Plays of the same name (site.yml imports) stay apart.
            if name in self.tallies:
                name = f"{name} #{sum(1 for p in self.plays if p.startswith(name)) + 1}"
            self.plays.append(name)
            self.tallies[name] = {}
            self._current_play = name
        elif kind.startswith("runner_on_") or kind.startswith("runner_item_on_"):
            self._count(kind, data)
        elif kind == "playbook_on_stats":
            self._finish_current_play()
        return True  # keep the event on disk as well

    def _count(self, kind: str, data: dict) -> None:
        host = data.get("host")
        if not host or self._current_play is None or kind.startswith("runner_item_on_"):
            return
        if host not in self.hosts_seen:
            self.hosts_seen.append(host)
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
            print(f"[{elapsed:7.1f}s] {play:<32} {host:<20} {tally.status}{detail}", file=self.out, flush=True)


def _one_line(text, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def check_inventory(inventory: Path, ansible_bin: Path) -> list[str]:
    """Returns the inventory's host names, or raises RunBroken with a one-line reason."""
    if not inventory.exists():
        raise RunBroken(f"inventory {inventory} does not exist")
    proc = subprocess.run(
        [str(ansible_bin / "ansible-inventory"), "-i", str(inventory), "--list"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=_ansible_env(), timeout=120, check=False,
    )
    # ansible-inventory only warns on an unparsable source; treat that as the error it is.
    unparsed = [line for line in proc.stderr.splitlines() if "Unable to parse" in line or "ERROR" in line]
    if proc.returncode != 0 or unparsed:
        reason = unparsed[0] if unparsed else proc.stderr.strip().splitlines()[-1:] or ["unknown error"]
        reason = reason if isinstance(reason, str) else reason[0]
        raise RunBroken(f"inventory {inventory} could not be parsed: {_one_line(reason)}")
    hosts = sorted(json.loads(proc.stdout).get("_meta", {}).get("hostvars", {}).keys())
    if not hosts:
        raise RunBroken(f"inventory {inventory} lists no hosts")
    return hosts


def _ansible_env() -> dict:
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(REPO_ROOT / "ansible.cfg")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class StageRun:
    stage: str
    inventory: Path
    artifacts: Path
    rc: int
    tracker: EventTracker
    hosts: list[str]
    duration_s: float
    runner_status: str


def run_stage(stage: str, inventory: Path, artifacts: Path, limit: str | None = None,
              extra_vars: dict | None = None, out: TextIO = sys.stdout,
              runner: Callable | None = None, playbook: Path | None = None,
              tags: str | None = None, baseline_dir: Path | None = None) -> StageRun:
    """Runs one stage's playbook through ansible-runner; raises RunBroken when it cannot start.

    `playbook` replaces the stage's own playbook (tests use it to run small plays)."""
    if stage not in STAGE_PLAYBOOKS:
        raise RunBroken(f"unknown stage {stage!r}; stages: {', '.join(STAGE_PLAYBOOKS)}")
    inventory = inventory.resolve()
    ansible_bin = Path(sys.executable).parent
    hosts = check_inventory(inventory, ansible_bin)
    playbook = playbook or REPO_ROOT / STAGE_PLAYBOOKS[stage]
    if not playbook.exists():
        raise RunBroken(f"stage {stage}: playbook {playbook} is missing")

    artifacts = artifacts.resolve()
    reports = artifacts / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    runner_dir = artifacts / "runner"
    if runner_dir.exists():
        shutil.rmtree(runner_dir)
    runner_dir.mkdir(parents=True)

    envvars = {
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "GPUFLEET_REPORT_DIR": str(reports),
        "PATH": f"{ansible_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_FORCE_COLOR": "0",
        # Baselines live outside the run's artifacts so the next run compares against them.
        "GPUFLEET_BASELINE_DIR": str((baseline_dir or Path("baselines")).resolve()),
    }
    tracker = EventTracker(out=out)
    if runner is None:
        import ansible_runner  # imported late: the CLI's --help works without it

        runner = ansible_runner.run
    started = time.monotonic()
    result = runner(
        private_data_dir=str(runner_dir),
        project_dir=str(REPO_ROOT),
        playbook=str(playbook),
        inventory=str(inventory),
        limit=limit,
        tags=tags,
        extravars=extra_vars or {},
        envvars=envvars,
        event_handler=tracker.handle,
        quiet=True,
        ident="run",
    )
    tracker._finish_current_play()
    rc = result.rc if result.rc is not None else 250
    return StageRun(stage=stage, inventory=inventory, artifacts=artifacts, rc=rc, tracker=tracker,
                    hosts=hosts, duration_s=round(time.monotonic() - started, 2),
                    runner_status=str(result.status))


def classify(run: StageRun) -> tuple[int, str]:
    """Maps a finished run to (exit code, one-line reason)."""
    failed = failed_hosts(run)
    if run.rc == 0 and not failed:
        return EXIT_PASSED, "all nodes passed"
    if failed and (run.rc in _ANSIBLE_HOST_FAILURE_CODES or run.rc == 0):
        return EXIT_NODES_FAILED, "nodes failed: " + ", ".join(sorted(failed))
    if not run.tracker.hosts_seen:
        return EXIT_RUN_BROKEN, f"ansible-playbook exited {run.rc} before any node ran a task"
    return EXIT_RUN_BROKEN, f"ansible-playbook exited {run.rc} ({run.runner_status})"


def failed_hosts(run: StageRun) -> set[str]:
    failed = set()
    for per_host in run.tracker.tallies.values():
        for host, tally in per_host.items():
            if tally.failed or tally.unreachable:
                failed.add(host)
    return failed
