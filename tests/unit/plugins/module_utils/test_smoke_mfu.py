"""The smoke report carries MFU: the job's model FLOPs over the GPUs' dense datasheet peak (gpu_peaks.py)."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_render as srd, smoke_report as sr, smoke_verdict as sv

# The smoke job's MLP 64-256-256-10: 6 x (64*256 + 256*256 + 256*10) FLOPs per sample.
FLOPS = 6 * (64 * 256 + 256 * 256 + 256 * 10)


def test_an_nccl_run_on_h100s_gets_its_mfu_against_the_fp32_datasheet_peak():
    training = {"train_flops_per_sample": FLOPS, "samples_per_s": 1.0e6, "dtype": "fp32"}
    mfu = sr.model_flops_utilization(training, "NVIDIA H100 80GB HBM3", "nccl", 16)
    assert mfu["model_tflops"] == pytest.approx(FLOPS * 1e6 / 1e12)
    assert mfu["peak_tflops_per_gpu"] == 67.0 and mfu["gpus"] == 16 and mfu["reason"] is None
    assert mfu["value"] == pytest.approx(FLOPS * 1e6 / 1e12 / (67.0 * 16))
    assert "h100" in mfu["source"]


@pytest.mark.parametrize("training, gpu, backend, reason", [
    ({"train_flops_per_sample": FLOPS, "samples_per_s": 300.0, "dtype": "fp32"}, None, "gloo", "a CPU run (gloo)"),
    ({"train_flops_per_sample": FLOPS, "samples_per_s": 300.0, "dtype": "fp32"}, "NVIDIA GeForce RTX 4090", "nccl",
     "no datasheet row"),
    ({"samples_per_s": 300.0, "dtype": "fp32"}, "NVIDIA H100 80GB HBM3", "nccl", "no model FLOPs"),
])
def test_no_mfu_without_a_gpu_peak_says_why_and_keeps_the_achieved_figure(training, gpu, backend, reason):
    mfu = sr.model_flops_utilization(training, gpu, backend, 2)
    assert mfu["value"] is None and reason in mfu["reason"]
    if "train_flops_per_sample" in training:
        assert mfu["model_tflops"] == pytest.approx(FLOPS * 300.0 / 1e12)


def test_the_report_and_its_markdown_carry_the_mfu():
    training = {"model": "mlp 64-256-256-10", "train_flops_per_sample": FLOPS, "samples_per_s": 2.0e6, "dtype": "fp32",
                "steps": 100, "per_gpu_batch": 64, "global_batch": 1024, "lr": 0.05, "loss_first": 2.3, "loss_last": 0.4,
                "loss_drop": 0.8, "nonfinite_values": 0, "params_in_sync": True, "step_time_ms": 1.0, "steps_per_s": 1000.0}
    result = {"world_size": 16, "backend": "nccl", "device": "cuda", "versions": {}, "sweep": {"rows": []},
              "nodes": ["node1", "node2"],
              "training": training}
    out = {"node": "node1", "rollcall": {"ok": True}, "torchrun_rc": 0, "timed_out": False, "last_stages": {},
           "nccl_lines": [], "log_tail": [], "result": result, "error": None}
    gpu = {"status": "ok", "driver_gpu_count": 8, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}
    nodes = {n: {"address": "10.0.0.%d" % i, "nproc": 8, "gpu": gpu, "probe": {"cuda_device_count": 8}}
             for i, n in enumerate(["node1", "node2"], 1)}
    report = sr.build_report("c", ["node1", "node2"], nodes, {"node1": out, "node2": dict(out, node="node2", result=None)},
                             "nccl")
    sv.evaluate(report, sv.resolve_thresholds(report, {}))
    mfu = report["training"]["mfu"]
    assert mfu["value"] == pytest.approx(FLOPS * 2.0e6 / 1e12 / (67.0 * 16)) and mfu["dtype"] == "fp32"
    assert "MFU: 0.0" in srd.render_markdown(report) and "x 67.0 TFLOPS dense datasheet peak" in srd.render_markdown(report)
