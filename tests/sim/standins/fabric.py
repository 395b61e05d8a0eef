"""The node's fabric as the fabric stand-ins see it (perftest, nccl-tests, mpirun, the GEMM bench). Stdlib only.

What a stand-in needs beyond the node's own captures:
    /etc/gpufleet-sim/node.json      this node: name, faults, captures (hardware.py writes it)
    /etc/gpufleet-sim/fabric.json    every node of the cluster: address and faults, the view a subnet
                                     manager has of the fabric (hardware.py keeps it the same on all nodes)

How faults scale a replayed figure (each far outside the noise of the captures, so no verdict in the
tests depends on the machine's speed):
    link-slow   a node's link runs at LINK_SLOW_FACTOR of its capture: the simulator's 10 Mbit/s token
                bucket is 1000x below an unshaped veth (tests/fixtures/iperf3: 9.5 Mbit/s vs 9.58 Gbit/s),
                so 1/100 is a conservative stand-in for "more than 100x slower". It hits traffic that
                leaves the node (pair tests, multi-node collectives), never a test inside one node.
    gpu-slow    GPU 0 computes and copies at GPU_SLOW_FACTOR of the capture (a throttled or degraded
                part); a collective inside the node runs at the pace of its slowest GPU.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import capture  # noqa: E402

ETC = Path(os.environ.get("GPUFLEET_SIM_ETC", "/etc/gpufleet-sim"))
LINK_SLOW_FACTOR = 0.01
GPU_SLOW_FACTOR = 0.4


def load_json(path: Path, default=None):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def node_config() -> dict:
    return load_json(ETC / "node.json", {}) or {}


def fabric_view() -> dict:
    """{node: {"ip": ..., "faults": [...]}} for every node of the cluster ({} outside a cluster)."""
    return load_json(ETC / "fabric.json", {}) or {}


def node_for_address(address: str) -> str | None:
    """The node that holds ``address`` (an IP or a node name), from the fabric view."""
    for name, entry in fabric_view().items():
        if address in (name, entry.get("ip")):
            return name
    return None


def faults_of(node: str | None) -> list:
    config = node_config()
    if node is None or node == config.get("node"):
        return list(config.get("faults", []))
    return list((fabric_view().get(node) or {}).get("faults", []))


def link_factor(*nodes) -> float:
    """The link-slow factor for traffic between these nodes: 1.0 inside one node."""
    names = {n for n in nodes if n}
    if len(names) < 2:
        return 1.0
    return LINK_SLOW_FACTOR if any("link-slow" in faults_of(n) for n in names) else 1.0


_CA_RE = re.compile(r"^CA '([^']+)'", re.M)


def ib_ports(config: dict | None = None) -> list:
    """[{ca, port, state, physical_state, rate, link_layer}] from the node's ibstat capture, faults applied."""
    config = node_config() if config is None else config
    path = config.get("ibstat_capture")
    if not path:
        return []
    text, _rc = capture.render_ibstat(Path(path).read_text(), config.get("faults", []),
                                      drop_errors=config.get("ibstat_drop_errors", False))
    ports = []
    for block in re.split(r"(?m)^(?=CA ')", text):
        match = _CA_RE.match(block)
        if not match:
            continue
        for number, body in re.findall(r"(?ms)^\s*Port (\d+):\s*$(.*?)(?=^\s*Port \d+:\s*$|\Z)", block):
            fields = dict(re.findall(r"(?m)^\s*([A-Za-z ]+):\s*(.*?)\s*$", body))
            ports.append({"ca": match.group(1), "port": int(number), "state": fields.get("State"),
                          "physical_state": fields.get("Physical state"),
                          "rate": float(fields.get("Rate") or 0), "link_layer": fields.get("Link layer")})
    return ports


def gpu_devices(config: dict | None = None) -> list:
    """(name, PCI bus id) of the GPUs the node's driver lists (faults applied, so a missing GPU is missing here too);
    the bus id as torch reports it (lower-case hex), as the real microbenchmark prints it."""
    config = node_config() if config is None else config
    path = config.get("gpu_capture")
    if not path:
        return []
    text = capture.render(Path(path).read_text(), driver_version=None, cuda_version=None,
                          faults=config.get("faults", []))
    rows = capture.query_gpu(text, ["name", "pci.bus_id"])
    return [(row[0], row[1].lower()) for row in rows] if isinstance(rows, list) else []


def gpu_names(config: dict | None = None) -> list:
    """The GPUs the node's driver lists (faults applied)."""
    return [name for name, _bus_id in gpu_devices(config)]
