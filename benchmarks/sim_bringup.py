"""Bring-up times of the simulated cluster, and repeated up/down cycles that must leave nothing.

    sudo .venv/bin/python benchmarks/sim_bringup.py [--nodes 3] [--cycles 10] [--cold] [--subnet 10.200.10.0/24]

--cold builds everything (Debian tree, mirror, packages, wheels) in a throwaway
cache directory first, to measure a first run on a fresh machine; it needs the
Debian mirror and PyPI (or /opt/wheels). Warm runs use /var/cache/gpufleet-sim.
Every `up` is followed by an SSH round trip to each node and a check that
`down` left no namespace, link, mount, process or state directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SIMCLUSTER = REPO_ROOT / "tests/sim/simcluster.py"
sys.path.insert(0, str(REPO_ROOT / "tests/sim"))

from gfsim import cluster as simlib, network as simnet  # noqa: E402

STEP_TIMEOUT = 600   # a hung step fails the run instead of hanging it


def leftovers(name: str) -> list[str]:
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    found += [f"netns {l.split()[0]}" for l in netns.splitlines() if l.startswith(simnet.netns_prefix(name))]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    found += [f"link {l.split(':')[1].strip()}" for l in links.splitlines() if simnet.short_id(name) in l.split(":")[1]]
    sdir = str(simlib.state_dir(name))
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True, check=False).stdout
    found += [f"mount {m}" for m in mounts.split() if m.startswith(sdir)]
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True, check=False).stdout
    found += [f"process {l.strip()}" for l in ps.splitlines() if sdir in l and " Z" not in l]
    if Path(sdir).exists():
        found.append(f"state dir {sdir}")
    return found


def cli(*args: str, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(SIMCLUSTER), *args], capture_output=True, text=True,
                          timeout=STEP_TIMEOUT, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"simcluster {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return proc


def cycle(name: str, subnet: str, nodes: int, env=None) -> tuple[float, float]:
    t0 = time.monotonic()
    cli("up", "--name", name, "--subnet", subnet, "--nodes", str(nodes), env=env)
    t_up = time.monotonic() - t0
    state = simlib.load_state(name)
    for node in state["nodes"]:
        out = simlib.ssh(state, node, "hostname", timeout=60)
        if out.stdout.strip() != node:
            raise RuntimeError(f"{node} answered {out.stdout!r} (rc={out.returncode}, {out.stderr})")
    t1 = time.monotonic()
    cli("down", "--name", name, env=env)
    t_down = time.monotonic() - t1
    left = leftovers(name)
    if left:
        raise RuntimeError(f"down left: {left}")
    return t_up, t_down


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--name", default="simbench")
    parser.add_argument("--subnet", default="10.200.10.0/24")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    if args.cold:
        cache = Path(tempfile.mkdtemp(prefix="gpufleet-sim-cold-", dir="/var/tmp"))
        env = dict(os.environ, GPUFLEET_SIM_CACHE=str(cache))
        try:
            t_up, t_down = cycle(args.name, args.subnet, args.nodes, env)
            print(f"cold  up {args.nodes} nodes: {t_up:6.1f} s   down: {t_down:5.1f} s   (fresh cache {cache})")
        finally:
            cli("down", "--name", args.name, env=env)
            shutil.rmtree(cache, ignore_errors=True)
    t_up, t_down = cycle(args.name, args.subnet, args.nodes)
    print(f"warm  up {args.nodes} nodes: {t_up:6.1f} s   down: {t_down:5.1f} s")
    ups, downs = [], []
    for i in range(args.cycles):
        t_up, t_down = cycle(args.name, args.subnet, args.nodes)
        ups.append(t_up)
        downs.append(t_down)
        print(f"cycle {i + 1:2}: up {t_up:5.1f} s  down {t_down:5.1f} s  leftovers: none")
    if ups:
        print(f"{args.cycles} cycles: up mean {sum(ups) / len(ups):.1f} s (max {max(ups):.1f}), "
              f"down mean {sum(downs) / len(downs):.1f} s (max {max(downs):.1f}); nothing left behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
