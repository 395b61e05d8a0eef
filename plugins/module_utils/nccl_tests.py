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
# nccl-tests' own error lines (src/common.h): "host: Test NCCL failure common.cu:959 'internal error ... / '",
# "host: Test CUDA failure ...", older builds "NCCL failure all_reduce.cu:95 'unhandled cuda error'".
_FAILURE_RE = re.compile(r"^(?:(\S+): )?(?:Test )?(NCCL|CUDA) failure (\S+) '(.*)'\s*$")
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
        "failures": [],
        "ranks_cut": False,
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
    numbers = sorted(rank["rank"] for rank in test["ranks"])
    # A rank list that is not 0..n-1 was cut (a log kept by its tail): its line count is not the rank count.
    test["ranks_cut"] = bool(numbers) and numbers != list(range(len(numbers)))
    if numbers and not test["ranks_cut"]:
        test["nranks"] = len(numbers)
    return test


class _NcclTestsLog(object):
    """One pass over a log: the tests finished so far, the one whose table is being read, the header lines
    seen before its table (version, collective, ranks) and the table's columns."""

    def __init__(self):
        self.tests, self.current, self.columns = [], None, None
        self.pending = _new_test()

    def close_current(self):
        if self.current is not None:
            self.tests.append(_finish(self.current))
            self.current = None

    def close_finished_table(self):
        # A rank list or a table header after a table with rows starts the next test (logs without markers).
        if self.current is not None and self.current["rows"]:
            self.close_current()

    def started(self):
        """The pending test got as far as its rank list or an error but printed no table: kept, with no rows."""
        return bool(self.pending["ranks"] or self.pending["failures"])

    def feed(self, line):
        m = _FAILURE_RE.match(line)
        if m:
            target = self.current if self.current is not None else self.pending
            target["failures"].append({"host": m.group(1), "library": m.group(2), "where": m.group(3),
                                       "message": m.group(4).strip().rstrip("/").strip()})
            return
        m = _VERSION_RE.match(line)
        if m:
            self.close_current()
            self.pending["nccl_tests_version"] = m.group(1)
            self.pending["nccl_library"] = m.group(2)
            return
        m = _COLLECTIVE_START_RE.match(line)
        if m:
            self.close_current()
            self.pending["collective"] = normalize_collective(m.group(1))
            return
        if _COLLECTIVE_END_RE.match(line):
            self.close_current()
            return
        m = _RANK_RE.match(line)
        if m:
            self.close_finished_table()
            target = self.current if self.current is not None else self.pending
            target["ranks"].append({
                "rank": int(m.group(1)), "host": m.group(2), "device": int(m.group(3)),
                "bus_id": m.group(4), "gpu": m.group(5).strip() or None,
            })
            return
        if line.startswith("#"):
            self.comment(line)
        elif self.current is not None and self.columns is not None:
            row = _parse_row(line.split(), self.columns)
            if row is not None:
                self.current["rows"].append(row)

    def comment(self, line):
        """A '#' line: a table header starts a test; the summary lines belong to the current one."""
        cols = _header_columns(line)
        if cols is not None:
            self.close_finished_table()
            if self.current is None:
                self.current, self.pending = self.pending, _new_test()
            self.columns = cols
            self.current["format"] = "wrong" if "#wrong" in cols else "error"
            return
        if self.current is None:
            return
        m = _AVG_RE.match(line)
        if m:
            self.current["avg_busbw_gbps"] = _num(m.group(1))
            return
        m = _OOB_RE.match(line)
        if m:
            self.current["out_of_bounds"] = int(m.group(1))
            if m.group(2):
                self.current["out_of_bounds_ok"] = m.group(2).upper() == "OK"


def parse_nccl_tests(text):
    """Parse nccl-tests stdout into one entry per test in the log.

    Returns a list of ``{"collective": "all_reduce"|... or None, "nranks": int or None,
    "rows": [{"size_bytes", "count", "type", "redop", ["root",] "out_of_place": {"time_us",
    "algbw_gbps", "busbw_gbps", "wrong"}, "in_place": {...}}], "avg_busbw_gbps": float or None,
    "wrong_total": int or None, ...}``. Newer nccl-tests print "# Collective test starting: X"
    before each test; a log without it gives collective None. Older logs print an ``error``
    column instead of ``#wrong``: wrong is then None (the error value is kept as ``error``).
    ``nranks`` counts the "# Rank N ... on host device d" header lines: None when there are none or when the
    list is not 0..n-1 (``ranks_cut``: the log was trimmed inside it), so a trimmed log is not read as fewer ranks.
    ``failures`` lists nccl-tests' own error lines (``{host, library, where, message}``); a test that failed
    before printing its table is still returned, with its ranks, its failures and no rows, so the reason is
    reported rather than "no table".
    """
    log = _NcclTestsLog()
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line:
            log.feed(line)
    log.close_current()
    if log.started():
        log.tests.append(_finish(log.pending))
    return log.tests


# A fall of more than this fraction from the band's peak is described as a collapse in the finding.
COLLAPSE_FRACTION = 0.10


def _size_text(size_bytes):
    """1073741824 -> '1 GiB' (nccl-tests sweeps are powers of two; anything else keeps its byte count)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return "%d %s" % (size_bytes // scale, unit)
    return "%d B" % size_bytes


def band_busbw(rows, min_size_bytes=None, top=None):
    """The large-message band of one sweep, judged where it is weakest once it has peaked.

    ``rows``: ``[{"size_bytes", "busbw_gbps"}]``, one per size (the better of out-of-place and in-place).
    The band is the sizes >= ``min_size_bytes`` (none that large: the largest size), or the ``top``
    largest, or by default the largest size alone. busbw rises with the message size up to a plateau,
    so the ramp before the band's peak is expected; a fall after it is not (a send/recv that reaches
    9 GB/s at 1 GiB and drops to 1 GB/s at 8 GiB has a 9 GB/s peak and a 1 GB/s sustained figure).
    The judged figure ``busbw_gbps`` is therefore the lowest busbw at or after the peak size.

    Returns None without a figure, else ``{busbw_gbps, peak_gbps, peak_size_bytes, low_gbps,
    low_size_bytes, band_from_bytes, band_to_bytes, collapse}``; ``collapse`` is None unless the band
    fell more than COLLAPSE_FRACTION below its peak, else ``{from_gbps, from_size_bytes, to_gbps,
    to_size_bytes, fraction, text}`` with ``text`` the sentence a finding shows.
    """
    sized = sorted((r for r in rows or [] if r.get("size_bytes") is not None and r.get("busbw_gbps") is not None),
                   key=lambda r: r["size_bytes"])
    if not sized:
        return None
    if top:
        band = sized[-int(top):]
    elif min_size_bytes is not None:
        band = [r for r in sized if r["size_bytes"] >= min_size_bytes] or sized[-1:]
    else:
        band = sized[-1:]
    peak_at = max(range(len(band)), key=lambda i: band[i]["busbw_gbps"])
    peak = band[peak_at]
    low = min(band[peak_at:], key=lambda r: r["busbw_gbps"])
    out = {"busbw_gbps": low["busbw_gbps"], "peak_gbps": peak["busbw_gbps"], "peak_size_bytes": peak["size_bytes"],
           "low_gbps": low["busbw_gbps"], "low_size_bytes": low["size_bytes"],
           "band_from_bytes": band[0]["size_bytes"], "band_to_bytes": band[-1]["size_bytes"], "collapse": None}
    if peak["busbw_gbps"] > 0 and low["busbw_gbps"] < peak["busbw_gbps"] * (1.0 - COLLAPSE_FRACTION):
        fraction = 1.0 - low["busbw_gbps"] / peak["busbw_gbps"]
        out["collapse"] = {
            "from_gbps": peak["busbw_gbps"], "from_size_bytes": peak["size_bytes"],
            "to_gbps": low["busbw_gbps"], "to_size_bytes": low["size_bytes"], "fraction": fraction,
            "text": "busbw fell from %.2f GB/s at %s to %.2f GB/s at %s (-%.0f %%; band %s to %s)" % (
                peak["busbw_gbps"], _size_text(peak["size_bytes"]), low["busbw_gbps"], _size_text(low["size_bytes"]),
                fraction * 100, _size_text(band[0]["size_bytes"]), _size_text(band[-1]["size_bytes"]))}
    return out


def size_rows(test):
    """One ``{"size_bytes", "busbw_gbps"}`` per size of a parsed test: the better of out-of-place and in-place."""
    rows = []
    for row in test.get("rows", []):
        values = [half["busbw_gbps"] for half in (row["out_of_place"], row["in_place"])
                  if half.get("busbw_gbps") is not None]
        rows.append({"size_bytes": row.get("size_bytes"), "busbw_gbps": max(values) if values else None})
    return rows


def large_message_band(test, min_size_bytes=None, top=None):
    """band_busbw over one parsed test (see there); None without rows."""
    return band_busbw(size_rows(test), min_size_bytes=min_size_bytes, top=top)


def large_message_busbw(test, min_size_bytes=None, top=None):
    """The busbw a verdict judges for the large sizes of one parsed test: the band's lowest figure at or
    after its peak (band_busbw), not the peak, so a collapse at the largest sizes is not hidden. The band
    is the sizes >= ``min_size_bytes`` (default: the largest size only) or the ``top`` largest sizes.
    Returns None without rows."""
    band = large_message_band(test, min_size_bytes=min_size_bytes, top=top)
    return band["busbw_gbps"] if band else None
