"""A stand-in for Slurm's srun, for tests on a machine without Slurm. It is not Slurm: it runs every
task on this machine and checks only what the smoke launcher relies on.

It accepts the options the launcher passes (--nodes, --ntasks, --ntasks-per-node, --nodelist, --label,
--kill-on-bad-exit, --export, --job-name, --time, --immediate; any other --name=value is recorded and
ignored), refuses an inconsistent request as srun would (tasks != nodes x tasks per node, a node list
of the wrong length), orders the node list itself (sorted, as Slurm orders a step's nodes by its own
node order, not the caller's) and starts tasks in block distribution with the SLURM_* variables srun
sets. With --label each output line gets "<task id>: ". With --kill-on-bad-exit the first task that
fails ends the others, and "srun: error: <node>: task <id>: Exited with exit code <n>" is printed.
Exit status: the highest task exit status. FAKE_SRUN_ARGV_LOG, when set, gets the argv as one JSON line.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

KNOWN = {"--nodes", "--ntasks", "--ntasks-per-node", "--nodelist", "--label", "--kill-on-bad-exit", "--export",
         "--job-name", "--time", "--immediate"}


def parse(argv):
    opts, i = {}, 0
    while i < len(argv) and argv[i].startswith("-"):
        name, _sep, value = argv[i].partition("=")
        opts[name] = value
        i += 1
    return opts, argv[i:]


def main(argv):
    if os.environ.get("FAKE_SRUN_ARGV_LOG"):
        with open(os.environ["FAKE_SRUN_ARGV_LOG"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(argv) + "\n")
    opts, command = parse(argv)
    if not command:
        print("srun: fatal: No command given to execute.", file=sys.stderr)
        return 1
    nodes = sorted(n for n in opts.get("--nodelist", "").split(",") if n)
    nnodes, ntasks, per_node = int(opts["--nodes"]), int(opts["--ntasks"]), int(opts["--ntasks-per-node"])
    if len(nodes) != nnodes or ntasks != nnodes * per_node:
        print("srun: error: Unable to allocate resources: Requested node configuration is not available", file=sys.stderr)
        return 1
    label = "--label" in opts
    kill_on_bad_exit = opts.get("--kill-on-bad-exit") == "1"
    lock = threading.Lock()
    procs = []
    for task in range(ntasks):
        node_id = task // per_node
        env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_PROCID=str(task),
                   SLURM_LOCALID=str(task % per_node), SLURM_NTASKS=str(ntasks), SLURM_NNODES=str(nnodes),
                   SLURM_NODEID=str(node_id), SLURMD_NODENAME=nodes[node_id], SLURM_STEP_NODELIST=",".join(nodes))
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,  # noqa: S603
                                      start_new_session=True))

    def pump(task, proc):
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with lock:
                sys.stdout.write(("%d: %s\n" % (task, line)) if label else line + "\n")
                sys.stdout.flush()

    readers = [threading.Thread(target=pump, args=(t, p), daemon=True) for t, p in enumerate(procs)]
    for reader in readers:
        reader.start()

    def stop_all(*_args):
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)

    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    codes = {}
    while len(codes) < len(procs):
        for task, proc in enumerate(procs):
            if task not in codes and proc.poll() is not None:
                codes[task] = proc.returncode
                if proc.returncode != 0:
                    with lock:
                        print("srun: error: %s: task %d: Exited with exit code %d" % (
                            nodes[task // per_node], task, proc.returncode), flush=True)
                    if kill_on_bad_exit:
                        stop_all()
        time.sleep(0.05)
    for reader in readers:
        reader.join(timeout=5)
    return max(abs(c) for c in codes.values())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
