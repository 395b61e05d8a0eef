# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Which network the bandwidth pair tests measure, with which tool and devices: pure functions.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

The tests measure the network the training job will use, read the way NCCL reads it:

- **RDMA** when every node has an Active port on the compute fabric: the HCAs in ``NCCL_IB_HCA`` of
  /etc/nccl.conf (the nccl_config role writes it from the ports that are up), else the compute-fabric
  ports rdma_info reports Active (InfiniBand ports on InfiniBand nodes, the fastest RoCE NIC type
  otherwise, as nccl_config chooses). Tool: perftest's ``ib_write_bw`` (or ``ib_read_bw``), one test
  per rail: the k-th HCA of one node against the k-th HCA of the other, as rail-optimised fabrics are
  wired. Each figure is judged against the slower port's rate.
- **TCP**, a labelled fallback, when some node has no Active RDMA port (or /etc/nccl.conf sets
  ``NCCL_IB_DISABLE=1``): ``iperf3`` between the addresses of the interface NCCL's socket transport
  uses (``NCCL_SOCKET_IFNAME``, else the interface that holds the node's address).

Every test and figure carries the network, the tool and the devices it used.
"""

from __future__ import annotations

import shlex

from ansible_collections.gpufleet.cluster.plugins.module_utils.figures import judge_figure
from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_env import classify_ports, natural_key
from ansible_collections.gpufleet.cluster.plugins.module_utils.tool_address import check_test_addresses

RDMA_TOOLS = ("ib_write_bw", "ib_read_bw")
TCP_TOOL = "iperf3"
NETWORKS = ("auto", "rdma", "tcp")


def parse_nccl_conf(text):
    """``{KEY: value}`` from /etc/nccl.conf (``KEY=value`` lines; ``#`` starts a comment)."""
    env = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            env[key.strip()] = value.strip()
    return env


def _nccl_list(spec):
    """(mode, [names]) for an NCCL interface/HCA list: ``=`` exact, ``^`` exclude, else prefixes."""
    spec = (spec or "").strip()
    mode = "prefix"
    if spec.startswith("^"):
        mode, spec = "exclude", spec[1:]
    elif spec.startswith("="):
        mode, spec = "exact", spec[1:]
    return mode, [s.strip() for s in spec.split(",") if s.strip()]


def _listed(mode, names, candidate):
    if mode == "exact":
        return candidate in names
    hit = any(candidate.startswith(n) for n in names)
    return not hit if mode == "exclude" else hit


def socket_endpoint(conf_env, interfaces, address, override=None):
    """``{interface, address, source, error}``: where NCCL's socket transport runs on this node.

    ``interfaces`` maps interface names to their IPv4 addresses. ``override`` (the role's interface
    knob) wins over ``NCCL_SOCKET_IFNAME`` of /etc/nccl.conf; without either, the interface that holds
    ``address`` (the node's address) is the one, as NCCL would pick for its bootstrap.
    """
    conf_env = conf_env or {}
    interfaces = {name: [a for a in addrs or [] if a] for name, addrs in (interfaces or {}).items()}
    spec = override or conf_env.get("NCCL_SOCKET_IFNAME")
    if spec:
        origin = "bandwidth_isolation_interface" if override else "/etc/nccl.conf"
        mode, names = _nccl_list(spec)
        hits = sorted((n for n in interfaces if n != "lo" and interfaces[n] and _listed(mode, names, n)),
                      key=natural_key)
        if not hits:
            return {"interface": None, "address": None, "source": "NCCL_SOCKET_IFNAME=%s (%s)" % (spec, origin),
                    "error": "no interface with an IPv4 address matches NCCL_SOCKET_IFNAME=%s (%s); interfaces: %s"
                             % (spec, origin, ", ".join(sorted(interfaces)) or "none")}
        name = next((n for n in hits if address in interfaces[n]), hits[0])
        chosen = address if address in interfaces[name] else interfaces[name][0]
        return {"interface": name, "address": chosen, "source": "NCCL_SOCKET_IFNAME=%s (%s)" % (spec, origin),
                "error": None}
    for name in sorted(interfaces, key=natural_key):
        if address in interfaces[name]:
            return {"interface": name, "address": address, "error": None,
                    "source": "the interface holding the node's address %s (NCCL_SOCKET_IFNAME is not set)" % address}
    return {"interface": None, "address": None, "source": "the node's address %s" % address,
            "error": "no interface holds the node's address %s and NCCL_SOCKET_IFNAME is not set" % address}


def _chosen(port, mode, names):
    """Whether a port is one NCCL would use under the HCA list (``mlx5_0`` or ``mlx5_0:1`` entries)."""
    if mode is None:
        return port["role"] == "compute"
    keys = (port["ca"], "%s:%s" % (port["ca"], port["port"]))
    if mode == "exclude":
        return all(_listed(mode, names, key) for key in keys)
    return any(_listed(mode, names, key) for key in keys)


def rdma_endpoint(cas, conf_env, override=None):
    """``{devices: [{ca, port, rate_gbps, link_layer}], source, reason}``: the HCA ports NCCL uses here.

    ``override`` (a list of ``mlx5_0`` / ``mlx5_0:1``) wins; else ``NCCL_IB_HCA`` of /etc/nccl.conf; else
    the compute-fabric ports (nccl_env.classify_ports). Only Active, LinkUp ports count. ``reason`` says
    why the list is empty.
    """
    conf_env = conf_env or {}
    if not override and str(conf_env.get("NCCL_IB_DISABLE", "")).strip() == "1":
        return {"devices": [], "source": "/etc/nccl.conf",
                "reason": "NCCL_IB_DISABLE=1 in /etc/nccl.conf: NCCL uses TCP sockets between the nodes"}
    ports = classify_ports(cas or [])
    if override:
        mode, names = "exact", [str(o) for o in override]
        source = "bandwidth_isolation_rdma_devices"
    elif conf_env.get("NCCL_IB_HCA"):
        mode, names = _nccl_list(conf_env["NCCL_IB_HCA"])
        source = "NCCL_IB_HCA=%s (/etc/nccl.conf)" % conf_env["NCCL_IB_HCA"]
    else:
        mode, names, source = None, [], "the compute-fabric ports rdma_info reports Active"
    devices = []
    for p in ports:
        if not p["active"]:
            continue
        if _chosen(p, mode, names):
            devices.append({"ca": p["ca"], "port": p["port"], "rate_gbps": p["rate_gbps"],
                            "link_layer": p["link_layer"]})
    devices.sort(key=lambda d: (natural_key(d["ca"]), d["port"]))
    reason = None
    if not devices:
        if not ports:
            reason = "no RDMA device (rdma_info found no HCA)"
        else:
            reason = "no Active port among %s (%s)" % (
                ", ".join("%s:%s %s" % (p["ca"], p["port"], p["state"]) for p in ports), source)
    return {"devices": devices, "source": source, "reason": reason}


def network_plan(nodes, endpoints, requested="auto", rdma_tool="ib_write_bw"):
    """``{network, tool, rails, nodes, excluded, not_checked, reason, note}``: what the pair tests measure,
    and on which nodes.

    ``endpoints`` maps each node to ``{rdma: rdma_endpoint(...), tcp: socket_endpoint(...)}``. ``auto``
    takes RDMA when every node has an Active fabric port, else the TCP fallback for all of them (one
    network for the whole search: figures of different networks cannot name a slow node together).
    ``rdma`` measures the nodes with ports and leaves the others out with the reason; ``tcp`` forces the
    fallback. ``rails`` is the fewest fabric ports any measured node has (rail k pairs the k-th ports).
    """
    if requested not in NETWORKS:
        raise ValueError("network must be one of %s, got %r" % (", ".join(NETWORKS), requested))
    if rdma_tool not in RDMA_TOOLS:
        raise ValueError("the RDMA tool must be one of %s, got %r" % (", ".join(RDMA_TOOLS), rdma_tool))
    nodes = list(nodes)
    without = {n: endpoints[n]["rdma"]["reason"] for n in nodes if not endpoints[n]["rdma"]["devices"]}
    if requested == "rdma" or (requested == "auto" and nodes and not without):
        measured = [n for n in nodes if n not in without]
        rails = min([len(endpoints[n]["rdma"]["devices"]) for n in measured] or [0])
        if requested == "rdma":
            reason = "RDMA requested (bandwidth_isolation_network: rdma)"
        else:
            reason = "every node has an Active RDMA port"
        return _with_notes({"network": "rdma", "tool": rdma_tool, "rails": rails, "nodes": measured,
                            "excluded": {n: "not measured on RDMA: %s" % r for n, r in without.items()},
                            "reason": reason})
    excluded = {n: "not measured on TCP: %s" % endpoints[n]["tcp"]["error"] for n in nodes
                if endpoints[n]["tcp"].get("error")}
    if requested == "tcp":
        reason = "TCP requested (bandwidth_isolation_network: tcp)"
    else:
        reason = "TCP fallback: no Active RDMA port on %s" % "; ".join(
            "%s (%s)" % (n, without[n]) for n in sorted(without, key=natural_key))
    return _with_notes({"network": "tcp", "tool": TCP_TOOL, "rails": 1,
                        "nodes": [n for n in nodes if n not in excluded], "excluded": excluded, "reason": reason})


def _with_notes(plan):
    """The plan with what labels it in reports: ``note`` and ``not_checked`` (one entry per node left out)."""
    if plan["network"] == "rdma":
        plan["note"] = ("RDMA between the nodes' fabric ports: perftest %s, one test per rail (the k-th port of "
                        "each node), each figure judged against the slower port's rate and the links' median"
                        % plan["tool"])
    else:
        plan["note"] = ("TCP FALLBACK, not RDMA: iperf3 between the addresses of the interface NCCL's socket "
                        "transport uses, judged against the links' median (%s)" % plan["reason"])
    plan["not_checked"] = [{"check": "pair tests", "node": node, "reason": why}
                           for node, why in sorted(plan["excluded"].items(), key=lambda kv: natural_key(kv[0]))]
    return plan


def link_tests(links, plan, endpoints, port_base):
    """One test per directed link ({src, dst}), data flowing src -> dst, with the ends' roles and devices.

    ib_write_bw and iperf3 send from the client: the client runs on src. ib_read_bw reads from the server:
    the server runs on src. Each test has one rail per port pair (rail k on TCP port ``port_base + k``);
    a link from a node to itself is that node's loopback test.
    """
    tests = []
    for link in links:
        src, dst = link["src"], link["dst"]
        client, server = (dst, src) if plan["tool"] == "ib_read_bw" else (src, dst)
        test = {"src": src, "dst": dst, "client": client, "server": server, "network": plan["network"],
                "tool": plan["tool"], "rails": []}
        if plan["network"] == "rdma":
            test["server_address"] = endpoints[server]["address"]
            test["bind"] = None
            for rail in range(plan["rails"]):
                cdev = endpoints[client]["rdma"]["devices"][rail]
                sdev = endpoints[server]["rdma"]["devices"][rail]
                test["rails"].append({"rail": rail, "port": int(port_base) + rail,
                                      "client_device": cdev["ca"], "client_ib_port": cdev["port"],
                                      "server_device": sdev["ca"], "server_ib_port": sdev["port"],
                                      "line_rate_gbps": _slower(cdev.get("rate_gbps"), sdev.get("rate_gbps"))})
        else:
            test["server_address"] = endpoints[server]["tcp"]["address"]
            test["bind"] = endpoints[client]["tcp"]["address"]
            test["rails"].append({"rail": 0, "port": int(port_base),
                                  "client_device": endpoints[client]["tcp"]["interface"],
                                  "server_device": endpoints[server]["tcp"]["interface"],
                                  "line_rate_gbps": None})
        tests.append(test)
    return tests


def _slower(a, b):
    rates = [r for r in (a, b) if r]
    return min(rates) if rates else None


def test_figure(result, rate_fraction=None):
    """A link figure from one bandwidth_test module result: ``{src, dst, gbps, network, tool, rails,
    line_rate_gbps, rate_floor_gbps}``. ``gbps`` is the slowest rail (a slow HCA makes its link slow);
    a rail with no figure makes it None, which the verdict counts as slow, never as a pass.
    """
    test = (result or {}).get("test") or {}
    rails = []
    by_rail = {r.get("rail"): r for r in (result or {}).get("results") or []}
    for rail in test.get("rails") or []:
        measured = by_rail.get(rail["rail"]) or {}
        src_side = "client" if test.get("client") == test.get("src") else "server"
        dst_side = "server" if src_side == "client" else "client"
        # figures.judge_figure: a rail figure that is no figure (NaN, text, absurd) is no figure, with the reason.
        gbps, problem = judge_figure(measured.get("gbps"), "rail %s %s" % (rail["rail"], rail.get(src_side + "_device")),
                                     "Gb/s", zero_ok=True)
        problem = problem if measured.get("gbps") is not None else None
        rails.append({"rail": rail["rail"], "src_device": rail.get(src_side + "_device"),
                      "dst_device": rail.get(dst_side + "_device"), "port": rail.get("port"),
                      "line_rate_gbps": rail.get("line_rate_gbps"), "gbps": gbps,
                      "samples_gbps": measured.get("samples_gbps", []),
                      "error": measured.get("error") or problem or ((result or {}).get("msg") if not by_rail else None)})
    figures = [r["gbps"] for r in rails]
    line = [r["line_rate_gbps"] for r in rails if r["line_rate_gbps"]]
    entry = {"src": test.get("src"), "dst": test.get("dst"), "network": test.get("network"), "tool": test.get("tool"),
             "gbps": None if (not figures or any(f is None for f in figures)) else min(figures),
             "rails": rails, "line_rate_gbps": min(line) if line else None, "rate_floor_gbps": None}
    if rate_fraction and entry["line_rate_gbps"] and entry["src"] != entry["dst"]:
        entry["rate_floor_gbps"] = round(float(rate_fraction) * entry["line_rate_gbps"], 3)
    errors = sorted({r["error"] for r in rails if r["error"]})
    if errors:
        entry["error"] = "; ".join(errors)
    return entry


def server_argv(test, rail, seconds, size=None, qps=None):
    """The server's command for one rail (perftest answers one client, then exits; iperf3 serves on)."""
    check_test_addresses(test)
    if test["tool"] == TCP_TOOL:
        return [TCP_TOOL, "-s", "-B", test["server_address"], "-p", str(rail["port"])]
    return [test["tool"], "-d", rail["server_device"], "-i", str(rail["server_ib_port"]), "-p", str(rail["port"])] \
        + _perftest_options(seconds, size, qps)


def servers_argv(test, seconds, size=None, qps=None, repeats=1):
    """One command serving every rail of a perftest test side by side, each rail's server once per repeat.

    One transient unit per test rather than one per rail: starting a unit is a round trip to the node, and a
    test on an eight-HCA node would make eight. The command exits with the last failing server's status.
    """
    script = "pids=''"
    for rail in test["rails"]:
        server = " ".join(shlex.quote(arg) for arg in server_argv(test, rail, seconds, size, qps))
        script += "; (for _ in $(seq %d); do %s || exit $?; done) & pids=\"$pids $!\"" % (int(repeats), server)
    return ["sh", "-c", script + '; rc=0; for pid in $pids; do wait "$pid" || rc=$?; done; exit $rc']


def client_argv(test, rail, seconds, size=None, qps=None):
    """The client's command for one rail: it connects to the server's address and prints the figure."""
    check_test_addresses(test)
    if test["tool"] == TCP_TOOL:
        argv = [TCP_TOOL, "-c", test["server_address"], "-p", str(rail["port"]), "-t", _seconds(seconds), "-J"]
        return argv + (["-B", test["bind"]] if test.get("bind") else [])
    return [test["tool"], "-d", rail["client_device"], "-i", str(rail["client_ib_port"]), "-p", str(rail["port"])] \
        + _perftest_options(seconds, size, qps) + [test["server_address"]]


def _perftest_options(seconds, size, qps):
    argv = ["-D", _seconds(seconds), "--report_gbits", "-F"]
    if size:
        argv += ["-s", str(int(size))]
    if qps:
        argv += ["-q", str(int(qps))]
    return argv


def _seconds(value):
    """Whole seconds, at least one: perftest's -D and iperf3's -t take integers."""
    return str(max(1, int(round(float(value)))))
