"""The bandwidth_test module runs real clients: the simulator's ib_write_bw (a perftest stand-in that talks
TCP like perftest) and, where installed, the real iperf3, all on 127.0.0.1."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "bandwidth_test.py"
STANDINS = REPO / "tests" / "sim" / "standins"
sys.path.insert(0, str(REPO / "tests" / "sim"))
from gfsim import hardware  # noqa: E402


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def node_env(tmp_path):
    merged = tmp_path / "nodes" / "node1" / "merged"
    (merged / "etc").mkdir(parents=True)
    (merged / "etc/hosts").write_text("127.0.0.1\tnode1\n")
    hardware.write_node_hardware(merged, "node1", hardware.node_hardware("hgx-h100", {}), [])
    etc = merged / hardware.NODE_ETC
    (etc / "node.json").write_text((etc / "node.json").read_text().replace('"/etc/gpufleet-sim', '"%s' % etc))
    return dict(os.environ, GPUFLEET_SIM_ETC=str(etc), PATH="%s:%s" % (STANDINS, os.environ["PATH"]),
                PYTHONPATH=str(REPO / "collections"))


def run_module(env, args):
    path = Path(env["GPUFLEET_SIM_ETC"]).parent / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, str(MODULE), str(path)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    return json.loads(proc.stdout)


def rdma_test(port, rails=1):
    return {"src": "node1", "dst": "node1", "client": "node1", "server": "node1", "network": "rdma",
            "tool": "ib_write_bw", "server_address": "127.0.0.1", "bind": None,
            "rails": [{"rail": k, "port": port + k, "client_device": "mlx5_%d" % k, "client_ib_port": 1,
                       "server_device": "mlx5_%d" % k, "server_ib_port": 1, "line_rate_gbps": 400}
                      for k in range(rails)]}


def test_rails_run_at_once_and_each_repeat_waits_for_its_server(node_env):
    port = free_port()
    test = rdma_test(port, rails=2)
    # The server starts after the client: the client retries until it listens, as the role's servers start.
    servers = []

    def start_servers():
        for rail in test["rails"]:
            script = 'for i in 1 2; do "$0" "$@" || exit $?; done'
            servers.append(subprocess.Popen(["sh", "-c", script, str(STANDINS / "ib_write_bw"), "-d",
                                             rail["server_device"], "-p", str(rail["port"]), "-D", "2",
                                             "--report_gbits", "-F"], env=node_env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
    launcher = subprocess.Popen(["sleep", "1"])
    try:
        path = Path(node_env["GPUFLEET_SIM_ETC"]).parent / "args.json"
        path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"test": test, "repeats": 2, "connect_timeout": 20}}))
        client = subprocess.Popen([sys.executable, str(MODULE), str(path)], env=node_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        launcher.wait()
        start_servers()
        out, err = client.communicate(timeout=120)
    finally:
        for proc in servers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    result = json.loads(out)
    assert result["changed"] is False and result["tool"] == "ib_write_bw", err
    assert [r["rail"] for r in result["results"]] == [0, 1]
    for rail in result["results"]:
        assert rail["gbps"] == pytest.approx(363.47, abs=0.01) and len(rail["samples_gbps"]) == 2
        assert rail["error"] is None and rail["argv"][0] == "ib_write_bw" and rail["argv"][-1] == "127.0.0.1"


def test_a_server_that_never_listens_gives_no_figure_and_perftests_reason(node_env):
    started = time.monotonic()
    result = run_module(node_env, {"test": rdma_test(free_port()), "connect_timeout": 1})
    (rail,) = result["results"]
    assert rail["gbps"] is None and rail["samples_gbps"] == [None]
    assert rail["error"].startswith("Couldn't connect to 127.0.0.1:")
    assert time.monotonic() - started < 60


def test_a_test_without_its_plan_fails_with_the_reason(node_env):
    result = run_module(node_env, {"test": {"src": "node1"}})
    assert result["failed"] and "bandwidth_link_tests" in result["msg"]


@pytest.mark.skipif(not shutil.which("iperf3"), reason="iperf3 is not installed on this machine")
def test_iperf3_between_two_loopback_addresses(node_env):
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        test = {"src": "node1", "dst": "node2", "client": "node1", "server": "node2", "network": "tcp",
                "tool": "iperf3", "server_address": "127.0.0.1", "bind": "127.0.0.1",
                "rails": [{"rail": 0, "port": port, "client_device": "lo", "server_device": "lo",
                           "line_rate_gbps": None}]}
        result = run_module(node_env, {"test": test, "seconds": 1, "repeats": 2, "connect_timeout": 10})
    finally:
        server.terminate()
        server.wait()
    (rail,) = result["results"]
    assert rail["gbps"] > 0 and len(rail["samples_gbps"]) == 2 and rail["argv"][:3] == ["iperf3", "-c", "127.0.0.1"]


@pytest.mark.parametrize("field, value", [("server_address", "--run_infinitely"), ("server_address", "-h"),
                                          ("bind", "-B"), ("server_address", "node 2")])
def test_an_address_that_is_not_one_is_refused_before_any_client_runs(node_env, tmp_path, field, value):
    """issue 35 N20: perftest would read '--run_infinitely' as an option and never end."""
    test = rdma_test(free_port())
    test[field] = value
    log = tmp_path / "ran"
    tool = tmp_path / "bin" / "ib_write_bw"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho \"$@\" >> '%s'\n" % log)
    tool.chmod(0o755)
    env = dict(node_env, PATH="%s:%s" % (tool.parent, node_env["PATH"]))
    result = run_module(env, {"test": test, "connect_timeout": 1})
    assert result.get("failed") is True, result
    assert "%s %r" % (field, value) in result["msg"] and "IP address or a host name" in result["msg"], result["msg"]
    assert not log.exists()
