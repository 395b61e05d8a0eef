"""Quick tier: the smoke job for real on this machine (gloo, CPU), no cluster needed.

- torchrun --standalone with 2 processes: sweep + training, checked and turned into all reports;
- two launchers on loopback (127.0.0.1 and 127.0.0.2) acting as two nodes: roll call, c10d
  rendezvous on the first, one process each; every socket the job listens on, read from /proc
  while it runs, is bound to a node's own address (issue 25, F12), never to every interface;
- a node that never starts: the roll call fails within its timeout and names it.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer, smoke_render as srd, smoke_report as sr, smoke_verdict as sv

_REPO = Path(__file__).resolve().parents[3]

JOB = _REPO / "roles" / "smoke_test" / "files" / "gpufleet_smoke.py"
BIN = Path(sys.executable).parent
TORCHRUN = BIN / "torchrun"

pytestmark = pytest.mark.torch

try:
    import torch  # noqa: F401  # pylint: disable=unused-import  # only whether it imports matters
    HAVE_TORCH = TORCHRUN.exists()
except ImportError:  # pragma: no cover
    HAVE_TORCH = False

if not HAVE_TORCH:  # pragma: no cover
    pytest.skip("torch and torchrun are not installed in this venv (pip install .[smoke])", allow_module_level=True)

SMALL = ["--backend", "gloo", "--max-bytes", str(4 << 20), "--warmup", "1", "--iters", "3", "--steps", "60"]


def _free_port(addr="127.0.0.1"):
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _env(**extra):
    env = dict(os.environ, **extra)
    env["PATH"] = "%s%s%s" % (BIN, os.pathsep, env.get("PATH", ""))
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env["OMP_NUM_THREADS"] = "1"
    return env


def _run(cmd, timeout, **env):
    """Run in its own session and kill the whole group on timeout (torchrun's workers too)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError("timed out: %s\n%s" % (cmd, err[-3000:]))
    return proc.returncode, out, err


def _check_result(res, world):
    assert res["backend"] == "gloo" and res["device"] == "cpu" and res["world_size"] == world
    rows = res["sweep"]["rows"]
    assert [r["size_bytes"] for r in rows] == [8 << i for i in range(len(rows))]
    assert rows[-1]["size_bytes"] == 4 << 20
    for r in rows:
        assert r["wrong"] == 0
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9, rel=1e-9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (world - 1) / world, rel=1e-12)
    t = res["training"]
    assert t["loss_last"] < t["loss_first"] * 0.7, t
    assert t["nonfinite_values"] == 0 and t["params_in_sync"] and t["max_param_diff"] == 0.0
    assert t["global_batch"] == t["per_gpu_batch"] * world and t["samples_per_s"] > 0


def test_standalone_two_processes_and_reports(tmp_path):
    result_file = tmp_path / "result.json"
    port = _free_port()
    t0 = time.monotonic()
    rc, out, err = _run([str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "--rdzv-endpoint", "127.0.0.1:%d" % port,
                         "--log-dir", str(tmp_path / "torchelastic"),  # not a new /tmp/torchelastic_* per run
                         str(JOB), "job", "--result-file", str(result_file)] + SMALL, timeout=180,
                        GPUFLEET_NODE_NAME="local")
    assert rc == 0, err[-3000:]
    res = json.loads(result_file.read_text())
    _check_result(res, 2)
    # Every rank reported its stages to stderr.
    assert "GPUFLEET_STAGE rank=1 stage=done" in err and "GPUFLEET_STAGE rank=0 stage=done" in err
    wall = time.monotonic() - t0

    # The controller side on this very result: one "node" holding both ranks.
    out_doc = {"node": "local", "rollcall": {"ok": True, "reached": [], "unreachable": [], "heard_from": [],
                                             "not_heard_from": []},
               "torchrun_rc": 0, "timed_out": False, "last_stages": {"0": "done", "1": "done"},
               "nccl_lines": [], "log_tail": [], "result": res, "error": None}
    nodes = {"local": {"address": "127.0.0.1", "nproc": 2, "gpu": {"status": "no_driver"},
                       "probe": {"torch": res["versions"]["torch"], "cuda_device_count": 0}}}
    report = sr.build_report("quick", ["local"], nodes, {"local": out_doc}, "gloo",
                             hparams={"global_batch": 128, "lr": 0.05, "warnings": []})
    sv.evaluate(report, sv.resolve_thresholds(report, {}))
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    assert report["sweep"]["bus_factor"] == 1.0
    for row in report["sweep"]["rows"]:
        assert row["busbw_gbps"] == row["algbw_gbps"] * (2 * (2 - 1) / 2)
    (tmp_path / "smoke.json").write_text(report_writer.render_json(report))
    (tmp_path / "smoke.junit.xml").write_text(srd.render_junit(report))
    (tmp_path / "smoke_busbw.svg").write_text(srd.render_svg(report))
    (tmp_path / "smoke.md").write_text(srd.render_markdown(report))
    junit = ET.parse(tmp_path / "smoke.junit.xml").getroot()
    assert junit.find("testsuite").get("failures") == "0"
    assert ET.parse(tmp_path / "smoke_busbw.svg").getroot().find("{http://www.w3.org/2000/svg}polyline") is not None
    assert "PASSED" in (tmp_path / "smoke.md").read_text()
    print("standalone 2-proc job: %.1f s wall, busbw at 4 MiB %.3f GB/s" % (wall, report["sweep"]["busbw_large_gbps"]))


def _launcher(name, peers, work, run_id, rdzv_port, roll_port, join_timeout=30, timeout=120):
    return [sys.executable, str(JOB), "node", "--node-name", name, "--peers", peers, "--nproc", "1",
            "--torchrun", str(TORCHRUN), "--rdzv-port", str(rdzv_port), "--rollcall-port", str(roll_port),
            "--run-id", run_id, "--join-timeout", str(join_timeout), "--timeout", str(timeout),
            "--work-dir", str(work), "--"] + SMALL


def _descendants(roots):
    """Every live process under ``roots`` (torchrun runs in a session of its own, so by parent)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry, encoding="utf-8") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = set(roots), True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in found and pid not in found}
        found |= more
        grew = bool(more)
    return found


def _hex_address(text):
    """'0100007F:1F90' -> ('127.0.0.1', 8080); an IPv6 wildcard -> ('::', port)."""
    addr, port = text.split(":")
    if len(addr) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr)[::-1]), int(port, 16)
    raw = b"".join(bytes.fromhex(addr[i:i + 8])[::-1] for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw), int(port, 16)


def _listening(pids):
    """{(address, port)} of the TCP sockets in LISTEN state that ``pids`` hold, from /proc."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="utf-8") as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    found.add(_hex_address(fields[1]))
    return found


def test_two_nodes_on_loopback(tmp_path):
    peers = "a=127.0.0.1,b=127.0.0.2"
    rdzv, roll = _free_port(), _free_port()
    procs, logs = {}, {}
    for name in ("a", "b"):
        logs[name] = (open(tmp_path / ("%s.out" % name), "w+", encoding="utf-8"),
                      open(tmp_path / ("%s.err" % name), "w+", encoding="utf-8"))
        procs[name] = subprocess.Popen(_launcher(name, peers, tmp_path / name, "t2n", rdzv, roll), stdout=logs[name][0],
                                       stderr=logs[name][1], text=True, env=_env(), start_new_session=True)
    listening = set()
    outs = {}
    try:
        harness_deadline = time.monotonic() + 240
        while any(p.poll() is None for p in procs.values()) and time.monotonic() < harness_deadline:
            listening |= _listening(_descendants({p.pid for p in procs.values()}))
            time.sleep(0.1)
        for name, proc in procs.items():
            assert proc.poll() is not None, "%s did not finish" % name
            out, err = (fh.seek(0) or fh.read() for fh in logs[name])
            assert proc.returncode == 0, (name, out[-2000:], err[-2000:])
            outs[name] = json.loads(out.strip().splitlines()[-1])
    finally:
        for name, proc in procs.items():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for fh in logs[name]:
                fh.close()
    # The rendezvous store (which the process group shares) listens on the first node's address only.
    assert {a for a, p in listening if p == rdzv} == {"127.0.0.1"}, sorted(listening)
    # Nothing the job opened listens on every interface; everything on one of the nodes' addresses.
    assert {a for a, _p in listening} <= {"127.0.0.1", "127.0.0.2"}, sorted(listening)
    for name, doc in outs.items():
        assert doc["rollcall"]["ok"] and doc["torchrun_rc"] == 0
        assert doc["rollcall"]["reached"] == [{"a": "b", "b": "a"}[name]]
    holders = [n for n, d in outs.items() if d["result"]]
    assert len(holders) == 1
    res = outs[holders[0]]["result"]
    _check_result(res, 2)
    assert sorted(res["nodes"]) == ["a", "b"]
    nodes = {n: {"address": a, "nproc": 1, "gpu": {"status": "no_driver"}, "probe": {"torch": "x", "cuda_device_count": 0}}
             for n, a in (("a", "127.0.0.1"), ("b", "127.0.0.2"))}
    report = sr.build_report("loop", ["a", "b"], nodes, outs, "gloo")
    sv.evaluate(report, sv.resolve_thresholds(report, {}))
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    assert report["nodes_joined"] == res["nodes"] and report["missing_nodes"] == []


def test_rank_zero_store_without_torchrun_listens_on_master_addr_only():
    """The srun launcher's path: no agent, rank 0 hosts the process group's store on MASTER_ADDR."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    from datetime import timedelta  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    spec = importlib.util.spec_from_file_location("gpufleet_smoke_store", JOB)
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    port = _free_port("127.0.0.3")
    env = {"MASTER_ADDR": "127.0.0.3", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1"}
    store = smoke.process_group_store(dist, env, timedelta(seconds=30))
    try:
        store.set("k", "v")
        assert store.get("k") == b"v"
        assert {(a, p) for a, p in _listening({os.getpid()}) if p == port} == {("127.0.0.3", port)}
    finally:
        del store


def test_node_that_never_starts_is_named_within_the_join_timeout(tmp_path):
    peers = "a=127.0.0.1,b=127.0.0.2"
    rc, out, err = _run(_launcher("a", peers, tmp_path / "a", "tmiss", _free_port(), _free_port(), join_timeout=4), timeout=60)
    assert rc == 3, err
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["rollcall"]["unreachable"] == ["b"] and doc["rollcall"]["not_heard_from"] == ["b"]
    assert doc["torchrun_rc"] is None  # torchrun never started: nothing to hang
    nodes = {"a": {"address": "127.0.0.1", "nproc": 1, "gpu": {}, "probe": {}},
             "b": {"address": "127.0.0.2", "nproc": 1, "gpu": {}, "probe": {}}}
    report = sr.build_report("loop", ["a", "b"], nodes, {"a": doc, "b": None}, "gloo")
    sv.evaluate(report, sv.resolve_thresholds(report, {}))
    assert not report["verdict"]["passed"]
    assert [m["node"] for m in report["missing_nodes"]] == ["b"]
    assert "b:" in report["verdict"]["reasons"][0]


def test_a_launch_leaves_nothing_in_tmpdir_and_no_torchrun_log_dir(tmp_path):
    """issue 35 N18: torchrun's default log dir is a fresh /tmp/torchelastic_* per launch, never removed; the
    launcher gives it one under the job's work dir and removes it when torchrun has ended."""
    tmpdir, work = tmp_path / "tmp", tmp_path / "work"
    tmpdir.mkdir()
    rc, out, err = _run(_launcher("a", "a=127.0.0.1", work, "ttmp", _free_port(), _free_port()), timeout=180,
                        TMPDIR=str(tmpdir))
    assert rc == 0, err[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["torchrun_rc"] == 0 and doc["result"], doc
    assert sorted(os.listdir(tmpdir)) == []
    command = doc["command"]
    assert "--log-dir" in command
    log_dir = Path(command[command.index("--log-dir") + 1])
    assert work in log_dir.parents and not log_dir.exists() and not log_dir.parent.exists()
