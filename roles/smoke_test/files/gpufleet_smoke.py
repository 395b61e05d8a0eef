# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""gpufleet smoke job: proves a cluster trains.

Three modes, one file (the smoke_test role copies it to every node):

``probe``  what this node's torch sees (version, CUDA, NCCL, GPU count), as one JSON line.
``node``   run on every node by Ansible: a bounded roll call (every node must reach every other
           node on the roll-call port within --join-timeout), then torchrun with the c10d
           rendezvous on the first node, under a hard deadline. Prints one JSON document:
           the roll call, torchrun's exit, the NCCL INFO lines and (on the node that held global
           rank 0) the job result. Standard library only, so it starts in milliseconds.
``store``  run by ``node`` on the first node: hosts the rendezvous TCPStore on that node's own
           address (a socket bound there and handed to TCPStore), not on every interface.
``job``    the distributed program torchrun starts, one process per GPU (or per CPU slot):
           all-reduce sweep (warm-up, timed iterations, correctness on every rank; time, algbw,
           busbw as nccl-tests computes them) and a short DDP training run (loss must fall, no
           NaN/Inf, parameters identical on all ranks). Global rank 0 writes the result file.

On a Slurm cluster (smoke_test_launcher: srun) two more modes replace ``node``:

``srun``        run by Ansible on the first node only: one ``srun`` step with every task of every
                node, under a hard deadline. Prints one JSON document holding a ``node``-style
                document per node, cut from srun's labelled output.
``slurm-task``  what each srun task runs: torch's env:// variables from SLURM_*, a roll call by each
                node's first task (the others wait for its verdict), then ``job`` in-process.

What crosses the network: the roll call (its own line protocol), the TCPStore (rendezvous and
process-group keys) and tensors. Records the ranks exchange travel as fixed-size JSON in uint8
tensors (:func:`encode_record`), never as pickles (no ``*_object`` collective).
"""

import argparse
import json
import math
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SCHEMA = "gpufleet.smoke.job/1"
ROLLCALL_MAGIC = "gpufleet-rollcall/1"
STORE_READY = "GPUFLEET_STORE_READY"
# One rank's record on the wire: 4-byte big-endian length, UTF-8 JSON, zero padding.
RECORD_BYTES = 1024
_RECORD_HEADER = 4
MEMBER_FIELDS = {"rank": int, "local_rank": int, "node": str, "address": (str, type(None)), "hostname": str,
                 "device": str, "gpu": (str, type(None))}


def _stage(rank, stage):
    """Progress marker on stderr: the launcher reports the last stage each rank reached."""
    sys.stderr.write("GPUFLEET_STAGE rank=%s stage=%s t=%.3f\n" % (rank, stage, time.time()))
    sys.stderr.flush()


# --------------------------------------------------------------------------------------------
# probe


def _probe_light(out):
    """Torch's version without importing torch (seconds on a loaded CPU node): read torch/version.py."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        out["error"] = "ModuleNotFoundError: No module named 'torch'"
        return out
    path = os.path.join(os.path.dirname(spec.origin), "version.py")
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        out["error"] = "cannot read %s: %s" % (path, exc)
        return out
    for line in text.splitlines():
        key, _sep, value = line.partition("=")
        key, value = key.strip().split(":")[0].strip(), value.strip().strip("'\"")
        if key == "__version__":
            out["torch"] = value
        elif key == "cuda":
            out["torch_cuda"] = None if value in ("None", "") else value
    out["light"] = True
    return out


def cmd_probe(args):
    out = {"python": sys.version.split()[0], "torch": None, "torch_cuda": None, "cuda_available": False,
           "cuda_device_count": 0, "nccl": None, "gloo": False, "devices": [], "error": None}
    if args.light:
        print(json.dumps(_probe_light(out)))
        return 0
    try:
        import torch  # noqa: F401  pylint: disable=import-outside-toplevel
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
        out["gloo"] = bool(dist.is_available() and dist.is_gloo_available())
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            out["cuda_device_count"] = torch.cuda.device_count()
            out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["cuda_device_count"])]
            try:
                ver = torch.cuda.nccl.version()
                out["nccl"] = ".".join(str(v) for v in ver) if isinstance(ver, tuple) else str(ver)
            except Exception as exc:  # pylint: disable=broad-except
                out["nccl_error"] = str(exc)
    except Exception as exc:  # pylint: disable=broad-except
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out))
    return 0


# --------------------------------------------------------------------------------------------
# node: roll call + torchrun under a deadline


def _parse_peers(text):
    """'n1=10.0.0.1,n2=10.0.0.2' -> [('n1', '10.0.0.1'), ...] in the given order."""
    peers = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, _sep, addr = item.partition("=")
        if not addr:
            raise SystemExit("--peers entries are name=address, got %r" % item)
        peers.append((name.strip(), addr.strip()))
    return peers


class _RollcallListener(object):
    """Answers every peer's roll call with this node's name, and notes who called and when."""

    def __init__(self, server, me, start):
        self.server, self.me, self.start = server, me, start
        self._heard_from = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _client = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                conn.settimeout(2.0)
                data = conn.recv(256).decode("utf-8", "replace").strip()
                magic, _sep, who = data.partition(" ")
                if magic == ROLLCALL_MAGIC:
                    conn.sendall(("%s %s\n" % (ROLLCALL_MAGIC, self.me)).encode())
                    with self._lock:
                        self._heard_from[who] = round(time.monotonic() - self.start, 3)
            except OSError:
                pass
            finally:
                conn.close()

    def heard_from(self):
        with self._lock:
            return dict(self._heard_from)

    def close(self):
        self._stop.set()
        self._thread.join(timeout=1.0)
        self.server.close()


def _call_peer(me, my_addr, addr, port, left):
    """The peer's answer to this node's roll call (raises OSError when it cannot be reached)."""
    with socket.create_connection((addr, port), timeout=min(2.0, left), source_address=(my_addr, 0)) as conn:
        conn.settimeout(min(2.0, max(left, 0.1)))
        conn.sendall(("%s %s\n" % (ROLLCALL_MAGIC, me)).encode())
        return conn.recv(256).decode("utf-8", "replace").strip()


def _call_peers(me, names, others, port, deadline, start, listener):
    """({peer: seconds when reached}, {peer: name it answered with, when not its own}, {peer: last error})."""
    reached, wrong_name, errors = {}, {}, {}
    pending = list(others)
    while time.monotonic() < deadline:
        for peer in list(pending):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                data = _call_peer(me, names[me], names[peer], port, left)
            except OSError as exc:
                errors[peer] = "%s:%s: %s" % (names[peer], port, exc)
                continue
            magic, _sep, who = data.partition(" ")
            if magic != ROLLCALL_MAGIC:
                errors[peer] = "unexpected answer %r" % data[:60]
                continue
            if who != peer:
                wrong_name[peer] = who
            reached[peer] = round(time.monotonic() - start, 3)
            pending.remove(peer)
        heard = listener.heard_from()
        if not pending and all(o in heard for o in others):
            break
        time.sleep(0.2)
    return reached, wrong_name, errors


def rollcall(me, peers, port, timeout):
    """Every node must reach every other node within ``timeout`` seconds.

    Each node listens on (its address, port) and answers with its name; it connects to every
    peer, retrying until the deadline. Returns this node's view: who it reached, who reached it.
    """
    names = dict(peers)
    my_addr = names[me]
    others = [n for n, _addr in peers if n != me]
    deadline = time.monotonic() + timeout
    start = time.monotonic()

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((my_addr, port))
    except OSError as exc:
        return {"node": me, "ok": False, "elapsed_s": 0.0, "reached": [], "unreachable": others,
                "heard_from": [], "not_heard_from": others, "wrong_name": {},
                "errors": {"bind": "cannot listen on %s:%s: %s" % (my_addr, port, exc)}}
    server.listen(64)
    server.settimeout(0.2)
    listener = _RollcallListener(server, me, start)
    reached, wrong_name, errors = _call_peers(me, names, others, port, deadline, start, listener)
    listener.close()
    heard = listener.heard_from()
    view = {
        "node": me,
        "elapsed_s": round(time.monotonic() - start, 3),
        "reached": sorted(reached),
        "unreachable": sorted(set(others) - set(reached)),
        "heard_from": sorted(n for n in heard if n in names),
        "not_heard_from": sorted(set(others) - set(heard)),
        "wrong_name": wrong_name,
        "errors": {k: v for k, v in errors.items() if k not in reached},
    }
    view["ok"] = not view["unreachable"] and not view["not_heard_from"] and not wrong_name
    return view


def fresh_work_files(work_dir, run_id, launcher):
    """(result file, log file) of this run in work_dir; a result left by an earlier run of the same id is removed."""
    os.makedirs(work_dir, exist_ok=True)
    result_file = os.path.join(work_dir, "result-%s.json" % run_id)
    if os.path.exists(result_file):
        os.unlink(result_file)
    return result_file, os.path.join(work_dir, "%s-%s.log" % (launcher, run_id))


def interface_for(address):
    """Name of the interface that holds ``address`` (gloo binds there), or None."""
    import fcntl  # pylint: disable=import-outside-toplevel
    import struct  # pylint: disable=import-outside-toplevel
    for _index, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915,  # SIOCGIFADDR
                                     struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
        if socket.inet_ntoa(packed[20:24]) == address:
            return name
    return None


def _tail(lines, n):
    return lines[-n:] if len(lines) > n else lines


def run_until(cmd, env, log_file, deadline, stop_signals):
    """Run ``cmd`` in its own session, output to ``log_file``; past ``deadline`` send ``stop_signals``
    [(signal, seconds to wait after it)] to the whole group. Returns (exit status, timed out)."""
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,  # noqa: S603
                                start_new_session=True)
        try:
            return proc.wait(timeout=max(deadline - time.monotonic(), 1)), False
        except subprocess.TimeoutExpired:
            for sig, grace in stop_signals:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return proc.returncode, True


def summarize_log(lines, max_nccl_lines):
    """Last stage per rank, the NCCL INFO/WARN lines and the log's tail, as the report reads them."""
    stages = {}
    nccl = []
    for line in lines:
        if line.startswith("GPUFLEET_STAGE "):
            fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
            stages[fields.get("rank", "?")] = fields.get("stage")
        elif "NCCL INFO" in line or "NCCL WARN" in line:
            nccl.append(line)
    return {"last_stages": stages, "nccl_lines": nccl[:max_nccl_lines],
            "log_tail": _tail([ln for ln in lines if not ln.startswith(("GPUFLEET_STAGE ", "GPUFLEET_TASK "))], 40)}


def bound_listener(address, port):
    """A TCP socket listening on (address, port) only: what the stores are handed instead of binding
    to every interface themselves."""
    family, kind, proto, _name, sockaddr = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(sockaddr)
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    return sock


def cmd_store(args):
    """Host a TCPStore on --address:--port until stdin closes (the launcher is done) or --timeout."""
    from datetime import timedelta  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    try:
        listener = bound_listener(args.address, args.port)
    except OSError as exc:
        print("cannot listen on %s:%s: %s" % (args.address, args.port, exc), flush=True)
        return 2
    # The store owns the descriptor from here on (detach: Python must not close it).
    store = dist.TCPStore(args.address, args.port, None, True, timedelta(seconds=max(args.timeout, 1)),
                          wait_for_workers=False, master_listen_fd=listener.detach())
    print("%s %s:%d" % (STORE_READY, args.address, store.port), flush=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        ready, _w, _x = select.select([sys.stdin], [], [], min(1.0, max(deadline - time.monotonic(), 0)))
        if ready and not sys.stdin.buffer.read1(4096):
            break
    del store
    return 0


def start_store_host(address, port, timeout, log_file):
    """The rendezvous store on this node's address, in a child that lives as long as its stdin.
    Its stdout carries only the ready line (or why it could not listen); torch's own output goes to
    ``log_file``, so a full pipe can never stall it."""
    with open(log_file, "wb") as log:
        return subprocess.Popen([sys.executable, os.path.abspath(__file__), "store", "--address", address,  # noqa: S603
                                 "--port", str(port), "--timeout", str(int(timeout) + 30)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)


def wait_store_ready(proc, deadline, log_file):
    """None once the store host says it listens; else why not (its output and log)."""
    fd = proc.stdout.fileno()
    text = b""
    while time.monotonic() < deadline and STORE_READY.encode() not in text:
        ready, _w, _x = select.select([fd], [], [], max(min(1.0, deadline - time.monotonic()), 0))
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            text += chunk
    if STORE_READY.encode() in text:
        return None
    with open(log_file, "r", encoding="utf-8", errors="replace") as log:
        lines = text.decode("utf-8", "replace").splitlines() + log.read().splitlines()
    return "the rendezvous store did not start: %s" % (" | ".join(_tail(lines, 5)) or "no output before the deadline")


def stop_store_host(proc):
    if proc is None:
        return
    try:
        proc.stdin.close()
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def cmd_node(args):
    t_start = time.time()
    deadline = time.monotonic() + args.timeout
    peers = _parse_peers(args.peers)
    names = [n for n, _addr in peers]
    if args.node_name not in names:
        raise SystemExit("--node-name %s is not in --peers" % args.node_name)
    node_rank = names.index(args.node_name)
    out = {"schema": SCHEMA, "node": args.node_name, "node_rank": node_rank, "nnodes": len(peers),
           "address": dict(peers)[args.node_name], "started_at": t_start, "rollcall": None,
           "torchrun_rc": None, "timed_out": False, "stage": "rollcall", "last_stages": {},
           "nccl_lines": [], "log_tail": [], "result": None, "error": None}

    store_host = store_log = None
    if node_rank == 0:
        # Started before the roll call, so importing torch overlaps it.
        os.makedirs(args.work_dir, exist_ok=True)
        store_log = os.path.join(args.work_dir, "store-%s.log" % args.run_id)
        store_host = start_store_host(peers[0][1], args.rdzv_port, args.timeout, store_log)
    try:
        return _node_run(args, out, peers, deadline, store_host, store_log)
    finally:
        stop_store_host(store_host)


def torchrun_command(args, peers, address, result_file, log_dir, deadline):
    """torchrun against the store the first node hosts, its logs in ``log_dir``, running this file's job."""
    join_left = max(int(min(args.join_timeout, deadline - time.monotonic())), 5)
    # is_host=0 everywhere: the store is the first node's store host, bound to its address only.
    rdzv_conf = "join_timeout=%d,read_timeout=%d,last_call_timeout=1,close_timeout=10,is_host=0" % (
        join_left, join_left)
    return [args.torchrun,
            "--nnodes", str(len(peers)),
            "--nproc-per-node", str(args.nproc),
            "--rdzv-backend", "c10d",
            "--rdzv-endpoint", "%s:%d" % (peers[0][1], args.rdzv_port),
            "--rdzv-id", args.run_id,
            "--rdzv-conf", rdzv_conf,
            "--local-addr", address,
            "--max-restarts", "0",
            "--monitor-interval", "1",
            "--log-dir", log_dir,
            os.path.abspath(__file__), "job",
            "--result-file", result_file] + list(args.job_args)


def torchrun_env(args, address, rdzv_host, launch_dir):
    """The environment torchrun and its workers run in."""
    env = dict(os.environ)
    if not env.get("GLOO_SOCKET_IFNAME"):
        iface = interface_for(address)
        if iface:
            env["GLOO_SOCKET_IFNAME"] = iface
    env["GPUFLEET_NODE_NAME"] = args.node_name
    env["GPUFLEET_NODE_ADDR"] = address
    # The workers' process group uses the rendezvous store too (under its own prefix), so no agent
    # or rank opens a store of its own on every interface.
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env["GPUFLEET_STORE_ADDR"], env["GPUFLEET_STORE_PORT"] = rdzv_host, str(args.rdzv_port)
    env["GPUFLEET_RUN_ID"] = args.run_id
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    # torch makes its compile cache (the job compiles nothing) in $TMPDIR when this is unset: keep it with the launch.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(launch_dir, "inductor"))
    return env


def _node_run(args, out, peers, deadline, store_host, store_log):
    """The roll call, then torchrun against the store the first node hosts; prints the node's document."""
    if len(peers) > 1:
        view = rollcall(args.node_name, peers, args.rollcall_port,
                        min(args.join_timeout, max(deadline - time.monotonic(), 1)))
    else:
        view = {"node": args.node_name, "ok": True, "elapsed_s": 0.0, "reached": [], "unreachable": [],
                "heard_from": [], "not_heard_from": [], "wrong_name": {}, "errors": {}}
    out["rollcall"] = view
    if not view["ok"]:
        out["error"] = "roll call failed: unreachable %s, not heard from %s" % (
            ", ".join(view["unreachable"]) or "-", ", ".join(view["not_heard_from"]) or "-")
        out["finished_at"] = time.time()
        print(json.dumps(out))
        return 3

    if store_host is not None:
        out["error"] = wait_store_ready(store_host, deadline, store_log)
        if out["error"]:
            out["finished_at"] = time.time()
            print(json.dumps(out))
            return 4
    result_file, log_file = fresh_work_files(args.work_dir, args.run_id, "torchrun")
    # torchrun's own files (its log dir, else a fresh /tmp/torchelastic_* per launch that nothing removes):
    # under the job's work dir, removed when torchrun has ended.
    launch_dir = os.path.join(args.work_dir, "torchrun-%s" % args.run_id)
    shutil.rmtree(launch_dir, ignore_errors=True)
    cmd = torchrun_command(args, peers, out["address"], result_file, os.path.join(launch_dir, "logs"), deadline)
    env = torchrun_env(args, out["address"], peers[0][1], launch_dir)
    out["gloo_socket_ifname"] = env.get("GLOO_SOCKET_IFNAME")
    out["stage"] = "torchrun"
    out["command"] = cmd
    try:
        # The whole session on expiry: torchrun's agent and every worker it started.
        out["torchrun_rc"], out["timed_out"] = run_until(cmd, env, log_file, deadline,
                                                         ((signal.SIGTERM, 5), (signal.SIGKILL, 5)))
    finally:
        shutil.rmtree(launch_dir, ignore_errors=True)
    with open(log_file, "r", encoding="utf-8", errors="replace") as log:
        lines = log.read().splitlines()
    out.update(summarize_log(lines, args.max_nccl_lines))
    out["log_file"] = log_file
    if os.path.exists(result_file):
        with open(result_file, "r", encoding="utf-8") as fh:
            out["result"] = json.load(fh)
    failed = out["timed_out"] or out["torchrun_rc"] != 0
    if failed and len(peers) > 1 and not out["result"]:
        # Who is still reachable now? A node cut off mid-run shows up here, not in the first roll call.
        out["stage"] = "rollcall_after"
        out["rollcall_after"] = rollcall(args.node_name, peers, args.rollcall_port, min(10.0, args.join_timeout))
    out["stage"] = "done"
    out["finished_at"] = time.time()
    if out["timed_out"]:
        out["error"] = "torchrun did not finish within %ss (killed)" % args.timeout
    elif out["torchrun_rc"] != 0:
        out["error"] = "torchrun exited with %s" % out["torchrun_rc"]
    print(json.dumps(out))
    return 0 if out["torchrun_rc"] == 0 and not out["timed_out"] else 4


# --------------------------------------------------------------------------------------------
# srun: one Slurm step across the nodes instead of one torchrun per node

# "srun --label" puts the task id before each line of output, right-aligned: "3: text", " 3: text".
SRUN_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
# srun's own report of a task that failed: "srun: error: node2: task 3: Exited with exit code 3".
SRUN_NODE_ERROR = re.compile(r"^srun: error: ([^:\s]+): task")
# On the deadline: two SIGINTs within a second (srun's Ctrl-C twice: it signals, then kills every task);
# SIGKILL only if srun will not go.
SRUN_STOP_SIGNALS = ((signal.SIGINT, 0.5), (signal.SIGINT, 15), (signal.SIGKILL, 5))


def _format_pairs(pairs):
    return ",".join("%s=%s" % pair for pair in pairs)


def _slurm_names_for(peers, slurm_names):
    """Slurm's name of every peer, in peer order; refuses a peer without one or a name used twice."""
    names = dict(slurm_names)
    missing = [n for n, _addr in peers if not names.get(n)]
    if missing:
        raise ValueError("no Slurm node name for %s" % ", ".join(missing))
    ordered = [names[n] for n, _addr in peers]
    twice = sorted({s for s in ordered if ordered.count(s) > 1})
    if twice:
        raise ValueError("Slurm node name(s) %s stand for more than one node" % ", ".join(twice))
    return ordered


def srun_command(srun, python, job_file, peers, slurm_names, nproc, run_id, rdzv_port, rollcall_port,
                 join_timeout, timeout, work_dir, srun_args=(), job_args=()):
    """The one srun step: nproc tasks on each peer, each running ``slurm-task``.

    --label tells the tasks' output apart, --kill-on-bad-exit ends the step when one task fails,
    --immediate bounds the wait for an allocation, --time is Slurm's own bound beside ours.
    """
    nodelist = _slurm_names_for(peers, slurm_names)
    nnodes = len(peers)
    cmd = [srun, "--job-name=gpufleet-smoke", "--nodes=%d" % nnodes, "--ntasks=%d" % (nnodes * nproc),
           "--ntasks-per-node=%d" % nproc, "--nodelist=%s" % ",".join(nodelist), "--kill-on-bad-exit=1",
           "--label", "--export=ALL", "--time=%d" % (int(math.ceil(timeout / 60.0)) + 1),
           "--immediate=%d" % max(int(join_timeout), 1)]
    cmd += list(srun_args)
    cmd += [python, job_file, "slurm-task", "--peers", _format_pairs(peers), "--slurm-names", _format_pairs(slurm_names),
            "--nproc", str(nproc), "--rdzv-port", str(rdzv_port), "--rollcall-port", str(rollcall_port),
            "--run-id", run_id, "--join-timeout", str(join_timeout), "--work-dir", work_dir, "--"]
    return cmd + list(job_args)


def slurm_task_env(environ, peers, slurm_names, nproc, master_port):
    """torch's env:// rendezvous variables for one srun task, from the SLURM_* variables srun sets.

    Slurm orders a step's nodes itself, so SLURM_PROCID 0 need not run on the first peer, where
    MASTER_ADDR points and rank 0 must host the store. The rank is therefore the node's place in
    ``peers`` times ``nproc`` plus SLURM_LOCALID; SLURM_NTASKS must be nodes x nproc.
    """
    unset = [v for v in ("SLURMD_NODENAME", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS") if not environ.get(v)]
    if unset:
        raise ValueError("%s not set: this mode runs only as a task of srun" % ", ".join(unset))
    ordered = _slurm_names_for(peers, slurm_names)
    here = environ["SLURMD_NODENAME"]
    if here not in ordered:
        raise ValueError("Slurm ran this task on %s, which is none of the planned nodes' Slurm names (%s); "
                         "set smoke_test_slurm_node_name to each node's name in Slurm" % (here, ", ".join(ordered)))
    node_rank = ordered.index(here)
    name, address = peers[node_rank]
    local_rank, ntasks = int(environ["SLURM_LOCALID"]), int(environ["SLURM_NTASKS"])
    world = len(peers) * nproc
    if ntasks != world:
        raise ValueError("srun started %d task(s); the plan is %d node(s) x %d = %d" % (ntasks, len(peers), nproc, world))
    if local_rank >= nproc:
        raise ValueError("%s (%s) runs local task %d but the plan is %d per node" % (name, here, local_rank, nproc))
    return {"RANK": str(node_rank * nproc + local_rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": str(node_rank), "MASTER_ADDR": peers[0][1],
            "MASTER_PORT": str(master_port), "GPUFLEET_NODE_NAME": name, "GPUFLEET_NODE_ADDR": address,
            "GPUFLEET_LAUNCHER": "srun"}


def split_srun_output(lines, peers, slurm_names):
    """srun's labelled output cut per node.

    Tasks name their node in their first line (GPUFLEET_TASK); the first task of each node prints
    its roll call (GPUFLEET_ROLLCALL). Returns ({node: {lines, rollcall, task_error}}, lines no
    task claims, srun's own error lines per node).
    """
    by_slurm = dict((s, n) for n, s in slurm_names)
    per_node = dict((n, {"lines": [], "rollcall": None, "task_error": None}) for n, _addr in peers)
    task_node = {}
    for line in lines:
        match = SRUN_LABEL.match(line)
        if match and match.group(2).startswith("GPUFLEET_TASK "):
            fields = dict(f.split("=", 1) for f in match.group(2).split()[1:] if "=" in f)
            if fields.get("node") in per_node:
                task_node[match.group(1)] = fields["node"]
    unclaimed, srun_errors = [], {}
    for line in lines:
        match = SRUN_LABEL.match(line)
        node = task_node.get(match.group(1)) if match else None
        if node is None:
            unclaimed.append(line)
            error = SRUN_NODE_ERROR.match(line)
            if error and by_slurm.get(error.group(1)) in per_node:
                srun_errors.setdefault(by_slurm[error.group(1)], []).append(line)
            continue
        text = match.group(2)
        if text.startswith("GPUFLEET_ROLLCALL "):
            try:
                per_node[node]["rollcall"] = json.loads(text.split(" ", 1)[1])
            except ValueError:
                per_node[node]["lines"].append(text)
        elif text.startswith("GPUFLEET_TASK_ERROR "):
            per_node[node]["task_error"] = per_node[node]["task_error"] or text.split(" ", 1)[1]
        else:
            per_node[node]["lines"].append(text)
    return per_node, unclaimed, srun_errors


def cmd_srun(args):
    """Launch node: one srun step for all nodes; prints {"launcher": "srun", "nodes": {node: doc}}."""
    t_start = time.time()
    deadline = time.monotonic() + args.timeout
    peers = _parse_peers(args.peers)
    slurm_names = _parse_peers(args.slurm_names)
    out = {"schema": SCHEMA, "launcher": "srun", "started_at": t_start, "command": None, "srun_rc": None,
           "timed_out": False, "nodes": {}, "log_tail": [], "error": None}
    try:
        cmd = srun_command(args.srun, args.python, os.path.abspath(__file__), peers, slurm_names, args.nproc,
                           args.run_id, args.rdzv_port, args.rollcall_port, args.join_timeout, args.timeout,
                           args.work_dir, args.srun_arg, args.job_args)
    except ValueError as exc:
        out["error"] = str(exc)
        print(json.dumps(out))
        return 2
    # Rank 0 writes the job result on the first peer: that is where this launcher must run.
    if interface_for(peers[0][1]) is None:
        out["error"] = "the srun launcher runs on %s (%s), which holds rank 0 and its result; no interface here has %s" % (
            peers[0][0], peers[0][1], peers[0][1])
        print(json.dumps(out))
        return 2
    result_file, log_file = fresh_work_files(args.work_dir, args.run_id, "srun")
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    out["command"] = cmd
    out["srun_rc"], out["timed_out"] = run_until(cmd, env, log_file, deadline, SRUN_STOP_SIGNALS)
    with open(log_file, "r", encoding="utf-8", errors="replace") as log:
        lines = log.read().splitlines()
    per_node, unclaimed, srun_errors = split_srun_output(lines, peers, slurm_names)
    out["log_tail"] = _tail(unclaimed, 40)
    out["log_file"] = log_file
    result = None
    if os.path.exists(result_file):
        with open(result_file, "r", encoding="utf-8") as fh:
            result = json.load(fh)
    # Reasons that name no node: srun's own errors (no allocation, a bad option), and tasks that failed
    # before they could say where they run (a Slurm node name that matches no planned node).
    general = []
    for line in unclaimed:
        match = SRUN_LABEL.match(line)
        if match and match.group(2).startswith("GPUFLEET_TASK_ERROR "):
            general.append(match.group(2).split(" ", 1)[1])
        elif line.startswith("srun: ") and ("error" in line or "fatal" in line) and not SRUN_NODE_ERROR.match(line):
            general.append(line)
    general = sorted(set(general), key=general.index)
    for node_rank, (name, address) in enumerate(peers):
        part = per_node[name]
        doc = {"schema": SCHEMA, "launcher": "srun", "node": name, "node_rank": node_rank, "nnodes": len(peers),
               "address": address, "started_at": t_start, "rollcall": part["rollcall"],
               # The report reads the launch's exit status from torchrun_rc whichever launcher ran.
               "torchrun_rc": out["srun_rc"], "timed_out": out["timed_out"], "stage": "done",
               "result": result if node_rank == 0 else None, "error": None}
        doc.update(summarize_log(part["lines"], args.max_nccl_lines))
        doc["log_tail"] = _tail(doc["log_tail"] + srun_errors.get(name, []), 40)
        rollcall_view = part["rollcall"]
        if part["task_error"]:
            doc["error"] = part["task_error"]
        elif rollcall_view and not rollcall_view.get("ok"):
            doc["error"] = "roll call failed: unreachable %s, not heard from %s" % (
                ", ".join(rollcall_view["unreachable"]) or "-", ", ".join(rollcall_view["not_heard_from"]) or "-")
        elif out["timed_out"]:
            doc["error"] = "srun did not finish within %ss (cancelled)" % args.timeout
        elif out["srun_rc"] != 0:
            why = srun_errors.get(name, []) + general
            doc["error"] = "srun exited with %s%s" % (out["srun_rc"], (": " + " | ".join(why[:3])) if why else "")
        out["nodes"][name] = doc
    out["finished_at"] = time.time()
    print(json.dumps(out))
    return 0 if out["srun_rc"] == 0 and not out["timed_out"] else 4


def _wait_for_rollcall(path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path, "r", encoding="utf-8") as fh:
                return json.load(fh)
        time.sleep(0.2)
    return None


def cmd_slurm_task(args):
    """One srun task: rendezvous variables, the node's roll call (its first task runs it), then the job."""
    t_start = time.monotonic()
    peers = _parse_peers(args.peers)
    try:
        env = slurm_task_env(os.environ, peers, _parse_peers(args.slurm_names), args.nproc, args.rdzv_port)
    except ValueError as exc:
        print("GPUFLEET_TASK_ERROR %s" % exc, flush=True)
        return 2
    name, local_rank = env["GPUFLEET_NODE_NAME"], int(env["LOCAL_RANK"])
    print("GPUFLEET_TASK procid=%s node=%s rank=%s local_rank=%d" % (
        os.environ["SLURM_PROCID"], name, env["RANK"], local_rank), flush=True)
    os.makedirs(args.work_dir, exist_ok=True)
    # One file per node: a work dir on a shared filesystem (NFS home, or several tasks on one host)
    # must not hand one node's roll call to another node's ranks, nor race on the temporary file.
    rollcall_file = os.path.join(args.work_dir, "rollcall-%s-%s.json" % (args.run_id, name))
    if local_rank == 0:
        if len(peers) > 1:
            view = rollcall(name, peers, args.rollcall_port, args.join_timeout)
        else:
            view = {"node": name, "ok": True, "elapsed_s": 0.0, "reached": [], "unreachable": [],
                    "heard_from": [], "not_heard_from": [], "wrong_name": {}, "errors": {}}
        print("GPUFLEET_ROLLCALL %s" % json.dumps(view), flush=True)
        tmp = "%s.%d.tmp" % (rollcall_file, os.getpid())
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(view, fh)
        os.replace(tmp, rollcall_file)
    else:
        view = _wait_for_rollcall(rollcall_file, args.join_timeout + 15)
        if view is None:
            print("GPUFLEET_TASK_ERROR %s: the node's first task never finished the roll call" % name, flush=True)
            return 3
    if not view["ok"]:
        # --kill-on-bad-exit would end the other nodes' roll calls before they print whom they reached,
        # and the report needs every node's view: leave only when theirs are over too.
        time.sleep(max(t_start + args.join_timeout + 2 - time.monotonic(), 0))
        return 3
    os.environ.update(env)
    if not os.environ.get("GLOO_SOCKET_IFNAME"):
        iface = interface_for(env["GPUFLEET_NODE_ADDR"])
        if iface:
            os.environ["GLOO_SOCKET_IFNAME"] = iface
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    job = argparse.ArgumentParser(prog="gpufleet_smoke.py slurm-task --")
    _job_parser(job)
    job_args = job.parse_args(args.job_args)
    job_args.result_file = os.path.join(args.work_dir, "result-%s.json" % args.run_id)
    return cmd_job(job_args)


# --------------------------------------------------------------------------------------------
# job: runs under torchrun


def _sizes(min_bytes, max_bytes, factor):
    sizes = []
    size = max(int(min_bytes), 4)
    while size <= max_bytes:
        sizes.append(size)
        nxt = size * factor
        if nxt <= size:
            break
        size = nxt
    return sizes


def _sync(device):
    if device.type == "cuda":
        import torch  # pylint: disable=import-outside-toplevel
        torch.cuda.synchronize(device)


def run_sweep(args, dist, torch, device, rank, world):
    """All-reduce (sum, float32) sweep; time averaged over ranks as nccl-tests does by default."""
    rows = []
    for size in _sizes(args.min_bytes, args.max_bytes, args.factor):
        _stage(rank, "sweep:%d" % size)
        count = max(size // 4, 1)
        nbytes = count * 4
        buf = torch.zeros(count, dtype=torch.float32, device=device)
        # Zeros while timing: repeated in-place sums stay finite and denormal-free.
        for _warmup in range(args.warmup):
            dist.all_reduce(buf)
        _sync(device)
        dist.barrier()
        if device.type == "cuda":
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _iteration in range(args.iters):
                dist.all_reduce(buf)
            end.record()
            end.synchronize()
            elapsed = begin.elapsed_time(end) / 1000.0 / args.iters
        else:
            t0 = time.perf_counter()
            for _iteration in range(args.iters):
                dist.all_reduce(buf)
            elapsed = (time.perf_counter() - t0) / args.iters
        times = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(times)
        avg_time = float(times.item()) / world
        # Correctness: element i of rank r holds (r+1)*(i%7+1); the sum is exact in float32.
        pattern = (torch.arange(count, device=device) % 7 + 1).to(torch.float32)
        buf.copy_(pattern * float(rank + 1))
        dist.all_reduce(buf)
        expected = pattern * float(world * (world + 1) // 2)
        wrong_local = int((buf != expected).sum().item())
        wrong = torch.tensor([wrong_local], dtype=torch.int64, device=device)
        dist.all_reduce(wrong)
        algbw = nbytes / avg_time / 1.0e9
        factor = 2.0 * (world - 1) / world
        rows.append({"size_bytes": nbytes, "count": count, "type": "float", "redop": "sum",
                     "time_us": avg_time * 1.0e6, "algbw_gbps": algbw, "busbw_gbps": algbw * factor,
                     "wrong": int(wrong.item())})
        del buf, pattern, expected
    return rows


def _cross_rank_checks(dist, torch, model, losses, elapsed, device, world):
    """(mean loss per step over the ranks, this rank's parameters, NaN/Inf count, max parameter difference
    from rank 0, ranks out of sync, slowest rank's wall time): the same collectives, in the same order, on
    every rank."""
    local = torch.stack(losses).to(torch.float64)
    mean_losses = local.clone()
    dist.all_reduce(mean_losses)
    mean_losses /= world
    # NaN/Inf anywhere: local losses or parameters on any rank.
    flat = torch.cat([p.detach().reshape(-1).to(torch.float64) for p in model.parameters()])
    nonfinite_local = int((~torch.isfinite(local)).sum().item()) + int((~torch.isfinite(flat)).sum().item())
    nonfinite = torch.tensor([nonfinite_local], dtype=torch.int64, device=device)
    dist.all_reduce(nonfinite)
    # Parameters identical on every rank: compare with rank 0's copy, bit for bit.
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    diff = torch.nan_to_num((flat - ref).abs(), nan=float("inf"))
    max_diff = torch.tensor([float(diff.max().item()) if diff.numel() else 0.0], dtype=torch.float64, device=device)
    dist.all_reduce(max_diff, op=dist.ReduceOp.MAX)
    mismatched = torch.tensor([0 if torch.equal(flat, ref) else 1], dtype=torch.int64, device=device)
    dist.all_reduce(mismatched)
    step_times = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(step_times, op=dist.ReduceOp.MAX)
    wall = float(step_times.item())
    series = [float(v) for v in mean_losses.cpu().tolist()]
    return series, flat, nonfinite, max_diff, mismatched, wall


def run_training(args, dist, torch, device, rank, world):
    """DDP on synthetic data: a fixed random 'teacher' labels Gaussian inputs; the MLP must learn it."""
    from torch import nn  # pylint: disable=import-outside-toplevel
    from torch.nn.parallel import DistributedDataParallel as DDP  # pylint: disable=import-outside-toplevel

    _stage(rank, "train:setup")
    torch.manual_seed(args.seed)
    teacher = torch.randn(args.features, args.classes, generator=torch.Generator().manual_seed(args.seed + 1))
    teacher = teacher.to(device)
    model = nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.classes)).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    warm = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1000 + rank)
    losses = []
    _sync(device)
    dist.barrier()
    t0 = time.perf_counter()
    for step in range(args.steps):
        if step % 10 == 0:
            _stage(rank, "train:%d" % step)
        x = torch.randn(args.batch, args.features, generator=gen).to(device, non_blocking=True)
        y = (x @ teacher).argmax(dim=1)
        loss = loss_fn(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.detach())
    _sync(device)
    elapsed = time.perf_counter() - t0
    _stage(rank, "train:check")
    series, flat, nonfinite, max_diff, mismatched, wall = _cross_rank_checks(dist, torch, model, losses, elapsed,
                                                                             device, world)
    k = max(1, args.steps // 10)
    first = sum(series[:k]) / k
    last = sum(series[-k:]) / k
    dtype = next(model.parameters()).dtype
    tf32 = device.type == "cuda" and dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
    return {
        "model": "mlp %d-%d-%d-%d" % (args.features, args.hidden, args.hidden, args.classes),
        "parameters": int(flat.numel()),
        # Model FLOPs for MFU: 2 per multiply-add forward, twice that backward, over the Linear weights.
        "train_flops_per_sample": 6 * sum(m.in_features * m.out_features for m in model.modules()
                                          if isinstance(m, nn.Linear)),
        "dtype": "tf32" if tf32 else {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype)),
        "steps": args.steps,
        "per_gpu_batch": args.batch,
        "global_batch": args.batch * world,
        "lr": args.lr,
        "optimizer": "sgd momentum 0.9, linear warm-up %d steps" % warm,
        "loss_first": first if math.isfinite(first) else None,
        "loss_last": last if math.isfinite(last) else None,
        "loss_drop": (1.0 - last / first) if (math.isfinite(first) and math.isfinite(last) and first > 0) else None,
        "losses": [round(v, 6) if math.isfinite(v) else None for v in series],
        "nonfinite_values": int(nonfinite.item()),
        "params_in_sync": int(mismatched.item()) == 0,
        "ranks_out_of_sync": int(mismatched.item()),
        "max_param_diff": float(max_diff.item()),
        "wall_s": wall,
        "step_time_ms": wall / args.steps * 1000.0,
        "steps_per_s": args.steps / wall if wall > 0 else None,
        "samples_per_s": args.batch * world * args.steps / wall if wall > 0 else None,
    }


def encode_record(record, size=RECORD_BYTES):
    """``record`` as ``size`` bytes: 4-byte big-endian length, compact UTF-8 JSON, zero padding."""
    payload = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(payload) > size - _RECORD_HEADER:
        raise ValueError("record of %d bytes does not fit in %d: %s..." % (
            len(payload), size - _RECORD_HEADER, payload[:80].decode("utf-8", "replace")))
    return len(payload).to_bytes(_RECORD_HEADER, "big") + payload + b"\0" * (size - _RECORD_HEADER - len(payload))


def decode_record(buf, size=RECORD_BYTES):
    """The JSON object ``encode_record`` wrote; ValueError for anything else (wrong size, length, text)."""
    buf = bytes(buf)
    if len(buf) != size:
        raise ValueError("record is %d bytes, need %d" % (len(buf), size))
    length = int.from_bytes(buf[:_RECORD_HEADER], "big")
    if not 0 < length <= size - _RECORD_HEADER:
        raise ValueError("record length %d is outside 1..%d" % (length, size - _RECORD_HEADER))
    if buf[_RECORD_HEADER + length:].strip(b"\0"):
        raise ValueError("record has bytes after its %d-byte payload" % length)
    try:
        record = json.loads(buf[_RECORD_HEADER:_RECORD_HEADER + length].decode("utf-8"),
                            parse_constant=lambda name: _reject("non-finite number %s" % name))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError("record is not UTF-8 JSON: %s" % exc) from None
    if not isinstance(record, dict):
        raise ValueError("record is a %s, need an object" % type(record).__name__)
    return record


def _reject(why):
    raise ValueError(why)


def validate_member(record, rank):
    """A rank's roll-call record, checked field by field: the keys and types MEMBER_FIELDS names."""
    if sorted(record) != sorted(MEMBER_FIELDS):
        raise ValueError("rank %d sent fields %s, need %s" % (rank, sorted(record), sorted(MEMBER_FIELDS)))
    for key, kind in MEMBER_FIELDS.items():
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            raise ValueError("rank %d sent %s=%r" % (rank, key, record[key]))
    if record["rank"] != rank:
        raise ValueError("rank %d sent the record of rank %d" % (rank, record["rank"]))
    return record


def gather_members(dist, torch, device, me, world):
    """Every rank's record, as fixed-size JSON in uint8 tensors over all_gather (no pickle)."""
    local = torch.tensor(list(encode_record(me)), dtype=torch.uint8, device=device)
    gathered = [torch.zeros(RECORD_BYTES, dtype=torch.uint8, device=device) for _rank in range(world)]
    dist.all_gather(gathered, local)
    members = []
    for rank, tensor in enumerate(gathered):
        try:
            members.append(validate_member(decode_record(bytes(tensor.cpu().tolist())), rank))
        except ValueError as exc:
            raise SystemExit("bad roll-call record from rank %d: %s" % (rank, exc)) from None
    return members


def process_group_store(dist, environ, timeout):
    """The process group's store: the rendezvous store the first node hosts (torchrun launcher), or
    under srun one rank 0 hosts on MASTER_ADDR only; None (env://) where torchrun's agent hosts it."""
    if environ.get("GPUFLEET_STORE_ADDR"):
        client = dist.TCPStore(environ["GPUFLEET_STORE_ADDR"], int(environ["GPUFLEET_STORE_PORT"]), None, False, timeout)
        return dist.PrefixStore("gpufleet/%s/pg/" % environ.get("GPUFLEET_RUN_ID", "run"), client)
    if environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return None
    addr, port = environ["MASTER_ADDR"], int(environ["MASTER_PORT"])
    world = int(environ["WORLD_SIZE"])
    if int(environ["RANK"]) != 0:
        return dist.TCPStore(addr, port, world, False, timeout)
    try:
        listener = bound_listener(addr, port)
    except OSError as exc:
        raise SystemExit("rank 0 cannot listen on MASTER_ADDR %s:%s: %s" % (addr, port, exc)) from None
    return dist.TCPStore(addr, port, world, True, timeout, master_listen_fd=listener.detach())


def cuda_device_index(local_rank, device_count, one_per_task=False):
    """The GPU of this rank: its local rank, or under srun the one GPU Slurm left the task (--gpus-per-task=1)."""
    if local_rank < device_count:
        return local_rank
    if one_per_task and device_count == 1:
        return 0
    raise SystemExit("local rank %d but torch sees %d GPU(s) on %s" % (local_rank, device_count, socket.gethostname()))


def cmd_job(args):
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    from datetime import timedelta  # pylint: disable=import-outside-toplevel

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    t_start = time.time()
    backend = args.backend
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise SystemExit("backend nccl asked but torch sees no CUDA device on %s" % socket.gethostname())
        index = cuda_device_index(local_rank, torch.cuda.device_count(),
                                  one_per_task=os.environ.get("GPUFLEET_LAUNCHER") == "srun")
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
    _stage(rank, "init")
    timeout = timedelta(seconds=args.collective_timeout)
    store = process_group_store(dist, os.environ, timeout)
    if store is None:
        dist.init_process_group(backend=backend, timeout=timeout)
    else:
        dist.init_process_group(backend=backend, timeout=timeout, store=store,
                                rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    world = dist.get_world_size()
    rank = dist.get_rank()
    me = {"rank": rank, "local_rank": local_rank, "node": os.environ.get("GPUFLEET_NODE_NAME") or socket.gethostname(),
          "address": os.environ.get("GPUFLEET_NODE_ADDR"), "hostname": socket.gethostname(),
          "device": str(device), "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None}
    members = gather_members(dist, torch, device, me, world)
    _stage(rank, "joined")
    init_s = time.time() - t_start
    nccl_version = None
    if backend == "nccl":
        try:
            ver = torch.cuda.nccl.version()
            nccl_version = ".".join(str(v) for v in ver) if isinstance(ver, tuple) else str(ver)
        except Exception:  # pylint: disable=broad-except
            nccl_version = None
    sweep = run_sweep(args, dist, torch, device, rank, world)
    training = run_training(args, dist, torch, device, rank, world)
    _stage(rank, "done")
    if rank == 0:
        nodes = []
        for m in members:
            if m["node"] not in nodes:
                nodes.append(m["node"])
        result = {
            "schema": SCHEMA,
            "backend": backend,
            "device": device.type,
            "world_size": world,
            "nodes": nodes,
            "ranks": members,
            "versions": {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "nccl": nccl_version,
                         "python": sys.version.split()[0]},
            "init_s": init_s,
            "sweep": {"collective": "all_reduce", "dtype": "float32", "warmup": args.warmup, "iters": args.iters,
                      "timing": "cuda events" if device.type == "cuda" else "perf_counter",
                      "time_average": "mean over ranks", "rows": sweep},
            "training": training,
            "started_at": t_start,
            "finished_at": time.time(),
        }
        tmp = args.result_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(result, fh)
        os.replace(tmp, args.result_file)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# --------------------------------------------------------------------------------------------


def _job_parser(parser):
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="gloo")
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--factor", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64, help="per-GPU (per-rank) batch")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--collective-timeout", type=int, default=60)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    probe = sub.add_parser("probe")
    probe.add_argument("--light", action="store_true", help="no torch import: version only, no GPU count")
    node = sub.add_parser("node")
    node.add_argument("--node-name", required=True)
    node.add_argument("--peers", required=True, help="name=address,... ; the first one hosts the rendezvous")
    node.add_argument("--nproc", type=int, required=True)
    node.add_argument("--torchrun", required=True)
    node.add_argument("--rdzv-port", type=int, default=29400)
    node.add_argument("--rollcall-port", type=int, default=29401)
    node.add_argument("--run-id", required=True)
    node.add_argument("--join-timeout", type=float, default=60)
    node.add_argument("--timeout", type=float, default=300)
    node.add_argument("--work-dir", default="/var/lib/gpufleet/smoke")
    node.add_argument("--max-nccl-lines", type=int, default=4000)
    node.add_argument("job_args", nargs=argparse.REMAINDER, help="after --: arguments for the job")
    store = sub.add_parser("store", help="internal: the rendezvous store, started by node on the first node")
    store.add_argument("--address", required=True, help="the node's own address on the job network")
    store.add_argument("--port", type=int, required=True)
    store.add_argument("--timeout", type=float, default=330)
    job = sub.add_parser("job")
    job.add_argument("--result-file", required=True)
    _job_parser(job)
    launch = sub.add_parser("srun")
    launch.add_argument("--peers", required=True, help="name=address,... ; the first one holds rank 0 and runs this")
    launch.add_argument("--slurm-names", required=True, help="name=Slurm node name,... for every peer")
    launch.add_argument("--nproc", type=int, required=True, help="tasks per node")
    launch.add_argument("--srun", default="srun")
    launch.add_argument("--python", default=sys.executable, help="python on the nodes that runs the tasks")
    launch.add_argument("--srun-arg", action="append", default=[], help="one more srun option (--srun-arg=--partition=gpu)")
    task = sub.add_parser("slurm-task")
    task.add_argument("--peers", required=True)
    task.add_argument("--slurm-names", required=True)
    task.add_argument("--nproc", type=int, required=True)
    for mode in (launch, task):
        mode.add_argument("--rdzv-port", type=int, default=29400, help="MASTER_PORT on the first peer")
        mode.add_argument("--rollcall-port", type=int, default=29401)
        mode.add_argument("--run-id", required=True)
        mode.add_argument("--join-timeout", type=float, default=60)
        mode.add_argument("--work-dir", default="/var/lib/gpufleet/smoke")
        mode.add_argument("job_args", nargs=argparse.REMAINDER, help="after --: arguments for the job")
    launch.add_argument("--timeout", type=float, default=300)
    launch.add_argument("--max-nccl-lines", type=int, default=4000)
    args = parser.parse_args(argv)
    if args.mode == "probe":
        return cmd_probe(args)
    if args.mode == "job":
        return cmd_job(args)
    if args.mode == "store":
        return cmd_store(args)
    if args.job_args and args.job_args[0] == "--":
        args.job_args = args.job_args[1:]
    if args.mode == "node":
        return cmd_node(args)
    if args.mode == "srun":
        return cmd_srun(args)
    return cmd_slurm_task(args)


def _exit_after_process_group(rc):
    """Leave a rank without interpreter finalization once its process group is destroyed.

    torch's C++ threads (gloo's, autograd's) can still be joinable when the interpreter tears down its
    modules, and the rank then aborts ("terminate called without an active exception", exit -6) after
    its work is done and its result written: 3 runs in 30 of the 2-rank gloo job under CPU load, each
    after destroy_process_group() had returned. Nothing is left to finalize: output is flushed here.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # pylint: disable=protected-access


if __name__ == "__main__":
    _rc = main()
    if "torch.distributed" in sys.modules and isinstance(_rc, int):
        _exit_after_process_group(_rc)
    sys.exit(_rc)
