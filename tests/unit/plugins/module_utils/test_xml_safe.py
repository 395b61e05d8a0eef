"""Every XML the collection writes (JUnit of every stage, the smoke chart) survives text XML 1.0 forbids
(issue 35 N10): a host name or a tool message with NUL, BEL, an ANSI colour escape or a lone surrogate
(what surrogateescape makes of undecodable bytes) is written visibly and parses with a strict parser."""

from __future__ import annotations

import xml.dom.minidom
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.cluster.plugins.action import smoke_report as smoke_action
from ansible_collections.gpufleet.cluster.plugins.filter.findings_junit import findings_junit
from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer
from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_render as srd
from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_report as sr
from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_verdict as sv

BAD = "\x00\x07\x1b[31m\ud800x\udfff\ufffe<&>\""
HOST = "node" + BAD


def strict_parse(text: str):
    """Both strict parsers, on the UTF-8 bytes a report file holds."""
    data = text.encode("utf-8")
    xml.dom.minidom.parseString(data)
    return ET.fromstring(data)


def all_text(root) -> str:
    return " ".join([root.text or ""] + [value for element in root.iter() for value in
                                         list(element.attrib.values()) + [element.text or "", element.tail or ""]])


def assert_kept_visibly(root):
    text = all_text(root)
    assert "\\x1b[31m" in text and "\\x00\\x07" in text and "\\ud800x\\udfff" in text, text
    assert "<&>\"" in text  # escaped on the way in, the same characters on the way out


@pytest.mark.parametrize("value, expected", [
    ("\x00\x07\x1b[31m", "\\x00\\x07\\x1b[31m"),
    ("a\ud800b\udfff", "a\\ud800b\\udfff"),
    ("\ufffe\uffff", "\\ufffe\\uffff"),
    ("tab\tline\nret\r ok \U0001f600 \ue000", "tab\tline\nret\r ok \U0001f600 \ue000"),
    ("<a & 'b'>", "&lt;a &amp; 'b'&gt;"),
])
def test_xml_text_replaces_what_xml_forbids_and_escapes_the_rest(value, expected):
    assert report_writer.xml_text(value) == expected


def test_xml_attr_is_quoted_and_safe():
    assert strict_parse("<a v=%s/>" % report_writer.xml_attr(BAD + "\n")).get("v") == (
        "\\x00\\x07\\x1b[31m\\ud800x\\udfff\\ufffe<&>\"\n")


def test_report_writer_junit():
    cases = [report_writer.make_case(HOST, "fail", BAD, BAD), report_writer.make_case(HOST + ".b", "skip", BAD),
             report_writer.make_case(HOST + ".c", "pass", output=BAD)]
    root = strict_parse(report_writer.render_junit("suite" + BAD, cases, title=BAD, properties=[(BAD, BAD)],
                                                   failure_type=BAD))
    assert len(root.findall(".//testcase")) == 3
    assert_kept_visibly(root)


def test_findings_junit_filter():
    findings = [{"code": "DCGM_FR_" + BAD, "severity": "fail", "node": HOST, "message": BAD},
                {"code": "NVLINK_DOWN", "severity": "warn", "node": HOST, "message": BAD}]
    root = strict_parse(findings_junit(findings, [HOST], ["dcgm", "nvlink"], {HOST: [{"check": "fabric", "reason": BAD}]},
                                       suite=BAD, nodes_not_checked=["gone" + BAD], not_checked_reason=BAD))
    assert root.find(".//failure") is not None
    assert_kept_visibly(root)


def _smoke_report():
    report = sr.build_report("cluster" + BAD, [HOST], {}, {}, "gloo")
    sv.evaluate(report, sv.resolve_thresholds(report, None))
    report["verdict"]["checks"].append({"name": "tool" + BAD, "status": "fail", "message": BAD})
    return report


def test_smoke_junit_and_chart():
    report = _smoke_report()
    assert_kept_visibly(strict_parse(srd.render_junit(report)))
    assert "\\x1b[31m" in all_text(strict_parse(srd.render_svg(report)))


def test_smoke_report_action_writes_files_a_strict_parser_reads(tmp_path):
    report = _smoke_report()
    smoke_action.write_reports(report, None, str(tmp_path))
    for kind in ("junit", "chart"):
        path = report["report_files"][kind]
        xml.dom.minidom.parse(path)
        assert "\\x1b[31m" in all_text(ET.parse(path).getroot())
