"""The machine-readable run summary: one JSON document a pipeline decides on.

Its schema is docs/run-summary.schema.json; `SCHEMA_VERSION` changes whenever a field changes
meaning or disappears (additions keep the version).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from gpufleet.runner import EXIT_NODES_FAILED, EXIT_PASSED, EXIT_RUN_BROKEN, StageRun, classify, failed_hosts

SCHEMA_VERSION = "1.0"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "run-summary.schema.json"
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
        "ready_nodes": sorted(h for h, n in nodes.items() if n["status"] == "passed"),
        "failed_nodes": sorted(h for h, n in nodes.items() if n["status"] == "failed"),
        "smoke": _smoke_verdict(reports),
        "artifacts": {
            "directory": str(run.artifacts),
            "events": str(run.artifacts / "runner" / "artifacts" / "run" / "job_events"),
            "reports": sorted(str(p) for p in reports.rglob("*") if p.is_file()),
        },
    }


def broken_summary(stage: str, inventory: Path, limit: str | None, reason: str, started_at: datetime) -> dict:
    """The summary of a run that could not start: same schema, no nodes."""
    return {
        "schema_version": SCHEMA_VERSION,
        "stage": stage,
        "inventory": str(inventory),
        "limit": limit,
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "duration_s": 0.0,
        "ansible_rc": None,
        "exit_code": EXIT_RUN_BROKEN,
        "result": "run_broken",
        "reason": reason,
        "nodes": {},
        "ready_nodes": [],
        "failed_nodes": [],
        "smoke": None,
        "artifacts": {"directory": None, "events": None, "reports": []},
    }


def summary_table(summary: dict) -> str:
    """The closing human table: one row per node, one column per play."""
    plays: list[str] = []
    for node in summary["nodes"].values():
        for play in node["stages"]:
            if play not in plays:
                plays.append(play)
    header = ["node", "status", *plays, "findings"]
    rows = [header]
    for host, node in sorted(summary["nodes"].items()):
        cells = [host, node["status"]]
        cells += [node["stages"].get(p, {}).get("status", "-") for p in plays]
        fails = sum(1 for f in node["findings"] if f.get("severity") == "fail")
        warns = sum(1 for f in node["findings"] if f.get("severity") == "warn")
        cells.append(f"{fails} fail, {warns} warn")
        rows.append(cells)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"result: {summary['result']} (exit {summary['exit_code']}): {summary['reason']}")
    return "\n".join(lines)
