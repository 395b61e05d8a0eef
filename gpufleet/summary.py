"""The machine-readable run summary: one JSON document a pipeline decides on.

Its schema is docs/run-summary.schema.json; `SCHEMA_VERSION` changes whenever a field changes
meaning or disappears (additions keep the version).
"""

from __future__ import annotations

import json
import textwrap
from datetime import datetime, timezone
from pathlib import Path

from gpufleet.runner import EXIT_NODES_FAILED, EXIT_PASSED, EXIT_RUN_BROKEN, StageRun, classify, failed_hosts

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


def _smoke_attribution(run: StageRun, reports: Path, failed: set[str]) -> tuple[set[str], dict[str, str]]:
    """Moves a failed smoke verdict from the host that ran it to the nodes the report names.

    Returns the corrected set of failed hosts and each smoke node's status."""
    smoke = _load(reports / "smoke.json")
    if not smoke:
        return failed, {}
    statuses = {n.get("name"): n.get("status") for n in smoke.get("nodes") or [] if n.get("name")}
    for missing in smoke.get("missing_nodes") or []:
        name = missing if isinstance(missing, str) else (missing or {}).get("name")
        if name:
            statuses[name] = statuses.get(name) if statuses.get(name) not in (None, "ok") else "missing"
    if (smoke.get("verdict") or {}).get("passed") is not False:
        return failed, statuses
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
    return (failed - only_verdict) | blamed, statuses


def per_host_unreachable(run: StageRun, host: str) -> bool:
    return any(per_host[host].unreachable for per_host in run.tracker.tallies.values() if host in per_host)


def build_summary(run: StageRun, limit: str | None, started_at: datetime) -> dict:
    reports = run.artifacts / "reports"
    findings = []
    for path in sorted(reports.rglob("*.json")):
        findings.extend(collect_findings(_load(path)))
    unique = {json.dumps(f, sort_keys=True): f for f in findings}
    findings = list(unique.values())
    versions = _versions_by_node(reports)
    code, reason = classify(run)
    bad, smoke_status = _smoke_attribution(run, reports, failed_hosts(run))
    if bad != failed_hosts(run) and code != EXIT_RUN_BROKEN:
        code, reason = EXIT_NODES_FAILED, "nodes failed: " + ", ".join(sorted(bad))

    nodes = {}
    all_hosts = sorted(set(run.tracker.hosts_seen) | (set(run.hosts) if limit is None else set()) | bad)
    for host in all_hosts:
        stages = {play: per_host[host].as_dict() for play, per_host in run.tracker.tallies.items()
                  if host in per_host}
        if host in bad:
            status = "failed"
        elif stages:
            status = "passed"
        else:
            status = "not_run"
        nodes[host] = {
            "status": status,
            "stages": stages,
            "findings": [f for f in findings if f.get("node") == host],
            "versions": versions.get(host, {}),
        }
        if host in smoke_status:
            nodes[host]["smoke_status"] = smoke_status[host]
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
        "reason": reason,
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


def broken_summary(stage: str | None, inventory, limit: str | None, reason: str, started_at: datetime) -> dict:
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
        "reason": reason,
        "nodes": {},
        "stage_names": {},
        "ready_nodes": [],
        "failed_nodes": [],
        "smoke": None,
        "artifacts": {"directory": None, "events": None, "reports": []},
    }


TABLE_WIDTH = 100
_NODE_WIDTH = 20
_SHORT_STATUS = {"unreachable": "unreach", "failed": "FAILED"}
_STATUS_RANK = {"skipped": 0, "ok": 1, "changed": 2, "failed": 3, "unreachable": 4}


def short_name(play: str, stage_names: dict[str, str]) -> str:
    """A play's column name: its stage tag (preflight, stack, reboot, fabric, health, smoke), else
    the first word of its name; the full play name stays in summary.json."""
    if play.split(" #")[0] in stage_names:
        return stage_names[play.split(" #")[0]]
    word = (play.split() or ["play"])[0].lower()
    return "".join(c for c in word if c.isalnum())[:9] or "play"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def summary_table(summary: dict, colour: bool = False) -> str:
    """The closing human table, at most 100 columns: one row per node, one column per stage (plays
    of the same stage merged, worst status shown), findings counted; details are in summary.json."""
    from gpufleet.runner import paint

    names = summary.get("stage_names") or {}
    columns: list[str] = []
    for node in summary["nodes"].values():
        for play in node["stages"]:
            if short_name(play, names) not in columns:
                columns.append(short_name(play, names))
    rows = []
    for host, node in sorted(summary["nodes"].items()):
        per_column: dict[str, str] = {}
        for play, tally in node["stages"].items():
            column = short_name(play, names)
            old = per_column.get(column)
            if old is None or _STATUS_RANK.get(tally["status"], 0) > _STATUS_RANK.get(old, 0):
                per_column[column] = tally["status"]
        fails = sum(1 for f in node["findings"] if f.get("severity") == "fail")
        warns = sum(1 for f in node["findings"] if f.get("severity") == "warn")
        rows.append((host, node["status"], per_column, f"{fails}F {warns}W"))

    def widths_for(cols):
        node_w = min(_NODE_WIDTH, max([4] + [len(r[0]) for r in rows]))
        col_w = [max([len(c)] + [len(_SHORT_STATUS.get(r[2].get(c, "-"), r[2].get(c, "-"))) for r in rows])
                 for c in cols]
        return node_w, col_w, node_w + 2 + 7 + 2 + sum(w + 2 for w in col_w) + len("findings")

    shown = list(columns)
    node_w, col_w, total = widths_for(shown)
    while total > TABLE_WIDTH and shown:  # very many plays: keep the first ones, say where the rest are
        shown.pop()
        node_w, col_w, total = widths_for(shown)

    def line(cells, raw_statuses=None):
        out = []
        for i, (cell, width) in enumerate(zip(cells, [node_w, 7, *col_w, len("findings")])):
            text = _clip(str(cell), width).ljust(width)
            status = raw_statuses[i] if raw_statuses else None
            out.append(paint(text, status, colour) if status else text)
        return "  ".join(out).rstrip()

    lines = [line(["node", "status", *shown, "findings"]),
             "  ".join("-" * w for w in [node_w, 7, *col_w, len("findings")])]
    for host, status, per_column, counts in rows:
        statuses = [per_column.get(c, "-") for c in shown]
        cells = [host, status, *[_SHORT_STATUS.get(s, s) for s in statuses], counts]
        lines.append(line(cells, [None, status, *statuses, None]))
    if len(shown) < len(columns):
        lines.append(f"(stages {', '.join(columns[len(shown):])} left out for width: see summary.json)")
    result = f"result: {summary['result']} (exit {summary['exit_code']}): {summary['reason']}"
    lines.extend(textwrap.wrap(result, TABLE_WIDTH, subsequent_indent="  "))
    return "\n".join(lines)
