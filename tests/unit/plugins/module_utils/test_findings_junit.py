"""JUnit from diagnostics findings: the failing node/check is a failure, not-checked is skipped."""

import xml.etree.ElementTree as ET
from pathlib import Path

from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings_junit import check_of, render_findings_junit

DCGM4_FAIL = Path(__file__).resolve().parents[3] / "fixtures" / "diagnostics" / "dcgm" / \
    "dcgm4.2.3-r1-gb10-software-fail-persistence-exit226.json"


def test_junit_names_the_failing_node_and_check():
    findings = dcgm.evaluate_dcgm(dcgm.parse_dcgm_diag(DCGM4_FAIL.read_text()), "node2", 1, rc=226)
    xml = render_findings_junit("gpufleet.diagnostics", ["node1", "node2"], ["dcgm", "nvlink"], findings,
                                {"node1": [{"check": "nvlink", "reason": "nvidia-smi nvlink -s listed no GPU"}],
                                 "node2": [{"check": "nvlink", "reason": "nvidia-smi nvlink -s listed no GPU"}]})
    root = ET.fromstring(xml)
    assert root.get("tests") == "4" and root.get("failures") == "1" and root.get("skipped") == "2"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["node2.dcgm"].find("failure").get("message").startswith("DCGM_FR_PERSISTENCE_MODE")
    assert cases["node1.dcgm"].find("failure") is None and cases["node1.dcgm"].find("skipped") is None
    assert "listed no GPU" in cases["node1.nvlink"].find("skipped").get("message")
    assert check_of("BANDWIDTH_NODE_SLOW") == "bandwidth" and check_of("ECC_X") == "other"
