# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""Parse nccl-tests output (``all_reduce_perf`` and friends) into plain data.

Pure functions, no Ansible import: the smoke_test role, the report and the unit tests share
them. Bandwidth follows nccl-tests' own definitions (doc/PERFORMANCE.md, src/all_reduce.cu):
algbw = bytes / time with GB = 1e9 bytes, busbw = algbw x bus factor, the factor depending on
the collective and the number of ranks n.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# Collective name (without "_perf") -> bus factor as a function of the rank count.
_BUS_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce_scatter": lambda n: float(n - 1) / n,
    "all_gather": lambda n: float(n - 1) / n,
    "alltoall": lambda n: float(n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "hypercube": lambda n: float(n - 1) / n,
}


def bus_factor(collective, nranks):
    """The busbw/algbw ratio nccl-tests uses for ``collective`` on ``nranks`` ranks.

    all_reduce: 2(n-1)/n; reduce_scatter, all_gather, alltoall: (n-1)/n; broadcast, reduce,
    sendrecv: 1. Raises ValueError on an unknown collective or n < 1.
    """
    if nranks is None or int(nranks) < 1:
        raise ValueError("nranks must be >= 1, got %r" % (nranks,))
    name = normalize_collective(collective)
    if name not in _BUS_FACTORS:
        raise ValueError("unknown collective %r" % (collective,))
    return _BUS_FACTORS[name](int(nranks))


def normalize_collective(name):
    """'all_reduce_perf' / 'allreduce' / 'AllReduce' -> 'all_reduce'; None stays None."""
    if name is None:
        return None
    text = str(name).strip().lower()
    if text.endswith("_perf"):
        text = text[: -len("_perf")]
    compact = text.replace("_", "")
    aliases = {
        "allreduce": "all_reduce",
        "reducescatter": "reduce_scatter",
        "allgather": "all_gather",
        "alltoall": "alltoall",
        "broadcast": "broadcast",
        "reduce": "reduce",
        "sendrecv": "sendrecv",
        "hypercube": "hypercube",
    }
    return aliases.get(compact, text)


def algbw_gbps(size_bytes, time_s):
    """Algorithm bandwidth in GB/s (1e9 bytes), as nccl-tests computes it."""
    if time_s <= 0:
        raise ValueError("time must be positive, got %r" % (time_s,))
    return float(size_bytes) / time_s / 1.0e9


def busbw_gbps(size_bytes, time_s, collective, nranks):
    """Bus bandwidth in GB/s: algbw x bus_factor(collective, nranks)."""
    return algbw_gbps(size_bytes, time_s) * bus_factor(collective, nranks)


_COLLECTIVE_START_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_COLLECTIVE_END_RE = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s*(?:\[([^\]]*)\])?\s*(.*)$")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)", re.IGNORECASE)
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.IGNORECASE)
_VERSION_RE = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*nccl-library=(\d+))?")


def _num(token):
    """A float from a table cell; None for N/A or anything unparsable."""
    try:
        return float(token)
    except (TypeError, ValueError):
        return None


def _wrong(token, new_format):
    """#wrong cell -> int; N/A -> None; old format's error column -> None (it is not a count)."""
    if not new_format:
        return None
    try:
        return int(token)
    except (TypeError, ValueError):
        return None


def _header_columns(line):
    """Column names from the '#  size  count  type ...' header line, or None."""
    body = line.lstrip("#").split()
    if len(body) >= 4 and body[0] == "size" and body[1] == "count":
        return body
    return None


def _new_test():
    return {
        "collective": None,
        "nranks": None,
        "rows": [],
        "avg_busbw_gbps": None,
        "wrong_total": None,
        "out_of_bounds": None,
        "out_of_bounds_ok": None,
        "nccl_tests_version": None,
        "nccl_library": None,
        "ranks": [],
        "format": None,
    }


def _parse_row(tokens, columns):
    """One data row -> row dict, using the header to find the root and #wrong/error columns."""
    has_root = "root" in columns
    new_format = "#wrong" in columns
    # size count type redop [root] then 4 cells per half: time algbw busbw wrong|error
    lead = 5 if has_root else 4
    if len(tokens) < lead + 8:
        return None
    try:
        size = int(tokens[0])
        count = int(tokens[1])
    except ValueError:
        return None
    halves = []
    for start in (lead, lead + 4):
        t, alg, bus, wrong = tokens[start:start + 4]
        halves.append({
            "time_us": _num(t),
            "algbw_gbps": _num(alg),
            "busbw_gbps": _num(bus),
            "wrong": _wrong(wrong, new_format),
        })
        if not new_format:
            halves[-1]["error"] = _num(wrong)
    row = {
        "size_bytes": size,
        "count": count,
        "type": tokens[2],
        "redop": tokens[3],
        "out_of_place": halves[0],
        "in_place": halves[1],
    }
    if has_root:
        try:
            row["root"] = int(tokens[4])
        except ValueError:
            row["root"] = None
    return row


def _finish(test):
    wrongs = [half["wrong"] for row in test["rows"] for half in (row["out_of_place"], row["in_place"])
              if half["wrong"] is not None]
    test["wrong_total"] = sum(wrongs) if wrongs else None
    if test["ranks"]:
        test["nranks"] = len(test["ranks"])
    return test


def parse_nccl_tests(text):
    """Parse nccl-tests stdout into one entry per test in the log.

    Returns a list of ``{"collective": "all_reduce"|... or None, "nranks": int or None,
    "rows": [{"size_bytes", "count", "type", "redop", ["root",] "out_of_place": {"time_us",
    "algbw_gbps", "busbw_gbps", "wrong"}, "in_place": {...}}], "avg_busbw_gbps": float or None,
    "wrong_total": int or None, ...}``. Newer nccl-tests print "# Collective test starting: X"
    before each test; a log without it gives collective None. Older logs print an ``error``
    column instead of ``#wrong``: wrong is then None (the error value is kept as ``error``).
    ``nranks`` counts the "# Rank N ... on host device d" header lines (None when cut off).
    """
    tests = []
    current = None
    columns = None
    pending = _new_test()  # header lines seen before any table (version, ranks)

    def start_new():
        nonlocal pending
        test = pending
        pending = _new_test()
        return test

    for raw in (text or "").splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        m = _VERSION_RE.match(stripped)
        if m:
            if current is not None:
                tests.append(_finish(current))
                current = None
            pending["nccl_tests_version"] = m.group(1)
            pending["nccl_library"] = m.group(2)
            continue
        m = _COLLECTIVE_START_RE.match(stripped)
        if m:
            if current is not None:
                tests.append(_finish(current))
                current = None
            pending["collective"] = normalize_collective(m.group(1))
            continue
        m = _COLLECTIVE_END_RE.match(stripped)
        if m:
            if current is not None:
                tests.append(_finish(current))
                current = None
            continue
        m = _RANK_RE.match(stripped)
        if m:
            if current is not None and current["rows"]:
                # A rank list after a finished table starts the next test (logs without markers).
                tests.append(_finish(current))
                current = None
            target = current if current is not None else pending
            target["ranks"].append({
                "rank": int(m.group(1)), "host": m.group(2), "device": int(m.group(3)),
                "bus_id": m.group(4), "gpu": m.group(5).strip() or None,
            })
            continue
        if stripped.startswith("#"):
            cols = _header_columns(stripped)
            if cols is not None:
                if current is not None and current["rows"]:
                    tests.append(_finish(current))
                    current = None
                if current is None:
                    current = start_new()
                columns = cols
                current["format"] = "wrong" if "#wrong" in cols else "error"
                continue
            m = _AVG_RE.match(stripped)
            if m and current is not None:
                current["avg_busbw_gbps"] = _num(m.group(1))
                continue
            m = _OOB_RE.match(stripped)
            if m and current is not None:
                current["out_of_bounds"] = int(m.group(1))
                if m.group(2):
                    current["out_of_bounds_ok"] = m.group(2).upper() == "OK"
                continue
            continue
        if current is not None and columns is not None:
            row = _parse_row(stripped.split(), columns)
            if row is not None:
                current["rows"].append(row)
    if current is not None:
        tests.append(_finish(current))
    return tests


def large_message_busbw(test, min_size_bytes=None, top=None):
    """Peak out-of-place/in-place busbw over the large sizes of one parsed test.

    Judges large messages, not the sweep average: the sizes >= ``min_size_bytes`` (default:
    the largest size only) or the ``top`` largest sizes. Returns None without rows.
    """
    rows = [r for r in test.get("rows", []) if r.get("size_bytes") is not None]
    if not rows:
        return None
    rows.sort(key=lambda r: r["size_bytes"])
    if top:
        chosen = rows[-int(top):]
    elif min_size_bytes is not None:
        chosen = [r for r in rows if r["size_bytes"] >= min_size_bytes] or rows[-1:]
    else:
        chosen = rows[-1:]
    values = [half["busbw_gbps"] for r in chosen for half in (r["out_of_place"], r["in_place"])
              if half.get("busbw_gbps") is not None]
    return max(values) if values else None
