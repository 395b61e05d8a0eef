# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Time a no-change re-run of playbooks/gpu_stack.yml against an empty play with fact gathering on the
same nodes, and print the ratio (issue 26: the converged-state record must keep it near Ansible's floor).

    python benchmarks/stack_rerun_ratio.py                      # the simulated cluster that is up (gfsim)
    python benchmarks/stack_rerun_ratio.py --sim-name scale8 --converge --runs 3
    python benchmarks/stack_rerun_ratio.py -i inventory/ --runs 5 --json rerun.json

Without -i it uses the inventory of a simulated cluster already brought up (tests/sim/simcluster.py up;
--sim-name picks which). The nodes must be converged: --converge runs the stack once first, untimed.
Each figure is the wall time of a whole ansible-playbook process; the median of --runs is reported. A re-run
that changes anything is not a no-change re-run: the figures are printed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "sim"))

from gfsim import cluster as simlib  # noqa: E402

EMPTY_PLAY = """---
- name: Empty play on the stack's hosts (facts gathered, as the stack play does)
  hosts: "{{ gpufleet_hosts | default('gpu_nodes') }}"
  gather_facts: true
  tasks: []
"""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-i", "--inventory", type=Path,
                        help="inventory of converged nodes (default: the simulated cluster --sim-name)")
    parser.add_argument("--sim-name", default=simlib.DEFAULT_NAME,
                        help="the simulated cluster whose inventory is the default (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="timed pairs of runs; the median is reported")
    parser.add_argument("--converge", action="store_true", help="run the stack once first, untimed")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.inventory is None:
        args.inventory = simlib.state_dir(args.sim_name) / "inventory.yml"
        if not args.inventory.exists():
            parser.error(f"no -i given and no simulated cluster {args.sim_name!r} is up (no {args.inventory}); "
                         f"bring one up (sudo .venv/bin/python tests/sim/simcluster.py up --nodes 8) or pass -i")
    elif not args.inventory.exists():
        parser.error(f"-i {args.inventory}: no such inventory")
    return args


def changed_tasks(output: str) -> int:
    """The changed= counts of the run's PLAY RECAP, summed over the nodes."""
    return sum(int(n) for n in re.findall(r"changed=(\d+)", output.split("PLAY RECAP")[-1]))


def summarise(stack_times: list[float], empty_times: list[float], changed: list[int], tasks: int) -> dict:
    """Medians and their ratio; an empty play that took no time has no ratio."""
    if not stack_times or len(stack_times) != len(empty_times):
        raise ValueError(f"want one empty play per stack re-run, got {len(stack_times)} and {len(empty_times)}")
    stack, empty = statistics.median(stack_times), statistics.median(empty_times)
    if empty <= 0:
        raise ValueError(f"the empty play's median is {empty} s: no ratio")
    return {"runs": len(stack_times), "stack_rerun_s": [round(t, 2) for t in stack_times],
            "empty_play_s": [round(t, 2) for t in empty_times], "stack_rerun_median_s": round(stack, 2),
            "empty_play_median_s": round(empty, 2), "ratio": round(stack / empty, 2), "stack_tasks": tasks,
            "changed_per_run": changed, "no_change": all(c == 0 for c in changed)}


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed, proc.stdout


def measure(args: argparse.Namespace, run=timed) -> dict:
    playbook_bin = str(Path(sys.executable).parent / "ansible-playbook")
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.yml"
        empty.write_text(EMPTY_PLAY)
        extra = ["-e", json.dumps({"gpufleet_report_dir": str(Path(tmp) / "reports"), "gpufleet_reboot_ok": True})]
        stack = [playbook_bin, "-i", str(args.inventory), "playbooks/gpu_stack.yml", *extra]
        if args.converge:
            run(stack)
        stack_times, empty_times, changed, tasks = [], [], [], 0
        for _run in range(args.runs):
            seconds, out = run(stack)
            stack_times.append(seconds)
            changed.append(changed_tasks(out))
            tasks = len(re.findall(r"^TASK \[", out, re.M))
            seconds, _out = run([playbook_bin, "-i", str(args.inventory), str(empty)])
            empty_times.append(seconds)
    return summarise(stack_times, empty_times, changed, tasks)


def main(argv=None, run=timed) -> int:
    args = parse_args(argv)
    result = measure(args, run)
    print(json.dumps(result, indent=2))
    print(f"no-change re-run {result['stack_rerun_median_s']} s / empty play {result['empty_play_median_s']} s "
          f"= {result['ratio']}x ({result['runs']} runs, {result['stack_tasks']} tasks, {args.inventory})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if not result["no_change"]:
        print(f"a re-run changed {result['changed_per_run']} task(s): not a no-change figure", file=sys.stderr)
    return 0 if result["no_change"] else 1


if __name__ == "__main__":
    sys.exit(main())
