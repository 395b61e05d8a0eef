# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Parse perftest's bandwidth reports (ib_write_bw, ib_read_bw, ib_send_bw) into plain data.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

perftest prints a header block ("RDMA_Write BW Test", "Device : mlx5_0", "Link type : IB", ...) and a
result table " #bytes #iterations BW peak[...] BW average[...] MsgRate[Mpps]". With --report_gbits the
unit is Gb/sec (10^9 bits); without it perftest says MB/sec (older releases) or MiB/sec (newer), and
both are 2^20 bytes per second (perftest's format_factor, src/perftest_parameters.h RESULT_FMT). Every
figure returned here is Gb/s. A server prints the same report as its client (xchg_bw_reports); a log
can hold both, and the last row is the run's figure. --run_infinitely prints one row per interval.
"""

from __future__ import annotations

import re

MIB = 2 ** 20

_TEST_RE = re.compile(r"^\s*((?:RDMA_Write|RDMA_Read|Send|Atomic\w*)(?: Bidirectional)? BW Test)\s*$", re.M)
_FIELD_RE = re.compile(r"([A-Za-z][\w*-]*(?: [\w*-]+)*)\s*:\s*(\S+)")
_HEADER_RE = re.compile(r"#bytes\s+#iterations\s+BW peak\[([^\]]+)\]\s+BW average\[([^\]]+)\]")
_ROW_RE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?\s*$")
# What perftest prints when it cannot start or reach its peer (src/perftest_communication.c,
# perftest_parameters.c, perftest_resources.c).
_FAILURES = (
    (re.compile(r"Couldn't connect to (\S+)"), "connect"),
    (re.compile(r"Couldn't listen to port (\d+)"), "listen"),
    (re.compile(r"Port number \d+ state is (\w+)"), "port_state"),
    (re.compile(r"IB device (\S+) not found"), "device"),
    (re.compile(r"Did not detect devices|Unable to find the Infiniband/RoCE device"), "device"),
)


def _to_gbps(value, unit):
    if value is None:
        return None
    unit = (unit or "").lower()
    if unit.startswith("gb"):
        return value
    if unit in ("mb/sec", "mib/sec"):
        return value * MIB * 8 / 1e9
    raise ValueError("unknown perftest bandwidth unit %r" % unit)


def parse_perftest(text):
    """``{test, device, link_type, qps, unit, rows: [{bytes, iterations, bw_peak_gbps, bw_avg_gbps,
    msg_rate_mpps}], bw_avg_gbps, failure}`` from a perftest log.

    ``bw_avg_gbps`` is the last row's BW average (the run's figure), None when there is no row.
    ``failure`` is ``{kind, detail}`` when the log carries perftest's own error lines (connect, listen,
    port_state, device), else None.
    """
    text = text or ""
    test = _TEST_RE.search(text)
    fields = {}
    for line in text.splitlines():
        for name, value in _FIELD_RE.findall(line):
            fields.setdefault(name.strip(), value)
    unit = None
    rows = []
    for line in text.splitlines():
        header = _HEADER_RE.search(line)
        if header:
            unit = header.group(2)
            continue
        match = _ROW_RE.match(line)
        if match and unit:
            rows.append({
                "bytes": int(match.group(1)),
                "iterations": int(match.group(2)),
                "bw_peak_gbps": _to_gbps(float(match.group(3)), unit),
                "bw_avg_gbps": _to_gbps(float(match.group(4)), unit),
                "msg_rate_mpps": float(match.group(5)) if match.group(5) else None,
            })
    qps = fields.get("Number of qps")
    return {
        "test": test.group(1) if test else None,
        "device": fields.get("Device"),
        "link_type": fields.get("Link type"),
        "qps": int(qps) if qps and qps.isdigit() else None,
        "unit": unit,
        "rows": rows,
        "bw_avg_gbps": rows[-1]["bw_avg_gbps"] if rows else None,
        "failure": perftest_failure(text),
    }


def perftest_failure(text):
    """``{kind, detail}`` for the first perftest error line in ``text``, or None."""
    for pattern, kind in _FAILURES:
        match = pattern.search(text or "")
        if match:
            return {"kind": kind, "detail": match.group(0).strip()}
    return None
