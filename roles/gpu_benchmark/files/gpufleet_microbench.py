# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Per-device GEMM throughput and memory bandwidth with torch, one JSON line per device.

  python3 gpufleet_microbench.py [--dtypes bf16,fp16,fp8] [--cpu-dtypes fp32] [--size 8192] [--iters 20]
                                 [--copy-mib 1024]

GEMM: n x n x n matmuls in each dtype, TFLOPS = 2 n^3 / time (fp8 through torch._scaled_mm, on GPUs of
compute capability 8.9 or later; elsewhere it is skipped with the reason). Memory: a device-to-device
copy of --copy-mib MiB, GB/s = 2 x bytes / time (each byte read once and written once). Each GPU is
measured alone, one after the other; run it with CUDA_DEVICE_ORDER=PCI_BUS_ID so the indexes are
nvidia-smi's (the role does).

On a node without CUDA the same code runs on the CPU, in --cpu-dtypes (fp16 matmuls crawl on most CPUs),
and the line says "device": "cpu" with the CPU's model name, so a CPU figure is never read as a GPU one.
"""

import argparse
import json
import platform
import sys
import time

FP8_MIN_CC = (8, 9)


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(torch, device, fn, iters):
    for _warm in range(3):
        fn()
    _sync(torch, device)
    start = time.perf_counter()
    for _it in range(iters):
        fn()
    _sync(torch, device)
    return (time.perf_counter() - start) / iters


def gemm_tflops(torch, device, n, dtype_name, iters):
    """TFLOPS of an n x n x n matmul in ``dtype_name``; raises RuntimeError when it cannot run."""
    if dtype_name == "fp8":
        if device.type != "cuda" or torch.cuda.get_device_capability(device) < FP8_MIN_CC:
            raise RuntimeError("fp8 GEMM needs a GPU of compute capability 8.9 or later")
        fp8 = torch.float8_e4m3fn
        a = torch.randn(n, n, device=device).to(fp8)
        b = torch.randn(n, n, device=device).to(fp8).t()  # column-major, as _scaled_mm wants it
        one = torch.tensor(1.0, device=device)

        def run():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # pylint: disable=protected-access
    else:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)

        def run():
            return a @ b
    seconds = _timed(torch, device, run, iters)
    return 2.0 * n ** 3 / seconds / 1e12


def copy_gbps(torch, device, mib, iters):
    src = torch.empty(mib * (1 << 20), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = _timed(torch, device, lambda: dst.copy_(src), iters)
    return 2.0 * src.numel() / seconds / 1e9


def cpu_name():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def describe(torch, device):
    if device.type == "cpu":
        return {"device": "cpu", "index": None, "name": cpu_name(), "cores": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(device)
    major, minor = torch.cuda.get_device_capability(device)
    ids = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    bus_id = "%08x:%02x:%02x.0" % tuple(ids) if all(isinstance(i, int) for i in ids) else None
    return {"device": "cuda", "index": device.index, "name": torch.cuda.get_device_name(device),
            "compute_capability": "%d.%d" % (major, minor), "bus_id": bus_id}


def measure(torch, device, args):
    line = describe(torch, device)
    line.update(tool="gpufleet_microbench", torch=torch.__version__, gemm_n=args.size, gemm_iters=args.iters,
                gemm_tflops={}, gemm_skipped={}, copy_mib=args.copy_mib)
    for dtype_name in args.dtypes:
        try:
            line["gemm_tflops"][dtype_name] = round(gemm_tflops(torch, device, args.size, dtype_name, args.iters), 3)
        except (RuntimeError, AttributeError, TypeError) as exc:
            line["gemm_skipped"][dtype_name] = str(exc).splitlines()[0][:200]
    try:
        line["copy_gbps"] = round(copy_gbps(torch, device, args.copy_mib, args.iters), 1)
    except RuntimeError as exc:
        line["copy_gbps"] = None
        line["copy_error"] = str(exc).splitlines()[0][:200]
    return line


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", default="bf16,fp16,fp8", help="GPU dtypes, comma-separated: bf16, fp16, fp8, fp32")
    parser.add_argument("--cpu-dtypes", default="fp32", help="the dtypes measured when there is no GPU")
    parser.add_argument("--size", type=int, default=None, help="default 8192 on GPUs, 1024 on the CPU")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--copy-mib", type=int, default=None, help="default 1024 on GPUs, 256 on the CPU")
    args = parser.parse_args(argv)
    for name in ("dtypes", "cpu_dtypes"):
        values = [d.strip() for d in getattr(args, name).split(",") if d.strip()]
        unknown = sorted(set(values) - {"bf16", "fp16", "fp8", "fp32"})
        if unknown:
            parser.error("unknown dtype(s) %s in --%s; known: bf16, fp16, fp8, fp32" % (", ".join(unknown), name.replace("_", "-")))
        setattr(args, name, values)
    import torch  # pylint: disable=import-outside-toplevel
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] or [torch.device("cpu")]
    on_gpu = devices[0].type == "cuda"
    if not on_gpu:
        args.dtypes = args.cpu_dtypes
    args.size = args.size or (8192 if on_gpu else 1024)
    args.copy_mib = args.copy_mib or (1024 if on_gpu else 256)
    for device in devices:
        print(json.dumps(measure(torch, device, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
