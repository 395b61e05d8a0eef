# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Parsers for nvidia-smi output. Pure functions: text in, plain data out.

PRIVATE to the gpufleet.cluster collection; the public contract is the shape
``parse_nvidia_smi`` returns (documented in gpufleet.cluster.gpu_info RETURN).

- ``parse_nvidia_smi(text)``: ``nvidia-smi -q -x`` (DTD v11, v12, v13) or the
  plain-text ``nvidia-smi -q`` / ``-a``; the format is detected. Both are first
  turned into the same tree of (key, value, children) nodes, keys being the XML
  tag or the text label in snake case, and one extractor reads that tree trying
  the XML tag and the text label of each field, in old and new spellings.
- ``parse_nvidia_smi_topo(text)``: ``nvidia-smi topo -m`` (tabs or spaces, ANSI escapes).
- ``parse_nvidia_smi_csv(text)``: ``nvidia-smi --query-* --format=csv``.
- ``parse_nvidia_smi_nvlink(text)``: ``nvidia-smi nvlink -s``.

Values nvidia-smi prints as N/A, [N/A], Not Supported, Requested functionality
has been deprecated (and the like) become None, never a string.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import (
    architecture_for_cc,
    lookup_model,
    normalize_cc,
    normalize_pci_device_id,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.pci import normalize_pci_bus_id


class NvidiaSmiParseError(ValueError):
    """The text is neither nvidia-smi -q XML nor -q text."""


# ---------------------------------------------------------------------------
# value helpers

_NULL_VALUES = {
    "n/a", "na", "not supported", "requested functionality has been deprecated",
    "unknown error", "insufficient permissions", "not available", "not found", "unknown",
    "none available", "",
}

_NUM_RE = re.compile(r"^[-+]?\d+(?:\.\d+)?")


def clean(value):
    """Strip a raw value; return None for nvidia-smi's 'no value' spellings."""
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    if text.lower() in _NULL_VALUES:
        return None
    return text


def to_int(value):
    """'81559 MiB' -> 81559, '16x' -> 16, '0x10' stays None; None for null spellings."""
    text = clean(value)
    if text is None:
        return None
    m = _NUM_RE.match(text)
    if not m:
        return None
    try:
        return int(float(m.group(0)))
    except ValueError:
        return None


def to_float(value):
    """'700.00 W' -> 700.0; None for null spellings."""
    text = clean(value)
    if text is None:
        return None
    m = _NUM_RE.match(text)
    return float(m.group(0)) if m else None


def to_bool(value):
    """Enabled/Yes/Active -> True, Disabled/No/Not Active -> False, else None."""
    text = clean(value)
    if text is None:
        return None
    low = text.lower()
    if low in ("enabled", "yes", "active", "true", "on"):
        return True
    if low in ("disabled", "no", "not active", "false", "off", "none"):
        return False
    return None


def to_mode(value):
    """'Enabled' -> 'enabled', 'Disabled' -> 'disabled', anything else -> None."""
    b = to_bool(value)
    if b is None:
        return None
    return "enabled" if b else "disabled"


def snake(label):
    """Text label -> key: 'SRAM Uncorrectable SEC-DED' -> 'sram_uncorrectable_secded'."""
    key = re.sub(r"[^0-9a-z]+", "_", str(label).strip().lower()).strip("_")
    return key.replace("sec_ded", "secded")


# ---------------------------------------------------------------------------
# the common tree


class Node(object):
    __slots__ = ("key", "value", "children", "attrs")

    def __init__(self, key, value=None, attrs=None):
        self.key = key
        self.value = value
        self.children = []
        self.attrs = attrs or {}

    def child(self, *keys):
        """First child whose key is one of ``keys``."""
        for c in self.children:
            if c.key in keys:
                return c
        return None

    def all(self, *keys):
        return [c for c in self.children if c.key in keys]


def _xml_tree(elem):
    text = (elem.text or "").strip()
    # camelCase tags (cliqueId, clusterUuid) get the same key as the text labels
    node = Node(snake(elem.tag), text or None, dict(elem.attrib))
    for sub in elem:
        node.children.append(_xml_tree(sub))
    return node


_GPU_HEADER_RE = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV_RE = re.compile(r"^(\S.*?)\s*:(?:\s(.*)|)$")


def _text_tree(text):
    root = Node("nvidia_smi_log")
    stack = [(-1, root)]
    for raw in text.splitlines():
        line = raw.expandtabs(8).rstrip()
        if not line.strip() or line.strip().startswith("====="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        gm = _GPU_HEADER_RE.match(body)
        if gm:
            node = Node("gpu", None, {"id": gm.group(1)})
        else:
            km = _KV_RE.match(body)
            if km:
                node = Node(snake(km.group(1)), (km.group(2) or "").strip() or None)
            else:
                node = Node(snake(body))
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _looks_like_xml(text):
    head = text.lstrip()[:200]
    return head.startswith("<?xml") or head.startswith("<!DOCTYPE") or head.startswith("<nvidia_smi_log")


# nvidia-smi's XML nests about six levels (gpu/ecc_errors/volatile/sram_uncorrectable_parity...);
# far deeper input is not nvidia-smi's, and the recursive tree walk must not meet it.
MAX_XML_DEPTH = 64


def _xml_depth_ok(root, limit=MAX_XML_DEPTH):
    stack = [(root, 1)]
    while stack:
        elem, depth = stack.pop()
        if depth > limit:
            return False
        stack.extend((sub, depth + 1) for sub in elem)
    return True


def _tree(text):
    if _looks_like_xml(text):
        try:
            # errors="replace": a lone surrogate (an undecodable byte kept by the caller) must
            # not become a UnicodeEncodeError.
            root = ET.fromstring(text.strip().encode("utf-8", errors="replace"))
        except ET.ParseError as e:
            raise NvidiaSmiParseError("nvidia-smi XML does not parse: %s" % e)
        except RecursionError:
            raise NvidiaSmiParseError("nvidia-smi XML nests too deep to parse")
        if not _xml_depth_ok(root):
            raise NvidiaSmiParseError("nvidia-smi XML nests deeper than %d levels: not nvidia-smi output"
                                      % MAX_XML_DEPTH)
        return "xml", _xml_tree(root)
    if "NVSMI LOG" not in text and not re.search(r"^(Driver Version|Attached GPUs)\s*:", text, re.M) \
            and not re.search(r"^GPU [0-9A-Fa-f]+:", text, re.M):
        raise NvidiaSmiParseError("not nvidia-smi -q output")
    return "text", _text_tree(text)


def _get(node, *paths):
    """First node found along any of the '/'-separated paths; each path
    segment may list alternatives with '|'."""
    for path in paths:
        cur = node
        for seg in path.split("/"):
            cur = cur.child(*seg.split("|")) if cur is not None else None
            if cur is None:
                break
        if cur is not None:
            return cur
    return None


def _val(node, *paths):
    """First non-null cleaned value along the paths."""
    for path in paths:
        n = _get(node, path)
        if n is not None:
            v = clean(n.value)
            if v is not None:
                return v
    return None


# ---------------------------------------------------------------------------
# per-GPU extraction

def _ecc_counts(section):
    """(correctable, uncorrectable, detail) over every memory kind a volatile or
    aggregate section lists. New layout: sram_/dram_ (un)correctable*; old:
    single_bit/double_bit per location (the location sum, 'total' only if no
    location has a number)."""
    if section is None:
        return None, None, None
    corr = []
    unc = []
    detail = {}
    for c in section.children:
        if c.key in ("single_bit", "double_bit"):
            sub = {}
            parts = []
            total = None
            for loc in c.children:
                v = to_int(loc.value)
                if loc.key == "total":
                    total = v
                    continue
                sub[loc.key] = v
                if v is not None:
                    parts.append(v)
            if total is not None:
                sub["total"] = total
            detail[c.key] = sub
            amount = sum(parts) if parts else total
            if amount is not None:
                (corr if c.key == "single_bit" else unc).append(amount)
            continue
        if "correctable" not in c.key:
            if c.children or c.value is not None:
                detail[c.key] = to_bool(c.value) if to_int(c.value) is None else to_int(c.value)
            continue
        v = to_int(c.value)
        detail[c.key] = v
        if v is None:
            continue
        if "uncorrectable" in c.key:
            unc.append(v)
        else:
            corr.append(v)
    return (sum(corr) if corr else None), (sum(unc) if unc else None), detail


def _ecc(gpu):
    errs = _get(gpu, "ecc_errors")
    out = {}
    detail = {}
    for kind in ("volatile", "aggregate"):
        c, u, d = _ecc_counts(_get(errs, kind) if errs is not None else None)
        out[kind] = {"correctable": c, "uncorrectable": u}
        if d:
            detail[kind] = d
    if errs is not None:
        src = _get(errs, "aggregate_uncorrectable_sram_sources")
        if src is not None:
            detail["aggregate_uncorrectable_sram_sources"] = {c.key: to_int(c.value) for c in src.children}
        for key in ("channel_repair_pending", "tpc_repair_pending", "unrepairable_memory"):
            n = _get(errs, key)
            if n is not None:
                detail[key] = to_bool(n.value)
        sram_thr = _val(errs, "aggregate/sram_threshold_exceeded")
        if sram_thr is not None:
            detail["sram_threshold_exceeded"] = to_bool(sram_thr)
    return out, (detail or None)


def _retired_pages(gpu):
    sec = _get(gpu, "retired_pages")
    if sec is None:
        return None
    single = to_int(_val(sec, "multiple_single_bit_retirement/retired_count", "single_bit_ecc"))
    double = to_int(_val(sec, "double_bit_retirement/retired_count", "double_bit_ecc"))
    pend = [to_bool(_val(sec, k)) for k in ("pending_blacklist", "pending_retirement", "pending_page_blacklist", "pending")]
    pend = [p for p in pend if p is not None]
    if single is None and double is None and not pend:
        return None
    return {"single_bit": single, "double_bit": double, "pending": any(pend) if pend else None}


def _remapped_rows(gpu):
    sec = _get(gpu, "remapped_rows")
    if sec is None or not sec.children:
        return None
    out = {
        "correctable": to_int(_val(sec, "remapped_row_corr", "correctable_error", "correctable")),
        "uncorrectable": to_int(_val(sec, "remapped_row_unc", "uncorrectable_error", "uncorrectable")),
        "pending": to_bool(_val(sec, "remapped_row_pending", "pending")),
        "failure": to_bool(_val(sec, "remapped_row_failure", "remapping_failure_occurred", "failure")),
    }
    if all(v is None for v in out.values()):
        return None
    for key, paths in (("correctable_inactive", ("remapped_row_corr_inactive", "correctable_error_inactive")),
                       ("uncorrectable_inactive", ("remapped_row_unc_inactive", "uncorrectable_error_inactive"))):
        v = to_int(_val(sec, *paths))
        if v is not None:
            out[key] = v
    hist = _get(sec, "row_remapper_histogram", "bank_remap_availability_histogram")
    if hist is not None:
        out["histogram"] = {re.sub(r"^row_remapper_histogram_", "", c.key): to_int(c.value) for c in hist.children}
    return out


# text labels -> the XML reason names
_REASON_ALIASES = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}


def _clock_event_reasons(gpu):
    sec = _get(gpu, "clocks_event_reasons", "clocks_throttle_reasons")
    if sec is None:
        return None, None
    states = {}

    def walk(node):
        for c in node.children:
            name = re.sub(r"^clocks_(event|throttle)_reason_", "", c.key)
            name = _REASON_ALIASES.get(name, name)
            state = to_bool(c.value)
            if state is not None:
                states[name] = state
            walk(c)

    walk(sec)
    if not states:
        return None, None
    return sorted(k for k, v in states.items() if v), states


def _mig_devices(gpu):
    devices = []
    container = _get(gpu, "mig_devices")
    nodes = container.all("mig_device") if container is not None else gpu.all("mig_device")
    for d in nodes:
        devices.append({
            "index": to_int(_val(d, "index")),
            "gpu_instance_id": to_int(_val(d, "gpu_instance_id")),
            "compute_instance_id": to_int(_val(d, "compute_instance_id")),
            "multiprocessor_count": to_int(_val(d, "device_attributes/shared/multiprocessor_count")),
            "memory_total_mib": to_int(_val(d, "fb_memory_usage/total", "shared_fb_memory_usage/total")),
        })
    return devices


def _compute_capability(gpu):
    for c in gpu.children:
        if "compute_cap" in c.key:
            cc = normalize_cc(clean(c.value))
            if cc:
                return cc
    return None


def _hex_id(value):
    if value is None:
        return None
    v = value.lower()
    return v if v.startswith("0x") else "0x" + v


def _identity(gpu, name, pci_device_id):
    """(model row or None, compute capability, its source, architecture, its source): nvidia-smi's own
    word first, then the model table (by PCI device id, then name), then the capability's architecture."""
    model = None
    if pci_device_id:
        model = lookup_model(pci_device_id)
    if model is None and name:
        model = lookup_model(name)

    cc = _compute_capability(gpu)
    cc_source = "nvidia-smi" if cc else None
    if cc is None and model is not None:
        cc, cc_source = model["compute_capability"], "model_table"
    arch = _val(gpu, "product_architecture")
    arch_source = "nvidia-smi" if arch else None
    if arch is None and model is not None:
        arch, arch_source = model["architecture"], "model_table"
    if arch is None and cc is not None:
        arch, arch_source = architecture_for_cc(cc), "compute_capability"
    return model, cc, cc_source, arch, arch_source


def _pcie(gpu):
    link = _get(gpu, "pci/pci_gpu_link_info|gpu_link_info")
    pcie = {
        "gen_current": to_int(_val(link, "pcie_gen/current_link_gen", "pcie_generation/current")) if link else None,
        "gen_max": to_int(_val(link, "pcie_gen/max_link_gen", "pcie_generation/max")) if link else None,
        "width_current": to_int(_val(link, "link_widths/current_link_width", "link_width/current")) if link else None,
        "width_max": to_int(_val(link, "link_widths/max_link_width", "link_width/max")) if link else None,
    }
    if link is not None:
        for key, paths in (("gen_device_current", ("pcie_gen/device_current_link_gen", "pcie_generation/device_current")),
                           ("gen_device_max", ("pcie_gen/max_device_link_gen", "pcie_generation/device_max")),
                           ("gen_host_max", ("pcie_gen/max_host_link_gen", "pcie_generation/host_max"))):
            if _get(link, *paths) is not None:
                pcie[key] = to_int(_val(link, *paths))
    pcie["replay_counter"] = to_int(_val(gpu, "pci/replay_counter|replays_since_reset"))
    return pcie


def _power(gpu):
    """(power limit W, power draw W)."""
    power = _get(gpu, "gpu_power_readings", "power_readings")
    if not power:
        return None, None
    # R610 nests the limits under "GPU Ceiling Power Limit".
    power_limit = to_float(_val(power, "current_power_limit", "enforced_power_limit", "power_limit",
                                "gpu_ceiling_power_limit/current_power_limit"))
    power_draw = to_float(_val(power, "power_draw", "average_power_draw", "instant_power_draw",
                               "instantaneous_power_draw"))
    return power_limit, power_draw


def _fabric(gpu):
    fab = _get(gpu, "fabric")
    if fab is None:
        return None
    fabric = {
        "state": _val(fab, "state"),
        "status": _val(fab, "status"),
        "clique_id": _val(fab, "cliqueid", "clique_id"),
        "cluster_uuid": _val(fab, "clusteruuid", "cluster_uuid"),
    }
    if fabric["state"] is None and fabric["status"] is None:
        return None
    return fabric


def _gpu(gpu, index):
    bus_id = _val(gpu, "pci/pci_bus_id|bus_id") or gpu.attrs.get("id")
    name = _val(gpu, "product_name")
    pci_device_id = normalize_pci_device_id(_val(gpu, "pci/pci_device_id|device_id"))
    model, cc, cc_source, arch, arch_source = _identity(gpu, name, pci_device_id)
    power_limit, power_draw = _power(gpu)
    ecc_errors, ecc_detail = _ecc(gpu)
    active, reason_states = _clock_event_reasons(gpu)
    reset = _get(gpu, "gpu_reset_status")
    mig_current = to_mode(_val(gpu, "mig_mode/current_mig|current"))

    return {
        "index": index,
        "name": name,
        "uuid": _val(gpu, "uuid", "gpu_uuid"),
        "serial": _val(gpu, "serial", "serial_number"),
        "pci_bus_id": normalize_pci_bus_id(bus_id) or bus_id,
        "pci_device_id": pci_device_id,
        "pci_sub_system_id": _hex_id(_val(gpu, "pci/pci_sub_system_id|sub_system_id")),
        "vbios_version": _val(gpu, "vbios_version"),
        "memory_total_mib": to_int(_val(gpu, "fb_memory_usage/total")),
        "architecture": arch,
        "architecture_source": arch_source,
        "compute_capability": cc,
        "compute_capability_source": cc_source,
        "model": model["key"] if model else None,
        "persistence_mode": to_bool(_val(gpu, "persistence_mode")),
        "mig_mode": {
            "current": mig_current,
            "pending": to_mode(_val(gpu, "mig_mode/pending_mig|pending")),
        },
        "mig_devices": _mig_devices(gpu),
        "ecc_mode": {
            "current": to_mode(_val(gpu, "ecc_mode/current_ecc|current")),
            "pending": to_mode(_val(gpu, "ecc_mode/pending_ecc|pending")),
        },
        "ecc_errors": ecc_errors,
        "ecc_errors_detail": ecc_detail,
        "retired_pages": _retired_pages(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "pcie": _pcie(gpu),
        "power_limit_w": power_limit,
        "power_draw_w": power_draw,
        "temperature_c": to_int(_val(gpu, "temperature/gpu_temp|gpu_current_temp")),
        "memory_temperature_c": to_int(_val(gpu, "temperature/memory_temp|memory_current_temp")),
        "clock_event_reasons_active": active,
        "clock_event_reasons": reason_states,
        "fabric": _fabric(gpu),
        "gpu_recovery_action": _val(gpu, "gpu_recovery_action"),
        "reset_required": to_bool(_val(reset, "reset_required")) if reset is not None else None,
        "drain_and_reset_recommended": to_bool(_val(reset, "drain_and_reset_recommended")) if reset is not None else None,
        "virtualization_mode": _val(gpu, "gpu_virtualization_mode/virtualization_mode"),
    }


# From R610 nvidia-smi deprecates "Driver Version" / "CUDA Version" for "KMD Version" / "CUDA UMD
# Version" and prints the old lines as "610.43.02 [Deprecated; will be removed in CUDA 14.0. Use KMD
# Version instead]" (tests/fixtures/nvidia-smi-q/h200-drv610.43.02-*). The new field is read first; the
# old one without its note. A value that is no version is an error, never returned as one.
_DEPRECATION_NOTE_RE = re.compile(r"^(\S+)\s+\[Deprecated\b[^\]]*\]$", re.I)
_VERSION_RES = {"driver": re.compile(r"^\d{3,4}\.\d{1,3}(?:\.\d{1,3})?$"), "cuda": re.compile(r"^\d{1,2}\.\d{1,2}$")}


def _version(root, kind, fields):
    """The driver (``kind`` "driver") or CUDA version from the first of ``fields`` present, the newer
    spelling first. Raises NvidiaSmiParseError when a field holds no version of the known forms, or when
    the new and the deprecated field disagree."""
    found = []
    for field in fields:
        raw = _val(root, field)
        if raw is None:
            continue
        note = _DEPRECATION_NOTE_RE.match(raw)
        value = note.group(1) if note else raw
        if not _VERSION_RES[kind].match(value):
            raise NvidiaSmiParseError(
                "nvidia-smi reports %s %r, which is not a %s version in a form this parser knows (%s); "
                "update gpufleet's nvidia_smi parser for this driver's output" % (
                    field.replace("_", " "), raw, kind,
                    "NNN.NN[.NN]" if kind == "driver" else "X.Y"))
        found.append((field, value))
    if len({v for _f, v in found}) > 1:
        raise NvidiaSmiParseError("nvidia-smi reports two %s versions: %s" % (
            kind, ", ".join("%s %s" % (f.replace("_", " "), v) for f, v in found)))
    return found[0][1] if found else None


def parse_nvidia_smi(text):
    """Parse ``nvidia-smi -q -x`` XML or ``nvidia-smi -q``/``-a`` text into
    ``{format, driver_version, cuda_version, attached_gpus, gpus: [...]}``
    (per-GPU keys: see gpu_info RETURN). Raises NvidiaSmiParseError on other text."""
    if text is None or not str(text).strip():
        raise NvidiaSmiParseError("empty nvidia-smi output")
    fmt, root = _tree(str(text))
    if root.key != "nvidia_smi_log":
        raise NvidiaSmiParseError("XML root is <%s>, not <nvidia_smi_log>" % root.key)
    gpus = [_gpu(g, i) for i, g in enumerate(root.all("gpu"))]
    return {
        "format": fmt,
        "driver_version": _version(root, "driver", ("kmd_version", "driver_version")),
        "cuda_version": _version(root, "cuda", ("cuda_umd_version", "cuda_version")),
        "attached_gpus": to_int(_val(root, "attached_gpus")),
        "timestamp": _val(root, "timestamp"),
        "gpus": gpus,
    }


# ---------------------------------------------------------------------------
# nvidia-smi topo -m

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NV_RE = re.compile(r"^NV(\d+)$")
# Closer first. NV# links are closer than any PCIe path.
PCIE_PATH_RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}


def _link_rank(token):
    if token is None:
        return 99
    if _NV_RE.match(token):
        return PCIE_PATH_RANK["NV"]
    return PCIE_PATH_RANK.get(token, 99)


def _num_or_str(value):
    v = clean(value)
    if v is None:
        return None
    return int(v) if re.match(r"^\d+$", v) else v


def _split_cells(line, tabbed):
    if tabbed:
        return [c.strip() for c in line.split("\t")]
    return re.split(r"\s{2,}", line.strip())


def _topo_matrix(lines, header_idx):
    """(device columns, {row: {column: link type}}, {row: {attribute column: value}}) of the matrix."""
    header = lines[header_idx]
    tabbed = "\t" in header
    cols = [c for c in _split_cells(header, tabbed) if c]
    devices = [c for c in cols if " " not in c]
    named = [c for c in cols if " " in c]
    n_dev = len(devices)
    matrix = {}
    attrs = {}
    for line in lines[header_idx + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = _split_cells(line, tabbed)
        row = cells[0].strip()
        rest = cells[1:]
        links = rest[:n_dev]
        tail = rest[n_dev:]
        while len(tail) > len(named) and "" in tail:
            tail.remove("")
        tail = (tail + [""] * len(named))[:len(named)]
        matrix[row] = {devices[j]: (links[j].strip() or None) if j < len(links) else None for j in range(n_dev)}
        attrs[row] = dict(zip(named, tail))
    return devices, matrix, attrs


def _topo_legends(lines):
    """({link type: meaning}, {NICn: device name}) from the Legend and NIC Legend below the matrix."""
    legend = {}
    nic_legend = {}
    section = None
    for line in lines:
        s = line.strip()
        if s.startswith("NIC Legend"):
            section = "nic"
            continue
        if s.startswith("Legend"):
            section = "legend"
            continue
        if section == "legend":
            m = re.match(r"^(\S+)\s+=\s+(.*)$", s)
            if m:
                legend[m.group(1)] = m.group(2)
        elif section == "nic":
            m = re.match(r"^(NIC\d+):\s*(\S+)$", s)
            if m:
                nic_legend[m.group(1)] = m.group(2)
    return legend, nic_legend


def _topo_gpu(g, row, a, gpu_cols, nic_cols, nic_name):
    nics = {nic_name(d): row.get(d) for d in nic_cols}
    best = min((_link_rank(v) for v in nics.values()), default=99)
    nearest = sorted(n for n, v in nics.items() if _link_rank(v) == best) if nics and best < 99 else []
    return {
        "name": g,
        "index": int(g[3:]),
        "cpu_affinity": clean(a.get("CPU Affinity")),
        "numa_affinity": _num_or_str(a.get("NUMA Affinity")),
        "gpu_numa_id": _num_or_str(a.get("GPU NUMA ID")),
        "links": {d: row.get(d) for d in gpu_cols if d != g},
        "nics": nics,
        "nearest_nics": nearest,
        "nearest_nic_link": nics[nearest[0]] if nearest else None,
    }


def parse_nvidia_smi_topo(text):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{gpus: [{name, index, cpu_affinity, numa_affinity, gpu_numa_id,
    links: {GPUn: type}, nics: {nic: type}, nearest_nics, nearest_nic_link}],
    nics: [{name, device, links}], matrix, legend, nic_legend, link_types, nvlink}``.
    NIC keys use the device name from the NIC Legend (mlx5_0) when there is one.
    Raises NvidiaSmiParseError when no matrix is found.
    """
    if text is None:
        raise NvidiaSmiParseError("empty topo output")
    lines = [_ANSI_RE.sub("", raw).rstrip("\r\n") for raw in str(text).splitlines()]
    header_idx = None
    for i, line in enumerate(lines):
        if re.match(r"^\s+GPU0\b", line) or re.match(r"^\tGPU0\b", line):
            header_idx = i
            break
    if header_idx is None:
        raise NvidiaSmiParseError("no GPU0 header row in nvidia-smi topo output")
    devices, matrix, attrs = _topo_matrix(lines, header_idx)
    legend, nic_legend = _topo_legends(lines[header_idx + 1:])
    gpu_cols = [d for d in devices if re.match(r"^GPU\d+$", d)]
    nic_cols = [d for d in devices if d not in gpu_cols]

    def nic_name(col):
        return nic_legend.get(col, col)

    gpus = [_topo_gpu(g, matrix.get(g, {}), attrs.get(g, {}), gpu_cols, nic_cols, nic_name) for g in gpu_cols]
    link_types = {v for gpu in gpus for v in gpu["links"].values() if v}
    nics = [{"name": nic_name(d), "column": d, "links": matrix.get(d, {})} for d in nic_cols]
    return {
        "gpus": gpus,
        "nics": nics,
        "matrix": matrix,
        "legend": legend,
        "nic_legend": nic_legend,
        "link_types": sorted(link_types),
        "nvlink": any(_NV_RE.match(t) for t in link_types),
    }


# ---------------------------------------------------------------------------
# nvidia-smi --query-* --format=csv

_UNIT_RE = re.compile(r"^(.*?)\s*\[([^\]]+)\]$")


def parse_nvidia_smi_csv(text):
    """Parse ``--format=csv`` output (with header) into a list of dicts.

    Keys are the field names without the unit suffix (``memory.total``); fields
    whose header carries a unit (``[MiB]``, ``[W]``, ``[%]``) become numbers,
    the rest stay strings; null spellings become None.
    """
    try:
        rows = list(csv.reader(io.StringIO(str(text or "").strip()), skipinitialspace=True))
    except csv.Error as e:
        # e.g. "field larger than field limit (131072)": not what nvidia-smi prints.
        raise NvidiaSmiParseError("nvidia-smi CSV does not parse: %s" % e)
    if not rows:
        return []
    fields = []
    for h in rows[0]:
        m = _UNIT_RE.match(h.strip())
        fields.append((m.group(1), m.group(2)) if m else (h.strip(), None))
    out = []
    for r in rows[1:]:
        if not any(c.strip() for c in r):
            continue
        item = {}
        for (name, unit), raw in zip(fields, r):
            v = clean(raw)
            if v is not None and unit is not None:
                num = to_float(v)
                v = num if num is None or not num.is_integer() or "." in v.split()[0] else int(num)
            item[name] = v
        out.append(item)
    return out


# ---------------------------------------------------------------------------
# nvidia-smi nvlink -s

_NVL_GPU_RE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: (\S+)\))?$")
_NVL_LINK_RE = re.compile(r"^Link (\d+): (.*)$")


def parse_nvidia_smi_nvlink(text):
    """Parse ``nvidia-smi nvlink -s``: ``{gpus: [{index, name, uuid, links:
    [{link, active, speed_gbps}], active_links, inactive_links}], error}``."""
    gpus = []
    error = None
    for raw in str(text or "").splitlines():
        s = raw.strip()
        if not s:
            continue
        m = _NVL_GPU_RE.match(s)
        if m:
            gpus.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3), "links": []})
            continue
        m = _NVL_LINK_RE.match(s)
        if m and gpus:
            rest = m.group(2).strip()
            inactive = "inactive" in rest.lower()
            gpus[-1]["links"].append({
                "link": int(m.group(1)),
                "active": not inactive,
                "speed_gbps": None if inactive else to_float(rest),
            })
            continue
        if s.startswith("NVML:") or "Unable" in s or "failed" in s.lower():
            error = s
    for g in gpus:
        g["active_links"] = sum(1 for lk in g["links"] if lk["active"])
        g["inactive_links"] = sum(1 for lk in g["links"] if not lk["active"])
    return {"gpus": gpus, "error": error}
