"""no_proxy: the inventory's hosts kept off the proxy, only when the operator sets a proxy and no no_proxy."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.filter.no_proxy import FilterModule, no_proxy

PROXY = {"http_proxy": "http://proxy.example.internal:3128", "https_proxy": "http://proxy.example.internal:3128"}
HOSTS = ["gpu-a01", "gpu-a02", "10.10.0.11", "10.10.0.12", "", "gpu-a01"]


def test_it_is_registered():
    assert FilterModule().filters() == {"no_proxy": no_proxy}


def test_a_proxy_without_no_proxy_gets_the_loopback_and_every_host_once():
    env = no_proxy(PROXY, HOSTS)
    want = "localhost,127.0.0.1,::1,gpu-a01,gpu-a02,10.10.0.11,10.10.0.12"
    assert env == {**PROXY, "no_proxy": want, "NO_PROXY": want}
    assert "no_proxy" not in PROXY  # the input is not changed


@pytest.mark.parametrize("proxy", [{"HTTPS_PROXY": "http://p:3128"}, {"all_proxy": "socks5://p:1080"},
                                   {"ftp_proxy": "http://p:3128", "other": "x"}])
def test_any_proxy_variable_in_either_case_counts(proxy):
    assert no_proxy(proxy, ["gpu-a01"])["NO_PROXY"] == "localhost,127.0.0.1,::1,gpu-a01"


@pytest.mark.parametrize("own", [{"no_proxy": ".cluster.internal"}, {"NO_PROXY": ".cluster.internal"}, {"no_proxy": ""}])
def test_the_operators_own_no_proxy_is_kept_as_it_is(own):
    assert no_proxy({**PROXY, **own}, HOSTS) == {**PROXY, **own}


@pytest.mark.parametrize("env", [{}, None, {"http_proxy": ""}, {"PIP_INDEX_URL": "https://pypi.internal/simple"}])
def test_without_a_proxy_nothing_is_added(env):
    assert no_proxy(env, HOSTS) == (env or {})


@pytest.mark.parametrize("env, hosts, words", [
    ("http://proxy:3128", [], ["must be a mapping", "str", "gpufleet_proxy_env"]),
    ({"http_proxy": ["a"]}, [], ["http_proxy must be strings"]),
    (PROXY, "gpu-a01", ["hosts must be a list", "str"]),
    (PROXY, ["gpu-a01,gpu-a02"], ["'gpu-a01,gpu-a02' is not one host name"]),
])
def test_bad_input_names_what_is_wrong(env, hosts, words):
    with pytest.raises(AnsibleFilterError) as err:
        no_proxy(env, hosts)
    assert all(word in str(err.value) for word in words), str(err.value)


def test_thousands_of_hosts_ask_for_a_domain_suffix():
    hosts = [f"gpu-node-{i:05d}.rack{i // 64:03d}.cluster.internal" for i in range(2000)]
    with pytest.raises(AnsibleFilterError, match=r"2000 inventory hosts .* domain suffix \(.cluster.internal\)"):
        no_proxy(PROXY, hosts)
    assert len(no_proxy(PROXY, hosts[:1000])["no_proxy"]) < 65536
