"""validate's measuring steps on clusters of their own: the bandwidth pair tests, nccl-tests and the per-GPU
GEMM and memory benchmark (issue 27).

- Four HGX H100 nodes with their InfiniBand ports Active (the fabric stage installs ibstat and writes
  /etc/nccl.conf): node3's `link-slow` fault is named by ib_write_bw between the HCAs NCCL uses, and by
  nccl-tests' pairwise sendrecv search; a `gpu-slow` node has its GPU 0 named against the H100's datasheet
  and the other GPUs.
- Three nodes without RDMA: the pair tests fall back to iperf3 on the interface NCCL's socket transport
  uses, and say so; the real 10 Mbit/s token bucket of `link-slow` names its node. torch on these nodes
  has no CUDA, so the benchmark reports the CPU's figures, labelled, compared with no datasheet.

The stand-ins replay real captures (tests/fixtures/perftest, nccl-tests, microbench; SOURCES.md) scaled by
the faults: `link-slow` is 1/100 of the capture, `gpu-slow` 0.4 of it (tests/sim/standins/fabric.py).
Each is far outside the noise, and the thresholds are the roles' defaults or match the fault.
"""

from __future__ import annotations

import json
from pathlib import Path

from simharness import recap

REPO = Path(__file__).resolve().parents[2]
STANDINS = "/usr/lib/gpufleet-sim/standins"
# Where the simulated nodes have the benchmark programs: the stand-ins, under the real programs' names.
SIM_BENCHMARKS = {
    "gpu_benchmark_compute_command": [f"{STANDINS}/gpufleet_microbench"],
    "gpu_benchmark_nccl_tests_path": STANDINS,
    "gpu_benchmark_mpirun": [f"{STANDINS}/mpirun", "--allow-run-as-root"],
}
HCAS = ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
# The token bucket's 10 Mbit/s = 0.01 Gb/s; the iperf3 figure through it is below this whatever the load.
SHAPED_GBPS_CEILING = 0.05
TCP_FLOOR_FRACTION = 0.05


def validate(cluster, report_dir: Path, tags: str, **extra):
    proc = cluster.playbook(REPO / "playbooks" / "validate.yml", "--tags", tags,
                            "-e", json.dumps({"gpufleet_report_dir": str(report_dir),
                                              "gpufleet_baseline_dir": str(report_dir / "baselines"), **extra}))
    return proc, proc.stdout + proc.stderr


def report(report_dir: Path, name: str, out: str) -> dict:
    path = report_dir / name
    assert path.exists(), out[-6000:]
    return json.loads(path.read_text())


def failed(out: str) -> list[str]:
    return sorted(node for node, counts in recap(out).items() if counts.get("failed"))


def test_four_rdma_nodes_name_the_slow_link_between_hcas_and_the_slow_gpu(sim_cluster_factory, tmp_path):
    cluster = sim_cluster_factory("benchrdma", nodes=4, preinstall=["driver=535.183.01"], faults=["node3=link-slow"])
    proc = cluster.playbook(REPO / "playbooks" / "fabric.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]

    # 1. node3's link: named by ib_write_bw between the HCAs; the GPUs and nccl-tests of the others pass.
    proc, out = validate(cluster, tmp_path / "r1", "compute,bandwidth,nccl_tests", **SIM_BENCHMARKS)
    assert failed(out) == ["node3"], out[-6000:]
    bandwidth = report(tmp_path / "r1", "bandwidth.json", out)
    assert bandwidth["nodes"] == ["node1", "node2", "node3", "node4"]
    assert (bandwidth["network"], bandwidth["tool"], bandwidth["rails"]) == ("rdma", "ib_write_bw", 8), bandwidth["why"]
    assert bandwidth["verdict"]["slow_nodes"] == ["node3"], (bandwidth["verdict"], bandwidth["ring"])
    (named,) = [f for f in bandwidth["findings"] if f["severity"] == "fail"]
    assert (named["code"], named["node"], named["network"], named["tool"]) == (
        "BANDWIDTH_NODE_SLOW", "node3", "rdma", "ib_write_bw"), named
    assert named["devices"] == HCAS and "(rdma, ib_write_bw)" in named["message"]
    for figure in bandwidth["ring"] + bandwidth["pair_results"]:
        assert [(r["src_device"], r["dst_device"]) for r in figure["rails"]] == list(zip(HCAS, HCAS)), figure
        assert figure["rate_floor_gbps"] == 320.0, figure
        assert (figure["gbps"] < 320.0 * 0.05) == ("node3" in (figure["src"], figure["dst"])), figure
    compute = report(tmp_path / "r1", "compute.json", out)
    assert compute["findings"] == [] and len(compute["gpus"]) == 32, compute["findings"]
    # The replayed capture has no fp16 figure for the H100 (said per GPU) and no node has a compute baseline yet:
    # the step is not a pass.
    assert compute["status"] == "not_checked" and compute["not_checked"], compute
    assert {n["check"] for n in compute["not_checked"]} == {"fp16 GEMM", "compute baseline"}, compute["not_checked"]
    assert {(g["gemm"]["bf16"]["peak_tflops"], g["memory"]["peak_gbps"]) for g in compute["gpus"]} == {(989.5, 3350.0)}
    # nccl-tests ran after the bandwidth step had failed node3: within, across and between the other three.
    nccl = report(tmp_path / "r1", "nccl_tests.json", out)
    assert nccl["nodes"] == ["node1", "node2", "node4"] and nccl["findings"] == [], nccl["findings"]
    # No per-node baseline was stored yet: said for each node, never a pass on a missing comparison.
    assert nccl["status"] == "not_checked" and {n["check"] for n in nccl["not_checked"]} == {"nccl baseline"}, \
        nccl["not_checked"]
    assert [r["nodes"] for r in nccl["runs"]["single"]] == [["node1"], ["node2"], ["node4"]]
    assert nccl["runs"]["multi"]["nranks"] == 24 and nccl["runs"]["multi"]["busbw_gbps"] >= nccl["runs"]["multi"]["floor_gbps"]
    assert nccl["runs"]["pairs"] and all(p["busbw_gbps"] >= p["floor_gbps"] for p in nccl["runs"]["pairs"])

    # 2. nccl-tests on its own: across all four nodes the all-reduce is slow, and the pairwise sendrecv
    #    search names node3 (network nccl), with the smoke job's per-rail floor.
    proc, out = validate(cluster, tmp_path / "r2", "nccl_tests", **SIM_BENCHMARKS)
    nccl = report(tmp_path / "r2", "nccl_tests.json", out)
    assert nccl["pair_verdict"]["slow_nodes"] == ["node3"], (nccl["pair_verdict"], nccl["runs"]["pairs"])
    slow = [f for f in nccl["findings"] if f["code"] == "BANDWIDTH_NODE_SLOW"]
    assert [(f["node"], f["network"]) for f in slow] == [("node3", "nccl")], nccl["findings"]
    low = sorted(f["node"] for f in nccl["findings"] if f["code"] == "NCCL_TESTS_BUSBW_LOW" and f["run"] == "multi-node")
    assert low == ["node1", "node2", "node3", "node4"], nccl["findings"]
    assert not [f for f in nccl["findings"] if f["code"] == "NCCL_TESTS_BUSBW_LOW" and f["run"] == "single-node"]

    # 3. A slow GPU: node2's GPU 0 computes and copies at 0.4 of the others, named against its datasheet.
    cluster.clear("node3")
    cluster.fault("node2", "gpu-slow")
    proc, out = validate(cluster, tmp_path / "r3", "compute", **SIM_BENCHMARKS)
    assert failed(out) == ["node2"], out[-6000:]
    compute = report(tmp_path / "r3", "compute.json", out)
    named = sorted((f["node"], f["gpu_index"], f["code"], f["metric"]) for f in compute["findings"])
    assert named == [("node2", 0, "GPU_GEMM_SLOW", "bf16"), ("node2", 0, "GPU_GEMM_SLOW", "fp8"),
                     ("node2", 0, "GPU_MEMORY_SLOW", "memory")], compute["findings"]
    bf16 = [f for f in compute["findings"] if f["metric"] == "bf16"][0]
    assert bf16["gpu_bus_id"] and "of the datasheet's 989.5 TFLOPS" in bf16["message"]
    assert "GPU 0 (NVIDIA H100 80GB HBM3) bf16 GEMM" in " ".join(out.split())


def test_nodes_without_rdma_fall_back_to_iperf3_on_nccls_interface_and_report_cpu_figures(sim_cluster_factory, tmp_path):
    cluster = sim_cluster_factory("benchtcp", nodes=3, preinstall=["driver=535.183.01", "torch"],
                                  profile=["rtx4090-workstation"], faults=["node2=link-slow"])
    proc = cluster.playbook(REPO / "playbooks" / "fabric.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    proc, out = validate(cluster, tmp_path, "compute,bandwidth", bandwidth_isolation_floor_fraction=TCP_FLOOR_FRACTION)
    assert failed(out) == ["node2"], out[-6000:]

    bandwidth = report(tmp_path, "bandwidth.json", out)
    assert (bandwidth["network"], bandwidth["tool"]) == ("tcp", "iperf3"), bandwidth["why"]
    assert bandwidth["why"].startswith("TCP fallback: no Active RDMA port on node1 (")
    assert bandwidth["note"].startswith("TCP FALLBACK, not RDMA") and "TCP FALLBACK, not RDMA" in " ".join(out.split())
    for node in cluster.nodes:
        tcp = bandwidth["endpoints"][node]["tcp"]
        assert (tcp["interface"], tcp["address"], tcp["source"]) == (
            "eth0", cluster.ip(node), "NCCL_SOCKET_IFNAME=eth0 (/etc/nccl.conf)"), tcp
    assert bandwidth["verdict"]["slow_nodes"] == ["node2"], (bandwidth["verdict"], bandwidth["ring"])
    (named,) = [f for f in bandwidth["findings"] if f["severity"] == "fail"]
    assert (named["node"], named["network"], named["tool"], named["devices"]) == ("node2", "tcp", "iperf3", ["eth0"])
    sends = [p for p in bandwidth["pair_results"] if p["src"] == "node2"]
    assert sends and all(p["gbps"] < SHAPED_GBPS_CEILING for p in sends), sends

    # torch sees no GPU here: the CPU's figures, labelled, never held to a GPU datasheet.
    compute = report(tmp_path, "compute.json", out)
    assert compute["gpus"] == [] and sorted(c["node"] for c in compute["cpus"]) == cluster.nodes
    assert compute["status"] == "not_checked" and compute["findings"] == []
    assert all(c["gemm"]["fp32"]["tflops"] > 0 and c["gemm"]["fp32"]["peak_tflops"] is None for c in compute["cpus"])
    # The console wraps long messages: read it with its whitespace collapsed.
    assert "CPU (" in out and "not compared with a GPU datasheet" in " ".join(out.split())
