"""Read and transform nvidia-smi captures, keeping their format (stdlib only).

Shared by the stand-in nvidia-smi inside the nodes and by the harness (which
builds each node's PCI tree from the same capture). Every transform edits the
capture's own text in place, so a text capture stays text and an XML capture
keeps its schema version: what our parsers see is what the real tool printed,
plus exactly the state change the simulation asks for.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

TEXT_GPU_HEADER = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*$", re.M)
XML_GPU_BLOCK = re.compile(r'[ \t]*<gpu id="[^"]*">.*?</gpu>\n?', re.S)


def is_xml(text: str) -> bool:
    return text.lstrip().startswith("<?xml") or "<nvidia_smi_log" in text[:2000]


# --- splitting into the header and per-GPU blocks ------------------------------

def split_gpus(text: str) -> tuple[str, list[str], str]:
    """(head, [gpu block, ...], tail); head + ''.join(blocks) + tail == text."""
    if is_xml(text):
        matches = list(XML_GPU_BLOCK.finditer(text))
    else:
        starts = [m.start() for m in TEXT_GPU_HEADER.finditer(text)]
        if not starts:
            return text, [], ""
        ends = starts[1:] + [len(text)]
        blocks = [text[s:e] for s, e in zip(starts, ends)]
        return text[:starts[0]], blocks, ""
    if not matches:
        return text, [], ""
    head = text[:matches[0].start()]
    tail = text[matches[-1].end():]
    return head, [m.group(0) for m in matches], tail


def join_gpus(head: str, blocks: list[str], tail: str) -> str:
    return head + "".join(blocks) + tail


# --- small editing helpers --------------------------------------------------------

def _set_xml(block: str, tag: str, value: str, count: int = 0) -> str:
    return re.sub(rf"(<{tag}>)[^<]*(</{tag}>)", rf"\g<1>{value}\g<2>", block, count=count)


def _set_text(block: str, label: str, value: str, count: int = 0, after: str | None = None) -> str:
    """Set 'label : value' lines; with after=SECTION only inside that section's indented body."""
    pattern = re.compile(rf"^(\s*{re.escape(label)}\s*: ).*$", re.M)
    if after is None:
        return pattern.sub(lambda m: m.group(1) + value, block, count=count)
    sec = re.search(rf"^(\s*){re.escape(after)}\s*$", block, re.M | re.I)
    if not sec:
        return block
    indent = len(sec.group(1))
    end = sec.end()
    for line in re.finditer(r"^.*$", block[sec.end() + 1:], re.M):
        stripped = line.group(0)
        if stripped.strip() and len(stripped) - len(stripped.lstrip()) <= indent:
            break
        end = sec.end() + 1 + line.end()
    body = pattern.sub(lambda m: m.group(1) + value, block[sec.end():end], count=count)
    return block[:sec.end()] + body + block[end:]


# --- reading -------------------------------------------------------------------------

def ecc_mode(text: str) -> dict:
    """ECC mode of the first GPU as captured: {'current': .., 'pending': ..}."""
    _head, blocks, _tail = split_gpus(text)
    block = blocks[0] if blocks else text
    if is_xml(text):
        cur = re.search(r"<current_ecc>([^<]*)</current_ecc>", block)
        pen = re.search(r"<pending_ecc>([^<]*)</pending_ecc>", block)
    else:
        sec = re.search(r"^\s*Ecc Mode\s*\n\s*Current\s*: (.*)\n\s*Pending\s*: (.*)$", block, re.M | re.I)
        cur = pen = None
        if sec:
            return {"current": sec.group(1).strip(), "pending": sec.group(2).strip()}
    return {"current": cur.group(1).strip() if cur else "N/A", "pending": pen.group(1).strip() if pen else "N/A"}


def gpu_pci_devices(text: str) -> list[dict]:
    """Bus id and PCI device id of each GPU in the capture."""
    _head, blocks, _tail = split_gpus(text)
    devices = []
    for block in blocks:
        if is_xml(text):
            bus = re.search(r"<pci_bus_id>([^<]*)</pci_bus_id>", block).group(1)
            dev = re.search(r"<pci_device_id>([^<]*)</pci_device_id>", block).group(1)
        else:
            bus = re.search(r"^\s*Bus Id\s*: (\S+)", block, re.M).group(1)
            dev = re.search(r"^\s*Device Id\s*: (\S+)", block, re.M).group(1)
        dev = dev.lower().removeprefix("0x")
        domain, rest = bus.split(":", 1)
        devices.append({"bus_id": bus, "sysfs_bus_id": f"{int(domain, 16):04x}:{rest.lower()}",
                        "device": "0x" + dev[:4]})
    return devices


# --- state and fault transforms ----------------------------------------------------

def render(text: str, *, driver_version: str | None, cuda_version: str | None,
           ecc: dict | None = None, persistence: str | None = None, faults=()) -> str:
    xml = is_xml(text)
    head, blocks, tail = split_gpus(text)
    if driver_version:
        head = _set_xml(head, "driver_version", driver_version) if xml else _set_text(head, "Driver Version", driver_version)
    if cuda_version:
        head = _set_xml(head, "cuda_version", cuda_version) if xml else _set_text(head, "CUDA Version", cuda_version)
    out = []
    for i, block in enumerate(blocks):
        if ecc:
            if xml:
                block = _set_xml(block, "current_ecc", ecc["current"])
                block = _set_xml(block, "pending_ecc", ecc["pending"])
            else:
                block = _set_text(block, "Current", ecc["current"], count=1, after="Ecc Mode")
                block = _set_text(block, "Pending", ecc["pending"], count=1, after="Ecc Mode")
        if persistence:
            block = _set_xml(block, "persistence_mode", persistence) if xml else _set_text(block, "Persistence Mode", persistence)
        if i == 0:   # faults hit the first GPU
            block = _fault_block(block, xml, faults)
        out.append(block)
    if "gpu-missing" in faults and len(out) > 1:
        # The driver lost one GPU (it stays on the PCI bus): drop the last block.
        out.pop()
        if xml:
            head = _set_xml(head, "attached_gpus", str(len(out)))
        else:
            head = _set_text(head, "Attached GPUs", str(len(out)))
    return join_gpus(head, out, tail)


# fabric-incomplete: the GPU has not registered with the NVLink fabric, as a real B300 read whose fabric manager
# could not finish (tests/fixtures/nvidia-smi-fabric): State In Progress, Status N/A (NVML's status is only
# meaningful once the state is Completed).
FABRIC_INCOMPLETE = {"state": "In Progress", "status": "N/A"}


def _fault_block(block: str, xml: bool, faults) -> str:
    if "fabric-incomplete" in faults:
        block = _fabric_incomplete(block, xml)
    if "ecc-uncorrectable" in faults:
        if xml:
            for section in ("volatile", "aggregate"):
                block = re.sub(rf"(<{section}>.*?</{section}>)",
                               lambda m: _ecc_uncorrectable_xml(m.group(1)), block, count=1, flags=re.S)
        else:
            for section in ("Volatile", "Aggregate"):
                block = _set_text(block, "DRAM Uncorrectable", "2", count=1, after=section)
                block = _set_text(block, "Double Bit ECC", "2", count=1, after=section)
    if "remap-pending" in faults or "remap-failure" in faults:
        pending = "Yes" if "remap-pending" in faults else "No"
        failure = "Yes" if "remap-failure" in faults else "No"
        if xml:
            if re.search(r"<remapped_rows>\s*N/A\s*</remapped_rows>", block):
                indent = re.search(r"^([ \t]*)<remapped_rows>", block, re.M).group(1)
                inner = indent + "    "
                full = (f"<remapped_rows>\n{inner}<remapped_row_corr>0</remapped_row_corr>\n"
                        f"{inner}<remapped_row_unc>1</remapped_row_unc>\n"
                        f"{inner}<remapped_row_pending>{pending}</remapped_row_pending>\n"
                        f"{inner}<remapped_row_failure>{failure}</remapped_row_failure>\n{indent}</remapped_rows>")
                block = re.sub(r"<remapped_rows>\s*N/A\s*</remapped_rows>", full, block, count=1)
            else:
                block = _set_xml(block, "remapped_row_unc", "1", count=1)
                block = _set_xml(block, "remapped_row_pending", pending, count=1)
                block = _set_xml(block, "remapped_row_failure", failure, count=1)
        else:
            block = _set_text(block, "Uncorrectable Error", "1", count=1, after="Remapped Rows")
            block = _set_text(block, "Pending", pending, count=1, after="Remapped Rows")
            block = _set_text(block, "Remapping Failure Occurred", failure, count=1, after="Remapped Rows")
    return block


def _fabric_incomplete(block: str, xml: bool) -> str:
    """Only a GPU that registers is edited: one whose capture reports a fabric state. Ampere and PCIe GPUs print
    N/A (or no section) and never register, so no real one reads In Progress."""
    if xml:
        section = re.search(r"<fabric>.*?</fabric>", block, re.S)
        state = section and re.search(r"<state>([^<]*)</state>", section.group(0))
    else:
        state = re.search(r"^\s*Fabric\s*\n\s*State\s*: (.*)$", block, re.M)
    if not state or state.group(1).strip().upper() in ("N/A", ""):
        return block
    if xml:
        edited = _set_xml(section.group(0), "state", FABRIC_INCOMPLETE["state"], count=1)
        edited = _set_xml(edited, "status", FABRIC_INCOMPLETE["status"], count=1)
        return block[:section.start()] + edited + block[section.end():]
    block = _set_text(block, "State", FABRIC_INCOMPLETE["state"], count=1, after="Fabric")
    return _set_text(block, "Status", FABRIC_INCOMPLETE["status"], count=1, after="Fabric")


def _ecc_uncorrectable_xml(section: str) -> str:
    if "<dram_uncorrectable>" in section:
        return _set_xml(section, "dram_uncorrectable", "2", count=1)
    # Pre-Ampere schema: <double_bit>...<total>
    return re.sub(r"(<double_bit>.*?<total>)[^<]*(</total>)", r"\g<1>2\g<2>", section, count=1, flags=re.S)


# --- ibstat ---------------------------------------------------------------------------

def render_ibstat(text: str, faults=(), drop_errors: bool = False) -> tuple[str, int]:
    """(output, exit status). ib-port-down takes the first CA's port down as a real
    down port reads: State Down, Physical state Disabled, Rate 40."""
    rc = 0
    lines = text.splitlines(keepends=True)
    if drop_errors:
        lines = [line for line in lines if not line.startswith("ibpanic:")]
    elif any(line.startswith("ibpanic:") for line in lines):
        rc = 255
    out = "".join(lines)
    if "ib-port-down" in faults:
        first_ca_end = out.find("\nCA '", 1)
        first = out if first_ca_end < 0 else out[:first_ca_end]
        rest = "" if first_ca_end < 0 else out[first_ca_end:]
        first = re.sub(r"(State: )Active", r"\1Down", first, count=1)
        first = re.sub(r"(Physical state: )LinkUp", r"\1Disabled", first, count=1)
        first = re.sub(r"(Rate: )\d+", r"\g<1>40", first, count=1)
        out = first + rest
    return out, rc


# --- --query-gpu ----------------------------------------------------------------------

# field -> (XML path under <gpu>, text path suffix, unit shown in the csv header)
QUERY_FIELDS = {
    "name": ("product_name", ("Product Name",), None),
    "gpu_name": ("product_name", ("Product Name",), None),
    "uuid": ("uuid", ("GPU UUID",), None),
    "gpu_uuid": ("uuid", ("GPU UUID",), None),
    "serial": ("serial", ("Serial Number",), None),
    "pci.bus_id": ("pci/pci_bus_id", ("PCI", "Bus Id"), None),
    "pci.device_id": ("pci/pci_device_id", ("PCI", "Device Id"), None),
    "persistence_mode": ("persistence_mode", ("Persistence Mode",), None),
    "memory.total": ("fb_memory_usage/total", ("FB Memory Usage", "Total"), "MiB"),
    "memory.used": ("fb_memory_usage/used", ("FB Memory Usage", "Used"), "MiB"),
    "memory.free": ("fb_memory_usage/free", ("FB Memory Usage", "Free"), "MiB"),
    "ecc.mode.current": ("ecc_mode/current_ecc", ("Ecc Mode", "Current"), None),
    "ecc.mode.pending": ("ecc_mode/pending_ecc", ("Ecc Mode", "Pending"), None),
    "ecc.errors.uncorrected.volatile.total": ("ecc_errors/volatile/dram_uncorrectable",
                                              ("Volatile", "DRAM Uncorrectable"), None),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_errors/aggregate/dram_uncorrectable",
                                               ("Aggregate", "DRAM Uncorrectable"), None),
    "temperature.gpu": ("temperature/gpu_temp", ("Temperature", "GPU Current Temp"), None),
    "power.draw": ("gpu_power_readings/power_draw", ("Power Draw",), "W"),
    "pcie.link.gen.current": ("pci/pci_gpu_link_info/pcie_gen/current_link_gen", ("GPU Link Info", "PCIe Generation", "Current"), None),
    "pcie.link.gen.max": ("pci/pci_gpu_link_info/pcie_gen/max_link_gen", ("GPU Link Info", "PCIe Generation", "Max"), None),
    "pcie.link.width.current": ("pci/pci_gpu_link_info/link_widths/current_link_width", ("Link Width", "Current"), None),
    "pcie.link.width.max": ("pci/pci_gpu_link_info/link_widths/max_link_width", ("Link Width", "Max"), None),
    "clocks.max.sm": ("max_clocks/sm_clock", ("Max Clocks", "SM"), "MHz"),
    "utilization.gpu": ("utilization/gpu_util", ("Utilization", "Gpu"), "%"),
}


def _text_paths(block: str) -> list[tuple[tuple[str, ...], str]]:
    """(path of section titles + key, value) for every 'key : value' line of a text block."""
    stack: list[tuple[int, str]] = []
    items = []
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if ":" in line and not TEXT_GPU_HEADER.match(line):
            key, _sep, value = line.strip().partition(":")
            items.append((tuple(s for _indent, s in stack) + (key.strip(),), value.strip()))
        else:
            stack.append((indent, line.strip()))
    return items


def query_gpu(text: str, fields: list[str]) -> list[list[str]] | str:
    """Rows of values (with units as printed), or the name of the first unknown field."""
    for field in fields:
        if field not in QUERY_FIELDS and field not in ("index", "driver_version", "count"):
            return field
    xml = is_xml(text)
    head, blocks, _tail = split_gpus(text)
    if xml:
        driver = re.search(r"<driver_version>([^<]*)<", head)
    else:
        driver = re.search(r"^Driver Version\s*: (.*)$", head, re.M)
    driver = driver.group(1).strip() if driver else "[N/A]"
    rows = []
    for index, block in enumerate(blocks):
        row = []
        if xml:
            gpu = ET.fromstring(block.strip())
        else:
            paths = _text_paths(block)
        for field in fields:
            if field == "index":
                row.append(str(index))
                continue
            if field == "driver_version":
                row.append(driver)
                continue
            if field == "count":
                row.append(str(len(blocks)))
                continue
            xml_path, text_suffix, _unused = QUERY_FIELDS[field]
            value = None
            if xml:
                node = gpu.find(xml_path)
                value = node.text.strip() if node is not None and node.text else None
            else:
                n = len(text_suffix)
                want = tuple(x.lower() for x in text_suffix)
                value = next((v for p, v in paths if tuple(x.lower() for x in p[-n:]) == want), None)
            if value is None or value == "N/A":
                value = "[N/A]"
            if field == "pci.bus_id" and value != "[N/A]":
                value = value.upper() if xml else value
            if field == "temperature.gpu":
                value = value.replace(" C", "")
            row.append(value)
        rows.append(row)
    return rows
