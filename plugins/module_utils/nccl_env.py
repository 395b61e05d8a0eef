# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Derive the NCCL environment of a node from its RDMA and topology facts (pure).

PRIVATE to the gpufleet.cluster collection; used by the ``nccl_env`` filter and by health.py.

Which HCAs are the compute fabric (documented in docs/health-checks.md, "NCCL environment"):

1. Ports the operator lists (``"mlx5_0"`` or ``"mlx5_0:1"``) are the fabric; nothing else is.
2. Otherwise, when any port's link layer is InfiniBand, the fabric is every InfiniBand port.
   Ethernet RDMA ports on such a node (BlueField bonds, CX-6 Dx front-end NICs) carry storage
   or management traffic and are left out: NCCL would otherwise stripe over a slower rail.
3. Otherwise (RoCE only) ports are grouped by CA type and the fabric is the group with the
   highest rate (ties: the larger group). Down ports report a placeholder rate (40), so a
   group's rate is the best rate any of its ports reports.

NCCL_IB_HCA lists the Active/LinkUp fabric ports in GPU-affinity order (GPU0's nearest HCA first,
by ``nvidia-smi topo -m`` distance), with the ``=`` prefix so ``mlx5_1`` does not also match
``mlx5_10`` (NCCL matches prefixes otherwise).
"""

from __future__ import annotations

import re

# nvidia-smi topo -m distance tokens, nearest first.
DISTANCE = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
# GPUDirect RDMA across the CPU interconnect is slower than bouncing through host memory.
GDR_LEVEL_CAP = "PHB"
DEFAULT_ROCE_GID_INDEX = 3


def natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(name))]


def _up(port):
    return port.get("state") == "Active" and port.get("physical_state") in (None, "LinkUp")


def classify_ports(cas, expected=None):
    """Flatten ``cas`` into ports tagged ``role`` (``compute``/``other``) and ``reason``."""
    ports = []
    for ca in cas or []:
        for port in ca.get("ports") or []:
            ports.append({
                "ca": ca.get("ca"),
                "port": port.get("port"),
                "ca_type": ca.get("ca_type"),
                "state": port.get("state"),
                "physical_state": port.get("physical_state"),
                "rate_gbps": port.get("rate_gbps"),
                "link_layer": port.get("link_layer"),
                "active": _up(port),
            })
    if expected:
        wanted = {str(e) for e in expected}
        for p in ports:
            hit = p["ca"] in wanted or "%s:%s" % (p["ca"], p["port"]) in wanted
            p["role"] = "compute" if hit else "other"
            p["reason"] = "listed by the operator" if hit else "not listed by the operator"
        return ports
    if any((p["link_layer"] or "").lower() == "infiniband" for p in ports):
        for p in ports:
            ib = (p["link_layer"] or "").lower() == "infiniband"
            p["role"] = "compute" if ib else "other"
            p["reason"] = ("InfiniBand fabric" if ib else
                           "Ethernet port on an InfiniBand node (storage/front-end)")
        return ports
    groups = {}
    for p in ports:
        groups.setdefault(p["ca_type"], []).append(p)
    if groups:
        best = max(groups, key=lambda t: (max([q["rate_gbps"] or 0 for q in groups[t]]),
                                          len(groups[t])))
        best_rate = max([q["rate_gbps"] or 0 for q in groups[best]])
        for p in ports:
            mine = p["ca_type"] == best
            p["role"] = "compute" if mine else "other"
            p["reason"] = ("RoCE fabric (%s, %s Gb/s)" % (best, best_rate) if mine else
                           "slower RoCE NIC type %s (fabric is %s at %s Gb/s)" % (
                               p["ca_type"], best, best_rate))
    return ports


# ---------------------------------------------------------------------------------------------
# Topology: GPU <-> NIC affinity


def _token(cell):
    cell = str(cell or "").strip().upper()
    if cell.startswith("NV"):
        return "NV"
    return cell


def gpu_nic_affinity(topology):
    """``{gpu_index: {hca_name: token}}`` from a ``parse_nvidia_smi_topo`` result (or {}).

    Uses each GPU's ``nics`` map (NIC names already resolved through the NIC Legend); a column
    still called ``NICn`` (no legend) cannot be named to NCCL and is skipped.
    """
    if not topology:
        return {}
    out = {}
    for gpu in topology.get("gpus") or []:
        index = gpu.get("index")
        if index is None:
            continue
        for name, cell in (gpu.get("nics") or {}).items():
            tok = _token(cell)
            if tok in DISTANCE and not re.match(r"^NIC\d+$", str(name)):
                out.setdefault(int(index), {})[str(name)] = tok
    return out


def affinity_order(hcas, affinity):
    """Order HCA names: for GPU0, 1, ... its nearest unused HCA; then the rest in name order.

    Returns ``(ordered, pairs)`` where pairs is ``[(gpu, hca, token)]``.
    """
    remaining = sorted(set(hcas), key=natural_key)
    ordered, pairs = [], []
    for gpu in sorted(affinity):
        options = [(DISTANCE[tok], natural_key(hca), hca, tok)
                   for hca, tok in affinity[gpu].items() if hca in remaining]
        if not options:
            continue
        hca, tok = min(options)[2:]
        if DISTANCE[tok] >= DISTANCE["SYS"]:
            continue  # no local HCA for this GPU; don't claim one
        remaining.remove(hca)
        ordered.append(hca)
        pairs.append((gpu, hca, tok))
    return ordered + remaining, pairs


# ---------------------------------------------------------------------------------------------
# The environment


def parse_gid_lines(text):
    """``{"mlx5_0:1": [{index, gid, type}]}`` from ``ca:port<TAB>index<TAB>gid<TAB>type`` lines
    (what the nccl_config role prints from /sys/class/infiniband/*/ports/*/gids and gid_attrs/types).
    Empty and all-zero GIDs are dropped."""
    tables = {}
    for line in (text or "").splitlines():
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 3 or not parts[1].strip().isdigit():
            continue
        gid = parts[2].strip().lower()
        if not gid or set(gid) <= {"0", ":"}:
            continue
        tables.setdefault(parts[0].strip(), []).append({
            "index": int(parts[1]), "gid": gid,
            "type": parts[3].strip() if len(parts) > 3 and parts[3].strip() else None})
    for table in tables.values():
        table.sort(key=lambda g: g["index"])
    return tables


def _gid_index(fabric, gid_tables, warnings):
    """Most common RoCE v2 IPv4 GID index over the fabric ports; default 3 with a warning."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import roce_gid_index

    found = {}
    for p in fabric:
        table = (gid_tables or {}).get("%s:%s" % (p["ca"], p["port"])) or (gid_tables or {}).get(p["ca"])
        if not table:
            continue
        index = roce_gid_index({"gids": table})
        if index is not None:
            found.setdefault(index, []).append(p["ca"])
    if not found:
        warnings.append(
            "RoCE GID table not readable: NCCL_IB_GID_INDEX defaults to %d (RoCE v2 IPv4 on a stock "
            "ConnectX with one IPv4 address); check show_gids and override with nccl_config_env_overrides"
            % DEFAULT_ROCE_GID_INDEX)
        return DEFAULT_ROCE_GID_INDEX, "default"
    index = max(found, key=lambda i: (len(found[i]), -i))
    if len(found) > 1:
        warnings.append("RoCE v2 IPv4 GID index differs between HCAs (%s); using %d" % (
            "; ".join("%d: %s" % (i, ",".join(found[i])) for i in sorted(found)), index))
    return index, "gid_table"


def _pick_socket_ifname(socket_ifname, nics):
    if socket_ifname:
        return socket_ifname
    skip = re.compile(r"^(lo|docker|virbr|veth|br-|cni|flannel|cali|ib)")
    for nic in nics or []:
        if nic.get("link") in (True, "up", "yes") and not skip.match(nic.get("name") or ""):
            return nic["name"]
    return None


def _hca_entries(active, affinity):
    """``(["mlx5_0:1", ...] in GPU-affinity order, [(gpu, hca, distance)])``."""
    names, pairs = affinity_order([p["ca"] for p in active], affinity)
    port_of = {}
    for p in active:
        port_of.setdefault(p["ca"], []).append(p["port"])
    return ["%s:%s" % (name, port) for name in names for port in sorted(port_of[name])], pairs


def _gdr_level(pairs, gdr_level):
    """The operator's level, else the worst GPU-HCA distance, capped at GDR_LEVEL_CAP, at least PIX."""
    if gdr_level:
        return gdr_level
    worst = max([DISTANCE[pair[2]] for pair in pairs] or [DISTANCE[GDR_LEVEL_CAP]])
    worst = min(worst, DISTANCE[GDR_LEVEL_CAP])
    return [k for k, v in DISTANCE.items() if v == max(worst, DISTANCE["PIX"])][0]


def _rdma_env(active, ports, rdma_info, topology, gid_tables, gdr_level, env, warnings):
    """NCCL over the Active fabric ports: HCA list, GID index on RoCE, GPUDirect level.
    Returns ``(transport, entries, pairs, gid_source)``; sets ``env`` and appends ``warnings``."""
    layers = {(p["link_layer"] or "").lower() for p in active}
    transport = "ib" if layers == {"infiniband"} else "roce"
    if len(layers) > 1:
        transport = "mixed"
        warnings.append("Fabric ports mix InfiniBand and Ethernet link layers; NCCL cannot "
                        "stripe across both well: list the HCAs in nccl_config_ib_hcas")
    affinity = gpu_nic_affinity(topology)
    entries, pairs = _hca_entries(active, affinity)
    env["NCCL_IB_HCA"] = "=" + ",".join(entries)
    if not affinity:
        warnings.append("No GPU/NIC topology: NCCL_IB_HCA is in name order, not GPU-affinity order")
    gid_source = None
    if transport in ("roce", "mixed"):
        index, gid_source = _gid_index([p for p in active if (p["link_layer"] or "").lower()
                                        == "ethernet"], gid_tables, warnings)
        env["NCCL_IB_GID_INDEX"] = str(index)
    if rdma_info.get("peermem_loaded"):
        env["NCCL_NET_GDR_LEVEL"] = _gdr_level(pairs, gdr_level)
    else:
        warnings.append(
            "nvidia_peermem is not loaded: without GPUDirect RDMA every inter-node transfer is "
            "staged through host memory (NCCL uses GDR only through DMA-BUF where the kernel and "
            "driver support it)")
    down = ["%s:%s" % (p["ca"], p["port"]) for p in ports if p["role"] == "compute" and not p["active"]]
    if down:
        warnings.append("Fabric ports not Active, left out of NCCL_IB_HCA: %s" % ", ".join(down))
    return transport, entries, pairs, gid_source


def _socket_warning(ifname, nics):
    speed = None
    for nic in nics or []:
        if nic.get("name") == ifname:
            speed = nic.get("speed_mbps")
    return (
        "No Active RDMA port: NCCL falls back to TCP sockets over %s%s. Inter-node collectives "
        "are then limited to that NIC's TCP throughput (one 400 Gb/s IB rail moves about 50 GB/s; "
        "a 25 GbE socket path about 3 GB/s) and pay kernel-copy latency on every step" % (
            ifname or "an unnamed interface", " (%s Mb/s)" % speed if speed else ""))


def _apply_overrides(env, overrides):
    """Operator values win; a None value removes a derived key."""
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[str(key)] = str(value) if not isinstance(value, bool) else ("1" if value else "0")


def derive_nccl_env(rdma_info=None, topology=None, socket_ifname=None, nics=None, gid_tables=None,
                    overrides=None, hcas=None, gdr_level=None):
    """Return ``{env, transport, hcas, excluded, warnings, gid_index_source, gpu_hca_pairs}``.

    ``rdma_info``: the rdma_info result (``cas``, ``peermem_loaded``). ``topology``: the
    gpu_info ``topology``. ``socket_ifname``: the interface for NCCL's bootstrap/socket traffic
    (the role passes the default-route interface); else the first up NIC of ``nics``.
    ``gid_tables``: ``{"mlx5_0:1": [{index, gid, type}]}`` read from sysfs.
    ``overrides``: operator values; they win, and a None value removes a derived key.
    ``hcas``: operator list of fabric HCAs (``"mlx5_0"`` / ``"mlx5_0:1"``).
    """
    rdma_info = rdma_info or {}
    if isinstance(gid_tables, str):
        gid_tables = parse_gid_lines(gid_tables)
    warnings = []
    env = {}
    ports = classify_ports(rdma_info.get("cas") or [], hcas or None)
    active = [p for p in ports if p["role"] == "compute" and p["active"]]
    excluded = [{"ca": p["ca"], "port": p["port"],
                 "reason": p["reason"] if p["role"] != "compute" else
                 "%s/%s" % (p["state"], p["physical_state"])}
                for p in ports if p["role"] != "compute" or not p["active"]]
    ifname = _pick_socket_ifname(socket_ifname, nics)
    if ifname:
        env["NCCL_SOCKET_IFNAME"] = ifname
    else:
        warnings.append("No up network interface found for NCCL_SOCKET_IFNAME; NCCL will guess")
    if active:
        transport, entries, pairs, gid_source = _rdma_env(active, ports, rdma_info, topology, gid_tables,
                                                          gdr_level, env, warnings)
    else:
        transport, entries, pairs, gid_source = "socket", [], [], None
        env["NCCL_IB_DISABLE"] = "1"
        warnings.append(_socket_warning(ifname, nics))
    _apply_overrides(env, overrides)
    return {
        "env": dict(sorted(env.items())),
        "transport": transport,
        "hcas": entries,
        "excluded": excluded,
        "warnings": warnings,
        "gid_index_source": gid_source,
        "gpu_hca_pairs": [{"gpu": g, "hca": h, "distance": t} for g, h, t in pairs],
    }
