# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Pure parsers for InfiniBand/RoCE tool output, plus the sysfs reader.

PRIVATE to the gpufleet.cluster collection. Parsers take text and return plain data; nothing here
imports AnsibleModule, so modules, filters and the report can all share them.

Every parser returns the same shape, one dict per CA (HCA)::

    {"ca": "mlx5_0", "ca_type": "MT4129", "firmware": "28.39.1002",
     "ports": [{"port": 1, "state": "Active", "physical_state": "LinkUp",
                "rate_gbps": 400, "link_layer": "InfiniBand"}]}

States are normalised to ibstat's spelling (``Active``, ``Down``, ``Initializing``, ``Armed``;
``LinkUp``, ``Polling``, ``Disabled`` ...) whatever the source ("4: ACTIVE" in sysfs).
"""

from __future__ import annotations

import os
import re

# The numeric codes are the IBTA PortState / PortPhysicalState values; the names are the ones
# ibstat prints (infiniband-diags ibstat.c), so every source normalises to the same words.
PORT_STATES = {
    0: "Unknown",
    1: "Down",
    2: "Initializing",
    3: "Armed",
    4: "Active",
    5: "ActiveDefer",
}
PHYS_STATES = {
    0: "NoStateChange",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
_STATE_WORDS = {
    "down": "Down",
    "init": "Initializing",
    "initializing": "Initializing",
    "initialize": "Initializing",
    "armed": "Armed",
    "active": "Active",
    "active_defer": "ActiveDefer",
    "activedefer": "ActiveDefer",
}
_PHYS_WORDS = {
    "sleep": "Sleep",
    "polling": "Polling",
    "disabled": "Disabled",
    "portconfigurationtraining": "PortConfigurationTraining",
    "linkup": "LinkUp",
    "link_up": "LinkUp",
    "linkerrorrecovery": "LinkErrorRecovery",
    "link_error_recovery": "LinkErrorRecovery",
    "phytest": "PhyTest",
    "phy_test": "PhyTest",
}

# ibstat CA-level keys; anything else indented under a "Port N:" header belongs to the port.
_CA_KEYS = {
    "ca type": "ca_type",
    "number of ports": "number_of_ports",
    "firmware version": "firmware",
    "hardware version": "hardware_version",
    "node guid": "node_guid",
    "system image guid": "system_guid",
}
_PORT_KEYS = {
    "state": "state",
    "physical state": "physical_state",
    "rate": "rate_gbps",
    "base lid": "base_lid",
    "lmc": "lmc",
    "sm lid": "sm_lid",
    "capability mask": "capability_mask",
    "port guid": "port_guid",
    "link layer": "link_layer",
}
_INT_KEYS = {"number_of_ports", "base_lid", "lmc", "sm_lid"}

_CA_HEADER = re.compile(r"^CA\s+'(?P<ca>[^']+)'\s*$")
_PORT_HEADER = re.compile(r"^\s*Port\s+(?P<port>\d+)\s*:\s*$")
_KEY_VALUE = re.compile(r"^\s+(?P<key>[A-Za-z][A-Za-z0-9 _/-]*?)\s*:\s*(?P<value>.*?)\s*$")
# infiniband-diags reports problems as "ibpanic: [pid] func: msg", "ibwarn: ...", "iberror: ...".
_DIAG_ERROR = re.compile(r"^\s*(ibpanic|ibwarn|iberror|ibstat|ibstatus)\s*:", re.IGNORECASE)


def _snake(key):
    return re.sub(r"[^a-z0-9]+", "_", key.strip().lower()).strip("_")


def _number(text):
    """'400' -> 400, '2.5' -> 2.5, anything else -> None."""
    if text is None:
        return None
    match = re.match(r"^\s*(\d+(?:\.\d+)?)", str(text))
    if not match:
        return None
    value = float(match.group(1))
    return int(value) if value.is_integer() else value


def _int(text):
    """Decimal or 0x-hex integer, else None."""
    if text is None:
        return None
    text = str(text).strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def parse_rate(text):
    """Rate in Gb/s from '400', '400 Gb/sec (4X NDR)', '2.5 Gb/sec (1X SDR)'; None if unreadable."""
    return _number(text)


def normalize_guid(text):
    """'b83f:d203:006e:2704' (sysfs, ibv_devinfo) or '0xB83F...' (ibstat) -> '0xb83fd203006e2704'."""
    if text is None:
        return None
    raw = str(text).strip().lower()
    if raw.startswith("0x"):
        raw = raw[2:]
    raw = raw.replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{1,16}", raw):
        return str(text).strip()
    return "0x" + raw.rjust(16, "0")


def _coded(text, table, words):
    """Normalise '4: ACTIVE', 'PORT_ACTIVE (4)', 'LINK_UP (5)', 'Active' to the ibstat word."""
    if text is None:
        return None
    text = str(text).strip()
    if not text:
        return None
    match = re.match(r"^(\d+)\s*:", text) or re.search(r"\((\d+)\)\s*$", text)
    if match and int(match.group(1)) in table:
        return table[int(match.group(1))]
    word = re.sub(r"^\d+\s*:\s*", "", text)
    word = re.sub(r"\s*\(\d+\)\s*$", "", word)
    word = re.sub(r"^PORT_", "", word, flags=re.IGNORECASE)
    key = word.strip().lower().replace(" ", "")
    return words.get(key, words.get(word.strip().lower(), word.strip()))


def normalize_state(text):
    """Logical port state in ibstat's spelling: Active, Down, Initializing, Armed."""
    return _coded(text, PORT_STATES, _STATE_WORDS)


def normalize_phys_state(text):
    """Physical port state in ibstat's spelling: LinkUp, Polling, Disabled, Sleep ..."""
    return _coded(text, PHYS_STATES, _PHYS_WORDS)


def _new_ca(name):
    return {"ca": name, "ca_type": None, "firmware": None, "ports": []}


def parse_ibstat_with_errors(text):
    """Parse ``ibstat`` output; return ``(cas, errors)``.

    ``errors`` holds every line that is not part of the ibstat format: ``ibpanic:``/``ibwarn:``
    lines (ibstat prints them when a device vanishes or cannot be read) and anything else
    unexpected, so a broken run is reported instead of silently yielding fewer CAs.
    Indentation is not relied on (captures come with tabs or with spaces).
    """
    cas = []
    errors = []
    ca = None
    port = None
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if _DIAG_ERROR.match(line):
            errors.append(line.strip())
            continue
        match = _CA_HEADER.match(line.strip())
        if match:
            ca = _new_ca(match.group("ca"))
            cas.append(ca)
            port = None
            continue
        match = _PORT_HEADER.match(line)
        if match and ca is not None:
            port = {"port": int(match.group("port"))}
            ca["ports"].append(port)
            continue
        match = _KEY_VALUE.match(line)
        if match and ca is not None:
            key = match.group("key").strip().lower()
            value = match.group("value")
            if key in _CA_KEYS:
                name = _CA_KEYS[key]
                ca[name] = _int(value) if name in _INT_KEYS else value
            elif port is not None:
                name = _PORT_KEYS.get(key, _snake(key))
                if name == "rate_gbps":
                    port[name] = parse_rate(value)
                elif name == "state":
                    port[name] = normalize_state(value)
                elif name == "physical_state":
                    port[name] = normalize_phys_state(value)
                elif name in _INT_KEYS:
                    port[name] = _int(value)
                elif name == "port_guid":
                    port[name] = normalize_guid(value)
                else:
                    port[name] = value
            else:
                ca[_snake(key)] = value
            continue
        errors.append(line.strip())
    for ca in cas:
        for key in ("node_guid", "system_guid"):
            if ca.get(key):
                ca[key] = normalize_guid(ca[key])
    return cas, errors


def parse_ibstat(text):
    """Parse ``ibstat`` output into one dict per CA, each with a ``ports`` list."""
    return parse_ibstat_with_errors(text)[0]


def ibstat_errors(text):
    """The ibpanic/ibwarn and other unexpected lines of an ``ibstat`` output."""
    return parse_ibstat_with_errors(text)[1]


def _rate_detail(value):
    match = re.search(r"\(([^)]*)\)", value or "")
    return match.group(1).strip() if match else None


def roce_gid_index(port, version="RoCE v2"):
    """The GID index NCCL_IB_GID_INDEX wants on RoCE: the first ``version`` GID holding an IPv4
    address (::ffff:a.b.c.d), else the first ``version`` GID, else None."""
    gids = [g for g in port.get("gids") or [] if (g.get("type") or "").lower() == version.lower()]
    for gid in gids:
        value = gid["gid"].lower()
        if value.startswith("::ffff:") or value.startswith("0000:0000:0000:0000:0000:ffff:"):
            return gid["index"]
    return gids[0]["index"] if gids else None


def active_ports(cas):
    """``[{ca, port, rate_gbps, link_layer}]`` for every port that is Active and LinkUp.

    A port whose physical state is unknown (a source without one) counts on its logical
    state alone.
    """
    found = []
    for ca in cas or []:
        for port in ca.get("ports") or []:
            if port.get("state") != "Active":
                continue
            if port.get("physical_state") not in (None, "LinkUp"):
                continue
            found.append(
                {
                    "ca": ca.get("ca"),
                    "port": port.get("port"),
                    "rate_gbps": port.get("rate_gbps"),
                    "link_layer": port.get("link_layer"),
                }
            )
    return found


# ---------------------------------------------------------------------------------------------
# sysfs reader (not a pure parser: it reads files under a root the caller chooses)


def _read(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (OSError, ValueError):
        return None


def _sort_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def read_ib_sysfs(path="/sys/class/infiniband"):
    """Read ``/sys/class/infiniband`` (or a copy of its layout) into the parse_ibstat shape.

    Returns ``[]`` when the directory is missing or empty.
    """
    try:
        names = sorted(os.listdir(path), key=_sort_key)
    except OSError:
        return []
    cas = []
    for name in names:
        base = os.path.join(path, name)
        if not os.path.isdir(base):
            continue
        ca = _new_ca(name)
        ca["ca_type"] = _read(os.path.join(base, "hca_type"))
        ca["firmware"] = _read(os.path.join(base, "fw_ver"))
        ca["hardware_version"] = _read(os.path.join(base, "hw_rev"))
        ca["node_guid"] = normalize_guid(_read(os.path.join(base, "node_guid")))
        ca["system_guid"] = normalize_guid(_read(os.path.join(base, "sys_image_guid")))
        numa = _int(_read(os.path.join(base, "device", "numa_node")))
        if numa is not None:
            ca["numa_node"] = numa
        ports_dir = os.path.join(base, "ports")
        try:
            port_names = sorted((p for p in os.listdir(ports_dir) if p.isdigit()), key=int)
        except OSError:
            port_names = []
        for number in port_names:
            pdir = os.path.join(ports_dir, number)
            rate = _read(os.path.join(pdir, "rate"))
            port = {
                "port": int(number),
                "state": normalize_state(_read(os.path.join(pdir, "state"))),
                "physical_state": normalize_phys_state(_read(os.path.join(pdir, "phys_state"))),
                "rate_gbps": parse_rate(rate),
                "link_layer": _read(os.path.join(pdir, "link_layer")),
                "base_lid": _int(_read(os.path.join(pdir, "lid"))),
                "sm_lid": _int(_read(os.path.join(pdir, "sm_lid"))),
                "lmc": _int(_read(os.path.join(pdir, "lid_mask_count"))),
                "capability_mask": _read(os.path.join(pdir, "cap_mask")),
            }
            if rate:
                port["rate_detail"] = _rate_detail(rate)
            gid0 = _read(os.path.join(pdir, "gids", "0"))
            if gid0 and gid0.count(":") == 7:
                # ibstat's Port GUID is the interface id: the low 64 bits of GID 0.
                port["port_guid"] = normalize_guid(":".join(gid0.split(":")[4:]))
            ca["ports"].append(port)
        ca["number_of_ports"] = len(ca["ports"])
        cas.append(ca)
    return cas
