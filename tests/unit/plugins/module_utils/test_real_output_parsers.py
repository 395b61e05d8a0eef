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


# --- NCCL_DEBUG=INFO lines from a trimmed log (smoke_parse) -------------------------------------------------

from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_parse  # noqa: E402

TRIMMED_IB = Path(__file__).resolve().parents[3] / "fixtures" / "nccl-debug" / \
    "nccl2-ib-2rank-trimmed-no-using-line-nccl-tests-issue350.log"


def test_a_trimmed_log_names_the_link_layer_from_its_queue_pairs():
    # NVIDIA/nccl-tests issue 350: the pasted log starts after "NET/IB : Using ..."; its "NET/IB: Dev 1 Port 1 qpn
    # 3038 mtu 5 LID 37" lines still show InfiniBand (a LID; RoCE prints a GID).
    info = smoke_parse.parse_nccl_debug(TRIMMED_IB.read_text())
    assert info["version"] is None and info["ib_devices"] == []
    assert info["inter_node"] == "IB" and info["gdr"] is True


def test_without_any_link_layer_evidence_the_transport_is_not_called_ib():
    # The same real lines without the two queue-pair lines: NCCL's IB verbs transport, link layer unknown.
    lines = [line for line in TRIMMED_IB.read_text().splitlines() if "qpn" not in line]
    info = smoke_parse.parse_nccl_debug(lines)
    assert info["inter_node"] == "IB/RoCE" and info["transports"] == ["NET/IB/RoCE"]


def test_a_gid_queue_pair_is_roce():
    line = "h:1:2 [0] NCCL INFO NET/IB: Dev 3 Port 1 qpn 2125 mtu 3 GID 3 (0/9301A8C0FFFF0000)"  # net_ib.cc's RoCE form
    info = smoke_parse.parse_nccl_debug([TRIMMED_IB.read_text().splitlines()[2], line])
    assert info["inter_node"] == "RoCE"


# --- dcgmi diag -j with text around the document --------------------------------------------------------------

from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm  # noqa: E402

DCGM3_PASS = DIAG / "dcgm" / "dcgm3.1.0-r1-8gpu-pass-warning-prefix-nvidia-jsonresulttests.txt"


def test_dcgm_document_found_past_text_with_braces_before_and_after_it():
    # The real 3.1.0 output (already led by "WARNING: THIS SHOULD NOT HAPPEN"), wrapped in lines a wrapper script
    # prints (synthetic, to show braces in the surrounding text no longer break the parse).
    text = "+ dcgmi diag -r 1 -j  # group {0,1}\n" + DCGM3_PASS.read_text() + "\nexit {rc=0}\n"
    parsed = dcgm.parse_dcgm_diag(text)
    assert parsed["version"] == "3.1.0" and parsed["schema"] == "3" and parsed["tests_run"] == ["software"]


def test_dcgm_text_without_a_document_still_says_what_was_there():
    with pytest.raises(dcgm.DcgmParseError, match="Error: unable to establish a connection"):
        dcgm.parse_dcgm_diag("Error: unable to establish a connection to the specified host: localhost\n")
    with pytest.raises(dcgm.DcgmParseError, match="not valid JSON"):
        dcgm.parse_dcgm_diag('Started {\n  "DCGM GPU Diagnostic": {')


# --- perfquery that answered without counters -----------------------------------------------------------------

from ansible_collections.gpufleet.cluster.plugins.module_utils import perfquery  # noqa: E402

PERF_REFUSED = DIAG / "perfquery" / "perfquery-mad-rpc-open-port-failed-roce-infiniband-exporter-issue26.txt"


def test_perfquery_without_counter_blocks_is_not_checked_with_its_words():
    text = PERF_REFUSED.read_text()
    blocks = perfquery.parse_perfquery(text)
    assert blocks == [] and perfquery.evaluate_perfquery(blocks, "n") == []
    reason = perfquery.perfquery_not_checked(blocks, text)
    assert reason.startswith("perfquery printed no counter block") and "Failed to open '(null)' port '0'" in reason


def test_perfquery_with_counters_is_checked():
    clean = (DIAG / "perfquery" / "x-extended-2ports-clean-lid1719.txt").read_text()
    assert perfquery.perfquery_not_checked(perfquery.parse_perfquery(clean), clean) is None
