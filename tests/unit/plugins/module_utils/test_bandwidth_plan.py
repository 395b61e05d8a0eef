"""Which network, tool and devices the pair tests use (on real ibstat captures), and the figures they give."""

import os
import subprocess

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import bandwidth, bandwidth_plan as plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import parse_ibstat
from fixtures_path import FIXTURES

IB_X8 = parse_ibstat((FIXTURES / "ibstat" / "h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt").read_text())
ROCE_2_DOWN = parse_ibstat((FIXTURES / "ibstat" / "h100-cx7-400-roce-2-ports-down-disabled.txt").read_text())
NODES = ["node1", "node2", "node3", "node4"]
CAPTURED = 363.47


def test_nccl_conf_is_key_value_lines():
    text = "# written by gpufleet\nNCCL_IB_HCA==mlx5_0:1,mlx5_1:1\nNCCL_SOCKET_IFNAME=eth0  # bootstrap\n\nbogus\n"
    assert plan.parse_nccl_conf(text) == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "eth0"}


def test_the_fabric_ports_of_an_ib_node_leave_out_its_ethernet_bond():
    rdma = plan.rdma_endpoint(IB_X8, {})
    assert [d["ca"] for d in rdma["devices"]] == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7",
                                                  "mlx5_8", "mlx5_9"]
    assert {d["rate_gbps"] for d in rdma["devices"]} == {400} and rdma["reason"] is None


@pytest.mark.parametrize("spec, expected", [
    ("=mlx5_0:1,mlx5_4:1", ["mlx5_0", "mlx5_4"]),
    ("mlx5_0,mlx5_1", ["mlx5_0", "mlx5_1"]),
    ("^mlx5_0,mlx5_1,mlx5_bond", ["mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]),
])
def test_nccl_ib_hca_in_nccl_conf_decides_the_devices(spec, expected):
    rdma = plan.rdma_endpoint(IB_X8, {"NCCL_IB_HCA": spec})
    assert [d["ca"] for d in rdma["devices"]] == expected and "NCCL_IB_HCA" in rdma["source"]


def test_no_devices_say_why():
    assert "NCCL_IB_DISABLE=1" in plan.rdma_endpoint(IB_X8, {"NCCL_IB_DISABLE": "1"})["reason"]
    assert plan.rdma_endpoint([], {})["reason"] == "no RDMA device (rdma_info found no HCA)"
    down = plan.rdma_endpoint(ROCE_2_DOWN, {"NCCL_IB_HCA": "=mlx5_5:1,mlx5_11:1"})
    assert down["devices"] == [] and "mlx5_5:1 Down" in down["reason"] and "mlx5_11:1 Down" in down["reason"]
    assert plan.rdma_endpoint(IB_X8, {}, override=["mlx5_5"])["devices"][0]["ca"] == "mlx5_5"


def test_the_socket_interface_is_ncclS_or_the_one_holding_the_address():
    interfaces = {"lo": ["127.0.0.1"], "eth0": ["10.200.0.11"], "ib0": ["192.168.1.11"], "docker0": ["172.17.0.1"]}
    by_conf = plan.socket_endpoint({"NCCL_SOCKET_IFNAME": "ib"}, interfaces, "10.200.0.11")
    assert by_conf == {"interface": "ib0", "address": "192.168.1.11", "error": None,
                       "source": "NCCL_SOCKET_IFNAME=ib (/etc/nccl.conf)"}
    assert plan.socket_endpoint({"NCCL_SOCKET_IFNAME": "^docker,ib"}, interfaces, "10.200.0.11")["interface"] == "eth0"
    assert plan.socket_endpoint({}, interfaces, "10.200.0.11", override="=docker0")["interface"] == "docker0"
    default = plan.socket_endpoint({}, interfaces, "10.200.0.11")
    assert default["interface"] == "eth0" and "NCCL_SOCKET_IFNAME is not set" in default["source"]
    none = plan.socket_endpoint({"NCCL_SOCKET_IFNAME": "enp"}, interfaces, "10.200.0.11")
    assert none["interface"] is None and "no interface with an IPv4 address matches" in none["error"]


def _endpoints(without_rdma=()):
    return {n: {"address": "10.0.0.%d" % i,
                "rdma": plan.rdma_endpoint([] if n in without_rdma else IB_X8, {}),
                "tcp": plan.socket_endpoint({}, {"eth0": ["10.0.0.%d" % i]}, "10.0.0.%d" % i)}
            for i, n in enumerate(NODES, 1)}


def test_every_node_with_rdma_measures_rdma_on_eight_rails():
    chosen = plan.network_plan(NODES, _endpoints())
    assert (chosen["network"], chosen["tool"], chosen["rails"], chosen["nodes"]) == ("rdma", "ib_write_bw", 8, NODES)


def test_one_node_without_rdma_turns_the_search_into_the_labelled_tcp_fallback():
    chosen = plan.network_plan(NODES, _endpoints(without_rdma=["node2"]))
    assert chosen["network"] == "tcp" and chosen["tool"] == "iperf3" and chosen["nodes"] == NODES
    assert chosen["reason"] == "TCP fallback: no Active RDMA port on node2 (no RDMA device (rdma_info found no HCA))"
    forced = plan.network_plan(NODES, _endpoints(without_rdma=["node2"]), requested="rdma")
    assert forced["network"] == "rdma" and forced["nodes"] == ["node1", "node3", "node4"]
    assert "node2" in forced["excluded"]
    with pytest.raises(ValueError):
        plan.network_plan(NODES, _endpoints(), requested="ethernet")


def test_link_tests_put_the_client_where_the_data_starts():
    endpoints = _endpoints()
    write = plan.link_tests([{"src": "node3", "dst": "node4"}], plan.network_plan(NODES, endpoints), endpoints, 29517)[0]
    assert (write["client"], write["server"], write["server_address"]) == ("node3", "node4", "10.0.0.4")
    assert [r["port"] for r in write["rails"]] == list(range(29517, 29525))
    assert write["rails"][2] == {"rail": 2, "port": 29519, "client_device": "mlx5_4", "client_ib_port": 1,
                                 "server_device": "mlx5_4", "server_ib_port": 1, "line_rate_gbps": 400}
    read_plan = plan.network_plan(NODES, endpoints, rdma_tool="ib_read_bw")
    read = plan.link_tests([{"src": "node3", "dst": "node4"}], read_plan, endpoints, 29517)[0]
    assert (read["client"], read["server"], read["server_address"]) == ("node4", "node3", "10.0.0.3")
    tcp = plan.link_tests([{"src": "node3", "dst": "node4"}], plan.network_plan(NODES, endpoints, "tcp"), endpoints, 5201)[0]
    assert tcp["bind"] == "10.0.0.3" and tcp["rails"] == [{"rail": 0, "port": 5201, "client_device": "eth0",
                                                           "server_device": "eth0", "line_rate_gbps": None}]


def test_client_and_server_commands_agree():
    endpoints = _endpoints()
    test = plan.link_tests([{"src": "node1", "dst": "node2"}], plan.network_plan(NODES, endpoints), endpoints, 29517)[0]
    rail = test["rails"][1]
    assert plan.server_argv(test, rail, 2, 1048576, 1) == [
        "ib_write_bw", "-d", "mlx5_1", "-i", "1", "-p", "29518", "-D", "2", "--report_gbits", "-F", "-s", "1048576",
        "-q", "1"]
    assert plan.client_argv(test, rail, 2.4, 1048576, 1) == plan.server_argv(test, rail, 2, 1048576, 1) + ["10.0.0.2"]
    tcp = plan.link_tests([{"src": "node1", "dst": "node2"}], plan.network_plan(NODES, endpoints, "tcp"), endpoints, 5201)[0]
    expected = ["iperf3", "-c", "10.0.0.2", "-p", "5201", "-t", "1", "-J", "-B", "10.0.0.1"]
    assert plan.client_argv(tcp, tcp["rails"][0], 0.3) == expected
    assert plan.server_argv(tcp, tcp["rails"][0], 2) == ["iperf3", "-s", "-B", "10.0.0.2", "-p", "5201"]


def _fake_server(tmp_path, failing_port=None):
    """An ib_write_bw that logs its port and exits 1 on `failing_port`: what sh runs in place of perftest."""
    tool = tmp_path / "ib_write_bw"
    tool.write_text('#!/bin/sh\nwhile [ "$1" != -p ]; do shift; done\necho "$2" >> "%s"\n[ "$2" != "%s" ]\n'
                    % (tmp_path / "served", failing_port))
    tool.chmod(0o755)
    return dict(os.environ, PATH="%s:%s" % (tmp_path, os.environ["PATH"]))


def test_one_command_serves_every_rail_once_per_repeat_and_reports_a_failed_server(tmp_path):
    endpoints = _endpoints()
    test = plan.link_tests([{"src": "node1", "dst": "node2"}], plan.network_plan(NODES, endpoints), endpoints, 29517)[0]
    argv = plan.servers_argv(test, 2, 1048576, 1, repeats=3)
    assert argv[:2] == ["sh", "-c"] and len(argv) == 3, argv
    # Each rail's own server command, as bandwidth_server_argv gives it.
    for rail in test["rails"]:
        assert " ".join(plan.server_argv(test, rail, 2, 1048576, 1)) in argv[2]
    proc = subprocess.run(argv, env=_fake_server(tmp_path), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    ports = sorted((tmp_path / "served").read_text().split())
    assert ports == sorted([str(r["port"]) for r in test["rails"]] * 3), ports
    # A server that fails ends its rail's repeats, and the unit's status says so.
    (tmp_path / "served").unlink()
    failing = test["rails"][0]["port"]
    proc = subprocess.run(argv, env=_fake_server(tmp_path, failing), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 1, proc
    ports = (tmp_path / "served").read_text().split()
    assert ports.count(str(failing)) == 1 and ports.count(str(test["rails"][1]["port"])) == 3, ports


def _run(test, per_rail):
    return {"test": test, "results": [{"rail": r["rail"], "gbps": per_rail(r), "samples_gbps": [per_rail(r)]}
                                      for r in test["rails"]]}


def test_a_link_slow_node_on_the_fabric_is_named_with_its_hcas():
    """The acceptance scenario in numbers: node3's link runs at 1/100 (the stand-in's link-slow)."""
    endpoints = _endpoints()
    chosen = plan.network_plan(NODES, endpoints)

    def measure(links):
        tests = plan.link_tests(links, chosen, endpoints, 29517)
        return bandwidth.pair_figures([_run(t, lambda r, t=t: CAPTURED / (100 if "node3" in (t["src"], t["dst"]) else 1))
                                       for t in tests], rate_fraction=0.8)

    ring = measure(bandwidth.ring_links(NODES))
    slow = bandwidth.slow_entries(ring, bandwidth.floor_for([e["gbps"] for e in ring]))
    _suspects, pairs = bandwidth.isolation_pairs(NODES, slow)
    per_node = {n: {"gbps": 400.0} for n in NODES}
    findings, verdict = bandwidth.name_culprits(NODES, ring, per_node, measure(pairs), transport="rdma, ib_write_bw")
    assert [(f["node"], f["code"]) for f in findings] == [("node3", "BANDWIDTH_NODE_SLOW")]
    finding = findings[0]
    assert finding["network"] == "rdma" and finding["tool"] == "ib_write_bw"
    assert finding["devices"] == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert "mlx5_0->mlx5_0 3.635" in finding["message"] and "(rdma, ib_write_bw)" in finding["message"]
    assert verdict["slow_nodes"] == ["node3"]


def test_a_missing_rail_makes_the_link_figure_missing():
    endpoints = _endpoints()
    test = plan.link_tests([{"src": "node1", "dst": "node2"}], plan.network_plan(NODES, endpoints), endpoints, 29517)[0]
    result = _run(test, lambda r: None if r["rail"] == 5 else CAPTURED)
    result["results"][5]["error"] = "Couldn't connect to 10.0.0.2:29522"
    figure = plan.test_figure(result, 0.8)
    assert figure["gbps"] is None and "Couldn't connect" in figure["error"]
    assert plan.test_figure(_run(test, lambda r: CAPTURED), 0.8)["gbps"] == CAPTURED
