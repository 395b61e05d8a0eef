# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The one report writer for a stage's results: JSON, JUnit XML and Markdown.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import. Every stage (preflight, health,
diagnostics, bandwidth, smoke) turns its results into *cases*, plain dicts::

    {"name": "node2.dcgm", "status": "fail", "message": "DCGM_FR_...: ...", "output": "..."}

``status`` is ``pass``, ``fail`` or ``skip`` (not checked / not applicable). A case with any other
status is an error, so nothing that was not checked is ever rendered as a pass. Stages that judge
findings (health, diagnostics, bandwidth, preflight) build their cases with :func:`findings_cases`,
one per node and check; the smoke test has its own named checks.
"""

from __future__ import annotations

import json
import re
from xml.sax.saxutils import escape, quoteattr

CASE_STATUSES = ("pass", "fail", "skip")
CLUSTER = "cluster"
# A finding's check is its code's family (DCGM_* -> dcgm, ...).
CHECK_PREFIXES = (("DCGM_", "dcgm"), ("NVLINK_", "nvlink"), ("FABRIC_", "fabric"), ("IB_COUNTER_", "ib_counters"),
                  ("BANDWIDTH_", "bandwidth"))


# What XML 1.0 forbids in a document: C0 controls but tab, newline and return; lone surrogates (undecodable
# bytes under surrogateescape); U+FFFE and U+FFFF. A host name or a tool's message may carry any of them.
_XML_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _visible(match):
    code = ord(match.group(0))
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def xml_safe(value):
    """The value as text XML 1.0 allows: each forbidden character written as its escape (\\x1b, \\ud800)."""
    return _XML_FORBIDDEN.sub(_visible, str(value))


def xml_text(value):
    """Element content for every XML the collection writes (JUnit, the smoke chart): safe, then escaped."""
    return escape(xml_safe(value))


def xml_attr(value):
    """An attribute value with its quotes: safe, then quoted (newlines kept as character references)."""
    return quoteattr(xml_safe(value))


def check_of(code):
    for prefix, check in CHECK_PREFIXES:
        if str(code).startswith(prefix):
            return check
    return "other"


def make_case(name, status, message="", output=""):
    if status not in CASE_STATUSES:
        raise ValueError("report case %r has status %r; a case is one of %s" % (name, status, ", ".join(CASE_STATUSES)))
    return {"name": str(name), "status": status, "message": message or "", "output": output or ""}


def _not_checked_entries(not_checked, nodes_not_checked, reason):
    """(node or None, check or None, reason) from {node: [{check, reason}]}, a flat list, or node names."""
    entries = []
    if isinstance(not_checked, dict):
        for node, items in not_checked.items():
            entries += [(node, item.get("check"), item.get("reason") or "not checked") for item in items or []]
    else:
        for item in not_checked or []:
            if isinstance(item, dict):
                entries.append((item.get("node"), item.get("check"), item.get("reason") or "not checked"))
            else:
                entries.append((None, None, str(item)))
    entries += [(node, None, reason) for node in nodes_not_checked or []]
    return entries


def _finding_text(findings, with_severity):
    if with_severity:
        return "\n".join("%s %s: %s" % (f["severity"].upper(), f["code"], f.get("message", "")) for f in findings)
    return "\n".join("%s: %s" % (f["code"], f.get("message", "")) for f in findings)


def _judged_case(name, mine, skip_reason=None):
    """Fail on a fail-level finding; else skipped when not checked; else pass with the warnings as output."""
    fails = [f for f in mine if f.get("severity") == "fail"]
    if fails:
        return make_case(name, "fail", fails[0]["code"] + ": " + fails[0].get("message", ""), _finding_text(fails, False))
    if skip_reason is not None:
        return make_case(name, "skip", "not checked: " + skip_reason)
    return make_case(name, "pass", output=_finding_text(mine, True) or "pass")


def findings_cases(findings, nodes, checks=None, not_checked=None, nodes_not_checked=None,
                   not_checked_reason="not checked"):
    """One case per node and check (per node when ``checks`` is empty), then one skipped case per
    not-checked entry no case covers; findings of no listed node (cluster-wide) get cases of their own."""
    findings = list(findings or [])
    checks = list(checks or [])
    entries = _not_checked_entries(not_checked, nodes_not_checked, not_checked_reason)
    skipped = {}
    for node, check, reason in entries:
        skipped.setdefault((node, check), reason)
    subjects = list(nodes or [])
    subjects += sorted({f.get("node") or CLUSTER for f in findings} - set(subjects))
    cases, covered = [], set()
    for node in subjects:
        mine = [f for f in findings if (f.get("node") or CLUSTER) == node]
        for check in checks or [None]:
            ours = [f for f in mine if check is None or check_of(f.get("code")) == check]
            key = (node, check)
            covered.add(key)
            name = node if check is None else "%s.%s" % (node, check)
            cases.append(_judged_case(name, ours, skipped.get(key)))
    for node, check, reason in entries:
        if (node, check) not in covered:
            covered.add((node, check))
            name = ".".join(str(part) for part in (node or CLUSTER, check) if part)
            cases.append(make_case(name, "skip", "not checked: " + reason))
    if not cases:
        cases.append(make_case(CLUSTER, "skip", "not checked: no node was checked"))
    return cases


def render_json(report):
    """A stage's JSON document, keys in the order the stage built them."""
    return json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"


def render_junit(suite, cases, title=None, properties=None, failure_type="CheckFailed"):
    """JUnit XML, one <testcase> per case: fail -> <failure>, skip -> <skipped>, pass -> <system-out>."""
    cases = [make_case(c["name"], c["status"], c.get("message"), c.get("output")) for c in cases]
    failures = sum(1 for c in cases if c["status"] == "fail")
    skipped = sum(1 for c in cases if c["status"] == "skip")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites name=%s tests="%d" failures="%d" skipped="%d">' % (
                 xml_attr(title or suite), len(cases), failures, skipped),
             '  <testsuite name=%s tests="%d" failures="%d" errors="0" skipped="%d">' % (
                 xml_attr(suite), len(cases), failures, skipped)]
    if properties:
        lines.append('    <properties>')
        for key, value in properties:
            lines.append('      <property name=%s value=%s/>' % (xml_attr(key), xml_attr(value)))
        lines.append('    </properties>')
    for case in cases:
        lines.append('    <testcase classname=%s name=%s time="0">' % (xml_attr(suite), xml_attr(case["name"])))
        if case["status"] == "fail":
            lines.append('      <failure message=%s type=%s>%s</failure>' % (
                xml_attr(case["message"]), xml_attr(failure_type), xml_text(case["output"])))
        elif case["status"] == "skip":
            lines.append('      <skipped message=%s/>' % xml_attr(case["message"]))
        else:
            lines.append('      <system-out>%s</system-out>' % xml_text(case["output"]))
        lines.append('    </testcase>')
    lines += ["  </testsuite>", "</testsuites>", ""]
    return "\n".join(lines)


def markdown_case_table(cases, head="check"):
    """The Markdown table of the cases (``| check | result | detail |``), one row per case."""
    lines = ["| %s | result | detail |" % head, "|---|---|---|"]
    for case in cases:
        case = make_case(case["name"], case["status"], case.get("message"), case.get("output"))
        detail = (case["message"] or case["output"]).replace("|", "\\|").replace("\n", "; ")
        lines.append("| %s | %s | %s |" % (case["name"], case["status"].upper(), detail))
    return lines


def report_dir(configured, environ, cwd):
    """The controller's report directory: ``gpufleet_report_dir`` when set, else ``$GPUFLEET_REPORT_DIR``,
    else ``reports/`` under the current directory (the one default every stage uses)."""
    if configured not in (None, ""):
        return str(configured)
    return environ.get("GPUFLEET_REPORT_DIR") or "%s/reports" % cwd.rstrip("/")
