"""An address handed to a measuring tool's command line is an IP address or an RFC 1123 host name, never an
option (issue 35 N20): perftest and iperf3 take the server's address as a bare argument, so "-h" or
"--run_infinitely" there is an option, not a peer."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.filter import bandwidth_isolation as filters
from ansible_collections.gpufleet.cluster.plugins.module_utils import bandwidth_plan as plan
from ansible_collections.gpufleet.cluster.plugins.module_utils import tool_address

GOOD = ["10.0.0.2", "fe80::1", "fe80::1%eth0", "::1", "node1", "gpu-a01.cluster.example.", "n" * 63,
        ".".join(["a" * 63] * 3) + "." + "b" * 61, "1node", "3com.example"]
BAD = ["-h", "--run_infinitely", "-oProxyCommand=x", "", " node1", "node1 ", "node_1", "node1;reboot", "-node1",
       "node1-", "a..b", "n" * 64, ".".join(["a" * 63] * 4), "10.0.0.256", "1.2.3", "$(reboot)", None, 7]


@pytest.mark.parametrize("value", GOOD)
def test_an_ip_address_or_an_rfc_1123_name_is_taken(value):
    assert tool_address.address_problem(value) is None
    tool_address.check_address(value, "server_address")


@pytest.mark.parametrize("value", BAD)
def test_anything_else_is_refused_naming_the_value(value):
    assert tool_address.address_problem(value)
    with pytest.raises(ValueError) as caught:
        tool_address.check_address(value, "server_address")
    assert "server_address %r" % (value,) in str(caught.value) and "IP address or a host name" in str(caught.value)


def _tests(server="10.0.0.2", bind="10.0.0.1"):
    rdma = {"tool": "ib_write_bw", "server_address": server, "bind": None,
            "rails": [{"rail": 0, "port": 18515, "client_device": "mlx5_0", "client_ib_port": 1,
                       "server_device": "mlx5_0", "server_ib_port": 1}]}
    tcp = {"tool": "iperf3", "server_address": server, "bind": bind,
           "rails": [{"rail": 0, "port": 5201, "client_device": "eth0", "server_device": "eth0"}]}
    return rdma, tcp


@pytest.mark.parametrize("server, bind, named", [("-h", "10.0.0.1", "server_address '-h'"),
                                                 ("10.0.0.2", "--version", "bind '--version'")])
@pytest.mark.parametrize("build", [plan.client_argv, plan.server_argv])
def test_no_command_is_built_around_an_option_shaped_address(server, bind, named, build):
    for test in _tests(server, bind):
        test["bind"] = bind
        with pytest.raises(ValueError, match=named):
            build(test, test["rails"][0], 2)
        with pytest.raises(ValueError, match=named):
            plan.servers_argv(test, 2)


def test_the_argv_filters_refuse_it_as_filter_errors():
    rdma, tcp = _tests("-h")
    for name, call in (("bandwidth_server_argv", lambda: filters.bandwidth_server_argv(tcp, tcp["rails"][0], 2)),
                       ("bandwidth_servers_argv", lambda: filters.bandwidth_servers_argv(rdma, 2))):
        with pytest.raises(AnsibleFilterError, match=r"%s: server_address '-h'" % name):
            call()


def test_the_endpoint_filter_refuses_an_option_shaped_node_address():
    with pytest.raises(AnsibleFilterError, match=r"bandwidth_endpoint: address '-1'.*bandwidth_isolation_address"):
        filters.bandwidth_endpoint({"cas": []}, "", {}, "-1")
