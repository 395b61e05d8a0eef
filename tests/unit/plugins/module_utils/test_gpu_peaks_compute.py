"""The datasheet table (gpu_peaks.py) and the per-GPU verdict (gpu_compute.py)."""

import json

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_compute, gpu_peaks
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import MODELS, lookup_model
from fixtures_path import FIXTURES

PUBLISHED = json.loads((FIXTURES / "microbench" / "h100-sxm-published-measurements.json").read_text())


def test_every_row_is_a_gpu_models_key_with_a_source_and_dense_figures():
    keys = {m["key"] for m in MODELS}
    for key, row in gpu_peaks.PEAKS.items():
        assert key in keys, key
        assert row["source"].startswith("https://") and row["memory_gbps"] > 0
        figures = row["dense_tflops"]
        assert set(figures) == set(gpu_peaks.DTYPES)
        # Dense tensor rates double per halving of the format where both exist (the datasheets' ladder; the
        # L40S sheet itself prints bf16 362.05 beside fp8 733, hence 2 %).
        if figures["bf16"] and figures["fp8"]:
            assert figures["fp8"] == pytest.approx(2 * figures["bf16"], rel=0.02)
        if figures["tf32"] and figures["bf16"]:
            assert figures["bf16"] == pytest.approx(2 * figures["tf32"], rel=0.02)


@pytest.mark.parametrize("name, dtype, value", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.5), ("NVIDIA H100 80GB HBM3", "fp8", 1979.0),
    ("NVIDIA H200", "bf16", 989.5), ("NVIDIA A100-SXM4-80GB", "bf16", 312.0), ("NVIDIA B200", "fp8", 4500.0),
    ("Tesla T4", "fp16", 65.0),
])
def test_peaks_by_the_names_the_drivers_print(name, dtype, value):
    assert gpu_peaks.peak_tflops(name, dtype)[0] == value


def test_what_a_gpu_lacks_and_an_unknown_model_are_said():
    value, why = gpu_peaks.peak_tflops("NVIDIA A100-SXM4-80GB", "fp8")
    assert value is None and "no fp8 tensor path" in why
    value, why = gpu_peaks.peak_tflops("NVIDIA GeForce RTX 4090", "bf16")
    assert value is None and "no datasheet row" in why
    assert gpu_peaks.peak_row("NVIDIA H200")["memory_gbps"] == 4800.0
    assert lookup_model("NVIDIA H200")["key"] == gpu_peaks.peak_row("NVIDIA H200")["model_key"]


def _line(index, bf16, copy, name="NVIDIA H100 80GB HBM3"):
    return json.dumps({"device": "cuda", "index": index, "name": name, "gemm_tflops": {"bf16": bf16},
                       "gemm_skipped": {}, "copy_gbps": copy})


def _run(*lines):
    return {"stdout": "\n".join(["torch warming up"] + list(lines)), "rc": 0, "stderr": ""}


def test_the_published_h100_figures_pass_and_a_slow_gpu_is_named():
    bf16, copy = PUBLISHED["gemm_tflops"]["bf16"], PUBLISHED["copy_gbps"]
    runs = {"node1": _run(*[_line(i, bf16, copy) for i in range(8)]),
            "node2": _run(*[_line(i, bf16 * (0.4 if i == 3 else 1), copy) for i in range(8)])}
    result = gpu_compute.compute_verdict(["node1", "node2"], runs, expected_gpus=8)
    assert [(f["node"], f["code"], f["gpu_index"]) for f in result["findings"]] == [("node2", "GPU_GEMM_SLOW", 3)]
    assert result["gpus"][0]["gemm"]["bf16"]["efficiency"] == pytest.approx(bf16 / 989.5, abs=1e-4)
    assert result["not_checked"] == []


def test_gpus_equally_slow_fail_against_the_datasheet():
    runs = {"node1": _run(*[_line(i, 300.0, 1000.0) for i in range(8)])}
    codes = {(f["code"], f["gpu_index"]) for f in gpu_compute.compute_verdict(["node1"], runs)["findings"]}
    assert codes == {(code, i) for i in range(8) for code in ("GPU_GEMM_BELOW_PEAK", "GPU_MEMORY_BELOW_PEAK")}


def test_cpu_figures_unknown_models_and_silent_nodes_are_not_checked_not_passed():
    cpu = json.dumps({"device": "cpu", "index": None, "name": "AMD EPYC", "gemm_tflops": {"fp32": 0.03},
                      "gemm_skipped": {}, "copy_gbps": 9.6})
    runs = {"node1": _run(cpu), "node2": _run(_line(0, 150.0, 900.0, name="NVIDIA GeForce RTX 4090")),
            "node3": {"stdout": "", "rc": 127, "stderr": "timeout: failed to run command '/opt/gpufleet/venv/bin/python'"},
            "node4": {"reason": "skipped"}}
    result = gpu_compute.compute_verdict(["node1", "node2", "node3", "node4"], runs)
    assert result["findings"] == []
    reasons = {n["node"]: n["reason"] for n in result["not_checked"]}
    assert "CPU figures (AMD EPYC)" in reasons["node1"]
    assert "no datasheet row for NVIDIA GeForce RTX 4090" in reasons["node2"]
    assert "rc 127" in reasons["node3"] and "failed to run command" in reasons["node3"]
    assert reasons["node4"] == "skipped"
    assert result["summary"][0].startswith("node1 CPU (AMD EPYC): fp32 0.0 TFLOPS")
