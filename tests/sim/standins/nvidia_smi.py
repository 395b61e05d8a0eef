#!/usr/bin/python3
"""Stand-in nvidia-smi for simulated nodes: replays the node's real capture.

The capture (text or XML, as recorded) is printed with the node's state
applied: the driver version of the installed kernel module and that branch's
CUDA version, ECC mode (kept across calls, pending becomes current at boot),
persistence mode, and the injected faults. Exposed as /usr/bin/nvidia-smi by
the userspace package of the driver (or by the .run-installer preinstall).

What is installed decides what it does, as with the real tool: the userspace
package writes userspace_version, the kernel-module package of a flavour writes
kernel_module ("<version> <flavour>"). No module: it cannot talk to the driver.
Different versions: NVML refuses (driver/library version mismatch). A GPU that
needs the open modules (Blackwell) with the proprietary module: no devices.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import capture  # noqa: E402

ETC = Path(os.environ.get("GPUFLEET_SIM_ETC", "/etc/gpufleet-sim"))
DRIVER_DIR = Path(os.environ.get("GPUFLEET_SIM_DRIVER_DIR", "/usr/lib/gpufleet-sim"))
RUN_DIR = Path(os.environ.get("GPUFLEET_SIM_RUN", "/run/gpufleet-sim"))
# The CUDA version a driver branch reports (nvidia-smi's "CUDA Version").
# 570 -> 12.8: CUDA 12.8.1's installers bundle driver 570.124.06 (tests/sim/manifests, cuda-local-installers).
BRANCH_CUDA = {"470": "11.4", "510": "11.6", "515": "11.7", "520": "11.8", "525": "12.0",
               "530": "12.1", "535": "12.2", "545": "12.3", "550": "12.4", "555": "12.5", "560": "12.6",
               "570": "12.8"}
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")
# As a real node prints it after a userspace upgrade without the new module (cpnr/computing issue 109:
# "NVML library version: 580.159" under userspace 580.159.x); exit status 18 is NVML's
# ERROR_LIB_RM_VERSION_MISMATCH.
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: {}\n"
NO_DEVICES = "No devices were found\n"


def load_json(path: Path, default=None):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def save_json(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def node_state():
    config = load_json(ETC / "node.json")
    if not config:
        return None, None
    if not config.get("gpu_capture"):
        return config, None
    return config, Path(config["gpu_capture"]).read_text()


def _read(name: str) -> str | None:
    try:
        return (DRIVER_DIR / name).read_text().strip() or None
    except OSError:
        return None


def kernel_module() -> tuple[str, str] | None:
    """(version, flavour) of the installed kernel module, or None."""
    text = _read("kernel_module")
    if not text or len(text.split()) != 2:
        return None
    version, flavour = text.split()
    return version, flavour


def driver_version() -> str | None:
    module = kernel_module()
    return module[0] if module else None


def driver_problem(config) -> tuple[str, int] | None:
    """Why the driver cannot answer, as the real nvidia-smi says it, or None."""
    module = kernel_module()
    if module is None or config is None:
        return NO_DRIVER, 9
    userspace = _read("userspace_version")
    if userspace != module[0]:
        return MISMATCH.format(".".join((userspace or "").split(".")[:2])), 18
    if config.get("requires_open_modules") and module[1] != "open":
        return NO_DEVICES, 6
    if not config.get("gpu_capture"):
        return (f"gpufleet-sim: profile {config['profile']} has no nvidia-smi capture (PCI ids only); "
                "the driver stand-in cannot answer for its GPUs\n"), 2
    return None


def persistence() -> str:
    try:
        return (RUN_DIR / "persistence_mode").read_text().strip()
    except OSError:
        return "Disabled"


def rendered(config, text) -> str:
    drv = driver_version()
    ecc = load_json(ETC / "ecc.json")
    return capture.render(text, driver_version=drv, cuda_version=BRANCH_CUDA.get(drv.split(".")[0]),
                          ecc=ecc, persistence=persistence(), faults=config.get("faults", []))


def select_gpus(text: str, index: str | None) -> str:
    if index is None:
        return text
    head, blocks, tail = capture.split_gpus(text)
    wanted = [int(i) for i in index.split(",")]
    if any(i >= len(blocks) for i in wanted):
        sys.stderr.write("No devices were found\n")
        sys.exit(6)
    return capture.join_gpus(head, [blocks[i] for i in wanted], tail)


def bus_ids(text: str) -> list[str]:
    return [d["bus_id"] for d in capture.gpu_pci_devices(text)]


def boot() -> int:
    """At boot, like the driver: pending ECC mode becomes current."""
    ecc = load_json(ETC / "ecc.json")
    if ecc and ecc.get("pending") not in (None, "N/A") and ecc["pending"] != ecc.get("current"):
        ecc["current"] = ecc["pending"]
        save_json(ETC / "ecc.json", ecc)
    return 0


def option_value(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def main(args: list[str]) -> int:
    if args[:1] == ["--gpufleet-sim-boot"]:
        return boot()
    config, text = node_state()
    problem = driver_problem(config)
    if problem is not None:
        sys.stdout.write(problem[0])
        return problem[1]
    out = rendered(config, text)
    index = option_value(args, "-i", "--id")
    if args[:1] == ["topo"]:
        if config.get("topo_capture"):
            sys.stdout.write(Path(config["topo_capture"]).read_text())
            return 0
        sys.stderr.write(f"gpufleet-sim: no 'topo -m' capture for profile {config['profile']}\n")
        return 2
    query = option_value(args, "--query-gpu")
    if query is not None:
        fmt = option_value(args, "--format") or ""
        if not fmt.startswith("csv"):
            sys.stderr.write('"--format" must be specified with "--query-gpu"\n')
            return 2
        fields = [f.strip() for f in query.split(",") if f.strip()]
        rows = capture.query_gpu(select_gpus(out, index), fields)
        if isinstance(rows, str):
            sys.stderr.write(f'Field "{rows}" is not a valid field to query.\n\n')
            return 2
        nounits = "nounits" in fmt
        if "noheader" not in fmt:
            header = []
            for f in fields:
                unit = capture.QUERY_FIELDS.get(f, (None, None, None))[2]
                header.append(f"{f} [{unit}]" if unit and not nounits else f)
            print(", ".join(header))
        for row in rows:
            if nounits:
                row = [v.rsplit(" ", 1)[0] if v.endswith((" MiB", " W", " MHz", " %")) else v for v in row]
            print(", ".join(row))
        return 0
    if "-q" in args or "--query" in args:
        sys.stdout.write(select_gpus(out, index))
        return 0
    if "-L" in args or "--list-gpus" in args:
        rows = capture.query_gpu(out, ["index", "name", "uuid"])
        for i, name, uuid in rows:
            print(f"GPU {i}: {name} (UUID: {uuid})")
        return 0
    ecc_arg = option_value(args, "-e", "--ecc-config")
    if ecc_arg is not None:
        want = {"0": "Disabled", "1": "Enabled"}.get(ecc_arg)
        if want is None:
            sys.stderr.write('Invalid combination of input arguments. Please run "nvidia-smi -h" for help.\n')
            return 2
        ecc = load_json(ETC / "ecc.json") or {}
        if ecc.get("current") == "N/A":
            print("Unable to set the ECC mode: Not Supported")
            return 3
        for bus in bus_ids(select_gpus(out, index)):
            verb = "Enabled" if want == "Enabled" else "Disabled"
            if ecc.get("pending") == want:
                print(f"ECC support is already {verb} for GPU {bus}.")
            else:
                print(f"{verb} ECC support for GPU {bus}.")
        ecc["pending"] = want
        save_json(ETC / "ecc.json", ecc)
        print("All done.")
        if ecc.get("current") != want:
            print("Reboot required.")
        return 0
    pm_arg = option_value(args, "-pm", "--persistence-mode")
    if pm_arg is not None:
        want = "Enabled" if pm_arg in ("1", "ENABLED") else "Disabled"
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        (RUN_DIR / "persistence_mode").write_text(want + "\n")
        for bus in bus_ids(select_gpus(out, index)):
            print(f"{want} persistence mode for GPU {bus}.")
        print("All done.")
        return 0
    if "-r" in args or "--gpu-reset" in args:
        for bus in bus_ids(select_gpus(out, index)):
            print(f"GPU {bus} was successfully reset.")
        print("All done.")
        return 0
    if not args:
        drv = driver_version()
        cuda = BRANCH_CUDA.get(drv.split(".")[0], "N/A")
        print("+" + "-" * 91 + "+")
        print(f"| NVIDIA-SMI {drv:<22} Driver Version: {drv:<18} CUDA Version: {cuda:<9}|")
        print("+" + "-" * 91 + "+")
        for i, name, bus in capture.query_gpu(out, ["index", "name", "pci.bus_id"]):
            print(f"| {i:>3}  {name:<40} {bus:<45}|")
        print("+" + "-" * 91 + "+")
        return 0
    sys.stderr.write(f"gpufleet-sim nvidia-smi: unsupported arguments: {' '.join(args)}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
