# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""One rule for every measured figure a verdict judges: a number, or the reason it is none.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

A figure reaches a verdict from a parser, a registered result, a JSON file or Jinja. Whatever went wrong
on the way (NaN or Infinity from a broken run, a string, null, a negative or absurd number from a bad
file) must not be compared with a threshold: ``NaN < floor`` is False, so a NaN passes every floor, and
a string or None crashes the comparison. :func:`judge_figure` is the gate every verdict calls first
(GEMM/memory, nccl-tests, the bandwidth ring and pairs, the node and smoke baselines):

- a bool, a string (even ``"12"``: a parser yields numbers, so text means something upstream broke), None
  or another type is not a figure;
- NaN and +/-Infinity are not figures;
- a negative figure is not a figure; zero is one only where the caller says a measured zero is possible
  (a link that moved nothing is slow, not unmeasured), never in a baseline;
- a figure outside the unit's plausible bounds (:data:`PLAUSIBLE`) is not a figure: 1e-300 GB/s or 1e12
  TFLOPS come from a corrupted file, not from a part.

Missing data is never a pass: :func:`missing` lists the parts expected to report (one per GPU, per link)
that did not, and :func:`figure_finding` / :func:`missing_finding` turn either into a fail finding
(``FIGURE_INVALID`` / ``FIGURE_MISSING``) in findings.py's shape.
"""

from __future__ import annotations

import json
import math

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding

# (lowest, highest) plausible figure per unit. Far outside any real part, on purpose: these bounds catch
# garbage, the thresholds judge parts. Highest: a B200 is ~4.5 PFLOPS dense FP8 and 8 TB/s HBM; an
# 8-GPU NVLink5 all-reduce ~900 GB/s; an 800G NIC 800 Gb/s; 100x headroom on each. Lowest: one
# millionth of the unit (a CPU stand-in's figures stay far above it).
PLAUSIBLE = {
    "TFLOPS": (1e-6, 1e5),
    "GB/s": (1e-6, 1e6),
    "Gb/s": (1e-6, 1e6),
    "samples/s": (1e-6, 1e12),
}
DEFAULT_BOUNDS = (1e-6, 1e12)

FIGURE_INVALID = "FIGURE_INVALID"
FIGURE_MISSING = "FIGURE_MISSING"


def _show(value):
    """How a bad value is written in a reason: as JSON writes it (NaN, "12", true), cut short."""
    return json.dumps(value, default=str)[:80]


def judge_figure(value, name, unit=None, zero_ok=False, bounds=None):
    """``(figure, None)`` for a usable figure (a float), else ``(None, why)``.

    ``name`` says what the figure is (``GPU 3 bf16 GEMM``) and ``unit`` picks the plausible bounds
    (:data:`PLAUSIBLE`; ``bounds`` overrides them). ``zero_ok``: a measured zero is a figure (a link
    that moved nothing), judged by the verdict's floor like any other.
    """
    label = "%s%s" % (name, " (%s)" % unit if unit else "")
    if value is None:
        return None, "%s: nothing was measured" % label
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, "%s is %s (a %s), need a number" % (label, _show(value), type(value).__name__)
    if not math.isfinite(value):
        return None, "%s is %s, need a finite number" % (label, value)
    if value == 0 and zero_ok:
        return 0.0, None
    if value <= 0:
        return None, "%s is %s, need a number > 0" % (label, _show(value))
    low, high = bounds or PLAUSIBLE.get(unit, DEFAULT_BOUNDS)
    if not low <= value <= high:
        return None, "%s is %s, outside the plausible %g..%g%s: a corrupted figure, not a measurement" % (
            label, _show(value), low, high, " " + unit if unit else "")
    return float(value), None


def unit_of(metric):
    """The unit a baseline metric's name says (``gpu0.gemm_bf16_tflops``: TFLOPS, ``link.*``/``loopback.*``:
    Gb/s, ``*_gbps``: GB/s, ``samples_per_s``), else None."""
    metric = str(metric)
    if metric.endswith("_tflops"):
        return "TFLOPS"
    if metric.startswith(("link.", "loopback.")):
        return "Gb/s"
    if metric.endswith("gbps"):
        return "GB/s"
    return "samples/s" if metric.endswith("samples_per_s") else None


def usable_figure(value, unit=None, zero_ok=False):
    """The figure as a float when :func:`judge_figure` accepts it, else None."""
    return judge_figure(value, "figure", unit, zero_ok)[0]


def missing(expected, reported):
    """The members of ``expected`` (GPU indexes, links) absent from ``reported``, in ``expected``'s order."""
    seen = set(reported)
    return [member for member in expected if member not in seen]


def figure_finding(node, problem, remediation, value=None, **extra):
    """A FIGURE_INVALID fail finding: the figure cannot be judged, so the part fails rather than passes."""
    return make_finding(FIGURE_INVALID, "fail", node, "%s: %s" % (node, problem), remediation,
                        value=value if usable_figure(value) is not None or value is None else _show(value), **extra)


def missing_finding(node, what, remediation, **extra):
    """A FIGURE_MISSING fail finding: a part expected to report a figure reported none."""
    return make_finding(FIGURE_MISSING, "fail", node, "%s: %s" % (node, what), remediation, **extra)
