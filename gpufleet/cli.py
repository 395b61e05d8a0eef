"""`gpufleet run STAGE -i INVENTORY`: one command, one JSON file, one exit code for pipelines."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from gpufleet.runner import EXIT_RUN_BROKEN, STAGE_PLAYBOOKS, RunBroken, run_stage
from gpufleet.summary import broken_summary, build_summary, summary_table

SUMMARY_FILE = "summary.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description="Provision and verify GPU training clusters (ansible-runner front end).",
        epilog="Exit codes: 0 all nodes passed; 1 some nodes failed checks (named on stderr and in "
               "summary.json); 2 the run itself broke (bad inventory, missing playbook, runner error).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one stage against an inventory")
    run.add_argument("stage", choices=sorted(STAGE_PLAYBOOKS), help="which stage to run")
    run.add_argument("-i", "--inventory", required=True, type=Path, help="inventory file or directory")
    run.add_argument("--artifacts", type=Path, default=None,
                     help="where events, reports and summary.json go (default: artifacts/<stage>-<UTC time>)")
    run.add_argument("--limit", default=None, help="limit to these hosts/groups (ansible --limit syntax)")
    run.add_argument("--tags", default=None, help="only these tags of the stage (e.g. validate --tags health)")
    run.add_argument("--baseline-dir", type=Path, default=None,
                     help="where smoke-test baselines are kept across runs (default: baselines/)")
    run.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|JSON",
                     help="extra variables, as for ansible-playbook")
    return parser


def _extra_vars(items: list[str]) -> dict:
    merged: dict = {}
    for item in items:
        item = item.strip()
        if item.startswith("{"):
            merged.update(json.loads(item))
        else:
            for pair in item.split():
                key, sep, value = pair.partition("=")
                if not sep:
                    raise RunBroken(f"extra variable {pair!r} is not KEY=VALUE or a JSON object")
                merged[key] = value
    return merged


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started_at = datetime.now(timezone.utc)
    artifacts = args.artifacts or Path("artifacts") / f"{args.stage}-{started_at:%Y%m%dT%H%M%SZ}"
    artifacts.mkdir(parents=True, exist_ok=True)
    summary_path = artifacts / SUMMARY_FILE
    try:
        print(f"gpufleet: stage {args.stage} on {args.inventory}"
              + (f" (limit {args.limit})" if args.limit else ""), flush=True)
        run = run_stage(args.stage, args.inventory, artifacts, limit=args.limit,
                        extra_vars=_extra_vars(args.extra_vars), tags=args.tags,
                        baseline_dir=args.baseline_dir)
        summary = build_summary(run, args.limit, started_at)
    except RunBroken as exc:
        summary = broken_summary(args.stage, args.inventory, args.limit, str(exc), started_at)
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"gpufleet: run broke: {exc}", file=sys.stderr)
        return EXIT_RUN_BROKEN
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    print(summary_table(summary))
    print(f"summary: {summary_path}")
    if summary["failed_nodes"]:
        print("gpufleet: nodes failed: " + ", ".join(summary["failed_nodes"]), file=sys.stderr)
    return summary["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
