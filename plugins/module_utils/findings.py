# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""One findings shape for health and preflight (docs/architecture.md, "Findings").

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import, so modules, filters and the
report share it. A finding is a plain dict::

    {"code": "ECC_UNCORRECTABLE_VOLATILE", "severity": "fail", "node": "node2",
     "gpu_index": 3, "gpu_bus_id": "00000000:3B:00.0", "value": 2, "threshold": 0,
     "message": "...", "remediation": "..."}

``gpu_index``/``gpu_bus_id`` are None for node-level findings. The human one-liner
(:func:`format_finding`) is rendered from the same dict, so the JSON and the text never disagree.
"""

from __future__ import annotations

import re

SEVERITIES = ("fail", "warn")
FIELDS = ("code", "severity", "node", "gpu_index", "gpu_bus_id", "value", "threshold", "message",
          "remediation")
_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def make_finding(code, severity, node, message, remediation, value=None, threshold=None,
                 gpu_index=None, gpu_bus_id=None, **extra):
    """Build a finding dict in the contract's shape; extra keys (e.g. ``counter``, ``ca``) ride along."""
    if severity not in SEVERITIES:
        raise ValueError("severity must be one of %s, got %r" % (", ".join(SEVERITIES), severity))
    if not _CODE.match(code or ""):
        raise ValueError("finding code must be an upper-case identifier, got %r" % (code,))
    finding = {
        "code": code,
        "severity": severity,
        "node": node,
        "gpu_index": gpu_index,
        "gpu_bus_id": gpu_bus_id,
        "value": value,
        "threshold": threshold,
        "message": message,
        "remediation": remediation,
    }
    for key, val in extra.items():
        if key not in finding:
            finding[key] = val
    return finding


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v) for v in value)
    return str(value)


def format_finding(finding):
    """One line: ``FAIL node2 GPU3 00000000:3B:00.0 ECC_UNCORRECTABLE_VOLATILE value=2 threshold=0: msg -> fix``."""
    parts = [str(finding.get("severity", "?")).upper(), str(finding.get("node") or "-")]
    if finding.get("gpu_index") is not None:
        parts.append("GPU%s" % finding["gpu_index"])
    if finding.get("gpu_bus_id"):
        parts.append(str(finding["gpu_bus_id"]))
    parts.append(str(finding.get("code")))
    if finding.get("value") is not None:
        parts.append("value=%s" % _show(finding["value"]))
    if finding.get("threshold") is not None:
        parts.append("threshold=%s" % _show(finding["threshold"]))
    line = " ".join(parts) + ": " + str(finding.get("message") or "")
    if finding.get("remediation"):
        line += " -> " + str(finding["remediation"])
    return " ".join(line.split())


def worst_status(findings):
    """``fail`` if any finding fails, else ``warn`` if any warns, else ``pass``."""
    severities = {f.get("severity") for f in findings or []}
    if "fail" in severities:
        return "fail"
    if "warn" in severities:
        return "warn"
    return "pass"


def sort_findings(findings):
    """Stable order for reports: fails first, then by GPU index (node-level last), then code."""
    def key(finding):
        gpu = finding.get("gpu_index")
        return (
            0 if finding.get("severity") == "fail" else 1,
            gpu is None,
            gpu if gpu is not None else 0,
            finding.get("code") or "",
            str(finding.get("ca") or ""),
            str(finding.get("port") or ""),
        )
    return sorted(findings or [], key=key)


def validate_finding(finding):
    """Return a list of problems with a finding's shape (empty when it follows the contract)."""
    problems = []
    for field in FIELDS:
        if field not in finding:
            problems.append("missing %s" % field)
    if finding.get("severity") not in SEVERITIES:
        problems.append("bad severity %r" % (finding.get("severity"),))
    if not _CODE.match(str(finding.get("code") or "")):
        problems.append("bad code %r" % (finding.get("code"),))
    if not finding.get("message"):
        problems.append("empty message")
    return problems
