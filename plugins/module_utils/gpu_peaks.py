# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Datasheet peaks per GPU model: dense tensor TFLOPS per dtype and memory bandwidth, one sourced row each.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import. Keyed by the model keys of
gpu_models.py (``lookup_model(name)["key"]``), so any name nvidia-smi or torch prints finds its row.

NVIDIA's datasheets print the tensor figures *with sparsity* (marked "*", "Shown with sparsity.
Specifications 1/2 lower without sparsity"); dense matmuls, which is what training runs and what the
GEMM benchmark measures, get half of that. Every figure below is the dense one. fp32 is the non-tensor
(CUDA core) rate; tf32 the dense tensor rate. ``None`` means the part has no such path (no fp8 before
Ada/Hopper, no bf16 before Ampere). Memory bandwidth is the datasheet's, in GB/s (10^9 bytes).

The rows were cross-checked against stas00/ml-engineering compute/accelerator/README.md @ 744d01e1
("TFLOPS comparison table" and "Accelerator memory size and speed", both dense), which cites the same
datasheets. A model without a row is reported as not compared, never judged against a guess.
"""

from __future__ import annotations

try:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import lookup_model
except ImportError:  # pragma: no cover - loaded by path (tests/gpu) without the collection
    from gpu_models import lookup_model  # type: ignore

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


def _row(fp32, tf32, bf16, fp16, fp8, memory_gbps, source):
    return {"dense_tflops": {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": fp16, "fp8": fp8},
            "memory_gbps": memory_gbps, "source": source}


_H100 = "https://www.nvidia.com/en-us/data-center/h100/ (H100 datasheet; tensor figures with sparsity halved)"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/ (H200 datasheet; tensor figures with sparsity halved)"
_A100 = "https://www.nvidia.com/en-us/data-center/a100/ (A100 datasheet; tensor figures with sparsity halved)"

PEAKS = {
    # Hopper
    "h100-sxm5-80gb": _row(67.0, 494.5, 989.5, 989.5, 1979.0, 3350.0, _H100 + ", H100 SXM: 3.35 TB/s HBM3"),
    "h100-pcie": _row(51.0, 378.0, 756.5, 756.5, 1513.0, 2000.0, _H100 + ", H100 PCIe: 2 TB/s HBM2e"),
    "h100-nvl": _row(60.0, 417.5, 835.5, 835.5, 1670.5, 3900.0, _H100 + ", H100 NVL: 3.9 TB/s HBM3"),
    "h200": _row(67.0, 494.5, 989.5, 989.5, 1979.0, 4800.0, _H200 + ", H200 SXM: 4.8 TB/s HBM3e"),
    "h200-nvl": _row(60.0, 417.5, 835.5, 835.5, 1670.5, 4800.0, _H200 + ", H200 NVL: 4.8 TB/s HBM3e"),
    # Blackwell (per GPU: the DGX/HGX B200 eight-GPU figures divided by eight, sparsity halved)
    "b200": _row(80.0, 1125.0, 2250.0, 2250.0, 4500.0, 8000.0,
                 "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet (DGX B200; per GPU, dense); "
                 "8 TB/s HBM3e per GPU"),
    # Ampere
    "a100-sxm4-80gb": _row(19.5, 156.0, 312.0, 312.0, None, 2039.0, _A100 + ", A100 80GB SXM: 2,039 GB/s HBM2e"),
    "a100-sxm4-40gb": _row(19.5, 156.0, 312.0, 312.0, None, 1555.0, _A100 + ", A100 40GB SXM: 1,555 GB/s HBM2"),
    "a100-pcie-80gb": _row(19.5, 156.0, 312.0, 312.0, None, 1935.0, _A100 + ", A100 80GB PCIe: 1,935 GB/s HBM2e"),
    "a100-pcie-40gb": _row(19.5, 156.0, 312.0, 312.0, None, 1555.0, _A100 + ", A100 40GB PCIe: 1,555 GB/s HBM2"),
    # Ada
    "l40s": _row(91.6, 183.0, 362.05, 362.05, 733.0, 864.0,
                 "https://www.nvidia.com/en-us/data-center/l40s/ (L40S datasheet; sparsity halved); 864 GB/s GDDR6"),
    "l4": _row(30.3, 60.0, 121.0, 121.0, 242.5, 300.0,
               "https://www.nvidia.com/en-us/data-center/l4/ (L4 datasheet; sparsity halved); 300 GB/s GDDR6"),
    # Volta and Turing: fp16 tensor cores, no bf16 or fp8 path
    "v100-sxm2-32gb": _row(15.7, None, None, 125.0, None, 900.0,
                           "https://www.nvidia.com/en-us/data-center/v100/ (V100 datasheet, SXM2): 900 GB/s HBM2"),
    "v100-sxm2-16gb": _row(15.7, None, None, 125.0, None, 900.0,
                           "https://www.nvidia.com/en-us/data-center/v100/ (V100 datasheet, SXM2): 900 GB/s HBM2"),
    "v100-pcie-32gb": _row(14.0, None, None, 112.0, None, 900.0,
                           "https://www.nvidia.com/en-us/data-center/v100/ (V100 datasheet, PCIe): 900 GB/s HBM2"),
    "v100-pcie-16gb": _row(14.0, None, None, 112.0, None, 900.0,
                           "https://www.nvidia.com/en-us/data-center/v100/ (V100 datasheet, PCIe): 900 GB/s HBM2"),
    "v100s-pcie-32gb": _row(16.4, None, None, 130.0, None, 1134.0,
                            "https://www.nvidia.com/en-us/data-center/v100/ (V100S PCIe datasheet): 1,134 GB/s HBM2"),
    "t4": _row(8.1, None, None, 65.0, None, 320.0,
               "https://www.nvidia.com/en-us/data-center/tesla-t4/ (T4 datasheet, mixed precision): 320 GB/s GDDR6"),
}


def peak_row(name_or_key):
    """``{model_key, dense_tflops, memory_gbps, source}`` for a GPU name or model key, or None."""
    model = lookup_model(name_or_key)
    key = model["key"] if model else str(name_or_key or "").lower()
    row = PEAKS.get(key)
    if row is None:
        return None
    return dict(row, model_key=key, dense_tflops=dict(row["dense_tflops"]))


def peak_tflops(name_or_key, dtype):
    """(dense TFLOPS or None, source or the reason there is none)."""
    row = peak_row(name_or_key)
    if row is None:
        return None, "no datasheet row for %s in gpu_peaks.py" % name_or_key
    value = row["dense_tflops"].get(dtype)
    if value is None:
        return None, "%s has no %s tensor path (%s)" % (row["model_key"], dtype, row["source"])
    return value, row["source"]
