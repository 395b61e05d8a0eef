#!/usr/bin/python3
"""Per-device GEMM throughput and memory bandwidth with torch, one JSON line per device.

  python3 gpufleet_microbench.py [--size 8192] [--dtype bf16] [--iters 20] [--copy-mib 1024]

GEMM: n x n x n matmuls, TFLOPS = 2 n^3 / time. Memory: device-to-device copy of --copy-mib MiB,
GB/s = 2 x bytes / time (each byte read once and written once). On a node without CUDA the same
code runs on the CPU and every line says "device": "cpu", so a CPU figure is never read as a GPU one.
"""

import argparse
import json
import sys
import time


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gemm(torch, device, n, dtype, iters):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _warm in range(3):
        a @ b
    _sync(torch, device)
    start = time.perf_counter()
    for _it in range(iters):
        a @ b
    _sync(torch, device)
    seconds = (time.perf_counter() - start) / iters
    return 2.0 * n ** 3 / seconds / 1e12, seconds


def copy_bandwidth(torch, device, mib, iters):
    src = torch.empty(mib * (1 << 20), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    _sync(torch, device)
    start = time.perf_counter()
    for _it in range(iters):
        dst.copy_(src)
    _sync(torch, device)
    seconds = (time.perf_counter() - start) / iters
    return 2.0 * src.numel() / seconds / 1e9


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=None, help="default 8192 on GPUs, 1024 on the CPU")
    parser.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--copy-mib", type=int, default=None, help="default 1024 on GPUs, 256 on the CPU")
    args = parser.parse_args(argv)
    import torch  # pylint: disable=import-outside-toplevel
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] or [torch.device("cpu")]
    on_gpu = devices[0].type == "cuda"
    args.size = args.size or (8192 if on_gpu else 1024)
    args.copy_mib = args.copy_mib or (1024 if on_gpu else 256)
    for device in devices:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        tflops, seconds = gemm(torch, device, args.size, dtype, args.iters)
        gbps = copy_bandwidth(torch, device, args.copy_mib, args.iters)
        print(json.dumps({"device": device.type, "index": device.index, "name": name, "dtype": args.dtype,
                          "gemm_n": args.size, "gemm_tflops": round(tflops, 4), "gemm_seconds": seconds,
                          "copy_mib": args.copy_mib, "copy_gbps": round(gbps, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
