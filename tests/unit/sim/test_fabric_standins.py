"""The fabric stand-ins (perftest, nccl-tests, mpirun, the GEMM bench) replay real captures, scaled by faults.

Each runs here as it runs inside a node: its node's configuration written by gfsim.hardware into a
directory GPUFLEET_SIM_ETC names, the driver state in GPUFLEET_SIM_DRIVER_DIR. Two perftest processes talk
over 127.0.0.1 exactly as two nodes' do over their bridge. The outputs are read with the collection's
own parsers, as the roles read them.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_tests import large_message_busbw, parse_nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.perftest import parse_perftest

REPO = Path(__file__).resolve().parents[3]
STANDINS = REPO / "tests" / "sim" / "standins"
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402

CAPTURED_GBPS = 363.47  # the ib_write_bw capture's BW average, measured on a 400 Gb/s port


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    """Trees of simulated nodes as gfsim.hardware writes them; returns {node: env for its stand-ins}."""
    def make(faults_by_node, profile="hgx-h100"):
        state = tmp_path / "nodes"
        names = sorted(faults_by_node)
        hosts = "".join("127.0.0.%d\t%s\n" % (i, n) for i, n in enumerate(names, 1))
        envs = {}
        drivers = tmp_path / "driver"
        drivers.mkdir(exist_ok=True)
        (drivers / "kernel_module").write_text("535.183.01 proprietary\n")
        (drivers / "userspace_version").write_text("535.183.01\n")
        for name in names:
            merged = state / name / "merged"
            for folder in ("etc/apt/apt.conf.d", "var/lib/dpkg", "usr/bin"):
                (merged / folder).mkdir(parents=True)
            (merged / "etc/hosts").write_text(hosts)
            hardware.write_node_hardware(merged, name, hardware.node_hardware(profile, {}), faults_by_node[name])
        for name in names:
            merged = state / name / "merged"
            etc = merged / hardware.NODE_ETC
            # The captures' paths are node paths (/etc/gpufleet-sim/...): point them at this tree.
            config = json.loads((etc / "node.json").read_text())
            text = json.dumps(config).replace('"/etc/gpufleet-sim', '"%s' % etc)
            (etc / "node.json").write_text(text)
            envs[name] = dict(os.environ, GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_DRIVER_DIR=str(drivers))
        return envs
    return make


def run(env, prog, *args, **kw):
    return subprocess.run([str(STANDINS / prog), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=60, check=False, **kw)


def pair(envs, server_node, client_node, device="mlx5_0"):
    """One ib_write_bw test: server on ``server_node``, client on ``client_node`` (data flows client -> server)."""
    port = free_port()
    server = subprocess.Popen([str(STANDINS / "ib_write_bw"), "-d", device, "-p", str(port), "-D", "2",
                               "--report_gbits", "-F"], env=envs[server_node], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        for _attempt in range(50):
            client = run(envs[client_node], "ib_write_bw", "-d", device, "-p", port, "-D", "2", "--report_gbits",
                         "-F", "127.0.0.1")
            if "Couldn't connect" not in client.stderr:
                break
            time.sleep(0.1)
        out, _err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return client, out


def test_a_healthy_pair_replays_the_capture_at_the_ports_rate(cluster):
    envs = cluster({"node1": [], "node2": []})
    client, server_out = pair(envs, "node2", "node1")
    assert client.returncode == 0, client.stderr
    doc = parse_perftest(client.stdout)
    assert doc["device"] == "mlx5_0" and doc["link_type"] == "IB" and doc["test"] == "RDMA_Write BW Test"
    # The simulated ports run at 400 Gb/s, the rate the capture was measured at.
    assert doc["bw_avg_gbps"] == pytest.approx(CAPTURED_GBPS, abs=0.01)
    # The server prints the client's report, as perftest's does.
    assert parse_perftest(server_out)["bw_avg_gbps"] == doc["bw_avg_gbps"]


def test_link_slow_at_either_end_slows_the_pair_a_hundredfold(cluster):
    envs = cluster({"node1": [], "node3": ["link-slow"]})
    for server_node, client_node in (("node3", "node1"), ("node1", "node3")):
        client, _out = pair(envs, server_node, client_node)
        assert parse_perftest(client.stdout)["bw_avg_gbps"] == pytest.approx(CAPTURED_GBPS / 100, abs=0.01)


def test_no_server_down_port_and_uncaptured_tool_fail_as_perftest_does(cluster):
    envs = cluster({"node1": ["ib-port-down"], "node2": []})
    refused = run(envs["node2"], "ib_write_bw", "-d", "mlx5_0", "-p", free_port(), "--report_gbits", "127.0.0.1")
    assert refused.returncode == 1 and parse_perftest(refused.stderr)["failure"]["kind"] == "connect"
    down = run(envs["node1"], "ib_write_bw", "-d", "mlx5_0", "--report_gbits", "127.0.0.1")
    assert down.returncode == 1 and "Port number 1 state is Down" in down.stderr
    missing = run(envs["node2"], "ib_write_bw", "-d", "mlx5_42", "127.0.0.1")
    assert missing.returncode == 1 and parse_perftest(missing.stderr)["failure"]["kind"] == "device"
    read = run(envs["node2"], "ib_read_bw", "-d", "mlx5_0", "127.0.0.1")
    assert read.returncode == 2 and "no captured ib_read_bw" in read.stderr


def test_a_node_without_rdma_has_no_device(cluster):
    envs = cluster({"node1": []}, profile="t4")
    proc = run(envs["node1"], "ib_write_bw", "-d", "mlx5_0", "127.0.0.1")
    assert proc.returncode == 1 and parse_perftest(proc.stderr)["failure"]["kind"] == "device"


def test_single_node_all_reduce_replays_the_8_gpu_capture_for_this_node(cluster):
    envs = cluster({"node1": [], "node2": ["gpu-slow"]})
    proc = run(envs["node1"], "all_reduce_perf", "-b", "32M", "-e", "16G", "-f", "2", "-g", "8")
    assert proc.returncode == 0, proc.stderr
    (test,) = parse_nccl_tests(proc.stdout)
    assert test["collective"] == "all_reduce" and test["nranks"] == 8
    assert {r["host"] for r in test["ranks"]} == {"node1"}
    assert [r["size_bytes"] for r in test["rows"]][0] == 32 * 2 ** 20 and test["rows"][-1]["size_bytes"] == 16 * 2 ** 30
    assert large_message_busbw(test) == pytest.approx(482.27, abs=0.05)
    slow = parse_nccl_tests(run(envs["node2"], "all_reduce_perf", "-b", "32M", "-e", "16G", "-g", "8").stdout)[0]
    assert large_message_busbw(slow) == pytest.approx(482.27 * 0.4, abs=0.1)


def test_multi_node_runs_through_mpirun_take_every_hosts_faults(cluster):
    envs = cluster({"node1": [], "node2": [], "node3": ["link-slow"]})
    binary = STANDINS / "sendrecv_perf"
    healthy = run(envs["node1"], "mpirun", "--allow-run-as-root", "-np", 16, "-H", "node1:8,node2:8",
                  "-x", "NCCL_DEBUG=INFO", binary, "-b", "4G", "-e", "16G", "-f", "2", "-g", 1, cwd="/")
    # node2's SSH port is not listening here, so the launch is refused as Open MPI's would be ...
    assert healthy.returncode == 1 and "node2" in healthy.stderr
    # ... and a one-host launch runs rank 0 with the capture of one node (no MPI peers to reach).
    single = run(envs["node1"], "mpirun", "-np", 8, "-H", "node1:8", STANDINS / "all_reduce_perf", "-b", "1G", "-e",
                 "1G", "-g", 1)
    assert single.returncode == 0, single.stderr
    assert parse_nccl_tests(single.stdout)[0]["nranks"] == 8


def test_pairwise_capture_and_link_slow_scaling(cluster):
    envs = cluster({"node1": [], "node3": ["link-slow"]})
    env = dict(envs["node1"], GPUFLEET_SIM_MPI_HOSTS="node1,node3", GPUFLEET_SIM_MPI_PER_NODE="8")
    proc = run(env, "sendrecv_perf", "-b", "4G", "-e", "16G", "-f", "2", "-g", 1)
    (test,) = parse_nccl_tests(proc.stdout)
    assert test["nranks"] == 16 and {r["host"] for r in test["ranks"]} == {"node1", "node3"}
    assert large_message_busbw(test) == pytest.approx(0.46, abs=0.01)  # 45.87 GB/s captured, / 100
    env["GPUFLEET_SIM_MPI_HOSTS"] = "node1,node2,node3"
    wide = parse_nccl_tests(run(env, "all_reduce_perf", "-b", "1G", "-e", "1G", "-g", 1).stdout)[0]
    assert wide["nranks"] == 24


def test_uncaptured_gpu_counts_and_a_missing_driver_are_errors(cluster, tmp_path):
    envs = cluster({"node1": []})
    assert run(envs["node1"], "all_reduce_perf", "-g", "4").returncode == 2
    assert "invalid device ordinal" in run(envs["node1"], "all_reduce_perf", "-g", "9").stderr
    no_driver = dict(envs["node1"], GPUFLEET_SIM_DRIVER_DIR=str(tmp_path / "nothing"))
    assert run(no_driver, "all_reduce_perf", "-g", "8").returncode == 1
    assert run(no_driver, "gpufleet_microbench").returncode == 1


def test_gemm_bench_replays_published_figures_and_slows_gpu0(cluster):
    envs = cluster({"node1": ["gpu-slow"]})
    lines = [json.loads(line) for line in run(envs["node1"], "gpufleet_microbench").stdout.splitlines()]
    assert [line["index"] for line in lines] == list(range(8))
    assert {line["name"] for line in lines} == {"NVIDIA H100 80GB HBM3"}
    assert lines[1]["gemm_tflops"] == {"bf16": 794.5, "fp8": 1402.6} and lines[1]["copy_gbps"] == 2540.0
    assert lines[0]["gemm_tflops"]["bf16"] == pytest.approx(794.5 * 0.4) and lines[0]["copy_gbps"] == pytest.approx(1016.0)
    assert "fp16" in lines[0]["gemm_skipped"]
    # Each GPU by the bus id the capture gives it, lower-case as torch reports it (the real tool prints it).
    assert [line["bus_id"] for line in lines][:3] == ["00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0"]


def test_fabric_view_and_perftest_diversion_are_written_into_every_node(cluster, tmp_path):
    cluster({"node1": [], "node2": []})
    trees = sorted((tmp_path / "nodes").glob("*/merged"))
    # A node whose lower layer already has perftest (a converged image): its binary is diverted too.
    (trees[1] / "usr/bin/ib_write_bw").write_bytes(b"\x7fELF perftest")
    views = [json.loads((t / hardware.NODE_ETC / "fabric.json").read_text()) for t in trees]
    assert views[0] == views[1] == {"node1": {"ip": "127.0.0.1", "faults": []}, "node2": {"ip": "127.0.0.2", "faults": []}}
    hardware.set_faults(trees[1], ["link-slow"])
    assert json.loads((trees[0] / hardware.NODE_ETC / "fabric.json").read_text())["node2"]["faults"] == ["link-slow"]
    hook = (trees[0] / hardware.PERFTEST_HOOK).read_text()
    assert "ib_write_bw.distrib" in hook and "/usr/lib/gpufleet-sim/standins/ib_write_bw" in hook
    binary = trees[1] / "usr/bin/ib_write_bw"
    assert binary.is_symlink() and os.readlink(binary) == "/usr/lib/gpufleet-sim/standins/ib_write_bw"
    assert (trees[1] / "usr/bin/ib_write_bw.distrib").read_bytes() == b"\x7fELF perftest"
    diversions = (trees[1] / "var/lib/dpkg/diversions").read_text()
    assert diversions.count("/usr/bin/ib_write_bw\n/usr/bin/ib_write_bw.distrib\n:\n") == 1
