"""Time a no-change re-run of playbooks/gpu_stack.yml against an empty play on the same nodes.

The cluster must already be converged (run the stack once first). Each measurement is the wall time
of a whole ansible-playbook process, repeated --runs times; the median is reported, with the ratio.

    python benchmarks/stack_rerun.py -i /tmp/stack-inv.yml --runs 3 [--json out.json]
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
EMPTY_PLAY = """---
- name: Empty play on the stack's hosts (facts gathered, as the stack play does)
  hosts: "{{ gpufleet_hosts | default('gpu_nodes') }}"
  gather_facts: true
  tasks: []
"""


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-i", "--inventory", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    playbook_bin = str(Path(sys.executable).parent / "ansible-playbook")
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.yml"
        empty.write_text(EMPTY_PLAY)
        stack_times, empty_times, changed = [], [], []
        for _run in range(args.runs):
            seconds, out = timed([playbook_bin, "-i", args.inventory, "playbooks/gpu_stack.yml"])
            stack_times.append(seconds)
            changed.append(sum(int(n) for n in re.findall(r"changed=(\d+)", out.split("PLAY RECAP")[-1])))
            seconds, _output = timed([playbook_bin, "-i", args.inventory, str(empty)])
            empty_times.append(seconds)
            tasks = len(re.findall(r"^TASK \[", out, re.M))
    result = {
        "runs": args.runs,
        "stack_rerun_s": [round(t, 1) for t in stack_times],
        "empty_play_s": [round(t, 1) for t in empty_times],
        "stack_rerun_median_s": round(statistics.median(stack_times), 1),
        "empty_play_median_s": round(statistics.median(empty_times), 1),
        "ratio": round(statistics.median(stack_times) / statistics.median(empty_times), 1),
        "stack_tasks": tasks,
        "changed_per_run": changed,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    # A re-run that changes something is not a no-change re-run: the figure would be meaningless.
    return 0 if all(c == 0 for c in changed) else 1


if __name__ == "__main__":
    sys.exit(main())
