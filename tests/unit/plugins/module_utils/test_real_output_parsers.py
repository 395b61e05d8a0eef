"""Issue 35: parsers on real output that is messier than the original fixtures. Each parser either parses what is
there or says "not checked" with the reason; none judges an absence. Captures: tests/fixtures/diagnostics/SOURCES.md
and tests/fixtures/SOURCES.md."""

from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_models, nvlink
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import validate_finding

DIAG = Path(__file__).resolve().parents[3] / "fixtures" / "diagnostics"
GB200 = DIAG / "nvlink" / "nvlink-s-gb200-gpu0-18links-nvlink5-excerpt-k8s-test-infra-issue371.txt"
NO_NVLINK = DIAG / "nvlink" / "nvlink-s-device-does-not-have-or-support-nvlink-checkbox-pr2727.txt"


# --- NVLink table: every GPU the solver knows has a row ----------------------------------------------------

@pytest.mark.parametrize("model", gpu_models.MODELS, ids=lambda m: m["key"])
def test_every_known_gpu_has_an_nvlink_row(model):
    row = gpu_models.nvlink_for_model(model["key"])
    assert model["key"] in gpu_models.NVLINK_BY_KEY
    if row["links"] is None:
        assert row["reason"], "a model whose links are not checked must say why"
    else:
        assert row["source"] and row["links"] >= 0
    if row["links"]:
        assert row["gbps"] is None or row["gbps"] > 0


def test_no_row_names_a_model_that_does_not_exist():
    assert set(gpu_models.NVLINK_BY_KEY) == {m["key"] for m in gpu_models.MODELS}


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA B300 SXM6 AC", (18, 53.125)), ("NVIDIA GB200", (18, 53.125)), ("NVIDIA B200", (18, 53.125)),
    ("NVIDIA H100 80GB HBM3", (18, 26.562)), ("NVIDIA A100-SXM4-80GB", (12, 25.0)),
    ("Tesla V100-SXM2-32GB", (6, 25.781)), ("NVIDIA L40S", (0, None)), ("NVIDIA A40", (None, None)),
])
def test_expected_nvlink_per_model(name, expected):
    assert nvlink.expected_nvlink(name) == expected


def test_an_unknown_gpu_is_not_checked_with_its_name():
    row = nvlink.nvlink_expectation("NVIDIA JMJWOA-Generic-GPU")
    assert row["links"] is None and "JMJWOA" in row["reason"]


# --- nvidia-smi nvlink -s ------------------------------------------------------------------------------------

def test_a_real_gb200_passes_its_nvlink5_row():
    status = nvlink.parse_nvlink_status(GB200.read_text())
    assert [len(g["links"]) for g in status] == [18]
    links, gbps = nvlink.expected_nvlink(status[0]["name"])
    assert nvlink.evaluate_nvlink(status, None, "n", expected_links=links, expected_gbps=gbps) == []
    assert nvlink.nvlink_not_checked(status) == []


def test_a_gpu_without_nvlink_is_not_checked_not_judged_as_zero_links():
    status = nvlink.parse_nvlink_status(NO_NVLINK.read_text())
    assert status[0]["links"] == [] and status[0]["message"] == "Device does not have or support Nvlink"
    # Even judged against an 18-link model, the tool's refusal is not "0 links".
    assert nvlink.evaluate_nvlink(status, None, "n", expected_links=18, expected_gbps=26.562) == []
    (entry,) = nvlink.nvlink_not_checked(status)
    assert entry["check"] == "nvlink" and entry["gpu_index"] == 0
    assert "Device does not have or support Nvlink" in entry["reason"]


def test_a_gpu_listing_nothing_is_not_checked_and_one_with_links_still_judged():
    text = GB200.read_text() + "GPU 1: NVIDIA GB200 (UUID: GPU-39ac7bce-e3d6-b426-008e-fa47897c72d5)\n"
    status = nvlink.parse_nvlink_status(text)
    assert [g["unchecked"] is None for g in status] == [True, False]
    assert "no output under its header" in status[1]["unchecked"]
    slow = nvlink.evaluate_nvlink(status, None, "n", expected_links=18, expected_gbps=60.0)
    assert [(f["code"], f["gpu_index"]) for f in slow] == [("NVLINK_SPEED_DEGRADED", 0)]
    assert all(validate_finding(f) == [] for f in slow)
