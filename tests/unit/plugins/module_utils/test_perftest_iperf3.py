"""perftest and iperf3 parsers on real captures (tests/fixtures/perftest, tests/fixtures/iperf3)."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils.iperf3 import parse_iperf3_json
from ansible_collections.gpufleet.cluster.plugins.module_utils.perftest import parse_perftest, perftest_failure
from fixtures_path import FIXTURES

PERFTEST = FIXTURES / "perftest"
IPERF3 = FIXTURES / "iperf3"


def test_report_gbits_client_of_a_400g_port():
    doc = parse_perftest((PERFTEST / "ib_write_bw-bnxt-re-400g-roce-3qp-D10-report-gbits-client.txt").read_text())
    assert doc["test"] == "RDMA_Write BW Test" and doc["device"] == "bnxt_re0" and doc["link_type"] == "Ethernet"
    assert doc["qps"] == 3 and doc["unit"] == "Gb/sec" and doc["failure"] is None
    assert doc["rows"] == [{"bytes": 65536, "iterations": 4159603, "bw_peak_gbps": 0.0, "bw_avg_gbps": 363.47,
                            "msg_rate_mpps": 0.693268}]
    assert doc["bw_avg_gbps"] == 363.47


def test_run_infinitely_rows_take_the_last_interval():
    doc = parse_perftest((PERFTEST / "ib_write_bw-dgx-spark-cx7-200g-roce-run-infinitely-client.txt").read_text())
    assert doc["device"] == "rocep1s0f0" and len(doc["rows"]) == 5
    assert doc["bw_avg_gbps"] == 92.57


def test_mib_per_second_is_converted_to_gbits():
    # Server and client of one loopback run in one log; perftest's MB/sec are 2^20 bytes per second.
    doc = parse_perftest((PERFTEST / "ib_write_bw-azure-hdr-loopback-8M-mb-sec-server-and-client.log").read_text())
    assert doc["device"] == "ib0" and doc["link_type"] == "IB" and doc["unit"] == "MB/sec"
    assert len(doc["rows"]) == 2
    assert doc["bw_avg_gbps"] == pytest.approx(24056.72 * 2 ** 20 * 8 / 1e9)


@pytest.mark.parametrize("text, kind", [
    ("Couldn't connect to 10.0.0.2:18515\n Unable to init the socket connection\n", "connect"),
    (" Port number 1 state is Down\n Couldn't get context for the device\n", "port_state"),
    ("IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE device\n", "device"),
    (" Did not detect devices \n If device exists, check if driver is up\n", "device"),
    ("Couldn't listen to port 18515\n", "listen"),
])
def test_perftest_failures_are_named(text, kind):
    assert perftest_failure(text)["kind"] == kind
    doc = parse_perftest(text)
    assert doc["bw_avg_gbps"] is None and doc["rows"] == [] and doc["failure"]["kind"] == kind


def test_iperf3_received_sum_in_gbits():
    doc = parse_iperf3_json((IPERF3 / "iperf3.12-veth-netns-tcp-2s-client.json").read_text())
    assert doc["gbps"] == pytest.approx(9.58208586248142) and doc["error"] is None
    assert doc["local"] == "10.254.77.1" and doc["remote"] == "10.254.77.2" and doc["version"] == "iperf 3.12"


def test_iperf3_through_the_simulators_token_bucket_is_a_thousand_times_slower():
    shaped = parse_iperf3_json((IPERF3 / "iperf3.12-veth-netns-tbf-10mbit-tcp-2s-client.json").read_text())["gbps"]
    free = parse_iperf3_json((IPERF3 / "iperf3.12-veth-netns-tcp-2s-client.json").read_text())["gbps"]
    assert shaped < 0.01 and free / shaped > 100


@pytest.mark.parametrize("text", [
    (IPERF3 / "iperf3.12-connection-refused-client.json").read_text(), "", "iperf3: error - x", "[1, 2]",
    '{"start": {}, "end": {}}',
])
def test_iperf3_without_a_figure_is_none_with_the_reason(text):
    doc = parse_iperf3_json(text)
    assert doc["gbps"] is None and doc["error"]
