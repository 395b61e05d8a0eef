"""gpu_diag_info in-process, with run_command fed the real dcgmi / nvlink / perfquery captures."""

import json
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import gpu_diag_info
from fixtures_path import FIXTURES

DIAG = Path(__file__).resolve().parents[3] / "fixtures" / "diagnostics"
DCGM_PASS = DIAG / "dcgm" / "dcgm3.1.0-r1-8gpu-pass-warning-prefix-nvidia-jsonresulttests.txt"
DCGM_FAIL = DIAG / "dcgm" / "dcgm4.2.3-r1-gb10-software-fail-persistence-exit226.json"
NVLINK_S = FIXTURES / "host" / "nvidia-smi-nvlink-s-a100-sxm4-80gb-x8-12links.txt"
PERF_BAD = DIAG / "perfquery" / "x-extended-1port-linkdowned1-xmitdiscards20046-lid2052.txt"


def run_module(monkeypatch, capsys, args, replies, bins=("dcgmi", "nvidia-smi", "perfquery")):
    calls = []

    def fake_run_tool(module, cmd, timeout_s, environ_update=None):
        assert timeout_s > 0, "every tool runs with a deadline"
        calls.append(cmd)
        key = " ".join(str(c).rsplit("/", 1)[-1] for c in cmd[:3])
        for prefix, reply in replies.items():
            if key.startswith(prefix):
                rc, path = reply
                return rc, path.read_text() if path else "", "", False
        return 1, "", "no reply for %s" % key, False

    monkeypatch.setattr(gpu_diag_info, "run_tool", fake_run_tool)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name if name in bins else None)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_diag_info.main()
    return json.loads(capsys.readouterr().out), calls


def test_passing_r1_and_healthy_nvlink(monkeypatch, capsys):
    result, calls = run_module(monkeypatch, capsys, {"node": "node1", "level": 1},
                               {"dcgmi diag -r": (0, DCGM_PASS), "nvidia-smi nvlink -s": (0, NVLINK_S),
                                "nvidia-smi nvlink -e": (1, None)})
    assert calls[0] == ["/usr/bin/dcgmi", "diag", "-r", "1", "-j"]
    assert result["changed"] is False and result["status"] == "pass" and result["findings"] == []
    assert result["dcgm"]["version"] == "3.1.0" and result["dcgm"]["tests_run"] == ["software"]
    assert len(result["nvlink"]) == 8
    assert [n["check"] for n in result["not_checked"]] == ["nvlink_errors"]


def test_failing_diag_and_ib_counters_are_findings(monkeypatch, capsys):
    ports = [{"ca": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "rate_gbps": 400},
             {"ca": "mlx5_bond_0", "port": 1, "link_layer": "Ethernet", "rate_gbps": 200}]
    result, calls = run_module(monkeypatch, capsys,
                               {"node": "node2", "level": 1, "checks": ["dcgm", "ib_counters"], "ib_ports": ports},
                               {"dcgmi diag -r": (226, DCGM_FAIL), "perfquery -x -C": (0, PERF_BAD)})
    assert result["status"] == "fail"
    assert [(f["code"], f["severity"]) for f in result["findings"]] == [
        ("DCGM_FR_PERSISTENCE_MODE", "fail"), ("IB_COUNTER_LINK_DOWNED_COUNTER", "fail"),
        ("IB_COUNTER_PORT_RCV_SWITCH_RELAY_ERRORS", "warn"), ("IB_COUNTER_PORT_XMIT_DISCARDS", "warn")]
    # Only the InfiniBand port is read; the RoCE bond has no IB port counters.
    assert calls[1] == ["/usr/bin/perfquery", "-x", "-C", "mlx5_0", "-P", "1"]


def test_missing_dcgmi_fails_and_says_why(monkeypatch, capsys):
    result, _calls = run_module(monkeypatch, capsys, {"node": "node3", "checks": ["dcgm"]}, {}, bins=())
    assert result["status"] == "fail" and result["findings"][0]["code"] == "DCGM_NO_RESULTS"
    assert "dcgmi not found" in result["not_checked"][0]["reason"]


def test_dcgmi_without_document_fails_with_its_error(monkeypatch, capsys, tmp_path):
    err = tmp_path / "out.txt"
    err.write_text("Error: unable to establish a connection to the specified host: localhost\n")
    result, _calls = run_module(monkeypatch, capsys, {"node": "node3", "checks": ["dcgm"], "level": 1},
                                {"dcgmi diag -r": (255, err)})
    (finding,) = result["findings"]
    assert finding["code"] == "DCGM_NO_RESULTS" and "unable to establish a connection" in finding["message"]


def test_a_dcgmi_killed_at_its_deadline_fails_and_names_the_deadline(monkeypatch, capsys):
    def hung_dcgmi(module, cmd, timeout_s, environ_update=None):
        assert timeout_s == 30
        return 124, "", "", True

    monkeypatch.setattr(gpu_diag_info, "run_tool", hung_dcgmi)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    with patch_module_args({"node": "node3", "checks": ["dcgm"], "level": 1, "diag_timeout": 30}):
        with pytest.raises(SystemExit):
            gpu_diag_info.main()
    result = json.loads(capsys.readouterr().out)
    (finding,) = result["findings"]
    assert result["status"] == "fail" and finding["code"] == "DCGM_NO_RESULTS"
    assert "did not finish within 30s (diag_timeout)" in finding["message"], finding["message"]


def test_a_gpu_that_refuses_nvlink_is_not_checked_with_the_tools_words(monkeypatch, capsys):
    # issue 35: "Device does not have or support Nvlink" (canonical/checkbox PR 2727) was judged as 0 links.
    refused = DIAG / "nvlink" / "nvlink-s-device-does-not-have-or-support-nvlink-checkbox-pr2727.txt"
    result, _calls = run_module(monkeypatch, capsys, {"node": "node1", "checks": ["nvlink"]},
                                {"nvidia-smi nvlink -s": (0, refused), "nvidia-smi nvlink -e": (0, refused)})
    assert result["findings"] == [] and result["status"] != "fail"
    reasons = {n["check"]: n["reason"] for n in result["not_checked"]}
    assert "Device does not have or support Nvlink" in reasons["nvlink"]
    assert "not in the model table" in reasons["nvlink_speed"]


def test_perfquery_that_printed_no_counters_is_not_checked(monkeypatch, capsys):
    # issue 35: treydock/infiniband_exporter issue 26's output, as if perfquery had exited 0: an empty answer passed.
    refused = DIAG / "perfquery" / "perfquery-mad-rpc-open-port-failed-roce-infiniband-exporter-issue26.txt"
    ports = [{"ca": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "rate_gbps": 400}]
    result, _calls = run_module(monkeypatch, capsys, {"node": "n", "checks": ["ib_counters"], "ib_ports": ports},
                                {"perfquery -x -C": (0, refused)})
    assert result["findings"] == []
    (entry,) = result["not_checked"]
    assert entry["check"] == "ib_counters" and "no counter block" in entry["reason"]
