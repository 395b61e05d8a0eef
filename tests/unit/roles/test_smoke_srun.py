"""smoke_test_launcher: srun, without Slurm.

No Slurm cluster is at hand, so nothing here shows that a real srun runs the step; what is shown:

- the srun argv, the ranks each task takes from SLURM_* and the cut of srun's labelled output per node
  (pure functions of files/gpufleet_smoke.py), and their refusals, which name the node and the value;
- the launcher end to end against a stand-in srun (fake_srun.py: every task on this machine, the node
  list ordered as Slurm orders it, not as given) with two "nodes" on 127.0.0.1 and 127.0.0.2, and a
  third that cannot be reached, whose roll call names it (torch: gloo on the CPU);
- the role: the srun launch through Ansible on localhost with the stand-in (torch), and its refusals
  before anything runs: srun missing on the launch node, srun options the launcher sets itself, a
  Slurm name srun cannot take, an unknown launcher (serial and forks: test_smoke_play_guards.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jinja2 import Environment

from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_report as sr, smoke_verdict as sv
from smoke_play import free_port, output, run_role

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "roles" / "smoke_test" / "files" / "gpufleet_smoke.py"
FAKE_SRUN = Path(__file__).resolve().parent / "fake_srun.py"
BIN = Path(sys.executable).parent
SMALL = ["--backend", "gloo", "--max-bytes", str(1 << 20), "--warmup", "1", "--iters", "2", "--steps", "60"]

_spec = importlib.util.spec_from_file_location("gpufleet_smoke", JOB)
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)

try:
    import torch  # noqa: F401  # pylint: disable=unused-import  # only whether it imports matters
    HAVE_TORCH = (BIN / "torchrun").exists()
except ImportError:  # pragma: no cover
    HAVE_TORCH = False
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed in this venv (pip install .[smoke])")

PEERS = [("gpu-a01", "10.0.0.1"), ("gpu-a02", "10.0.0.2")]
# Slurm's names sort the other way round: Slurm would put SLURM_PROCID 0 on gpu-a02.
SLURM = [("gpu-a01", "z-node"), ("gpu-a02", "a-node")]


# ---------------------------------------------------------------------------------------------
# pure functions


def test_srun_command_is_one_step_with_every_rank_of_every_node():
    cmd = smoke.srun_command("/usr/bin/srun", "/opt/gpufleet/venv/bin/python", "/var/lib/gpufleet/smoke/gpufleet_smoke.py",
                             PEERS, SLURM, 8, "gpufleet-x", 29400, 29401, 60, 600, "/var/lib/gpufleet/smoke",
                             ["--partition=gpu", "--gpus-per-node=8"], ["--backend", "nccl"])
    task = cmd.index("/opt/gpufleet/venv/bin/python")
    srun_opts = cmd[1:task]
    assert cmd[0] == "/usr/bin/srun"
    for opt in ("--nodes=2", "--ntasks=16", "--ntasks-per-node=8", "--nodelist=z-node,a-node", "--kill-on-bad-exit=1",
                "--label", "--export=ALL", "--immediate=60", "--time=11", "--job-name=gpufleet-smoke"):
        assert opt in srun_opts, opt
    # Site options come after the launcher's own; the task runs slurm-task with the plan and then the job's arguments.
    assert srun_opts[-2:] == ["--partition=gpu", "--gpus-per-node=8"]
    assert cmd[task + 1:task + 3] == ["/var/lib/gpufleet/smoke/gpufleet_smoke.py", "slurm-task"]
    rest = cmd[task + 3:]
    assert rest[rest.index("--peers") + 1] == "gpu-a01=10.0.0.1,gpu-a02=10.0.0.2"
    assert rest[rest.index("--slurm-names") + 1] == "gpu-a01=z-node,gpu-a02=a-node"
    assert rest[rest.index("--nproc") + 1] == "8" and rest[rest.index("--rdzv-port") + 1] == "29400"
    assert rest[rest.index("--") + 1:] == ["--backend", "nccl"]


def test_srun_command_refuses_a_node_without_or_sharing_a_slurm_name():
    with pytest.raises(ValueError, match="no Slurm node name for gpu-a02"):
        smoke.srun_command("srun", "python", "job.py", PEERS, [("gpu-a01", "n1")], 1, "r", 1, 2, 10, 60, "/w")
    with pytest.raises(ValueError, match="Slurm node name.s. n1 stand for more than one node"):
        smoke.srun_command("srun", "python", "job.py", PEERS, [("gpu-a01", "n1"), ("gpu-a02", "n1")], 1, "r", 1, 2, 10, 60, "/w")


def _slurm_env(procid, localid, node, ntasks=4):
    return {"SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid), "SLURM_NTASKS": str(ntasks),
            "SLURMD_NODENAME": node}


def test_ranks_follow_the_batch_order_not_slurms():
    # Slurm ordered a-node (gpu-a02) first: its tasks have SLURM_PROCID 0 and 1.
    envs = {(procid, node): smoke.slurm_task_env(_slurm_env(procid, procid % 2, node), PEERS, SLURM, 2, 29400)
            for procid, node in ((0, "a-node"), (1, "a-node"), (2, "z-node"), (3, "z-node"))}
    ranks = {key: env["RANK"] for key, env in envs.items()}
    assert ranks == {(0, "a-node"): "2", (1, "a-node"): "3", (2, "z-node"): "0", (3, "z-node"): "1"}
    first = envs[(2, "z-node")]
    # Rank 0 sits on the first peer, where MASTER_ADDR points and the store is hosted.
    assert first["MASTER_ADDR"] == "10.0.0.1" and first["MASTER_PORT"] == "29400"
    assert first["WORLD_SIZE"] == "4" and first["LOCAL_WORLD_SIZE"] == "2" and first["LOCAL_RANK"] == "0"
    assert first["GPUFLEET_NODE_NAME"] == "gpu-a01" and first["GPUFLEET_NODE_ADDR"] == "10.0.0.1"
    assert envs[(1, "a-node")]["LOCAL_RANK"] == "1" and envs[(1, "a-node")]["GROUP_RANK"] == "1"
    assert {env["GPUFLEET_LAUNCHER"] for env in envs.values()} == {"srun"}


@pytest.mark.parametrize("environ, message", [
    ({"SLURM_PROCID": "0"}, "SLURMD_NODENAME, SLURM_LOCALID, SLURM_NTASKS not set: this mode runs only as a task of srun"),
    (_slurm_env(0, 0, "gpu-a01.cluster"), "Slurm ran this task on gpu-a01.cluster, which is none of the planned nodes' "
                                          "Slurm names .z-node, a-node.; set smoke_test_slurm_node_name"),
    (_slurm_env(0, 0, "z-node", ntasks=3), r"srun started 3 task.s.; the plan is 2 node.s. x 2 = 4"),
    (_slurm_env(2, 2, "a-node"), "gpu-a02 .a-node. runs local task 2 but the plan is 2 per node"),
])
def test_task_refusals_name_the_node_and_the_value(environ, message):
    with pytest.raises(ValueError, match=message):
        smoke.slurm_task_env(environ, PEERS, SLURM, 2, 29400)


SRUN_OUTPUT = """\
1: GPUFLEET_TASK procid=1 node=gpu-a01 rank=1 local_rank=1
0: GPUFLEET_TASK procid=0 node=gpu-a01 rank=0 local_rank=0
 2: GPUFLEET_TASK procid=2 node=gpu-a02 rank=2 local_rank=0
0: GPUFLEET_ROLLCALL {"node": "gpu-a01", "ok": true, "reached": ["gpu-a02"], "unreachable": [], "heard_from": ["gpu-a02"], \
"not_heard_from": []}
 2: GPUFLEET_ROLLCALL {"node": "gpu-a02", "ok": true, "reached": ["gpu-a01"], "unreachable": [], "heard_from": ["gpu-a01"], \
"not_heard_from": []}
0: GPUFLEET_STAGE rank=0 stage=init t=1.0
 2: GPUFLEET_STAGE rank=2 stage=sweep:8 t=2.0
 2: gpu-a02:77:77 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/IB/0/GDRDMA
0: gpu-a01:55:55 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
 3: python: can't open file '/var/lib/gpufleet/smoke/gpufleet_smoke.py': [Errno 2] No such file or directory
srun: error: a-node: task 3: Exited with exit code 2
srun: error: Timed out waiting for job step to complete
"""


def test_srun_output_is_cut_per_node_by_the_task_labels():
    per_node, unclaimed, srun_errors = smoke.split_srun_output(SRUN_OUTPUT.splitlines(), PEERS, SLURM)
    assert per_node["gpu-a01"]["rollcall"]["reached"] == ["gpu-a02"]
    assert per_node["gpu-a02"]["rollcall"]["reached"] == ["gpu-a01"]
    summary = smoke.summarize_log(per_node["gpu-a02"]["lines"], 100)
    assert summary["last_stages"] == {"2": "sweep:8"}
    assert summary["nccl_lines"] == ["gpu-a02:77:77 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/IB/0/GDRDMA"]
    assert smoke.summarize_log(per_node["gpu-a01"]["lines"], 100)["nccl_lines"] == [
        "gpu-a01:55:55 [0] NCCL INFO NCCL version 2.18.3+cuda12.2"]
    # Task 3 died before it said where it runs: its line is nobody's, srun's error line names the Slurm node.
    assert unclaimed[0].startswith(" 3: python: can't open file")
    assert srun_errors == {"gpu-a02": ["srun: error: a-node: task 3: Exited with exit code 2"]}


@pytest.mark.parametrize("local_rank, count, one_per_task, expected", [
    (3, 8, False, 3), (3, 8, True, 3), (3, 1, True, 0), (0, 1, False, 0)])
def test_cuda_device_of_a_rank(local_rank, count, one_per_task, expected):
    assert smoke.cuda_device_index(local_rank, count, one_per_task) == expected


def test_cuda_device_refuses_a_rank_without_a_gpu():
    with pytest.raises(SystemExit, match="local rank 3 but torch sees 1 GPU"):
        smoke.cuda_device_index(3, 1, one_per_task=False)
    with pytest.raises(SystemExit, match="local rank 3 but torch sees 2 GPU"):
        smoke.cuda_device_index(3, 2, one_per_task=True)


def test_the_role_knows_which_srun_options_the_launcher_sets_itself():
    role_vars = yaml.safe_load((REPO / "roles/smoke_test/vars/main.yml").read_text())
    env = Environment()
    env.tests["match"] = lambda value, pattern: re.match(pattern, value) is not None
    clash = env.from_string("{{ args | select('match', pattern) | list }}")
    args = ["--partition=gpu", "--account=ops", "--gpus-per-node=8", "--exclusive", "--reservation=burnin", "--time=30",
            "--nodes=2", "-N2", "--ntasks=16", "-n", "--ntasks-per-node=8", "--nodelist=a,b", "-w", "--label", "-l",
            "--export=NONE", "--output=x.log", "-o", "--error=e", "-K", "--kill-on-bad-exit=0"]
    found = clash.render(args=args, pattern=role_vars["__smoke_test_srun_reserved"])
    assert found == str(args[6:])
    names = role_vars["__smoke_test_slurm_name_pattern"]
    assert [n for n in ("gpu-a01", "node1.cluster", "n_2", "", "a,b", "a=b", "-x") if re.match(names, n)] == [
        "gpu-a01", "node1.cluster", "n_2"]


# ---------------------------------------------------------------------------------------------
# the launcher against the stand-in srun


def _stand_in(tmp_path: Path) -> Path:
    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir(parents=True, exist_ok=True)
    srun.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, FAKE_SRUN))
    srun.chmod(0o755)
    return srun


def _launch(tmp_path, peers, slurm_names, join_timeout=30, timeout=200):
    srun = _stand_in(tmp_path)
    cmd = [sys.executable, str(JOB), "srun", "--peers", ",".join("%s=%s" % p for p in peers),
           "--slurm-names", ",".join("%s=%s" % p for p in slurm_names), "--nproc", "1", "--srun", str(srun),
           "--python", sys.executable, "--rdzv-port", str(free_port()), "--rollcall-port", str(free_port()),
           "--run-id", "t-srun", "--join-timeout", str(join_timeout), "--timeout", str(timeout),
           "--work-dir", str(tmp_path / "work"), "--srun-arg=--partition=test", "--"] + SMALL
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", FAKE_SRUN_ARGV_LOG=str(tmp_path / "argv.jsonl"))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout + 60, check=False)
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    argv = json.loads((tmp_path / "argv.jsonl").read_text().splitlines()[-1])
    return proc, doc, argv


def _report(doc, peers, launcher="srun"):
    nodes = {n: {"address": a, "nproc": 1, "gpu": {"status": "no_driver"}, "probe": {"torch": "x", "cuda_device_count": 0}}
             for n, a in peers}
    report = sr.build_report("loop", [n for n, _a in peers], nodes, doc["nodes"], "gloo", config={"launcher": launcher})
    sv.evaluate(report, sv.resolve_thresholds(report, {}))
    return report


@needs_torch
@pytest.mark.torch
def test_srun_launcher_runs_one_step_over_two_nodes_on_loopback(tmp_path):
    peers = [("a", "127.0.0.1"), ("b", "127.0.0.2")]
    proc, doc, argv = _launch(tmp_path, peers, [("a", "node2"), ("b", "node1")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert doc["srun_rc"] == 0 and doc["launcher"] == "srun" and "--partition=test" in argv
    assert "--nodelist=node2,node1" in argv and "--ntasks=2" in argv
    for name, node in doc["nodes"].items():
        assert node["rollcall"]["ok"] and node["error"] is None and node["torchrun_rc"] == 0, (name, node)
    # Both "nodes" share this work dir (as on an NFS home): each wrote its own roll call file
    # (one shared name once raced here: FileNotFoundError on the other node's os.replace).
    work = tmp_path / "work"
    assert sorted(p.name for p in work.glob("rollcall-*")) == ["rollcall-t-srun-a.json", "rollcall-t-srun-b.json"]
    # The stand-in put SLURM_PROCID 0 on node1 (b); rank 0 and the result are still on a, the first peer.
    result = doc["nodes"]["a"]["result"]
    assert doc["nodes"]["b"]["result"] is None
    assert result["world_size"] == 2 and result["nodes"] == ["a", "b"]
    assert [(m["rank"], m["node"]) for m in result["ranks"]] == [(0, "a"), (1, "b")]
    assert doc["nodes"]["a"]["last_stages"] == {"0": "done"} and doc["nodes"]["b"]["last_stages"] == {"1": "done"}
    report = _report(doc, peers)
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    completed = next(c for c in report["verdict"]["checks"] if c["name"] == "job_completed")
    assert completed["message"] == "srun finished on every node"


@needs_torch
@pytest.mark.torch
def test_srun_roll_call_names_the_node_nobody_reaches(tmp_path):
    # c's address is on no interface here: it cannot listen, and a and b cannot reach it.
    peers = [("a", "127.0.0.1"), ("b", "127.0.0.2"), ("c", "10.255.255.1")]
    proc, doc, _argv = _launch(tmp_path, peers, [("a", "n1"), ("b", "n2"), ("c", "n3")], join_timeout=4, timeout=60)
    assert proc.returncode == 4 and doc["srun_rc"] != 0
    assert doc["nodes"]["a"]["rollcall"]["unreachable"] == ["c"]
    assert doc["nodes"]["b"]["rollcall"]["unreachable"] == ["c"]
    assert doc["nodes"]["a"]["error"] == "roll call failed: unreachable c, not heard from c"
    report = _report(doc, peers)
    assert not report["verdict"]["passed"]
    assert [m["node"] for m in report["missing_nodes"]] == ["c"]


def test_srun_launcher_reports_an_srun_that_cannot_allocate(tmp_path):
    # An srun that fails before any task starts: every node carries srun's reason.
    broken = tmp_path / "srun"
    broken.write_text("#!/bin/sh\necho 'srun: error: Unable to allocate resources: Requested node configuration is not "
                      "available' >&2\nexit 1\n")
    broken.chmod(0o755)
    cmd = [sys.executable, str(JOB), "srun", "--peers", "a=127.0.0.1,b=127.0.0.2", "--slurm-names", "a=n1,b=n2",
           "--nproc", "1", "--srun", str(broken), "--run-id", "t-alloc", "--timeout", "30", "--work-dir", str(tmp_path / "w"),
           "--"] + SMALL
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 4 and doc["srun_rc"] == 1
    for node in doc["nodes"].values():
        assert node["error"] == ("srun exited with 1: srun: error: Unable to allocate resources: Requested node "
                                 "configuration is not available")
        assert node["rollcall"] is None and node["result"] is None
    report = _report(doc, [("a", "127.0.0.1"), ("b", "127.0.0.2")])
    assert not report["verdict"]["passed"]
    assert "Unable to allocate resources" in report["verdict"]["reasons"][0]


def test_srun_launcher_refuses_to_run_off_the_first_node(tmp_path):
    cmd = [sys.executable, str(JOB), "srun", "--peers", "a=10.255.255.1,b=127.0.0.2", "--slurm-names", "a=n1,b=n2",
           "--nproc", "1", "--srun", "srun", "--run-id", "t-off", "--work-dir", str(tmp_path / "w"), "--"] + SMALL
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2
    assert doc["error"] == ("the srun launcher runs on a (10.255.255.1), which holds rank 0 and its result; "
                            "no interface here has 10.255.255.1")


# ---------------------------------------------------------------------------------------------
# the role through Ansible, on localhost


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
def test_role_launches_and_reports_the_launcher(tmp_path, launcher):
    """Both launchers take the job's arguments from the same plan; torchrun is the default."""
    srun = _stand_in(tmp_path)
    extra = ["-e", "smoke_test_launcher=srun", "-e", "smoke_test_srun=%s" % srun] if launcher == "srun" else []
    proc = run_role(tmp_path, *extra, "-e", "smoke_test_interface=lo", "-e", "smoke_test_rdzv_port=%d" % free_port(),
                    "-e", "smoke_test_rollcall_port=%d" % free_port(),
                    "-e", json.dumps({"smoke_test_srun_args": ["--partition=test"],
                                      "smoke_test_sweep_cpu": {"min_bytes": 8, "max_bytes": 1 << 20, "warmup": 1, "iters": 2}}))
    assert proc.returncode == 0, output(proc)
    report = json.loads((tmp_path / "reports" / "smoke.json").read_text())
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    assert report["config"]["launcher"] == launcher and report["backend"] == "gloo" and report["world_size"] == 1
    assert report["nodes"][0]["name"] == "localhost" and report["nodes"][0]["status"] == "ok"
    assert report["sweep"]["rows"][-1]["size_bytes"] == 1 << 20
    srun_logs = list((tmp_path / "work").glob("srun-*.log"))
    torchrun_logs = list((tmp_path / "work").glob("torchrun-*.log"))
    if launcher == "srun":
        assert not torchrun_logs and len(srun_logs) == 1
        assert "GPUFLEET_TASK procid=0 node=localhost rank=0 local_rank=0" in srun_logs[0].read_text()
    else:
        assert not srun_logs and len(torchrun_logs) == 1


def test_role_refuses_srun_missing_on_the_launch_node(tmp_path):
    proc = run_role(tmp_path, "-e", "smoke_test_launcher=srun", "-e", "smoke_test_srun=/nonexistent/srun")
    assert proc.returncode == 2, output(proc)
    assert ("smoke_test_launcher is srun, but '/nonexistent/srun' is not found on localhost, the launch node "
            "(the first node of the batch, which runs srun for all of them). Install the Slurm client there, set "
            "smoke_test_srun to the full path of srun, or set smoke_test_launcher to torchrun.") in proc.stdout
    assert not (tmp_path / "reports" / "smoke.json").exists()


def test_role_refuses_srun_options_the_launcher_sets(tmp_path):
    proc = run_role(tmp_path, "-e", json.dumps({"smoke_test_launcher": "srun",
                                                "smoke_test_srun_args": ["--partition=gpu", "-N2", "--nodelist=x"]}))
    assert proc.returncode == 2, output(proc)
    assert "smoke_test_srun_args has -N2 --nodelist=x: the srun launcher sets the nodes" in proc.stdout


def test_role_refuses_a_slurm_name_srun_cannot_take(tmp_path):
    proc = run_role(tmp_path, "-e", json.dumps({"smoke_test_launcher": "srun", "smoke_test_slurm_node_name": "a,b"}))
    assert proc.returncode == 2, output(proc)
    assert "it is not for localhost (a,b)" in proc.stdout


def test_role_refuses_an_unknown_launcher(tmp_path):
    proc = run_role(tmp_path, "-e", "smoke_test_launcher=mpirun")
    assert proc.returncode == 2, output(proc)
    assert "value of smoke_test_launcher must be one of: torchrun, srun, got: mpirun" in proc.stdout


@needs_torch
@pytest.mark.torch
def test_nodes_an_earlier_play_failed_are_named_not_counted_as_missing(tmp_path):
    """validate fails nodes in its health/diagnostics plays first; the job runs on the rest and is judged on them."""
    proc = run_role(tmp_path, "-e", "smoke_test_interface=lo", "-e", "smoke_test_rdzv_port=%d" % free_port(),
                    "-e", "smoke_test_rollcall_port=%d" % free_port(),
                    "-e", json.dumps({"smoke_test_sweep_cpu": {"min_bytes": 8, "max_bytes": 1 << 16, "warmup": 1,
                                                               "iters": 2}}),
                    hosts=("localhost", "sicknode"), failed_before=("sicknode",))
    # The run still fails (sicknode failed), but the smoke job itself passed on the node it had.
    assert proc.returncode != 0 and "failed before the smoke job" in proc.stdout, output(proc)
    report = json.loads((tmp_path / "reports" / "smoke.json").read_text())
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    assert report["hosts_expected"] == ["localhost"] and report["missing_nodes"] == []
    assert "sicknode left the run before the smoke job (an earlier play failed it)" in report["notes"]
