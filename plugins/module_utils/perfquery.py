# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""InfiniBand port counters from ``perfquery`` (infiniband-diags): parse and judge.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

``perfquery [-x] [-d CA] [LID] [PORT]`` prints a ``# Port counters: Lid L port P`` (``# Port
extended counters: ...`` with ``-x``, ``# PortRcvErrorDetails counters: ...`` with ``-E``) header and
``Name:.....value`` lines; several headers may follow each other (one per port).

Thresholds: ``ibqueryerrors`` (rdma-core infiniband-diags/man/ibqueryerrors.8.in.rst) reports every
error counter above a threshold whose default is zero. Here the physical-layer and link counters
fail above zero (SymbolErrorCounter, LinkErrorRecoveryCounter, LinkDownedCounter, PortRcvErrors,
PortRcvRemotePhysicalErrors, LocalLinkIntegrityErrors, ExcessiveBufferOverrunErrors); the
congestion side effects (PortXmitDiscards, PortRcvSwitchRelayErrors, VL15Dropped) only warn —
that split is this project's choice (they rise with congestion on healthy links), not a vendor
number. PortXmitWait and the data counters are throughput, never judged.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding

_HEADER = re.compile(r"^#\s*(.+?) counters: Lid (\d+) port (\d+)(?: \((.*)\))?\s*$")
_VALUE = re.compile(r"^(\w+):\.*(\S+)\s*$")

FAIL_COUNTERS = ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
                 "PortRcvRemotePhysicalErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors")
WARN_COUNTERS = ("PortXmitDiscards", "PortRcvSwitchRelayErrors", "VL15Dropped")
REMEDIATION = {
    "SymbolErrorCounter": "Physical-layer errors: reseat or replace the cable/transceiver, then clear the counters",
    "LinkErrorRecoveryCounter": "The link retrained: check the cable and the switch port; clear counters and watch",
    "LinkDownedCounter": "The link went down: check the cable, the switch port and the subnet manager log",
    "PortRcvErrors": "Malformed packets received: check the cable and the sending port",
    "PortRcvRemotePhysicalErrors": "Errors on the far side of the link: check the switch port",
    "LocalLinkIntegrityErrors": "Link integrity errors: replace the cable",
    "ExcessiveBufferOverrunErrors": "Buffer overruns: check flow control and the cable",
}


def _number(value):
    if value.lower().startswith("0x"):
        return int(value, 16)
    return int(value) if value.isdigit() else value


def parse_perfquery(text):
    """One dict per counter block: {kind, lid, port, capabilities, counters{name: int}}."""
    blocks, current = [], None
    for line in (text or "").splitlines():
        header = _HEADER.match(line.strip())
        if header:
            current = {"kind": header.group(1).strip(), "lid": int(header.group(2)), "port": int(header.group(3)),
                       "capabilities": header.group(4), "counters": {}}
            blocks.append(current)
            continue
        value = _VALUE.match(line.strip())
        if value and current is not None:
            current["counters"][value.group(1)] = _number(value.group(2))
    return blocks


def evaluate_perfquery(blocks, node, ca=None, fail_max=0, warn_max=0):
    """Findings for counter blocks (``ca`` names the HCA the blocks came from, for the message)."""
    findings = []
    where = "%s " % ca if ca else ""
    for block in blocks or []:
        counters = block["counters"]
        for name in FAIL_COUNTERS + WARN_COUNTERS:
            value = counters.get(name)
            if not isinstance(value, int):
                continue
            severity = "fail" if name in FAIL_COUNTERS else "warn"
            limit = fail_max if severity == "fail" else warn_max
            if value > limit:
                findings.append(make_finding(
                    "IB_COUNTER_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper(), severity, node,
                    "%sport %s (lid %s): %s = %s" % (where, block["port"], block["lid"], name, value),
                    REMEDIATION.get(name, "Congestion side effect: check the fabric's load and routing; "
                                          "clear the counters and watch"),
                    value=value, threshold=limit, ca=ca, port=block["port"], counter=name))
    return findings


def perfquery_not_checked(blocks, text=""):
    """Why the counters of one perfquery run could not be judged, or None: no counter block at all (a refused query:
    "perfquery: iberror: failed: Failed to open '(null)' port '0'"), or blocks without any counter judged here.
    An empty answer is not a clean port."""
    if not blocks:
        said = " ".join(str(text or "").split())[:300]
        return "perfquery printed no counter block%s" % (": %s" % said if said else "")
    if not any(isinstance(block["counters"].get(name), int) for block in blocks
               for name in FAIL_COUNTERS + WARN_COUNTERS):
        return "perfquery's blocks (%s) hold none of the error counters judged here" % ", ".join(
            sorted({block["kind"] for block in blocks}))
    return None
