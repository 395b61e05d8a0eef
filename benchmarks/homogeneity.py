"""Time the preflight's cluster half over 10,000 nodes' facts; exit 1 above the budget.

Facts come from the real captures (8x H100 `nvidia-smi -q`, ibstat of an 8x CX-7 node, the
Della lscpu) parsed once; every node gets its own copy with its own name, and a few nodes are
made different (an A100 node, an older driver, a down-trained HCA) so the outlier path is timed
too.

Gated (exit 1 above --budget): the cluster step the role runs once on the controller, i.e. the
homogeneity grouping and outlier findings over the 10,000 node summaries plus the compatibility
solver. Also printed, not gated: the per-node summary and profile checks, which the role runs on
each node's own fork (set_fact per host), so their cost is spread over the forks; --gate-all
gates the sum of everything instead.

    .venv/bin/python benchmarks/homogeneity.py [--nodes 10000] [--budget 1.0]
"""
from __future__ import annotations

import argparse
import copy
import gc
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO / "tests"))

import yaml  # noqa: E402

from fixtures_path import FIXTURES  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils import homogeneity as hom  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils import profiles  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import parse_lscpu  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import active_ports, parse_ibstat  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi  # noqa: E402


def base_facts():
    smi = parse_nvidia_smi((FIXTURES / "nvidia-smi-q/h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt").read_text())
    a100 = parse_nvidia_smi((FIXTURES / "nvidia-smi-xml/a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml").read_text())
    cas = parse_ibstat((FIXTURES / "ibstat/h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt").read_text())
    cpu = parse_lscpu((FIXTURES / "host/lscpu-della-h100-node-2x-xeon-8468.txt").read_text())
    gpu = {"status": "ok", "message": "", "driver_version": smi["driver_version"], "cuda_version": smi["cuda_version"],
           "gpus": smi["gpus"], "driver_gpu_count": 8, "pci_gpu_count": 8, "pci_nvswitch_count": 4, "nvswitch": True,
           "pci_devices": []}
    rdma = {"source": "ibstat", "cas": cas, "errors": [], "peermem_loaded": True, "active_ports": active_ports(cas)}
    host = {"cpu": {k: cpu[k] for k in ("model", "sockets", "cores", "threads", "numa_nodes")},
            "memory": {"total_mib": 2 * 1024 * 1024 - 9000, "ecc_active": True},
            "block_devices": [{"name": "nvme0n1", "nvme": True, "size_bytes": 3840755982336, "rotational": False}],
            "nics": [{"name": "eth0", "speed_mbps": 100000, "link": True, "mtu": 9000, "driver": "mlx5_core"}],
            "kernel": "5.15.0-105-generic", "secure_boot": "disabled",
            "virtualization": {"container": False, "vm": False, "type": None},
            "os": {"id": "ubuntu", "version_id": "22.04", "family": "debian"}}
    a100_gpu = dict(gpu, gpus=a100["gpus"] * 8, driver_version=a100["driver_version"])
    return gpu, rdma, host, a100_gpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds (default 1.0)")
    ap.add_argument("--gate-all", action="store_true", help="gate per-node work + cluster step together")
    args = ap.parse_args(argv)

    gpu, rdma, host, a100_gpu = base_facts()
    defaults = yaml.safe_load((REPO / "roles/preflight/defaults/main.yml").read_text())
    profile = profiles.resolve_profile("training", defaults["preflight_profiles"])
    supported = defaults["preflight_supported_os"]
    names = ["gpu%05d" % i for i in range(args.nodes)]
    # What Ansible would hand over: one independent facts triple per node (not timed).
    facts = {}
    for i, n in enumerate(names):
        g = a100_gpu if i == args.nodes // 2 else gpu
        h = host
        if i == args.nodes // 3:
            g = dict(gpu, driver_version="535.161.08")
        if i == args.nodes // 4:
            h = dict(host, kernel="5.15.0-101-generic")
        facts[n] = (copy.deepcopy(g), rdma, h)

    try:
        from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import solve
    except ImportError:  # the solver is timed when it is there
        solve = None

    # The inputs are long-lived (Ansible's hostvars); keep the cyclic GC from re-walking
    # them on every collection, as it would not in a run that holds them from the start.
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    summaries = {n: profiles.node_summary(*facts[n]) for n in names}
    t1 = time.perf_counter()
    node_findings = [f for n in names for f in profiles.check_node(n, summaries[n], profile, len(names), supported)]
    t2 = time.perf_counter()
    report = hom.homogeneity(summaries, hom.DEFAULT_PROPERTIES)
    outliers = hom.outlier_findings(report)
    t3 = time.perf_counter()
    plan = None
    if solve is not None:
        models = sorted({g["name"] for s in summaries.values() for g in s["gpus"]})
        plan = solve({"cuda": "12.2", "torch": "2.1.2", "gpus": models, "os": "ubuntu22.04", "arch": "x86_64",
                      "nvswitch": True})
    t4 = time.perf_counter()

    cluster_step = t4 - t2
    total = t4 - t0
    gated = total if args.gate_all else cluster_step
    print("nodes: %d, properties: %d, profile findings: %d, outlier findings: %d (nodes %s)" % (
        len(names), len(hom.DEFAULT_PROPERTIES), len(node_findings), len(outliers), ", ".join(report["outlier_nodes"])))
    print("per node (spread over forks in a real run):")
    print("  node summaries   %.3f s" % (t1 - t0))
    print("  profile checks   %.3f s" % (t2 - t1))
    print("cluster step (run once):")
    print("  homogeneity      %.3f s" % (t3 - t2))
    print("  solver           %s" % ("%.3f s (driver branch %s)" % (t4 - t3, plan["driver_branch"]) if plan else "not found, skipped"))
    print("homogeneity + solver: %.3f s; everything: %.3f s; gated: %.3f s (budget %.1f s)" % (
        cluster_step, total, gated, args.budget))
    expected = {names[args.nodes // 2], names[args.nodes // 3], names[args.nodes // 4]}
    if set(report["outlier_nodes"]) != expected:
        print("FAIL: outliers %s, expected %s" % (report["outlier_nodes"], sorted(expected)))
        return 2
    if gated > args.budget:
        print("FAIL: over budget")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
