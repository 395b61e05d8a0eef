"""Smoke report: assembly, verdict, baseline compare, NCCL transport parsing and rendering."""
import copy
import json
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer, smoke_parse as sp, smoke_render as srd
from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_report as sr, smoke_verdict as sv
from fixtures_path import FIXTURES

HOSTS = ["node1", "node2", "node3"]


def _rows(world, sizes=(8, 1024, 1 << 20, 1 << 26), gbps=1.0):
    rows = []
    for size in sizes:
        t = size / (gbps * 1e9) + 50e-6
        alg = size / t / 1e9
        rows.append({"size_bytes": size, "count": size // 4, "type": "float", "redop": "sum", "time_us": t * 1e6,
                     "algbw_gbps": alg, "busbw_gbps": alg * 2 * (world - 1) / world, "wrong": 0})
    return rows


def _result(hosts, nproc=1, backend="gloo", loss=(2.3, 0.5), gbps=1.0):
    world = len(hosts) * nproc
    return {
        "schema": "gpufleet.smoke.job/1", "backend": backend, "device": "cpu" if backend == "gloo" else "cuda",
        "world_size": world, "nodes": list(hosts),
        "ranks": [{"rank": i, "node": hosts[i // nproc]} for i in range(world)],
        "versions": {"torch": "2.13.0+cpu", "torch_cuda": None, "nccl": None, "python": "3.11.2"},
        "sweep": {"collective": "all_reduce", "dtype": "float32", "warmup": 2, "iters": 5, "rows": _rows(world, gbps=gbps)},
        "training": {"model": "mlp 64-256-256-10", "parameters": 85002, "steps": 100, "per_gpu_batch": 64,
                     "global_batch": 64 * world, "lr": 0.05, "loss_first": loss[0], "loss_last": loss[1],
                     "loss_drop": 1 - loss[1] / loss[0], "losses": [], "nonfinite_values": 0, "params_in_sync": True,
                     "ranks_out_of_sync": 0, "max_param_diff": 0.0, "wall_s": 2.0, "step_time_ms": 20.0,
                     "steps_per_s": 50.0, "samples_per_s": 50.0 * 64 * world},
    }


def _view(node, others, reached=None, heard=None):
    reached = others if reached is None else reached
    heard = others if heard is None else heard
    return {"node": node, "ok": set(reached) == set(others) and set(heard) == set(others),
            "reached": sorted(reached), "unreachable": sorted(set(others) - set(reached)),
            "heard_from": sorted(heard), "not_heard_from": sorted(set(others) - set(heard)), "wrong_name": {}, "errors": {}}


def _nodes(hosts, nproc=1, gpus=None):
    out = {}
    for i, h in enumerate(hosts):
        gpu = {"status": "no_driver"} if not gpus else {
            "status": "ok", "driver_version": "535.183.01", "cuda_version": "12.2", "driver_gpu_count": gpus,
            "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * gpus}
        out[h] = {"address": "10.200.13.%d" % (11 + i), "nproc": nproc, "gpu": gpu,
                  "probe": {"torch": "2.13.0+cpu", "cuda_device_count": gpus or 0}}
    return out


def _outputs(hosts, result=None, rc=0, nccl_lines=None, views=None):
    outs = {}
    for i, h in enumerate(hosts):
        others = [o for o in hosts if o != h]
        outs[h] = {"node": h, "rollcall": (views or {}).get(h, _view(h, others)), "torchrun_rc": rc, "timed_out": False,
                   "last_stages": {str(i): "done"}, "nccl_lines": (nccl_lines or {}).get(h, []), "log_tail": [],
                   "result": result if i == 0 else None, "error": None if rc == 0 else "torchrun exited with %s" % rc}
    return outs


def _judge(report, baseline=None, overrides=None, **kw):
    return sv.evaluate(report, sv.resolve_thresholds(report, overrides), baseline=baseline, **kw)


def _message(report, name):
    return next(c["message"] for c in report["verdict"]["checks"] if c["name"] == name)


def _status(report):
    return {c["name"]: c["status"] for c in report["verdict"]["checks"]}


def test_three_node_gloo_run_passes_and_busbw_matches_formula():
    res = _result(HOSTS)
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, res), "gloo")
    _judge(report)
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    assert report["backend"] == "gloo" and report["nccl"] is None and report["transports"] == ["gloo/TCP"]
    assert report["world_size"] == 3 and report["hardware_key"] == "cpu-x1-n3-gloo"
    for row in report["sweep"]["rows"]:
        assert row["busbw_gbps"] == row["algbw_gbps"] * (2 * (3 - 1) / 3)
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-12)
    st = _status(report)
    assert st["busbw_gbps"] == "skip" and "not applicable on gloo" in _message(report, "busbw_gbps")
    assert st["nccl_transport"] == "skip" and st["baseline"] == "skip"


def test_gloo_bandwidth_judged_when_set_explicitly():
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS)), "gloo")
    _judge(report, overrides={"min_busbw_gbps": 50.0})
    assert not report["verdict"]["passed"]
    assert any(r.startswith("busbw_gbps:") and "floor 50.0" in r for r in report["verdict"]["reasons"])


def test_cut_node_is_named_from_the_roll_call():
    views = {"node1": _view("node1", ["node2", "node3"], reached=["node2"], heard=["node2"]),
             "node2": _view("node2", ["node1", "node3"], reached=["node1"], heard=["node1"]),
             "node3": _view("node3", ["node1", "node2"], reached=[], heard=[])}
    for i, view in enumerate(views.values()):
        view["elapsed_s"] = 20.0 + i / 10
    outs = _outputs(HOSTS, None, rc=None, views=views)
    for o in outs.values():
        o["error"] = "roll call failed"
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), outs, "gloo")
    _judge(report)
    assert not report["verdict"]["passed"]
    # How long each node's roll call waited, by the job's own clock, travels into the report.
    assert [n["rollcall_s"] for n in report["nodes"]] == [20.0, 20.1, 20.2]
    assert [m["node"] for m in report["missing_nodes"]] == ["node3"]
    assert "cut off" in report["missing_nodes"][0]["reason"]
    reasons = " ".join(report["verdict"]["reasons"])
    assert "node3" in reasons and "nodes_joined" in reasons
    assert _status(report)["loss_decreased"] == "skip"


def test_two_node_cut_names_the_link():
    hosts = ["a", "b"]
    views = {"a": _view("a", ["b"], reached=[], heard=[]), "b": _view("b", ["a"], reached=[], heard=[])}
    found = sp.diagnose_rollcall(hosts, views)
    assert {f["node"] for f in found} == {"a", "b"}


def test_unreachable_host_without_output_is_named():
    nodes = _nodes(HOSTS[:2])
    res = _result(HOSTS[:2])
    report = sr.build_report("simc", HOSTS, nodes, _outputs(HOSTS[:2], res), "gloo")
    _judge(report)
    assert not report["verdict"]["passed"]
    assert [m["node"] for m in report["missing_nodes"]] == ["node3"]
    assert report["nodes"][2]["status"] == "unreachable"


def test_job_failure_after_roll_call_names_node_by_peer_address():
    outs = _outputs(HOSTS, None, rc=1)
    outs["node1"]["log_tail"] = ["RuntimeError: [gloo] Connection closed by peer [10.200.13.13]:45211"]
    outs["node3"]["torchrun_rc"] = None
    outs["node3"]["timed_out"] = True
    outs["node3"]["error"] = "torchrun did not finish within 60s (killed)"
    outs["node3"]["last_stages"] = {"2": "sweep:4096"}
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), outs, "gloo")
    _judge(report)
    text = json.dumps(report["missing_nodes"])
    assert "node3" in text and "sweep:4096" in text
    assert "mention node3" in report["missing_nodes"][0]["reason"]


def test_baseline_regression_names_metric_and_values():
    good = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS, gbps=1.0)), "gloo")
    _judge(good)
    baseline = sv.make_baseline(good)
    baseline["metrics"]["busbw_large_gbps"] *= 1.5
    now = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS, gbps=1.0)), "gloo")
    _judge(now, baseline=baseline, tolerance=0.10)
    assert not now["verdict"]["passed"]
    (reason,) = now["verdict"]["reasons"]
    assert reason.startswith("baseline: busbw_large_gbps regressed:")
    assert sp._fmt(now["sweep"]["busbw_large_gbps"], 3) in reason
    assert sp._fmt(baseline["metrics"]["busbw_large_gbps"], 3) in reason
    # Within tolerance passes.
    ok = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS, gbps=0.95)), "gloo")
    _judge(ok, baseline=sv.make_baseline(good), tolerance=0.10)
    assert ok["verdict"]["passed"], ok["verdict"]["reasons"]
    assert _status(ok)["baseline"] == "pass"


def test_loss_that_does_not_fall_fails():
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS, loss=(2.3, 2.2))), "gloo")
    _judge(report)
    assert _status(report)["loss_decreased"] == "fail"
    bad = _result(HOSTS)
    bad["training"].update(nonfinite_values=3, params_in_sync=False, ranks_out_of_sync=1, max_param_diff=0.5)
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, bad), "gloo")
    _judge(report)
    assert _status(report)["finite_values"] == "fail" and _status(report)["params_in_sync"] == "fail"


def test_wrong_allreduce_values_fail():
    res = _result(HOSTS)
    res["sweep"]["rows"][2]["wrong"] = 5
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, res), "gloo")
    _judge(report)
    assert _status(report)["allreduce_correct"] == "fail"


# NCCL_DEBUG=INFO lines in the format NCCL 2.18 prints them (host:pid:tid [dev] NCCL INFO ...).
NCCL_IB = """\
gpu-a01:4001:4001 [0] NCCL INFO Bootstrap : Using eth0:10.10.0.11<0>
gpu-a01:4001:4001 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
gpu-a01:4001:4120 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB ; OOB eth0:10.10.0.11<0>
gpu-a01:4001:4120 [0] NCCL INFO Using network IB
gpu-a01:4001:4120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-a01:4001:4120 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA
gpu-a01:4001:4120 [0] NCCL INFO Channel 01/0 : 8[0] -> 7[7] [receive] via NET/IB/0/GDRDMA
gpu-a01:4001:4120 [0] NCCL INFO NVLS comm 0x55d5c8 headRank 0 nHeads 8 buffSize 1048576 memSize 2097152
gpu-a01:4001:4120 [0] NCCL INFO comm 0x55d5c8 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x1 - Init COMPLETE
"""
NCCL_SOCKET = """\
gpu-a02:5001:5001 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
gpu-a02:5001:5100 [0] NCCL WARN NET/IB : No device found.
gpu-a02:5001:5100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.10.0.12<0>
gpu-a02:5001:5100 [0] NCCL INFO Using network Socket
gpu-a02:5001:5100 [0] NCCL INFO Channel 00/0 : 8[0] -> 9[1] via SHM/direct/direct
gpu-a02:5001:5100 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [send] via NET/Socket/0
"""
NCCL_ROCE = "x:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n" \
            "x:1:1 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0\n"


def test_parse_nccl_debug_ib():
    info = sp.parse_nccl_debug(NCCL_IB)
    assert info["version"] == "2.18.3" and info["cuda"] == "12.2"
    assert info["networks"] == ["IB"]
    assert info["transports"] == ["NET/IB", "NVLS", "P2P"]
    assert info["inter_node"] == "IB" and info["gdr"] is True
    assert {d["device"] for d in info["ib_devices"]} == {"mlx5_0", "mlx5_1", "mlx5_2"}


def test_parse_nccl_debug_socket_and_roce():
    sock = sp.parse_nccl_debug(NCCL_SOCKET)
    assert sock["inter_node"] == "Socket" and sock["transports"] == ["NET/Socket", "SHM"]
    assert sock["warnings"] == ["NET/IB : No device found."]
    assert sock["socket_devices"] == ["eth0"]
    roce = sp.parse_nccl_debug(NCCL_ROCE)
    assert roce["inter_node"] == "RoCE" and roce["gdr"] is False
    both = sp.parse_nccl_debug(NCCL_IB + NCCL_SOCKET)
    assert both["inter_node"] == "Socket"  # one node on TCP drags the whole ring


def _nccl_report(lines_by_host, hosts=("n1", "n2")):
    hosts = list(hosts)
    res = _result(hosts, nproc=8, backend="nccl", gbps=400.0)
    res["versions"]["nccl"] = "2.18.3"
    return sr.build_report("gpuc", hosts, _nodes(hosts, nproc=8, gpus=8), _outputs(hosts, res, nccl_lines=lines_by_host), "nccl")


def test_rdma_cluster_that_fell_back_to_sockets_fails():
    report = _nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_SOCKET.splitlines()})
    assert report["hardware_key"] == "h100-sxm5-80gb-x8-n2-nccl"
    assert report["versions"]["driver"] == "535.183.01" and report["versions"]["nccl"] == "2.18.3"
    _judge(report, expect_rdma=True)
    st = _status(report)
    assert st["nccl_transport"] == "fail"
    assert "Socket on n2" in next(c["message"] for c in report["verdict"]["checks"] if c["name"] == "nccl_transport")
    ok = _nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()})
    _judge(ok, expect_rdma=True)
    assert _status(ok)["nccl_transport"] == "pass"


def test_multinode_nccl_without_a_logged_transport_fails():
    report = _nccl_report({"n1": [], "n2": []})
    _judge(report, expect_rdma=False)
    assert _status(report)["nccl_transport"] == "fail"
    assert not report["verdict"]["passed"]


def test_busbw_thresholds_per_hardware():
    assert sv.busbw_threshold("h100-sxm5-80gb", 8, 1, "nccl")[0] == 460.0
    assert sv.busbw_threshold("h200", 8, 1, "nccl")[0] == 431.0
    floor, source = sv.busbw_threshold("b200", 8, 1, "nccl")
    assert floor == 600.0 and "p6-b200" in source   # AWS's NVLink-only check (issue 27)
    assert sv.busbw_threshold("gb200", 4, 1, "nccl")[0] is None   # no sourced NVL72 tray figure
    assert sv.busbw_threshold("h100-sxm5-80gb", 1, 1, "nccl")[0] is None  # one rank: busbw 0 by definition
    assert sv.busbw_threshold("h100-sxm5-80gb", 8, 4, "nccl", rdma_gbps_per_node=3200)[0] == pytest.approx(300.0)
    assert sv.busbw_threshold("h100-sxm5-80gb", 8, 1, "gloo")[0] is None
    report = _nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()})
    th = sv.resolve_thresholds(report, {}, rdma_gbps_per_node=3200)
    assert th["min_busbw_gbps"]["value"] == pytest.approx(300.0)
    assert sv.resolve_thresholds(report, {"min_busbw_gbps": 123})["min_busbw_gbps"]["value"] == 123.0


def test_nccl_tests_log_becomes_a_check():
    hosts = ["n1"]
    res = _result(hosts, nproc=8, backend="nccl", gbps=300.0)
    log = (FIXTURES / "nccl-tests" / "h100-1node-8gpu-nccl2.29.2-tests2.17.8-all-collectives.log").read_text()
    report = sr.build_report("gpuc", hosts, _nodes(hosts, nproc=8, gpus=8), _outputs(hosts, res), "nccl",
                             nccl_tests_logs={"n1": log})
    _judge(report)
    assert report["nccl_tests"]["n1"][0]["collective"] == "all_reduce"
    assert _status(report)["nccl_tests"] == "pass"
    # The single node's sweep at 300 GB/s algbw is below the H100 floor of 460 busbw.
    assert _status(report)["busbw_gbps"] == "fail"


def test_crashed_or_unfinished_all_reduce_perf_fails():
    hosts = ["n1"]
    res = _result(hosts, nproc=8, backend="nccl", gbps=500.0)
    full = (FIXTURES / "nccl-tests" / "h100-1node-8gpu-nccl2.29.2-tests2.17.8-all-collectives.log").read_text()
    # The same real log cut before the summary lines, as a killed run leaves it.
    cut = full[: full.index("# Out of bounds")] if "# Out of bounds" in full else full[: len(full) // 3]
    cases = {
        "crash": ({"text": "Segmentation fault (core dumped)\n", "rc": 139}, "exited with 139"),
        "timeout": ({"text": full, "rc": 124}, "timed out"),
        "cut": ({"text": cut, "rc": 0}, "did not finish"),
    }
    for name, (log, needle) in cases.items():
        report = sr.build_report("gpuc", hosts, _nodes(hosts, nproc=8, gpus=8), _outputs(hosts, res), "nccl",
                                 nccl_tests_logs={"n1": log})
        _judge(report)
        assert _status(report)["nccl_tests"] == "fail", name
        assert needle in next(c["message"] for c in report["verdict"]["checks"] if c["name"] == "nccl_tests"), name
    clean = sr.build_report("gpuc", hosts, _nodes(hosts, nproc=8, gpus=8), _outputs(hosts, res), "nccl",
                            nccl_tests_logs={"n1": {"text": full, "rc": 0}})
    _judge(clean)
    assert _status(clean)["nccl_tests"] == "pass"


def test_renderings():
    good = sr.build_report("sim c", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS)), "gloo")
    _judge(good)
    base = sv.make_baseline(good)
    report = sr.build_report("sim c", HOSTS, _nodes(HOSTS), _outputs(HOSTS, _result(HOSTS, gbps=0.5)), "gloo")
    _judge(report, baseline=base)
    junit = ET.fromstring(srd.render_junit(report))
    cases = junit.findall(".//testcase")
    assert len(cases) == len(report["verdict"]["checks"])
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["baseline"]
    assert junit.find("testsuite").get("failures") == "1"
    svg = ET.fromstring(srd.render_svg(report, base))
    polylines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(polylines) == 2 and len(polylines[0].get("points").split()) == 4
    md = srd.render_markdown(report, "smoke_busbw.svg", base)
    assert "FAILED" in md and "![busbw vs message size](smoke_busbw.svg)" in md and "**gloo**" in md
    doc = json.loads(report_writer.render_json(report))
    assert doc["verdict"]["passed"] is False and doc["backend"] == "gloo"


def test_report_is_json_serialisable_without_result():
    report = sr.build_report("x", ["a"], {}, {}, "gloo")
    _judge(report)
    assert not report["verdict"]["passed"]
    json.loads(report_writer.render_json(report))
    ET.fromstring(srd.render_svg(report))
    assert copy.deepcopy(report)["missing_nodes"][0]["node"] == "a"


def test_node_dropped_mid_run_is_named_from_the_second_roll_call():
    outs = _outputs(HOSTS, None, rc=1)
    outs["node3"]["torchrun_rc"] = None
    outs["node3"]["timed_out"] = True
    outs["node1"]["rollcall_after"] = _view("node1", ["node2", "node3"], reached=["node2"], heard=["node2"])
    outs["node2"]["rollcall_after"] = _view("node2", ["node1", "node3"], reached=["node1"], heard=["node1"])
    outs["node3"]["rollcall_after"] = _view("node3", ["node1", "node2"], reached=[], heard=[])
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), outs, "gloo")
    _judge(report)
    assert [m["node"] for m in report["missing_nodes"]] == ["node3"]
    assert report["missing_nodes"][0]["reason"].startswith("dropped during the job: cut off")


# ------------------------------------------------------------------ verdicts need evidence (issue 13)

def _with_rdma(report, gbps_by_host):
    for node in report["nodes"]:
        node["rdma_gbps"] = gbps_by_host.get(node["name"])
    return report


def test_gpus_on_the_pci_bus_with_a_gloo_run_fail():
    """The driver is not loaded (nvidia-smi: no_driver) but the bus shows 8 GPUs: a CPU run proves nothing."""
    nodes = _nodes(HOSTS)
    for node in nodes.values():
        node["gpu"]["pci_gpu_count"] = 8
    report = sr.build_report("gpuc", HOSTS, nodes, _outputs(HOSTS, _result(HOSTS)), "gloo")
    _judge(report)
    assert _status(report)["backend"] == "fail" and not report["verdict"]["passed"]
    assert "node1 (8 on PCI, 0 seen by the driver, 0 by torch)" in _message(report, "backend")
    # The simulated cluster's stand-in GPUs are on a fake bus: there gloo is the design.
    sim = sr.build_report("gpuc", HOSTS, nodes, _outputs(HOSTS, _result(HOSTS)), "gloo")
    _judge(sim, sim=True)
    assert _status(sim)["backend"] == "pass" and "simulated GPUs" in _message(sim, "backend")


def test_torch_seeing_fewer_gpus_than_the_driver_fails():
    hosts = ["n1", "n2"]
    nodes = _nodes(hosts, nproc=8, gpus=8)
    nodes["n2"]["probe"]["cuda_device_count"] = 7
    nodes["n2"]["nproc"] = 7
    res = _result(hosts, nproc=8, backend="nccl", gbps=400.0)
    ib = {h: NCCL_IB.splitlines() for h in hosts}
    report = _with_rdma(sr.build_report("gpuc", hosts, nodes, _outputs(hosts, res, nccl_lines=ib), "nccl"),
                        {"n1": 3200, "n2": 3200})
    _judge(report)
    assert _status(report)["gpus_used"] == "fail"
    assert "n2: torch sees 7 of the driver's 8 GPU(s)" in _message(report, "gpus_used")
    full = _with_rdma(sr.build_report("gpuc", hosts, _nodes(hosts, nproc=8, gpus=8),
                                      _outputs(hosts, res, nccl_lines=ib), "nccl"), {"n1": 3200, "n2": 3200})
    _judge(full)
    assert _status(full)["gpus_used"] == "pass"


def test_empty_sweep_fails():
    res = _result(HOSTS)
    res["sweep"]["rows"] = []
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, res), "gloo")
    _judge(report)
    assert _status(report)["sweep_rows"] == "fail" and not report["verdict"]["passed"]
    assert "no rows" in _message(report, "sweep_rows")


def test_row_with_time_zero_fails_instead_of_crashing():
    res = _result(HOSTS)
    res["sweep"]["rows"][1]["time_us"] = 0.0
    report = sr.build_report("simc", HOSTS, _nodes(HOSTS), _outputs(HOSTS, res), "gloo")
    _judge(report)
    assert _status(report)["sweep_rows"] == "fail"
    assert "1024 B (time_us is 0.0)" in _message(report, "sweep_rows")
    assert report["sweep"]["rows"][1]["busbw_gbps"] is None
    assert report["sweep"]["busbw_large_gbps"] is not None  # the other rows still count
    json.loads(report_writer.render_json(report))
    ET.fromstring(srd.render_svg(report))
    srd.render_markdown(report)


def test_multinode_nccl_over_sockets_fails_unless_allowed_by_name():
    """The judging host's view does not matter: sockets fail without expect_rdma too."""
    report = _with_rdma(_nccl_report({"n1": NCCL_SOCKET.splitlines(), "n2": NCCL_SOCKET.splitlines()}),
                        {"n1": None, "n2": None})
    _judge(report, expect_rdma=False, overrides={"min_busbw_gbps": 1.0})
    assert _status(report)["nccl_transport"] == "fail" and not report["verdict"]["passed"]
    assert "smoke_test_allow_socket_transport" in _message(report, "nccl_transport")
    allowed = _with_rdma(_nccl_report({"n1": NCCL_SOCKET.splitlines(), "n2": NCCL_SOCKET.splitlines()}),
                         {"n1": None, "n2": None})
    _judge(allowed, overrides={"min_busbw_gbps": 1.0}, allow_socket_transport=True)
    assert _status(allowed)["nccl_transport"] == "pass"
    assert "allowed by smoke_test_allow_socket_transport" in _message(allowed, "nccl_transport")


def test_multinode_nccl_without_a_floor_fails_unless_allowed_by_name():
    report = _with_rdma(_nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()}),
                        {"n1": 3200, "n2": None})
    _judge(report)
    assert _status(report)["busbw_gbps"] == "fail"
    assert "no active RDMA port on n2" in _message(report, "busbw_gbps")
    assert "smoke_test_allow_no_busbw_floor" in _message(report, "busbw_gbps")
    allowed = _with_rdma(_nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()}),
                         {"n1": 3200, "n2": None})
    _judge(allowed, allow_no_busbw_floor=True)
    assert _status(allowed)["busbw_gbps"] == "skip"


def test_multinode_floor_comes_from_the_slowest_node_not_the_judge():
    """n1 (the host that judges, run_once) has 8x400 Gb/s up; n2 only 2x400: the floor follows n2."""
    report = _with_rdma(_nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()}),
                        {"n1": 3200, "n2": 800})
    th = sv.resolve_thresholds(report, {})
    assert th["min_busbw_gbps"]["value"] == pytest.approx(0.75 * 800 / 8)
    assert "800 Gb/s" in th["min_busbw_gbps"]["source"]
    assert sv.cluster_rdma_gbps(report) == (800.0, [])


# ------------------------------------------------------------------ broken baselines (issue 25, F11)

def _baseline_case_report():
    """A passing 2-node NCCL run and a baseline stored from it (the shape the action reads)."""
    report = _with_rdma(_nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()}),
                        {"n1": 3200, "n2": 3200})
    _judge(report)
    assert report["verdict"]["passed"], report["verdict"]["reasons"]
    return report


def _metrics(**metrics):
    def edit(doc):
        doc["metrics"] = metrics
        return doc
    return edit


def _field(key, value):
    def edit(doc):
        doc[key] = value
        return doc
    return edit


# name -> (how to spoil a good baseline, what the failing check must say)
BROKEN_BASELINES = {
    "empty_object": (lambda doc: {}, "missing key(s) schema, hardware_key, backend, world_size, metrics"),
    "empty_metrics": (_metrics(), "metrics is {}"),
    "nan_metric": (_metrics(busbw_large_gbps=float("nan")), "metric busbw_large_gbps is NaN"),
    "infinite_metric": (_metrics(busbw_large_gbps=float("inf")), "metric busbw_large_gbps is Infinity"),
    "negative_metric": (_metrics(busbw_large_gbps=-5.0), "metric busbw_large_gbps is -5.0"),
    "zero_metric": (_metrics(samples_per_s=0), "metric samples_per_s is 0"),
    "string_metric": (_metrics(busbw_large_gbps="fast"), 'metric busbw_large_gbps is "fast"'),
    "bool_metric": (_metrics(busbw_large_gbps=True), "metric busbw_large_gbps is true"),
    "unknown_metric": (_metrics(tokens_per_s=9.0), "metric tokens_per_s is unknown"),
    "metrics_list": (_field("metrics", [1.0]), "metrics is [1.0]"),
    "other_hardware": (_field("hardware_key", "a100-sxm4-80gb-x8-n2-nccl"),
                       'hardware_key is "a100-sxm4-80gb-x8-n2-nccl", this run\'s is "h100-sxm5-80gb-x8-n2-nccl"'),
    "other_backend": (_field("backend", "gloo"), 'backend is "gloo", this run\'s is "nccl"'),
    "other_world_size": (_field("world_size", 8), "world_size is 8, this run's is 16"),
    "other_schema": (_field("schema", "gpufleet.smoke.baseline/0"), 'schema is "gpufleet.smoke.baseline/0"'),
    "bad_sweep_row": (_field("sweep", [{"size_bytes": "big"}]), "sweep row"),
    "json_list": (lambda doc: [doc], "it is a JSON array, need an object"),
    "json_string": (lambda doc: "baseline", "it is a JSON string, need an object"),
    "json_number": (lambda doc: 3.5, "it is a JSON number, need an object"),
}


@pytest.mark.parametrize("name", sorted(BROKEN_BASELINES))
def test_broken_baseline_fails_with_its_reason_and_renders(name):
    spoil, needle = BROKEN_BASELINES[name]
    good = _baseline_case_report()
    # Through JSON, as the action reads it (NaN and Infinity included).
    baseline = json.loads(json.dumps(spoil(sv.make_baseline(good))))
    report = _with_rdma(_nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()}),
                        {"n1": 3200, "n2": 3200})
    _judge(report, baseline=baseline)
    assert _status(report)["baseline"] == "fail", name
    assert not report["verdict"]["passed"]
    assert needle in _message(report, "baseline"), _message(report, "baseline")
    assert report["baseline"]["found"] and not report["baseline"]["usable"]
    assert report["baseline"]["comparison"] == []
    ET.fromstring(srd.render_junit(report))
    ET.fromstring(srd.render_svg(report))
    assert "cannot be used" in srd.render_markdown(report)
    json.loads(report_writer.render_json(report))


def test_good_baseline_still_passes_and_round_trips():
    good = _baseline_case_report()
    stored = json.loads(json.dumps(sv.make_baseline(good)))
    assert sv.baseline_problems(stored, good) == []
    report = _with_rdma(_nccl_report({"n1": NCCL_IB.splitlines(), "n2": NCCL_IB.splitlines()}),
                        {"n1": 3200, "n2": 3200})
    _judge(report, baseline=stored)
    assert _status(report)["baseline"] == "pass" and report["baseline"]["usable"]
    assert [c["metric"] for c in report["baseline"]["comparison"]] == ["busbw_large_gbps", "samples_per_s"]


def test_unreadable_baseline_fails_with_the_reason():
    report = _baseline_case_report()
    _judge(report, baseline=None, baseline_error="cannot read /b/x.json: Expecting value: line 1 column 1 (char 0)")
    assert _status(report)["baseline"] == "fail"
    assert "Expecting value" in _message(report, "baseline") and report["baseline"]["found"]


def test_one_rank_baseline_keeps_only_figures_it_can_be_held_to():
    """One rank: busbw is 0 by definition, no reference; samples/s is kept and the document is usable."""
    hosts = ["solo"]
    report = sr.build_report("simc", hosts, _nodes(hosts), _outputs(hosts, _result(hosts)), "gloo")
    _judge(report)
    assert report["sweep"]["busbw_large_gbps"] == 0
    doc = sv.make_baseline(report)
    assert list(doc["metrics"]) == ["samples_per_s"]
    assert sv.baseline_problems(doc, report) == []


def test_a_broken_measurement_is_no_match_for_the_baseline():
    good = _baseline_case_report()
    baseline = sv.make_baseline(good)
    good["training"]["samples_per_s"] = float("nan")
    _judge(good, baseline=baseline)
    assert _status(good)["baseline"] == "fail"
    assert "samples_per_s regressed: this run measured nan" in _message(good, "baseline")
    assert "| samples_per_s | nan |" in srd.render_markdown(good)


def test_baseline_with_no_metric_this_run_measured_is_skipped_not_passed():
    good = _baseline_case_report()
    baseline = sv.make_baseline(good)
    del baseline["metrics"]["busbw_large_gbps"]
    good["training"]["samples_per_s"] = None
    _judge(good, baseline=baseline)
    assert _status(good)["baseline"] == "skip"
    assert "measured none of the baseline's metrics (samples_per_s)" in _message(good, "baseline")
