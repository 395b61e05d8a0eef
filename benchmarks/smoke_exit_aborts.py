"""Count how often a rank of the CPU smoke job aborts on the way out, under CPU load.

    .venv/bin/python benchmarks/smoke_exit_aborts.py [--runs 30] [--load 2] [--job PATH]

Runs the 2-rank gloo job (``torchrun --standalone``, loopback only) ``--runs`` times while ``--load``
busy-loop processes keep the cores busy (each ended by its PID), and prints how many runs failed and how
many of those were the teardown abort ("terminate called without an active exception", exit -6, after
the rank reported ``done``). Exit 1 when any run failed. ``--job`` times another copy of the job, e.g.
the one before a fix: ``git show REV:roles/smoke_test/files/gpufleet_smoke.py > /tmp/old.py``.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "roles" / "smoke_test" / "files" / "gpufleet_smoke.py"
ABORT = "terminate called without an active exception"
SMALL = ["--backend", "gloo", "--max-bytes", str(4 << 20), "--warmup", "1", "--iters", "3", "--steps", "60"]


def run_job(job, port, workdir):
    """(torchrun's exit code, its stderr)."""
    torchrun = Path(sys.executable).parent / "torchrun"
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", GPUFLEET_NODE_NAME="local")
    cmd = [str(torchrun), "--standalone", "--nproc-per-node", "2", "--rdzv-endpoint", "127.0.0.1:%d" % port,
           str(job), "job", "--result-file", str(Path(workdir) / "result.json")] + SMALL
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        _out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _out, err = proc.communicate()
    return proc.returncode, err


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--load", type=int, default=2, help="busy-loop processes beside the job")
    parser.add_argument("--job", type=Path, default=JOB)
    parser.add_argument("--port", type=int, default=29650, help="first rendezvous port on 127.0.0.1")
    args = parser.parse_args(argv)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _loop in range(args.load)]
    failed = aborted = 0
    try:
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="gpufleet-exit-") as workdir:
                rc, err = run_job(args.job, args.port + i, workdir)
            if rc != 0:
                failed += 1
                aborted += ABORT in err
    finally:
        for proc in busy:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    print("%s: %d runs under %d busy loops: %d failed, %d of them the teardown abort"
          % (args.job, args.runs, args.load, failed, aborted))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
