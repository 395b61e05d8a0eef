# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""JUnit XML from findings: one test case per node and check, so a pipeline shows which node failed what.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import. A check is the code's family
(``DCGM_*`` -> dcgm, ``NVLINK_*`` -> nvlink, ...). A fail-level finding makes the case a <failure>;
a check listed as not checked makes it <skipped> with the reason (never a silent pass).
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

CHECK_PREFIXES = (("DCGM_", "dcgm"), ("NVLINK_", "nvlink"), ("FABRIC_", "fabric"), ("IB_COUNTER_", "ib_counters"),
                  ("BANDWIDTH_", "bandwidth"))


def check_of(code):
    for prefix, check in CHECK_PREFIXES:
        if str(code).startswith(prefix):
            return check
    return "other"


def render_findings_junit(suite, nodes, checks, findings, not_checked=None):
    """``nodes``: node names; ``checks``: check names run on every node; ``not_checked``: {node: [{check, reason}]}."""
    not_checked = not_checked or {}
    cases = []
    for node in nodes:
        skipped = {}
        for item in not_checked.get(node) or []:
            skipped.setdefault(item["check"], item["reason"])
        for check in checks:
            mine = [f for f in findings if f.get("node") == node and check_of(f.get("code")) == check]
            fails = [f for f in mine if f.get("severity") == "fail"]
            name = "%s.%s" % (node, check)
            if fails:
                text = "\n".join("%s: %s" % (f["code"], f.get("message", "")) for f in fails)
                cases.append(("fail", name, fails[0]["code"] + ": " + fails[0].get("message", ""), text))
            elif check in skipped and not mine:
                cases.append(("skip", name, "not checked: " + skipped[check], ""))
            else:
                text = "\n".join("%s %s: %s" % (f["severity"].upper(), f["code"], f.get("message", "")) for f in mine)
                cases.append(("pass", name, "", text or "pass"))
    failures = sum(1 for c in cases if c[0] == "fail")
    skips = sum(1 for c in cases if c[0] == "skip")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites name=%s tests="%d" failures="%d" skipped="%d">' % (quoteattr(suite), len(cases), failures, skips),
             '  <testsuite name=%s tests="%d" failures="%d" errors="0" skipped="%d">' % (
                 quoteattr(suite), len(cases), failures, skips)]
    for status, name, message, text in cases:
        lines.append('    <testcase classname=%s name=%s time="0">' % (quoteattr(suite), quoteattr(name)))
        if status == "fail":
            lines.append('      <failure message=%s type="NodeCheckFailed">%s</failure>' % (quoteattr(message), escape(text)))
        elif status == "skip":
            lines.append('      <skipped message=%s/>' % quoteattr(message))
        else:
            lines.append('      <system-out>%s</system-out>' % escape(text))
        lines.append('    </testcase>')
    lines += ["  </testsuite>", "</testsuites>", ""]
    return "\n".join(lines)
