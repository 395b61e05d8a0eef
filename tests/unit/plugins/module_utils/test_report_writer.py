"""The one report writer: findings as JUnit / Markdown / JSON; not-checked is never rendered as a pass."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm
from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer as rw

DCGM4_FAIL = Path(__file__).resolve().parents[3] / "fixtures" / "diagnostics" / "dcgm" / \
    "dcgm4.2.3-r1-gb10-software-fail-persistence-exit226.json"


def _cases(xml):
    root = ET.fromstring(xml)
    return root, {c.get("name"): c for c in root.iter("testcase")}


def _status(case):
    if case.find("failure") is not None:
        return "fail"
    if case.find("skipped") is not None:
        return "skip"
    return "pass"


def _finding(code, severity, node, message="m"):
    return {"code": code, "severity": severity, "node": node, "message": message}


def test_junit_names_the_failing_node_and_check():
    findings = dcgm.evaluate_dcgm(dcgm.parse_dcgm_diag(DCGM4_FAIL.read_text()), "node2", 1, rc=226)
    cases = rw.findings_cases(findings, ["node1", "node2"], ["dcgm", "nvlink"],
                              {"node1": [{"check": "nvlink", "reason": "nvidia-smi nvlink -s listed no GPU"}],
                               "node2": [{"check": "nvlink", "reason": "nvidia-smi nvlink -s listed no GPU"}]})
    root, by_name = _cases(rw.render_junit("gpufleet.diagnostics", cases, failure_type="NodeCheckFailed"))
    assert root.get("tests") == "4" and root.get("failures") == "1" and root.get("skipped") == "2"
    assert by_name["node2.dcgm"].find("failure").get("message").startswith("DCGM_FR_PERSISTENCE_MODE")
    assert by_name["node2.dcgm"].find("failure").get("type") == "NodeCheckFailed"
    assert _status(by_name["node1.dcgm"]) == "pass"
    assert "listed no GPU" in by_name["node1.nvlink"].find("skipped").get("message")
    assert rw.check_of("BANDWIDTH_NODE_SLOW") == "bandwidth" and rw.check_of("ECC_X") == "other"


def test_one_case_per_node_without_checks_warnings_pass_fails_fail():
    findings = [_finding("ECC_UNCORRECTABLE_VOLATILE", "fail", "node2", "2 errors"),
                _finding("PCIE_LINK_DEGRADED", "warn", "node1", "x8")]
    root, by_name = _cases(rw.render_junit("gpufleet.health", rw.findings_cases(findings, ["node1", "node2"])))
    assert sorted(by_name) == ["node1", "node2"]
    assert _status(by_name["node2"]) == "fail" and "2 errors" in by_name["node2"].find("failure").text
    assert _status(by_name["node1"]) == "pass" and "WARN PCIE_LINK_DEGRADED" in by_name["node1"].find("system-out").text
    assert root.get("failures") == "1"


def test_empty_findings_pass_every_node_checked():
    root, by_name = _cases(rw.render_junit("s", rw.findings_cases([], ["node1", "node2"], ["dcgm"])))
    assert {n: _status(c) for n, c in by_name.items()} == {"node1.dcgm": "pass", "node2.dcgm": "pass"}
    assert root.get("tests") == "2" and root.get("failures") == "0" and root.get("skipped") == "0"


def test_no_node_checked_is_not_a_pass():
    root, by_name = _cases(rw.render_junit("s", rw.findings_cases([], [])))
    assert [_status(c) for c in by_name.values()] == ["skip"]
    assert root.get("skipped") == "1"


def test_not_checked_entries_are_never_rendered_as_a_pass():
    findings = [_finding("BANDWIDTH_LINK_SLOW", "warn", "node1")]
    not_checked = [{"check": "pair tests", "node": "node3", "reason": "no RDMA port"},
                   {"check": "inter-node bandwidth", "reason": "no ring figure was measured"}]
    cases = rw.findings_cases(findings, ["node1", "node2"], not_checked=not_checked, nodes_not_checked=["node4"],
                              not_checked_reason="unreachable")
    statuses = {c["name"]: c["status"] for c in cases}
    assert statuses == {"node1": "pass", "node2": "pass", "node3.pair tests": "skip",
                        "cluster.inter-node bandwidth": "skip", "node4": "skip"}
    # A check not checked on a node with only warnings stays skipped, not passed.
    cases = rw.findings_cases(findings, ["node1"], ["bandwidth"], {"node1": [{"check": "bandwidth", "reason": "r"}]})
    assert [c["status"] for c in cases] == ["skip"]
    table = rw.markdown_case_table(rw.findings_cases([], ["node1"], nodes_not_checked=["node2"]))
    assert "| node1 | PASS | pass |" in table and "| node2 | SKIP | not checked: not checked |" in table


def test_cluster_wide_findings_get_a_case_of_their_own():
    cases = rw.findings_cases([_finding("STACK_PLAN", "fail", None, "no CUDA fits")], ["node1"])
    assert {c["name"]: c["status"] for c in cases} == {"node1": "pass", "cluster": "fail"}


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="not_checked"):
        rw.render_junit("s", [{"name": "x", "status": "not_checked"}])
    with pytest.raises(ValueError, match="maybe"):
        rw.markdown_case_table([{"name": "x", "status": "maybe"}])


def test_junit_properties_and_escaping():
    cases = [rw.make_case("a<b", "fail", 'say "no" & <stop>', "x < y")]
    xml = rw.render_junit("suite", cases, title="gpufleet smoke", properties=[("backend", "gloo")])
    root, by_name = _cases(xml)
    assert root.get("name") == "gpufleet smoke" and root.find("testsuite").get("name") == "suite"
    assert root.find(".//property").get("value") == "gloo"
    assert by_name["a<b"].find("failure").get("message") == 'say "no" & <stop>'
    assert by_name["a<b"].find("failure").text == "x < y"


def test_markdown_table_escapes_cells_and_keeps_one_line_per_case():
    cases = [rw.make_case("node1", "fail", "A|B: broke", "A|B: broke\nC: too"), rw.make_case("node2", "pass", "", "W\nX")]
    table = rw.markdown_case_table(cases, head="node")
    assert table == ["| node | result | detail |", "|---|---|---|", "| node1 | FAIL | A\\|B: broke |", "| node2 | PASS | W; X |"]


def test_json_keeps_the_stage_key_order():
    text = rw.render_json({"status": "pass", "cluster": "c", "when": Path("/x")})
    assert text.endswith("\n") and list(json.loads(text)) == ["status", "cluster", "when"]


def test_report_dir_default_order():
    assert rw.report_dir("/srv/r", {"GPUFLEET_REPORT_DIR": "/env"}, "/cwd") == "/srv/r"
    assert rw.report_dir("", {"GPUFLEET_REPORT_DIR": "/env"}, "/cwd") == "/env"
    assert rw.report_dir(None, {}, "/cwd/") == "/cwd/reports"
