"""The machine-readable run summary: one JSON document a pipeline decides on.

Its schema is docs/run-summary.schema.json; `SCHEMA_VERSION` changes whenever a field changes
meaning or disappears (additions keep the version).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from gpufleet import console
from gpufleet.runner import (EXIT_NODES_FAILED, EXIT_PASSED, EXIT_RUN_BROKEN, REASON_NAMES_WIDTH, StageRun, one_line,
                             classify, failed_hosts)

SCHEMA_VERSION = "1.0"


def _schema_path() -> Path:
    """docs/run-summary.schema.json of the clone, else the copy inside the installed collection."""
    from gpufleet import collection

    found = collection.locate()
    root = found.root if found else Path(__file__).resolve().parent.parent
    return root / "docs" / "run-summary.schema.json"


SCHEMA_PATH = _schema_path()
_RESULT_NAMES = {EXIT_PASSED: "passed", EXIT_NODES_FAILED: "nodes_failed"}
# The smoke_test role judges the whole job in one run_once task, so Ansible reports its failure on
# whichever host ran it; the smoke report says which nodes were really at fault.
SMOKE_VERDICT_TASK = "Judge the run and write the reports"
# A reason is one line a person reads in a CI log; longer ones are cut (summary.json has the details).
REASON_LIMIT = 500


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def collect_findings(document) -> list[dict]:
    """Every finding (a dict with code, severity and node) anywhere in a gpufleet report."""
    found = []
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if {"code", "severity", "node"} <= item.keys():
                found.append(item)
                continue
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _versions_by_node(reports: Path) -> dict[str, dict]:
    """Installed versions per node: the stack report's, else what the smoke job saw."""
    versions: dict[str, dict] = {}
    stack = _load(reports / "stack.json") or {}
    for entry in stack.get("nodes") or []:
        installed = entry.get("installed") or {}
        torch = installed.get("torch") or {}
        versions[entry.get("node")] = {
            "driver": installed.get("driver"),
            "cuda": installed.get("cuda_default"),
            "nccl": installed.get("nccl"),
            "torch": torch.get("version") if isinstance(torch, dict) else torch,
        }
    smoke = _load(reports / "smoke.json") or {}
    for node in smoke.get("nodes") or []:
        name = node.get("name")
        if name and name not in versions:
            versions[name] = {
                "driver": node.get("driver_version"),
                "cuda": node.get("cuda_version"),
                "nccl": (smoke.get("versions") or {}).get("nccl"),
                "torch": node.get("torch"),
            }
    return versions


def _smoke_verdict(reports: Path) -> dict | None:
    smoke = _load(reports / "smoke.json")
    if not smoke:
        return None
    verdict = smoke.get("verdict")
    if isinstance(verdict, dict):
        return {"passed": verdict.get("passed"), "reasons": verdict.get("reasons", []),
                "backend": smoke.get("backend")}
    return {"passed": None, "reasons": [], "backend": smoke.get("backend")}


@dataclass
class SmokeBlame:
    """Who the smoke report blames, against what Ansible saw (the verdict fails on the host that ran it)."""

    failed: set[str]  # the failed hosts, corrected
    statuses: dict[str, str] = field(default_factory=dict)  # each smoke node's status in the report
    verdict_only: set[str] = field(default_factory=set)  # hosts whose only failure was running the verdict
    blamed: set[str] = field(default_factory=set)  # hosts the report says failed the job
    reason: str | None = None  # the verdict's first reason
    play: str | None = None  # the play that ran the verdict task


def _verdict_play(run: StageRun) -> str | None:
    return next((play for play, per_host in run.tracker.tallies.items()
                 for tally in per_host.values() if SMOKE_VERDICT_TASK in tally.failed_tasks), None)


def _smoke_attribution(run: StageRun, reports: Path, failed: set[str]) -> SmokeBlame:
    """Moves a failed smoke verdict from the host that ran it to the nodes the report names."""
    smoke = _load(reports / "smoke.json")
    if not smoke:
        return SmokeBlame(failed)
    statuses = {n.get("name"): n.get("status") for n in smoke.get("nodes") or [] if n.get("name")}
    for missing in smoke.get("missing_nodes") or []:
        name = missing if isinstance(missing, str) else (missing or {}).get("name")
        if name:
            statuses[name] = statuses.get(name) if statuses.get(name) not in (None, "ok") else "missing"
    verdict = smoke.get("verdict") or {}
    if verdict.get("passed") is not False:
        return SmokeBlame(failed, statuses)
    only_verdict = set()
    for host in failed:
        tasks = [t for per_host in run.tracker.tallies.values() if host in per_host
                 for t in per_host[host].failed_tasks]
        if tasks and all(t == SMOKE_VERDICT_TASK for t in tasks) and not per_host_unreachable(run, host):
            only_verdict.add(host)
    at_fault = {name for name, status in statuses.items() if status != "ok"}
    # A cluster-wide failure (bandwidth regression, loss not falling) names no single node: every
    # node of the job is then not ready.
    blamed = at_fault or set(smoke.get("hosts_expected") or statuses)
    reasons = verdict.get("reasons") or []
    return SmokeBlame((failed - only_verdict) | blamed, statuses, only_verdict, blamed,
                      one_line(reasons[0]) if reasons else None, _verdict_play(run))


def _apply_smoke_blame(host: str, stages: dict, blame: SmokeBlame) -> None:
    """The smoke play's entry says what the report says about this node, not where the verdict ran."""
    stage = stages.get(blame.play) if blame.play else None
    if stage is None:
        return
    if host in blame.verdict_only and host not in blame.blamed:
        stage["status"] = "changed" if stage["changed"] else "ok"
        stage["first_failure"] = None
    elif host in blame.blamed and stage["status"] not in ("failed", "unreachable"):
        stage["status"] = "failed"
        why = f"smoke job: {blame.statuses.get(host) or 'failed'}" + (f": {blame.reason}" if blame.reason else "")
        stage["first_failure"] = one_line(why)


def per_host_unreachable(run: StageRun, host: str) -> bool:
    return any(per_host[host].unreachable for per_host in run.tracker.tallies.values() if host in per_host)


def _first_failure(stages: dict, stage_names: dict[str, str]) -> tuple[str | None, str | None]:
    """(short name of the first failed stage, its first failure) of one node."""
    for play, stage in stages.items():
        if stage["status"] in ("failed", "unreachable"):
            return short_name(play, stage_names), stage.get("first_failure") or stage["status"]
    return None, None


def _node(host: str, run: StageRun, blame: SmokeBlame, complete: bool, findings: list, versions: dict) -> dict:
    stages = {play: per_host[host].as_dict() for play, per_host in run.tracker.tallies.items() if host in per_host}
    _apply_smoke_blame(host, stages, blame)
    if host in blame.failed:
        status = "failed"
    elif stages and complete:
        status = "passed"
    else:
        status = "not_run"  # never reached, or the run stopped before it finished with this node
    failed_stage, reason = _first_failure(stages, run.stage_names)
    node = {"status": status, "stages": stages, "failed_stage": failed_stage, "reason": reason,
            "findings": [f for f in findings if f.get("node") == host], "versions": versions.get(host, {})}
    if host in blame.statuses:
        node["smoke_status"] = blame.statuses[host]
    return node


def build_summary(run: StageRun, limit: str | None, started_at: datetime) -> dict:
    reports = run.artifacts / "reports"
    findings = []
    for path in sorted(reports.rglob("*.json")):
        findings.extend(collect_findings(_load(path)))
    unique = {json.dumps(f, sort_keys=True): f for f in findings}
    findings = list(unique.values())
    versions = _versions_by_node(reports)
    code, reason = classify(run)
    blame = _smoke_attribution(run, reports, failed_hosts(run))
    if blame.failed != failed_hosts(run) and code != EXIT_RUN_BROKEN:
        code, reason = EXIT_NODES_FAILED, "nodes failed: " + console.names(sorted(blame.failed), REASON_NAMES_WIDTH)
    # A node passes only when Ansible finished the whole playbook with it and the run did not break.
    complete = run.tracker.finished_playbook and code != EXIT_RUN_BROKEN
    all_hosts = sorted(set(run.tracker.hosts_seen) | (set(run.hosts) if limit is None else set()) | blame.failed)
    nodes = {host: _node(host, run, blame, complete, findings, versions) for host in all_hosts}
    return {
        "schema_version": SCHEMA_VERSION,
        "stage": run.stage,
        "inventory": str(run.inventory),
        "limit": limit,
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "duration_s": run.duration_s,
        "ansible_rc": run.rc,
        "exit_code": code,
        "result": _RESULT_NAMES.get(code, "run_broken"),
        "reason": one_line_reason(reason),
        # A configuration error's whole text (the reason is cut at REASON_LIMIT); [] when the input was fine.
        "config_errors": list(run.tracker.config_errors),
        "cancelled": run.cancelled,
        "settings": {item.label: {"value": item.value, "source": item.source} for item in run.settings},
        "nodes": nodes,
        "stage_names": {play: short_name(play, run.stage_names) for play in run.tracker.plays},
        "ready_nodes": sorted(h for h, n in nodes.items() if n["status"] == "passed"),
        "failed_nodes": sorted(h for h, n in nodes.items() if n["status"] == "failed"),
        "smoke": _smoke_verdict(reports),
        "artifacts": {
            "directory": str(run.artifacts),
            "events": str(run.artifacts / "runner" / "job_events"),
            "reports": sorted(str(p) for p in reports.rglob("*") if p.is_file()),
        },
    }


def one_line_reason(reason: str) -> str:
    """Every reason is one line of at most REASON_LIMIT characters (a person reads it, a CI shows it)."""
    return one_line(reason, REASON_LIMIT) or "no reason given"


def broken_summary(stage: str | None, inventory, limit: str | None, reason: str, started_at: datetime,
                   artifacts: Path | None = None) -> dict:
    """The summary of a run that could not start: same schema, no nodes (stage and inventory are
    null when the command line was too broken to name them)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "stage": stage,
        "inventory": None if inventory is None else str(inventory),
        "limit": limit,
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "duration_s": 0.0,
        "ansible_rc": None,
        "exit_code": EXIT_RUN_BROKEN,
        "result": "run_broken",
        "reason": one_line_reason(reason),
        "config_errors": [],
        "cancelled": None,
        "settings": {},
        "nodes": {},
        "stage_names": {},
        "ready_nodes": [],
        "failed_nodes": [],
        "smoke": None,
        "artifacts": {"directory": None if artifacts is None else str(artifacts), "events": None, "reports": []},
    }


_SHORT_STATUS = {"unreachable": "UNREACH", "failed": "FAILED", "changed": "changed", "skipped": "skipped"}
_STATUS_RANK = {"skipped": 0, "ok": 1, "changed": 2, "failed": 3, "unreachable": 4}
_NODE_WIDTH = 24  # longer host names get a line of their own above their row, whole


def short_name(play: str, stage_names: dict[str, str]) -> str:
    """A play's column name: its stage tag (preflight, stack, reboot, fabric, health, smoke), else
    the first word of its name; the full play name stays in summary.json."""
    if play.split(" #")[0] in stage_names:
        return stage_names[play.split(" #")[0]]
    word = (play.split() or ["play"])[0].lower()
    return "".join(c for c in word if c.isalnum())[:9] or "play"


def _rows(summary: dict) -> tuple[list[str], list[dict]]:
    """(stage columns in play order, one row per node: stage column -> worst status of its plays)."""
    names = summary.get("stage_names") or {}
    columns: list[str] = []
    for play in list(names) + [p for node in summary["nodes"].values() for p in node["stages"]]:
        if short_name(play, names) not in columns:
            columns.append(short_name(play, names))
    rows = []
    for host, node in sorted(summary["nodes"].items()):
        cells: dict[str, str] = {}
        for play, tally in node["stages"].items():
            column = short_name(play, names)
            if _STATUS_RANK.get(tally["status"], 0) >= _STATUS_RANK.get(cells.get(column, "skipped"), 0):
                cells[column] = tally["status"]
        fails = sum(1 for f in node["findings"] if f.get("severity") == "fail")
        warns = sum(1 for f in node["findings"] if f.get("severity") == "warn")
        rows.append({"host": host, "status": node["status"], "cells": cells, "counts": f"{fails}F {warns}W",
                     "failed_stage": node.get("failed_stage"), "reason": node.get("reason")})
    return [c for c in columns if any(c in row["cells"] for row in rows)], rows


def _reason_lines(row: dict, width: int) -> list[str]:
    """The node's first failure under its row: at most two lines, cut at the width."""
    if not row["reason"]:
        return []
    # The middle is cut, not the end: a failure's cause ("port 22: Connection refused") ends it.
    text = console.clip_middle(f"{row['failed_stage']}: {row['reason']}", 2 * (width - 4) - 8)
    lines = textwrap.wrap(text, width - 4) or [""]
    if len(lines) > 2:
        lines = [lines[0], console.clip_middle(" ".join(lines[1:]), width - 4)]
    return ["    " + line for line in lines]


def _table(columns: list[str], rows: list[dict], width: int, colour: bool) -> list[str] | None:
    """One column per stage, or None when that does not fit `width`."""
    from gpufleet.runner import paint

    node_w = min(_NODE_WIDTH, max([4] + [len(r["host"]) for r in rows]))
    status_w = max([6] + [len(r["status"]) for r in rows])
    col_w = [max([len(c)] + [len(_SHORT_STATUS.get(r["cells"].get(c, "-"), r["cells"].get(c, "-"))) for r in rows])
             for c in columns]
    widths = [node_w, status_w, *col_w, len("findings")]
    if sum(w + 2 for w in widths) - 2 > width:
        return None

    def line(cells, statuses):
        return "  ".join(paint(str(c).ljust(w), s, colour) if s else str(c).ljust(w)
                         for c, w, s in zip(cells, widths, statuses)).rstrip()

    lines = [line(["node", "status", *columns, "findings"], [None] * len(widths)), "  ".join("-" * w for w in widths)]
    for row in rows:
        statuses = [row["cells"].get(c, "-") for c in columns]
        host = row["host"]
        if len(host) > node_w:
            lines.append(host)
            host = ""
        lines.append(line([host, row["status"], *[_SHORT_STATUS.get(s, s) for s in statuses], row["counts"]],
                          [None, row["status"], *statuses, None]))
        lines.extend(_reason_lines(row, width))
    return lines


def _stacked(columns: list[str], rows: list[dict], width: int, colour: bool) -> list[str]:
    """A block per node: the host whole, its status and findings, then every stage, wrapped."""
    from gpufleet.runner import paint

    lines = []
    for row in rows:
        lines.append(f"{row['host']}  {paint(row['status'], row['status'], colour)}  findings {row['counts']}")
        stages = [f"{c} {_SHORT_STATUS.get(row['cells'][c], row['cells'][c])}" for c in columns if c in row["cells"]]
        lines.extend(textwrap.wrap(", ".join(stages), width, initial_indent="  ", subsequent_indent="  "))
        lines.extend(_reason_lines(row, width))
    return lines


def summary_table(summary: dict, colour: bool = False, width: int | None = None) -> str:
    """The closing human table in `width` columns (default: the terminal's, gpufleet.console): one row
    per node and one column per stage (plays of the same stage merged, worst status shown), or -- when the stages do not fit -- a block per node
    listing every stage. No stage is ever left out; each failed node's first failure follows it."""
    width = width or console.width()
    columns, rows = _rows(summary)
    lines = _table(columns, rows, width, colour) or _stacked(columns, rows, width, colour)
    result = f"result: {summary['result']} (exit {summary['exit_code']}): {summary['reason']}"
    lines.extend(textwrap.wrap(result, width, subsequent_indent="  "))
    return "\n".join(lines)
