"""Measure the smoke job on this machine's CPU (gloo), the way the quick tier runs it.

    .venv/bin/python benchmarks/smoke_cpu.py [--nproc 2] [--max-bytes 67108864] [--repeat 2]

Runs ``torchrun --standalone --nproc-per-node N gpufleet_smoke.py job`` on loopback, then prints the
sweep (time, algbw, busbw per size), the training figures and the wall time of each phase, and the
report's verdict. Only loopback traffic; the torchrun process group is killed on timeout.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_parse as sp, smoke_report as sr, smoke_verdict as sv  # noqa: E402

JOB = REPO / "roles" / "smoke_test" / "files" / "gpufleet_smoke.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(args, workdir):
    result = Path(workdir) / "result.json"
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc-per-node", str(args.nproc),
           "--rdzv-endpoint", "127.0.0.1:%d" % free_port(), str(JOB), "job", "--result-file", str(result),
           "--backend", "gloo", "--max-bytes", str(args.max_bytes), "--warmup", str(args.warmup),
           "--iters", str(args.iters), "--steps", str(args.steps)]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", GPUFLEET_NODE_NAME="bench")
    t0 = time.monotonic()
    epoch0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        _stdout, err = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise SystemExit("timed out after %s s" % args.timeout)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit("job failed rc=%s\n%s" % (proc.returncode, err[-3000:]))
    stages = {}
    for line in err.splitlines():
        if line.startswith("GPUFLEET_STAGE rank=0 "):
            fields = dict(f.split("=", 1) for f in line.split()[1:])
            stages.setdefault(fields["stage"].split(":")[0], float(fields["t"]))
    stages["launch"] = epoch0
    return json.loads(result.read_text()), wall, stages


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--max-bytes", type=int, default=64 * 1024 * 1024)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            res, wall, stages = run_once(args, tmp)
        out = {"node": "bench", "rollcall": {"ok": True}, "torchrun_rc": 0, "timed_out": False, "last_stages": {},
               "nccl_lines": [], "log_tail": [], "result": res, "error": None}
        nodes = {"bench": {"address": "127.0.0.1", "nproc": args.nproc, "gpu": {}, "probe": {}}}
        report = sr.build_report("bench", ["bench"], nodes, {"bench": out}, "gloo")
        sv.evaluate(report, sv.resolve_thresholds(report, {}))
        print("run %d: %d ranks, wall %.1f s (torchrun start -> init %.1f s, init+join %.1f s, sweep %.1f s, train %.1f s)" % (
            i + 1, res["world_size"], wall, stages.get("init", 0) - stages["launch"],
            stages.get("sweep", 0) - stages.get("init", 0), stages.get("train", 0) - stages.get("sweep", 0),
            stages.get("done", 0) - stages.get("train", 0)))
        print("  %12s %12s %12s %12s" % ("size", "time us", "algbw GB/s", "busbw GB/s"))
        for row in report["sweep"]["rows"]:
            print("  %12s %12.1f %12.4f %12.4f" % (sp.human_bytes(row["size_bytes"]), row["time_us"], row["algbw_gbps"],
                                                   row["busbw_gbps"]))
        t = report["training"]
        print("  training: loss %.3f -> %.3f (drop %.2f), %.1f steps/s, %.0f samples/s, params in sync: %s"
              % (t["loss_first"], t["loss_last"], t["loss_drop"], t["steps_per_s"], t["samples_per_s"], t["params_in_sync"]))
        print("  verdict: %s %s" % ("PASSED" if report["verdict"]["passed"] else "FAILED", report["verdict"]["reasons"]))


if __name__ == "__main__":
    main()
