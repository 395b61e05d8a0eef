# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""``proxy_env | gpufleet.cluster.no_proxy(hosts)``: the cluster's own hosts kept off the proxy.

When the operator sets a proxy (``http_proxy``, ``https_proxy``, ``ftp_proxy``, ``all_proxy``, in either
case) and no ``no_proxy``/``NO_PROXY`` of their own, both are added: the loopback names and addresses,
then the given inventory host names and addresses, each once, in order. apt matches ``no_proxy`` by name
suffix only and Python's urllib too, so the list names every host rather than a network (CIDR).
An operator's own no_proxy, even an empty one, is kept as it is.
"""

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

from ansible.errors import AnsibleFilterError

PROXY_NAMES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy")
LOOPBACK = ("localhost", "127.0.0.1", "::1")
# One environment string may not exceed the kernel's MAX_ARG_STRLEN (128 KiB); stay well below it.
MAX_NO_PROXY = 64 * 1024


def _check_env(proxy_env) -> dict:
    if proxy_env is None:
        return {}
    if not isinstance(proxy_env, dict):
        raise AnsibleFilterError(
            f"no_proxy: the proxy environment (gpufleet_proxy_env or <role>_proxy_env) must be a mapping such as "
            f"{{http_proxy: 'http://proxy.example.internal:3128', https_proxy: ...}}, not a {type(proxy_env).__name__}")
    bad = sorted(str(k) for k, v in proxy_env.items() if not isinstance(k, str) or not isinstance(v, (str, int)))
    if bad:
        raise AnsibleFilterError(f"no_proxy: the proxy environment's {', '.join(bad)} must be strings (environment "
                                 "variable names and values)")
    return {key: str(value) for key, value in proxy_env.items()}


def _check_hosts(hosts) -> list:
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError(f"no_proxy: hosts must be a list of host names and addresses, not a {type(hosts).__name__}")
    names = []
    for host in hosts:
        text = str(host).strip() if host is not None else ""
        if any(c in text for c in ", \t\n"):
            raise AnsibleFilterError(f"no_proxy: {host!r} is not one host name or address (it holds a comma or a space)")
        if text and text not in names:
            names.append(text)
    return names


def no_proxy(proxy_env, hosts=()):
    env = _check_env(proxy_env)
    names = _check_hosts(hosts)
    uses_proxy = any(env.get(name) or env.get(name.upper()) for name in PROXY_NAMES)
    if not uses_proxy or "no_proxy" in env or "NO_PROXY" in env:
        return env
    value = ",".join(dict.fromkeys([*LOOPBACK, *names]))
    if len(value) > MAX_NO_PROXY:
        raise AnsibleFilterError(
            f"no_proxy: the {len(names)} inventory hosts make a no_proxy of {len(value)} characters, more than an "
            f"environment variable may safely carry ({MAX_NO_PROXY}). Set no_proxy in gpufleet_proxy_env yourself, "
            "with the cluster's domain suffix (.cluster.internal) instead of every host.")
    return {**env, "no_proxy": value, "NO_PROXY": value}


class FilterModule(object):
    def filters(self):
        return {"no_proxy": no_proxy}
