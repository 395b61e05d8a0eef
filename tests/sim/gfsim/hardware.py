"""Hardware profiles, per-node hardware state and the fake PCI tree.

A node's hardware is described by files the stand-ins read at run time:
    /etc/gpufleet-sim/node.json    profile, capture paths, active faults
    /etc/gpufleet-sim/ecc.json     ECC mode current/pending (nvidia-smi -e keeps it)
    /etc/gpufleet-sim/captures/    copies of the captures the node replays
    /etc/gpufleet-sim/fabric.json  every node's address and faults (the same on all nodes; the fabric
                                   stand-ins read the far end's faults from it)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from . import util
from .util import FIXTURES_DIR, REPO_ROOT, STANDINS_DIR

sys.path.insert(0, str(STANDINS_DIR))
import capture as capture_lib  # noqa: E402  (stdlib-only module shared with the stand-ins)

PROFILES = {
    "hgx-h100": {
        "description": "HGX H100: 8x H100 80GB HBM3 SXM5, 4 NVSwitch, 8x ConnectX-7 400 Gb/s InfiniBand",
        "gpu": "nvidia-smi-q/h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt",
        "ibstat": "ibstat/h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt",
        "topo": "topo/hgx-h100-8gpu-nv18-8nic-pix-2numa-sglang-issue30401.txt",
        "gpu_pci_class": "0x030200",
        "nvswitch": {"count": 4, "device": "0x22a3"},
    },
    "a100-sxm4": {
        "description": "HGX A100: 4x A100-SXM4-80GB (MIG capture), 6 NVSwitch, ConnectX-6 HDR 200 Gb/s InfiniBand",
        "gpu": "nvidia-smi-xml/a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml",
        # The capture ends with an ibpanic line for a ninth device; a healthy node drops it.
        "ibstat": "ibstat/a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt",
        "ibstat_drop_errors": True,
        "topo": None,
        "gpu_pci_class": "0x030200",
        "nvswitch": {"count": 6, "device": "0x1af1"},
    },
    "rtx4090-workstation": {
        "description": "Workstation: 1x GeForce RTX 4090, no NVSwitch, no InfiniBand",
        "gpu": "nvidia-smi-xml/rtx4090-drv535.86.05-cuda12.2.xml",
        "ibstat": None,
        "topo": None,
        "gpu_pci_class": "0x030000",
        "nvswitch": None,
    },
    "t4": {
        "description": "Cloud VM: 1x Tesla T4, no InfiniBand",
        "gpu": "nvidia-smi-xml/tesla-t4-drv515.105.01-cuda11.7.xml",
        "ibstat": None,
        "topo": None,
        "gpu_pci_class": "0x030200",
        "nvswitch": None,
    },
    "v100s-pcie-x8": {
        "description": "8x Tesla V100S-PCIE-32GB (pass-through VM), no InfiniBand",
        "gpu": "nvidia-smi-xml/v100s-pcie-32gb-x8-drv460.73.01-cuda11.2.xml",
        "ibstat": None,
        "topo": None,
        "gpu_pci_class": "0x030200",
        "nvswitch": None,
    },
    # No published `nvidia-smi -q` of a B200 was found to replay (see tests/sim/manifests/SOURCES.md):
    # the profile is PCI ids only. 10de:2901 is "GB100 [B200]" in pci.ids; the eight bus addresses
    # are the HGX H100 capture's (the board layout, not a B200 fact). nvidia-smi answers only that
    # it has no capture; with the proprietary module it finds no devices, as Blackwell needs the
    # open kernel modules (gpufleet issue 12).
    # Its NVSwitches are no PCI functions (fourth generation): the host reaches them through the
    # ConnectX-7 bridge on the baseboard, two ports each exposing a full PF and a Limited PF whose VPD
    # carries SMDL=SW_MNG (Fabric Manager User Guide 2.3, 1.3.2; SOURCES.md "Hardware profile hgx-b200").
    "hgx-b200": {
        "description": ("HGX B200 (PCI ids only): 8x B200 (10de:2901), no nvidia-smi capture, NVSwitches behind "
                        "the ConnectX-7 bridge (2 ports x PF + LPF, LPF VPD SMDL=SW_MNG)"),
        "gpu": None,
        "pci_gpus": {"bus_ids_from": "nvidia-smi-q/h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt",
                     "device": "0x2901"},
        "ibstat": None,
        "topo": None,
        "gpu_pci_class": "0x030200",
        "nvswitch": None,
        # Bus addresses and the VPD's other fields are not sourced; the ids, class and marker are.
        "nvswitch_bridge": {"vendor": "0x15b3", "device": "0x1021", "class": "0x020700",
                            "functions": {"0000:e0:00.0": "full", "0000:e0:00.1": "limited",
                                          "0000:e1:00.0": "full", "0000:e1:00.1": "limited"}},
        "requires_open_modules": True,
    },
}

GPU_FAULTS = {"ecc-uncorrectable", "ecc-disabled", "remap-pending", "remap-failure", "gpu-missing",
              "gpu-diag-fail", "gpu-slow", "fabric-incomplete"}
IB_FAULTS = {"ib-port-down"}
NET_FAULTS = {"link-cut", "link-slow"}
FAULTS = sorted(GPU_FAULTS | IB_FAULTS | NET_FAULTS)

NODE_ETC = "etc/gpufleet-sim"
# Real `dcgmi diag -r 1 -j` documents the stand-in dcgmi replays (tests/fixtures/diagnostics/SOURCES.md):
# a pass on a healthy node, the failing one under the `gpu-diag-fail` fault.
DCGM_CAPTURES = {
    "dcgm_pass": REPO_ROOT / "tests/fixtures/diagnostics/dcgm/dcgm3.1.0-r1-8gpu-pass-warning-prefix-nvidia-jsonresulttests.txt",
    "dcgm_fail": REPO_ROOT / "tests/fixtures/diagnostics/dcgm/dcgm4.2.3-r1-gb10-software-fail-persistence-exit226.json",
}
# Real runs the fabric stand-ins replay (tests/fixtures/SOURCES.md), and the line rate each was measured at.
PERFTEST_CAPTURES = {
    "ib_write_bw": {"path": REPO_ROOT / "tests/fixtures/perftest/ib_write_bw-bnxt-re-400g-roce-3qp-D10-report-gbits-client.txt",
                    "line_rate_gbps": 400},
}
NCCL_TESTS_CAPTURES = {
    "single": REPO_ROOT / "tests/fixtures/nccl-tests/h100-1node-8gpu-nccl2.29.2-tests2.17.8-all-collectives.log",
    "pair": REPO_ROOT / "tests/fixtures/nccl-tests/h100-2node-16gpu-pairwise-nccl2.29.2-tests2.17.8-alltoall-sendrecv.log",
    "multi": REPO_ROOT / "tests/fixtures/nccl-tests/h100-10node-80gpu-nccl2.29.2-tests2.17.8-all-collectives.log",
}
MICROBENCH_CAPTURE = REPO_ROOT / "tests/fixtures/microbench/h100-sxm-published-measurements.json"
# perftest's binaries run the stand-in while the package is installed, as ibstat does (image.py): diverted
# aside by dpkg, and pointed at the stand-in after every dpkg run.
PERFTEST_STANDINS = ("ib_write_bw", "ib_read_bw")
PERFTEST_HOOK = "etc/apt/apt.conf.d/99gpufleet-sim-perftest"
PCI_TREE = "opt/gpufleet-sim/sys/bus/pci/devices"


def classify_capture(path: Path) -> str:
    """Which stand-in a capture given with --capture feeds: gpu, ibstat or topo."""
    head = path.read_text(errors="replace")[:4000]
    if head.lstrip().startswith("CA '") or "\nCA '" in head:
        return "ibstat"
    if "<nvidia_smi_log" in head or "NVSMI LOG" in head or "Attached GPUs" in head:
        return "gpu"
    if "GPU0" in head and ("Legend" in head or "CPU Affinity" in head):
        return "topo"
    raise ValueError(f"{path}: not an nvidia-smi -q, ibstat or topo -m capture")


def node_hardware(profile_name: str, overrides: dict[str, Path]) -> dict:
    if profile_name not in PROFILES:
        raise ValueError(f"unknown profile {profile_name!r}; known: {', '.join(sorted(PROFILES))}")
    profile = PROFILES[profile_name]
    sources = {}
    for kind in ("gpu", "ibstat", "topo"):
        if kind in overrides:
            sources[kind] = overrides[kind]
        elif profile.get(kind):
            sources[kind] = FIXTURES_DIR / profile[kind]
        else:
            sources[kind] = None
    return {"profile": profile_name, "sources": sources}


def write_node_hardware(merged: Path, node: str, hw: dict, faults: list[str]) -> None:
    etc = merged / NODE_ETC
    captures = etc / "captures"
    captures.mkdir(parents=True, exist_ok=True)
    profile = PROFILES[hw["profile"]]
    config = {"node": node, "profile": hw["profile"], "faults": sorted(set(faults)),
              "ibstat_drop_errors": bool(profile.get("ibstat_drop_errors")),
              "requires_open_modules": bool(profile.get("requires_open_modules"))}
    for kind, src in hw["sources"].items():
        if src is None:
            config[f"{kind}_capture"] = None
            continue
        dest = captures / f"{kind}-{Path(src).name}"
        shutil.copyfile(src, dest)
        config[f"{kind}_capture"] = "/" + str(dest.relative_to(merged))
    for kind, src in DCGM_CAPTURES.items():
        dest = captures / f"{kind}-{src.name}"
        shutil.copyfile(src, dest)
        config[f"{kind}_capture"] = "/" + str(dest.relative_to(merged))
    util.write_json(etc / "node.json", config)
    ensure_fabric_standins(merged)
    if hw["sources"]["gpu"] is None:
        # PCI ids only: no capture says what ECC mode the GPUs are in.
        util.write_json(etc / "ecc.json", {"current": "N/A", "pending": "N/A"})
        write_pci_tree(merged / PCI_TREE, None, profile)
        return
    gpu_text = Path(hw["sources"]["gpu"]).read_text()
    ecc = capture_lib.ecc_mode(gpu_text)
    if "ecc-disabled" in faults:
        ecc = {"current": "Disabled", "pending": "Disabled"}
    util.write_json(etc / "ecc.json", ecc)
    write_pci_tree(merged / PCI_TREE, gpu_text, profile)


def _copy_capture(merged: Path, captures: Path, src: Path) -> str:
    dest = captures / src.name
    shutil.copyfile(src, dest)
    return "/" + str(dest.relative_to(merged))


def _fabric_captures(merged: Path, captures: Path) -> dict:
    """The node.json keys of the fabric stand-ins: perftest, nccl-tests and GEMM/memory captures."""
    return {
        "perftest": {tool: {"capture": _copy_capture(merged, captures, entry["path"]),
                            "line_rate_gbps": entry["line_rate_gbps"]} for tool, entry in PERFTEST_CAPTURES.items()},
        "nccl_tests": {kind: _copy_capture(merged, captures, src) for kind, src in NCCL_TESTS_CAPTURES.items()},
        "microbench_capture": _copy_capture(merged, captures, MICROBENCH_CAPTURE),
    }


def ensure_fabric_standins(merged: Path) -> None:
    """The fabric stand-ins' captures in node.json (also for a node brought up before they existed),
    perftest's binaries diverted to the stand-in (also when a lower layer already installed perftest),
    and every node's fabric.json refreshed from its siblings' addresses and faults."""
    config_path = merged / NODE_ETC / "node.json"
    config = util.read_json(config_path) or {}
    if config and any(key not in config for key in ("perftest", "nccl_tests", "microbench_capture")):
        captures = merged / NODE_ETC / "captures"
        captures.mkdir(parents=True, exist_ok=True)
        config.update(_fabric_captures(merged, captures))
        util.write_json(config_path, config)
    diversions = merged / "var/lib/dpkg/diversions"
    recorded = diversions.read_text() if diversions.exists() else ""
    for tool in PERFTEST_STANDINS:
        binary = f"/usr/bin/{tool}"
        if f"{binary}\n{binary}.distrib\n" not in recorded:
            recorded += f"{binary}\n{binary}.distrib\n:\n"
        installed = merged / binary.lstrip("/")
        if installed.exists() and not installed.is_symlink():
            installed.rename(installed.with_name(f"{tool}.distrib"))
            installed.symlink_to(f"/usr/lib/gpufleet-sim/standins/{tool}")
    if diversions.parent.is_dir():
        diversions.write_text(recorded)
    hook = merged / PERFTEST_HOOK
    if hook.parent.is_dir():
        hook.write_text("".join(
            f'DPkg::Post-Invoke {{ "if [ -e /usr/bin/{t}.distrib ]; then ln -sfn /usr/lib/gpufleet-sim/standins/{t} '
            f'/usr/bin/{t}; elif [ -L /usr/bin/{t} ]; then rm -f /usr/bin/{t}; fi"; }};\n' for t in PERFTEST_STANDINS))
    refresh_fabric(merged)


def refresh_fabric(merged: Path) -> None:
    """Write fabric.json ({node: {ip, faults}}) into every node of the cluster that holds ``merged``.

    The nodes' trees are siblings (<state>/nodes/<node>/merged); addresses come from the /etc/hosts the
    cluster writes into each node, faults from each node's node.json."""
    view = {}
    hosts = (merged / "etc/hosts").read_text() if (merged / "etc/hosts").exists() else ""
    addresses = {fields[1]: fields[0] for fields in (line.split() for line in hosts.splitlines()) if len(fields) >= 2}
    siblings = [p for p in merged.parent.parent.glob("*/merged") if (p / NODE_ETC / "node.json").exists()]
    for tree in siblings:
        config = util.read_json(tree / NODE_ETC / "node.json") or {}
        name = config.get("node") or tree.parent.name
        view[name] = {"ip": addresses.get(name), "faults": config.get("faults", [])}
    for tree in siblings:
        util.write_json(tree / NODE_ETC / "fabric.json", view)


def set_faults(merged: Path, faults: list[str]) -> None:
    path = merged / NODE_ETC / "node.json"
    config = util.read_json(path)
    before = set(config["faults"])
    config["faults"] = sorted(set(faults))
    util.write_json(path, config)
    ensure_fabric_standins(merged)
    # ECC mode is state, not a replay transform: the fault sets it, clearing restores the capture's.
    if "ecc-disabled" in set(faults) - before:
        util.write_json(merged / NODE_ETC / "ecc.json", {"current": "Disabled", "pending": "Disabled"})
    elif "ecc-disabled" in before - set(faults) and config.get("gpu_capture"):
        gpu_capture = merged / config["gpu_capture"].lstrip("/")
        util.write_json(merged / NODE_ETC / "ecc.json", capture_lib.ecc_mode(gpu_capture.read_text()))


def pci_vpd(vendor_field: str) -> bytes:
    """A PCI VPD image as sysfs' ``vpd`` returns it (PCIe Base spec "Vital Product Data": identifier string,
    VPD-R with PN, SN and a vendor-specific VA keyword, RV, end tag). Only ``vendor_field`` matters to a
    reader: the CX7 bridge's Limited PF carries ``SMDL=SW_MNG`` there (where in the VPD is not sourced)."""
    def resource(tag: int, data: bytes) -> bytes:
        return bytes([tag, len(data) & 0xFF, len(data) >> 8]) + data

    keywords = b"PN\x09" + b"SIM-CX7-B" + b"SN\x08" + b"SIM00000" + b"VA" + bytes([len(vendor_field)]) + vendor_field.encode()
    return resource(0x82, b"gpufleet-sim ConnectX-7 bridge") + resource(0x90, keywords + b"RV\x01\x00") + b"\x78"


def write_nvswitch_bridge(root: Path, bridge: dict) -> None:
    """The ConnectX-7 bridge functions of an HGX B200 baseboard: only the Limited PFs' VPD names them."""
    for bus_id, role in bridge["functions"].items():
        d = root / bus_id
        d.mkdir()
        (d / "vendor").write_text(bridge["vendor"] + "\n")
        (d / "device").write_text(bridge["device"] + "\n")
        (d / "class").write_text(bridge["class"] + "\n")
        marker = ":SMDL=SW_MNG" if role == "limited" else ""
        (d / "vpd").write_bytes(pci_vpd("MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0" + marker))


def write_pci_tree(root: Path, gpu_text: str | None, profile: dict) -> None:
    """sysfs-like PCI devices matching the capture: what lspci/gpu_info count independently
    of the driver (so a GPU missing from the driver still shows here)."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)

    def device(bus_id: str, device_id: str, pci_class: str) -> None:
        d = root / bus_id
        d.mkdir()
        (d / "vendor").write_text("0x10de\n")
        (d / "device").write_text(device_id + "\n")
        (d / "class").write_text(pci_class + "\n")
        (d / "subsystem_vendor").write_text("0x10de\n")

    if gpu_text is not None:
        for gpu in capture_lib.gpu_pci_devices(gpu_text):
            device(gpu["sysfs_bus_id"], gpu["device"], profile["gpu_pci_class"])
    else:
        layout = (FIXTURES_DIR / profile["pci_gpus"]["bus_ids_from"]).read_text()
        for gpu in capture_lib.gpu_pci_devices(layout):
            device(gpu["sysfs_bus_id"], profile["pci_gpus"]["device"], profile["gpu_pci_class"])
    if profile.get("nvswitch"):
        for i in range(profile["nvswitch"]["count"]):
            device(f"0000:{0xc0 + i:02x}:00.0", profile["nvswitch"]["device"], "0x068000")
    if profile.get("nvswitch_bridge"):
        write_nvswitch_bridge(root, profile["nvswitch_bridge"])
