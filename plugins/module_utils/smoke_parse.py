# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Smoke test: what the job printed, read (pure functions), and the text helpers the smoke modules share.

``parse_nccl_debug`` reads NCCL_DEBUG=INFO lines (version, networks, the transports channels really
used); ``diagnose_rollcall`` names the nodes a failed roll call points at. No Ansible import, no I/O.
"""

from __future__ import absolute_import, division, print_function

import math
import re

__metaclass__ = type


def slug(text):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    out = re.sub(r"[^a-z0-9]+", "-", str(text or "").lower()).strip("-")
    return out or "unknown"


def human_bytes(n):
    """8 -> '8 B', 1048576 -> '1 MiB'."""
    n = int(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def _fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return ("%." + str(digits) + "f") % value
    return str(value)


_NCCL_VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+(?:\.\d+)?))?")
_USING_NETWORK_RE = re.compile(r"NCCL INFO Using network (\S+(?: \S+)?)")
_NET_IB_RE = re.compile(r"NET/IB\s*:\s*Using\s+(.*)")
_IB_DEV_RE = re.compile(r"\[\d+\]([\w.-]+):(\d+)/(IB|RoCE)")
_NET_SOCKET_RE = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)")
_CHANNEL_RE = re.compile(r"Channel \d+/\d+ : .* via (\S+)")
# A queue pair NCCL connected: "NET/IB: Dev 1 Port 1 qpn 3038 mtu 5 LID 37" on InfiniBand, "... mtu 5 GID 3 (...)" on
# RoCE (net_ib.cc prints the LID on IB, the GID index on RoCE). Evidence of the link layer when a trimmed log lost the
# "NET/IB : Using [0]mlx5_0:1/IB" line.
_IB_QP_RE = re.compile(r"NET/IB: .*\bmtu \d+ (LID|GID)\b")
# What inter_node says when NCCL's IB verbs transport carried the traffic but the log names no link layer.
IB_OR_ROCE = "IB/RoCE"


def _ib_kind(layers):
    """NCCL's NET/IB transport runs on InfiniBand and on RoCE: name the one the log shows, IB_OR_ROCE when it
    shows neither (a log trimmed before the "NET/IB : Using" line), never a guess."""
    if not layers:
        return IB_OR_ROCE
    return "RoCE" if layers == {"RoCE"} else "IB"


def parse_nccl_debug(lines):
    """NCCL_DEBUG=INFO lines -> {version, cuda, networks, ib_devices, transports, inter_node, gdr, warnings}.

    ``transports`` is the set of paths NCCL really connected channels over: P2P, SHM, NVLS,
    CollNet, NET/IB, NET/RoCE, NET/Socket (and NET/<plugin>). ``inter_node`` is IB, RoCE,
    Socket, the plugin name, or None when no channel crossed a network (one node); ``IB/RoCE`` when
    the IB verbs transport carried it but the log (trimmed) names no link layer, neither in the
    "NET/IB : Using" line nor in a queue-pair line (LID on IB, GID on RoCE).
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    out = {"version": None, "cuda": None, "networks": [], "ib_devices": [], "socket_devices": [],
           "transports": [], "inter_node": None, "gdr": False, "warnings": []}
    transports = set()
    link_layers = {}
    qp_layers = set()
    for line in lines or []:
        m = _IB_QP_RE.search(line)
        if m:
            qp_layers.add("IB" if m.group(1) == "LID" else "RoCE")
        m = _NCCL_VERSION_RE.search(line)
        if m and out["version"] is None:
            out["version"], out["cuda"] = m.group(1), m.group(2)
        m = _USING_NETWORK_RE.search(line)
        if m and m.group(1) not in out["networks"]:
            out["networks"].append(m.group(1))
        m = _NET_IB_RE.search(line)
        if m:
            for dev, port, layer in _IB_DEV_RE.findall(m.group(1)):
                link_layers[dev] = layer
                entry = {"device": dev, "port": int(port), "link_layer": layer}
                if entry not in out["ib_devices"]:
                    out["ib_devices"].append(entry)
        m = _NET_SOCKET_RE.search(line)
        if m:
            for dev in re.findall(r"\[\d+\]([\w.:-]+?)(?::[\d.]+)?<", m.group(1)):
                if dev not in out["socket_devices"]:
                    out["socket_devices"].append(dev)
        if "NCCL WARN" in line:
            text = line.split("NCCL WARN", 1)[1].strip()
            if text not in out["warnings"] and len(out["warnings"]) < 50:
                out["warnings"].append(text)
        if "NVLS" in line and ("NVLS comm" in line or "via NVLS" in line or "Connected NVLS" in line):
            transports.add("NVLS")
        m = _CHANNEL_RE.search(line)
        if m:
            path = m.group(1)
            head = path.split("/")
            if head[0] == "P2P":
                transports.add("P2P")
            elif head[0] == "SHM":
                transports.add("SHM")
            elif head[0] == "NVLS":
                transports.add("NVLS")
            elif head[0].upper() == "COLLNET":
                transports.add("CollNet")
            elif head[0] == "NET" and len(head) > 1:
                # IB is resolved to IB or RoCE after the loop: the queue-pair lines come after the channel lines.
                transports.add("NET/" + head[1])
                if "GDRDMA" in path:
                    out["gdr"] = True
    if "NET/IB" in transports:
        transports.discard("NET/IB")
        transports.add("NET/" + _ib_kind(set(link_layers.values()) | qp_layers))
    out["transports"] = sorted(transports)
    nets = [t.split("/", 1)[1] for t in out["transports"] if t.startswith("NET/")]
    if nets:
        # The slowest one wins: a single node on sockets drags every ring through TCP.
        for pick in ("Socket", "RoCE", "IB", IB_OR_ROCE):
            if pick in nets:
                out["inter_node"] = pick
                break
        else:
            out["inter_node"] = nets[0]
    return out


def diagnose_rollcall(expected, views):
    """Name the nodes a failed roll call points at.

    ``views``: {node: roll-call view or None}. A node is named when it reached none of its peers
    and every peer that reported could not reach it (a cut link), when most peers could not reach
    it, or when it never reported at all. Returns [{node, reason}] in inventory order.
    """
    findings = []
    for node in expected:
        others = [o for o in expected if o != node]
        if not others:
            continue
        view = views.get(node)
        reporters = [o for o in others if views.get(o)]
        complaints = [o for o in reporters
                      if node in (views[o].get("unreachable") or []) or node in (views[o].get("not_heard_from") or [])]
        if view is None:
            if reporters and complaints:
                findings.append({"node": node, "reason": "never joined: %s could not reach it and it reported nothing"
                                 % ", ".join(complaints)})
            continue
        if not reporters:
            # Every peer is silent: they are the ones to name, not this node.
            continue
        reached_none = not set(view.get("reached") or []) & set(reporters)
        if reached_none and len(complaints) == len(reporters):
            reason = "cut off: reached none of its %d peer(s)" % len(others)
            if complaints:
                reason += "; %s could not reach it" % ", ".join(complaints)
            findings.append({"node": node, "reason": reason})
        elif reporters and len(complaints) * 2 > len(reporters):
            findings.append({"node": node, "reason": "unreachable from %s" % ", ".join(complaints)})
    if not findings:
        pairs = []
        for node in expected:
            view = views.get(node) or {}
            for peer in view.get("unreachable") or []:
                pair = tuple(sorted((node, peer)))
                if pair not in pairs:
                    pairs.append(pair)
        for a, b in pairs:
            findings.append({"node": a, "reason": "cannot reach %s (link %s <-> %s)" % (b, a, b)})
    return findings


def _addresses_in(text):
    return set(re.findall(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])", text or ""))
