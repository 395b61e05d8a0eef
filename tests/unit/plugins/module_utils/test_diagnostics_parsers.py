"""dcgmi diag / nvidia-smi nvlink / perfquery parsers and judges, on the real captures
(tests/fixtures/diagnostics/SOURCES.md)."""

from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm, health, nvlink, perfquery
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import validate_finding
from fixtures_path import FIXTURES as SHARED

DIAG = Path(__file__).resolve().parents[3] / "fixtures" / "diagnostics"
DCGM3_PASS = DIAG / "dcgm" / "dcgm3.1.0-r1-8gpu-pass-warning-prefix-nvidia-jsonresulttests.txt"
DCGM4_FAIL = DIAG / "dcgm" / "dcgm4.2.3-r1-gb10-software-fail-persistence-exit226.json"
NVLINK_A100 = SHARED / "host" / "nvidia-smi-nvlink-s-a100-sxm4-80gb-x8-12links.txt"


def _valid(findings):
    for finding in findings:
        assert validate_finding(finding) == [], finding
    return findings


# --- dcgmi diag ---------------------------------------------------------------------------

def test_dcgm3_document_after_a_warning_line_with_nulls_between_tests():
    parsed = dcgm.parse_dcgm_diag(DCGM3_PASS.read_text())
    assert parsed["schema"] == "3" and parsed["version"] == "3.1.0"
    assert parsed["preamble"] == "WARNING: THIS SHOULD NOT HAPPEN"
    # 9 Deployment checks on GPUs "0,...,7" plus the Custom "software" test once per GPU.
    assert len(parsed["results"]) == 17
    assert parsed["results"][0]["gpu_ids"] == list(range(8))
    assert [r["gpu_ids"] for r in parsed["results"][9:]] == [[i] for i in range(8)]
    assert {r["status"] for r in parsed["results"]} == {"pass"}
    assert parsed["tests_run"] == ["software"]
    assert dcgm.evaluate_dcgm(parsed, "node1", 1) == []


def test_dcgm3_pass_at_level_2_is_incomplete_not_a_pass():
    findings = _valid(dcgm.evaluate_dcgm(dcgm.parse_dcgm_diag(DCGM3_PASS.read_text()), "node1", 2))
    assert [f["code"] for f in findings] == ["DCGM_LEVEL_INCOMPLETE"]
    assert "memory, pcie" in findings[0]["message"]


def test_dcgm4_failing_document_becomes_a_coded_finding():
    parsed = dcgm.parse_dcgm_diag(DCGM4_FAIL.read_text())
    assert parsed["schema"] == "4" and parsed["version"] == "4.2.3" and parsed["driver_version"] == "580.82.09"
    assert parsed["test_summaries"] == {"software": "fail"}
    (result,) = parsed["results"]
    assert result["gpu_ids"] == [0] and result["status"] == "fail"
    (warning,) = result["warnings"]
    assert warning == {"error_id": 29, "error": "DCGM_FR_PERSISTENCE_MODE", "category": "SOFTWARE_OTHER",
                       "severity": "CONFIG", "message": warning["message"]}
    (finding,) = _valid(dcgm.evaluate_dcgm(parsed, "node2", 1, rc=226))
    assert finding["code"] == "DCGM_FR_PERSISTENCE_MODE" and finding["severity"] == "fail"
    assert finding["node"] == "node2" and finding["gpu_index"] == 0 and finding["dcgm_error_id"] == 29
    assert "Persistence mode for GPU 0 is disabled" in finding["message"]
    assert finding["remediation"]


def test_dcgm4_document_judged_at_level_2_names_the_tests_it_lacks():
    """validate runs DCGM 4 at level 2 (issue 27 item 6): a 4.x document whose memory and pcie tests did not
    report is incomplete, never a level-2 pass (no real 4.x level-2 capture was found; the level-1 one stands in)."""
    parsed = dcgm.parse_dcgm_diag(DCGM4_FAIL.read_text())
    findings = _valid(dcgm.evaluate_dcgm(parsed, "node2", 2, rc=226))
    assert [f["code"] for f in findings] == ["DCGM_FR_PERSISTENCE_MODE", "DCGM_LEVEL_INCOMPLETE"]
    assert "-r 2" in findings[1]["message"] and "memory, pcie" in findings[1]["message"]


def test_nonzero_exit_without_a_failing_test_is_a_run_error():
    parsed = dcgm.parse_dcgm_diag(DCGM3_PASS.read_text())
    (finding,) = _valid(dcgm.evaluate_dcgm(parsed, "node1", 1, rc=205))
    assert finding["code"] == "DCGM_RUN_ERROR" and "DCGM_ST_NVVS_ISOLATE_ERROR" in finding["message"]


def test_no_document_is_a_failure_not_a_pass():
    (finding,) = _valid(dcgm.evaluate_dcgm(None, "node3", 2, rc=127))
    assert finding["code"] == "DCGM_NO_RESULTS" and finding["severity"] == "fail"
    with pytest.raises(dcgm.DcgmParseError, match="no JSON"):
        dcgm.parse_dcgm_diag("Error: unable to connect to host engine at localhost.\n")
    with pytest.raises(dcgm.DcgmParseError, match="neither"):
        dcgm.parse_dcgm_diag('{"something": 1}')


def test_unknown_status_words_never_read_as_pass():
    assert dcgm.normalize_status("PASS") == dcgm.normalize_status("Pass") == "pass"
    assert dcgm.normalize_status("Not Run") == "not_run"
    assert dcgm.normalize_status("Inconclusive") == "unknown"


# --- nvidia-smi nvlink --------------------------------------------------------------------

def test_nvlink_status_a100_all_links_healthy():
    gpus = nvlink.parse_nvlink_status(NVLINK_A100.read_text())
    assert len(gpus) == 8 and all(len(g["links"]) == 12 for g in gpus)
    assert gpus[0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert {l["gbps"] for g in gpus for l in g["links"]} == {25.0}
    assert nvlink.expected_nvlink(gpus[0]["name"]) == (12, 25.0)
    assert nvlink.evaluate_nvlink(gpus, None, "node1", expected_links=12, expected_gbps=25.0) == []


def test_nvlink_status_judged_against_a_faster_model_flags_every_link():
    gpus = nvlink.parse_nvlink_status(NVLINK_A100.read_text())
    findings = _valid(nvlink.evaluate_nvlink(gpus, None, "node1", expected_links=18, expected_gbps=26.562))
    assert sorted({f["code"] for f in findings}) == ["NVLINK_COUNT_LOW", "NVLINK_SPEED_DEGRADED"]
    assert len(findings) == 16 and {f["gpu_index"] for f in findings} == set(range(8))


def test_nvlink_all_inactive_gpu_fails():
    gpus = nvlink.parse_nvlink_status((DIAG / "nvlink" / "nvlink-s-a100-gpu6-all-links-inactive-azurehpc.txt").read_text())
    assert gpus[0]["gpu_index"] == 6 and gpus[0]["all_inactive"] is True
    (finding,) = _valid(nvlink.evaluate_nvlink(gpus, None, "node4", expected_links=12, expected_gbps=25.0))
    assert finding["code"] == "NVLINK_ALL_INACTIVE" and finding["gpu_index"] == 6


def test_nvlink_elided_capture_is_not_counted_as_missing_links():
    gpus = nvlink.parse_nvlink_status((DIAG / "nvlink" / "nvlink-s-h100-gpu0-EDITED-links-elided-ml-engineering.txt").read_text())
    assert gpus[0]["elided"] and [l["link"] for l in gpus[0]["links"]] == [0, 17]
    assert nvlink.expected_nvlink(gpus[0]["name"]) == (18, 26.562)
    assert nvlink.evaluate_nvlink(gpus, None, "n", expected_links=18, expected_gbps=26.562) == []


def test_nvlink_error_counters_zero_pass_and_threshold_applies():
    errors = nvlink.parse_nvlink_errors((DIAG / "nvlink" / "nvlink-e-h100-gpu0-EDITED-links-elided-ml-engineering.txt").read_text())
    assert sorted(errors[0]["links"]) == [0, 1, 17]
    assert errors[0]["links"][17] == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
    assert nvlink.evaluate_nvlink([], errors, "n") == []
    # A negative limit turns the same real counters into findings: the comparison really runs.
    findings = _valid(nvlink.evaluate_nvlink([], errors, "n", error_max=-1))
    assert len(findings) == 3 and {f["severity"] for f in findings} == {"warn"}


def test_fabric_state_on_nvswitch_systems():
    gpus = [{"index": 0, "pci_bus_id": "00000000:18:00.0", "architecture": "Hopper",
             "fabric": {"state": "Completed", "status": "Success"}},
            {"index": 1, "pci_bus_id": "00000000:2A:00.0", "architecture": "Hopper",
             "fabric": {"state": "In Progress", "status": "N/A"}},
            {"index": 2, "pci_bus_id": "00000000:3A:00.0", "architecture": "Hopper", "fabric": None}]
    assert nvlink.evaluate_fabric(gpus, "n", nvswitch_present=False, fabric_manager_active=False) == []
    found = [(f["code"], f.get("gpu_index")) for f in _valid(nvlink.evaluate_fabric(gpus, "n", True, False))]
    # The GPUs are judged by health's own check (the same codes in both reports).
    assert sorted(found, key=str) == sorted([("FABRIC_MANAGER_DOWN", None), ("FABRIC_STATE_MISSING", 2),
                                             ("FABRIC_STATE_FAILURE", 1)], key=str)
    assert [f for f in found if f[0] != "FABRIC_MANAGER_DOWN"] == [
        (f["code"], f["gpu_index"]) for f in health.check_fabric("n", {"gpus": gpus, "nvswitch": True})]


def test_an_hgx_a100_whose_gpus_do_not_register_passes_the_fabric_check():
    """A100s report Fabric State N/A (they never register with the fabric): a running fabric manager is all
    their NVSwitch system needs. Judged per GPU as Hopper's are, every real A100 would fail."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi
    capture = SHARED / "nvidia-smi-xml" / "a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml"
    gpus = parse_nvidia_smi(capture.read_text())["gpus"]
    assert gpus and all(str((g.get("fabric") or {}).get("state")).lower() in ("n/a", "none") for g in gpus), gpus
    assert nvlink.evaluate_fabric(gpus, "n", nvswitch_present=True, fabric_manager_active=True) == []
    assert [f["code"] for f in nvlink.evaluate_fabric(gpus, "n", True, False)] == ["FABRIC_MANAGER_DOWN"]


def test_fabric_state_from_a_real_h100_capture_is_ready():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi
    gpus = parse_nvidia_smi((SHARED / "nvidia-smi-q" / "h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt").read_text())["gpus"]
    assert len(gpus) == 8
    assert nvlink.evaluate_fabric(gpus, "n", nvswitch_present=True, fabric_manager_active=True) == []


# --- perfquery ----------------------------------------------------------------------------

def test_perfquery_two_clean_ports():
    blocks = perfquery.parse_perfquery((DIAG / "perfquery" / "x-extended-2ports-clean-lid1719.txt").read_text())
    assert [(b["lid"], b["port"], b["kind"]) for b in blocks] == [(1719, 1, "Port extended"), (1719, 2, "Port extended")]
    assert blocks[0]["counters"]["PortXmitData"] == 36298026860928
    assert blocks[1]["counters"]["PortXmitWait"] == 36510964
    assert perfquery.evaluate_perfquery(blocks, "node1", "mlx5_0") == []


def test_perfquery_link_downed_fails_discards_warn():
    blocks = perfquery.parse_perfquery(
        (DIAG / "perfquery" / "x-extended-1port-linkdowned1-xmitdiscards20046-lid2052.txt").read_text())
    findings = _valid(perfquery.evaluate_perfquery(blocks, "node3", "mlx5_2"))
    assert [(f["code"], f["severity"], f["value"]) for f in findings] == [
        ("IB_COUNTER_LINK_DOWNED_COUNTER", "fail", 1),
        ("IB_COUNTER_PORT_XMIT_DISCARDS", "warn", 20046),
        ("IB_COUNTER_PORT_RCV_SWITCH_RELAY_ERRORS", "warn", 7),
    ]
    assert findings[0]["ca"] == "mlx5_2" and findings[0]["port"] == 1 and "mlx5_2 port 1" in findings[0]["message"]


def test_perfquery_rcv_error_details_block():
    (block,) = perfquery.parse_perfquery((DIAG / "perfquery" / "rcv-error-details-lid1719-port1.txt").read_text())
    assert block["kind"] == "PortRcvErrorDetails" and block["counters"]["PortMalformedPktErrors"] == 0
    assert perfquery.evaluate_perfquery([block], "n") == []
