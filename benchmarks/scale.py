"""How the flow's cost grows with the node count, on the simulated cluster (issue 17).

For each node count: bring a cluster up (wall time, memory per node), then time each stage as a
whole ansible-playbook process with the project's ansible.cfg (forks as configured there):

    preflight      playbooks/preflight.yml
    stack          playbooks/gpu_stack.yml, first run on bare nodes (install, one batched reboot)
    stack-rerun    playbooks/gpu_stack.yml again (must report changed=0 on every node)
    fabric         playbooks/fabric.yml
    health         playbooks/validate.yml --tags health
    smoke          playbooks/validate.yml --tags smoke (the torchrun job over gloo on the nodes' CPUs;
                   not in the default list: its memory, not Ansible, limits how many nodes it fits)
    empty          an empty play with fact gathering on the same nodes: Ansible's floor

and print seconds per stage and per node. A stage that fails on any node is reported as failed,
with its figure, never silently dropped.

    sudo .venv/bin/python benchmarks/scale.py --nodes 4 8 [--stages preflight,stack,...] [--json out.json]

--preinstall passes the simulator's --preinstall (repeatable): `torch` starts the nodes with the cached
torch venv layer, `driver=535.183.01` with that driver installed, so health, fabric and the smoke job
can be timed on many nodes without the stack's first run (pip and apt on shared CPUs); the output
says what was preinstalled.
Root only (network namespaces, systemd-nspawn). One cluster at a time, always taken down.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "tests" / "sim"))

from simharness import bring_up, recap, sim_skip_reason, simlib, tear_down  # noqa: E402

STAGES = ("preflight", "stack", "stack-rerun", "fabric", "health", "smoke", "empty")
DEFAULT_STAGES = ("preflight", "stack", "stack-rerun", "fabric", "health", "empty")
# 10.200.0-19 are for named clusters; 19 is this benchmark's, one cluster at a time.
SUBNET = "10.200.19.0/24"
EMPTY_PLAY = """---
- name: Empty play with fact gathering (Ansible's floor for a play on these nodes)
  hosts: gpu_nodes
  gather_facts: true
  tasks: []
"""


def mem_available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def pss_kib(pids: list[int]) -> int:
    """Proportional set size: shared pages (the common lower layer's libraries) split between users."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            continue
    return total


def node_memory_mib(name: str, nodes: list[str]) -> float:
    """Mean PSS of everything running inside a node (its systemd, sshd, journald, ...)."""
    per_node = []
    for node in nodes:
        pid_file = simlib.state_dir(name) / "nodes" / node / "nspawn.pid"
        if not pid_file.exists():
            raise RuntimeError(f"{node}: no nspawn.pid at {pid_file}")
        per_node.append(pss_kib(descendants(int(pid_file.read_text().strip()))))
    return sum(per_node) / len(per_node) / 1024


def run_stage(cluster, stage: str, reports: Path, empty_play: Path) -> dict:
    extra = ["-e", json.dumps({"gpufleet_report_dir": str(reports), "gpufleet_reboot_ok": True})]
    playbook = {
        "preflight": [REPO / "playbooks" / "preflight.yml"],
        "stack": [REPO / "playbooks" / "gpu_stack.yml"],
        "stack-rerun": [REPO / "playbooks" / "gpu_stack.yml"],
        "fabric": [REPO / "playbooks" / "fabric.yml"],
        "health": [REPO / "playbooks" / "validate.yml", "--tags", "health"],
        "smoke": [REPO / "playbooks" / "validate.yml", "--tags", "smoke"],
        "empty": [empty_play],
    }[stage]
    timer_json = reports.parent / f"tasks-{stage}.json"
    timer = {"ANSIBLE_CALLBACK_PLUGINS": str(REPO / "benchmarks" / "callbacks"),
             "ANSIBLE_CALLBACKS_ENABLED": "task_timer", "TASK_TIMER_JSON": str(timer_json)}
    # Lowest MemAvailable while the stage runs: what it costs the host at its peak.
    lowest = [mem_available_kib()]
    baseline = lowest[0]
    done = threading.Event()

    def sample():
        while not done.wait(1.0):
            lowest[0] = min(lowest[0], mem_available_kib())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    proc = cluster.playbook(playbook[0], *playbook[1:], *extra, timeout=5400, env=timer)
    seconds = time.monotonic() - start
    done.set()
    sampler.join()
    out = proc.stdout + proc.stderr
    counts = recap(out)
    failed = sorted(n for n in cluster.nodes if n not in counts
                    or counts[n].get("failed", 0) or counts[n].get("unreachable", 0))
    changed = sum(counts.get(n, {}).get("changed", 0) for n in cluster.nodes)
    result = {"seconds": round(seconds, 1), "per_node": round(seconds / len(cluster.nodes), 2),
              "rc": proc.returncode, "failed_nodes": failed, "changed": changed,
              "tasks": len(re.findall(r"^TASK \[", out, re.M)),
              "peak_extra_mem_mib": round((baseline - lowest[0]) / 1024)}
    if stage.startswith("stack"):
        # Nodes that ran the roles (not found converged by their record): all on a first run, none on a re-run.
        result["roles_ran_on"] = len(set(re.findall(r"(\S+): running the stack roles:", out)))
    if timer_json.exists():
        result["slowest_tasks"] = json.loads(timer_json.read_text())[:8]
    if proc.returncode != 0 or failed:
        result["tail"] = out[-3000:]
    if stage == "stack-rerun" and changed:
        result["error"] = f"a no-change re-run changed {changed} task(s): the figure is not a no-change figure"
    return result


def measure(nodes: int, stages: list[str], preinstall: list[str]) -> dict:
    name = f"scale{nodes}"
    tear_down(name)
    before = mem_available_kib()
    start = time.monotonic()
    cluster = bring_up(name, SUBNET, nodes, profile=["hgx-h100"], preinstall=preinstall)
    row: dict = {"nodes": nodes, "bring_up_s": round(time.monotonic() - start, 1), "stages": {}}
    try:
        time.sleep(5)  # let the nodes' boot settle before reading memory
        row["node_pss_mib"] = round(node_memory_mib(name, cluster.nodes), 1)
        row["mem_available_drop_mib_per_node"] = round((before - mem_available_kib()) / 1024 / nodes, 1)
        with tempfile.TemporaryDirectory() as tmp:
            empty_play = Path(tmp) / "empty.yml"
            empty_play.write_text(EMPTY_PLAY)
            for stage in stages:
                result = run_stage(cluster, stage, Path(tmp) / "reports", empty_play)
                row["stages"][stage] = result
                print(f"  {nodes:>3} nodes  {stage:<12} {result['seconds']:>7.1f} s  "
                      f"{result['per_node']:>6.2f} s/node  changed={result['changed']}  "
                      f"failed={','.join(result['failed_nodes']) or '-'}", flush=True)
                for task in result.get("slowest_tasks", [])[:5]:
                    print(f"      {task['seconds']:>6.1f} s  {task['task']}", flush=True)
                if stage == "stack" and result["failed_nodes"]:
                    break  # later stages judge an installed stack
    finally:
        tear_down(name)
        left = simlib.leftovers(name)
        if left:
            row["leftovers"] = left
    return row


def table(rows: list[dict], stages: list[str]) -> str:
    head = "| nodes | bring-up s | PSS MiB/node | " + " | ".join(f"{s} s (s/node)" for s in stages) + " |"
    lines = [head, "|" + "---|" * (3 + len(stages))]
    for row in rows:
        if row.get("error"):
            lines.append(f"| {row['nodes']} | FAILED | - | " + " | ".join("not run" for _stage in stages) + " |")
            continue
        cells = []
        for stage in stages:
            r = row["stages"].get(stage)
            if r is None:
                cells.append("not run")
            else:
                mark = " FAILED" if r["failed_nodes"] or r["rc"] else ""
                mark += " CHANGED" if r.get("error") else ""
                cells.append(f"{r['seconds']:.1f} ({r['per_node']:.2f}){mark}")
        lines.append(f"| {row['nodes']} | {row['bring_up_s']:.1f} | {row['node_pss_mib']:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--stages", default=",".join(DEFAULT_STAGES),
                        help=f"comma-separated, in order; known: {', '.join(STAGES)}")
    parser.add_argument("--preinstall", action="append", default=[], metavar="WHAT",
                        help="the simulator's --preinstall: torch, driver=VERSION[:open|:proprietary]")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    stages = [s for s in args.stages.split(",") if s]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        parser.error(f"unknown stage(s) {', '.join(unknown)}; known: {', '.join(STAGES)}")
    if "stack-rerun" in stages and "stack" not in stages:
        parser.error("stack-rerun needs stack first (a no-change re-run of a converged node)")
    reason = sim_skip_reason()
    if reason:
        sys.exit(reason)
    forks = re.search(r"^forks\s*=\s*(\d+)", (REPO / "ansible.cfg").read_text(), re.M)
    print(f"forks={forks.group(1) if forks else 'default'} cpus={os.cpu_count()} "
          f"preinstalled={','.join(args.preinstall) or 'nothing'}", flush=True)
    rows = []
    for count in args.nodes:
        try:
            rows.append(measure(count, stages, args.preinstall))
        except RuntimeError as exc:  # a failed bring-up is a result at that size, not the end of the run
            print(f"  {count:>3} nodes  bring-up failed: {str(exc)[-600:]}", flush=True)
            rows.append({"nodes": count, "error": str(exc)[-2000:], "stages": {}})
    print(table(rows, stages))
    measured = [row for row in rows if not row.get("error")]
    base = measured[0] if measured else {"stages": {}}
    for row in measured[1:]:
        growth = {s: round(row["stages"][s]["per_node"] / base["stages"][s]["per_node"], 2)
                  for s in stages if s in row["stages"] and s in base["stages"] and base["stages"][s]["per_node"]}
        print(f"per-node cost at {row['nodes']} / at {base['nodes']} nodes: {growth}")
    if "stack-rerun" in stages and "empty" in stages:
        for row in rows:
            if "stack-rerun" in row["stages"] and "empty" in row["stages"]:
                ratio = row["stages"]["stack-rerun"]["seconds"] / row["stages"]["empty"]["seconds"]
                print(f"{row['nodes']} nodes: no-change stack re-run / empty play = {ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"forks": forks.group(1) if forks else None, "preinstall": args.preinstall,
                                         "rows": rows}, indent=2) + "\n")
    bad = [(r["nodes"], s) for r in rows for s, v in r["stages"].items() if v["rc"] or v["failed_nodes"] or v.get("error")]
    bad += [(r["nodes"], "leftovers") for r in rows if r.get("leftovers")]
    bad += [(r["nodes"], "bring-up") for r in rows if r.get("error")]
    if bad:
        print(f"failed or changed: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
