# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Hardware profiles: one node's facts -> a flat summary -> findings.

PRIVATE to the gpufleet.cluster collection. Pure functions, no Ansible import
beyond the collection's own module_utils, so the filters, the benchmark and the
unit tests share them.

``node_summary(gpu_info, rdma_info, host_info)`` flattens what the three facts
modules return into one dict of scalars (what the report table and the
homogeneity check compare) plus a short per-GPU list (what per-GPU checks need).
Before the driver is installed the GPU model comes from the PCI device id and
VRAM from the model table; ``gpu_source`` / ``vram_source`` say which.

``resolve_profile(name, builtin, custom)`` picks a profile (a custom profile
may ``extends:`` another) and validates every key, raising ``ProfileError``
with the inventory variable's name in the message.

``check_node(node, summary, profile, ...)`` returns findings in the shape of
docs/architecture.md: ``{code, severity, node, gpu_index, gpu_bus_id, value,
threshold, message, remediation}``.
"""

from __future__ import annotations

import functools
import re

from ansible_collections.gpufleet.cluster.plugins.module_utils import versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.request_schema import nearest, profile_problems
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import (
    lookup_model,
    normalize_cc,
)

FAIL = "fail"
WARN = "warn"

# Profile keys, their kind and what ``null`` means. A key left out of a
# custom profile (without ``extends``) is null: the check is skipped.
PROFILE_KEYS = {
    "description": "str",
    "gpu_models": "list",              # allow-list of model keys/families/names; [] or null: any
    "min_compute_capability": "cc",    # e.g. "7.5"
    "min_gpus_per_node": "int",
    "min_vram_gib": "number",          # per GPU, nominal (model table) size
    "min_cpu_cores_per_gpu": "number",  # physical cores
    "min_ram_per_vram": "number",      # host RAM / total VRAM
    "require_nvme": "bool",
    "min_nic_gbps": "number",
    "require_rdma_multinode": "bool",
    "ecc": "policy",                   # required | preferred | ignore
    "persistence_mode": "policy",      # required | preferred | ignore
    "extends": "str",
}
POLICIES = ("required", "preferred", "ignore")

# MemTotal in /proc/meminfo excludes firmware- and kernel-reserved memory (a few
# per cent of what is installed), so a RAM:VRAM ratio is compared with this slack.
RAM_SLACK = 0.95


class ProfileError(ValueError):
    """A profile name or value that cannot be used; the message names the variable."""


# --------------------------------------------------------------------------- #
# Small normalizers
# --------------------------------------------------------------------------- #

def _int(value):
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    m = re.search(r"-?\d+", str(value))
    return int(m.group(0)) if m else None


def _number(value):
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(str(value).strip())
    except ValueError:
        return None


_ON_OFF = {True: True, False: False, None: None, "Enabled": True, "Disabled": False,
           "enabled": True, "disabled": False}


def _on_off(value):
    """True/False for Enabled/Disabled, On/Off, yes/no, bools; None when unknown/N/A."""
    try:
        return _ON_OFF[value]
    except (KeyError, TypeError):
        pass
    text = str(value).strip().lower()
    if text in ("enabled", "enable", "on", "yes", "true", "1"):
        return True
    if text in ("disabled", "disable", "off", "no", "false", "0"):
        return False
    return None


def _join(values):
    """One comparable scalar for a per-GPU / per-HCA property: the single value,
    or the sorted distinct values joined with ', ' when a node mixes them."""
    distinct = sorted({str(v) for v in values if v is not None})
    if not distinct:
        return None
    if len(distinct) == 1:
        only = [v for v in values if v is not None][0]
        return only
    return ", ".join(distinct)


# RHEL and the rebuild in the one supported-OS list (Rocky) use the rhel key; other rebuilds keep their own id,
# which is not in the list (compat_packages SUPPORTED_OS), so preflight reports them as the solver refuses them.
_RHEL_CLONES = ("rhel", "redhat", "rocky")


def os_key(os_id, version_id):
    """The solver's OS key: 'ubuntu22.04' (Ubuntu keeps the point release),
    'debian12', 'rhel9' (others keep the major; RHEL clones map to rhel)."""
    if not os_id:
        return None
    os_id = str(os_id).strip().lower()
    version = str(version_id or "").strip()
    if not version:
        return os_id
    if os_id == "ubuntu":
        return "ubuntu" + version
    if os_id in _RHEL_CLONES:
        os_id = "rhel"
    return os_id + version.split(".", maxsplit=1)[0]


@functools.lru_cache(maxsize=256)
def _norm_cc(cc):
    return normalize_cc(cc)


@functools.lru_cache(maxsize=256)
def _cc_tuple(cc):
    text = normalize_cc(cc)
    return None if text is None else versions.dotted_key(text)


# --------------------------------------------------------------------------- #
# Facts -> summary
# --------------------------------------------------------------------------- #

@functools.lru_cache(maxsize=1024)
def _model_for(name_or_id):
    """lookup_model, cached: a cluster has few distinct names. The dict is shared; read only."""
    return lookup_model(name_or_id) if name_or_id else None


def _gpus_from_smi(smi_gpus):
    gpus = []
    for pos, g in enumerate(smi_gpus):
        model = _model_for(g.get("name"))
        mib = _int(g.get("memory_total_mib"))
        ecc = g.get("ecc_mode") or {}
        pcie = g.get("pcie") or {}
        gpus.append({
            "index": _int(g.get("index")) if g.get("index") is not None else pos,
            "bus_id": g.get("pci_bus_id"),
            "name": g.get("name"),
            "model": model,
            "memory_mib": mib,
            "memory_source": "nvidia-smi" if mib is not None else ("model table" if model else None),
            "compute_capability": _norm_cc(g.get("compute_capability")) or (model or {}).get("compute_capability"),
            "vbios_version": g.get("vbios_version"),
            "pcie_width": _int(pcie.get("width_current")),
            "ecc_current": _on_off(ecc.get("current")),
            "ecc_pending": _on_off(ecc.get("pending")),
            "persistence": _on_off(g.get("persistence_mode")),
        })
    return gpus


def _gpus_from_pci(pci_gpus):
    """Before the driver: the model from the PCI device id, nothing the driver would report."""
    gpus = []
    for pos, d in enumerate(pci_gpus):
        model = _model_for(d.get("device_id")) or _model_for(d.get("model"))
        gpus.append({
            "index": pos,
            "bus_id": d.get("bus_id"),
            "name": (model or {}).get("name") or d.get("model") or d.get("device_id"),
            "model": model,
            "memory_mib": None,
            "memory_source": None,
            "compute_capability": (model or {}).get("compute_capability"),
            "vbios_version": None,
            "pcie_width": None,
            "ecc_current": None,
            "ecc_pending": None,
            "persistence": None,
        })
    return gpus


def _node_gpus(gpu_info):
    """``(gpus, source)``: nvidia-smi's GPUs, else the PCI ones; memory the driver did not report
    comes from the model table."""
    smi_gpus = list(gpu_info.get("gpus") or [])
    pci_gpus = [d for d in (gpu_info.get("pci_devices") or []) if (d or {}).get("kind") == "gpu"]
    if smi_gpus:
        gpus, source = _gpus_from_smi(smi_gpus), "nvidia-smi"
    elif pci_gpus:
        gpus, source = _gpus_from_pci(pci_gpus), "pci"
    else:
        gpus, source = [], "none"
    for g in gpus:
        if g["memory_mib"] is None and g["model"]:
            table_mib = g["model"].get("memory_mib")
            if table_mib is None and g["model"].get("memory_gib"):
                table_mib = int(g["model"]["memory_gib"] * 1024)
            if table_mib is not None:
                g["memory_mib"] = table_mib
                g["memory_source"] = "model table"
    return gpus, source


def _gpu_fields(gpu_info, gpus, source):
    """The summary's GPU scalars: model, counts, memory, compute capability, ECC, PCIe, NVSwitch."""
    pci_count = _int(gpu_info.get("pci_gpu_count"))
    driver_count = _int(gpu_info.get("driver_gpu_count"))
    if driver_count is None and gpu_info.get("gpus"):
        driver_count = len(gpu_info["gpus"])
    gpu_count = max([c for c in (pci_count, driver_count, len(gpus)) if c is not None] or [0])
    mems = [g["memory_mib"] for g in gpus if g["memory_mib"] is not None]
    nominal = []
    for g in gpus:
        gib = (g["model"] or {}).get("memory_gib")
        if gib is None and g["memory_mib"] is not None:
            gib = int(round(g["memory_mib"] / 1024.0))
        nominal.append(gib)
    ecc_caps = [(g["model"] or {}).get("ecc_capable") if g["model"] else None for g in gpus]
    vram_sources = sorted({g["memory_source"] for g in gpus if g["memory_source"]})
    widths = [g["pcie_width"] for g in gpus if g["pcie_width"] is not None]
    return {
        "gpu_status": gpu_info.get("status"),
        "gpu_message": gpu_info.get("message"),
        "gpu_source": source,
        "gpu_model": _join([g["name"] for g in gpus]),
        "gpu_model_keys": sorted({g["model"]["key"] for g in gpus if g["model"]}),
        "gpu_count": gpu_count,
        "driver_gpu_count": driver_count,
        "pci_gpu_count": pci_count,
        "vram_mib": min(mems) if mems else None,
        "vram_source": ", ".join(vram_sources) if vram_sources else None,
        "vram_total_mib": sum(mems) if mems and len(mems) == len(gpus) else None,
        "vram_gib": min([n for n in nominal if n is not None]) if any(n is not None for n in nominal) else None,
        "compute_capability": _join([g["compute_capability"] for g in gpus]),
        "ecc_capable": (all(ecc_caps) if ecc_caps and None not in ecc_caps else None),
        "driver_version": gpu_info.get("driver_version"),
        "cuda_version": gpu_info.get("cuda_version"),
        "vbios_version": _join([g["vbios_version"] for g in gpus]),
        "pcie_width": min(widths) if widths else None,
        "nvswitch_count": _int(gpu_info.get("pci_nvswitch_count")),
        "nvswitch": bool(gpu_info.get("nvswitch")),
    }


def _rdma_fields(rdma_info):
    cas = list(rdma_info.get("cas") or [])
    active = list(rdma_info.get("active_ports") or [])
    active_rates = [_number(p.get("rate_gbps")) for p in active]
    return {
        "hca_count": len(cas),
        "hca_rate_gbps": _join([r if r is None or r != int(r) else int(r) for r in active_rates]),
        "hca_firmware": _join([ca.get("firmware") for ca in cas]),
        "rdma_source": rdma_info.get("source"),
        "rdma_active_ports": len(active),
        "rdma_ports_total": sum(len(ca.get("ports") or []) for ca in cas),
    }


def _fastest_link(nics, active_ports):
    """``((name, Mb/s) or None, whether any speed was known)`` over the NICs that are up and the
    Active RDMA ports."""
    best = None
    known = False
    for nic in nics or []:
        speed = _int(nic.get("speed_mbps"))
        if nic.get("link") is False or speed is None or speed <= 0:
            continue
        known = True
        if best is None or speed > best[1]:
            best = (nic.get("name"), speed)
    for p in active_ports:
        rate = _number(p.get("rate_gbps"))
        if rate:
            known = True
            mbps = int(rate * 1000)
            if best is None or mbps > best[1]:
                best = ("%s/%s" % (p.get("ca"), p.get("port")), mbps)
    return best, known


def _host_fields(host_info, active_ports, gpu_count, vram_total):
    """CPU and memory (per GPU and per VRAM), NVMe, the fastest link, OS, kernel, virtualization."""
    cpu = host_info.get("cpu") or {}
    cores = _int(cpu.get("cores"))
    mem_mib = _int((host_info.get("memory") or {}).get("total_mib"))
    nic_best, nic_speeds_known = _fastest_link(host_info.get("nics"), active_ports)
    host_os = host_info.get("os") or {}
    virt = host_info.get("virtualization") or {}
    return {
        "cpu_model": cpu.get("model"),
        "cpu_cores": cores,
        "cpu_cores_per_gpu": round(cores / float(gpu_count), 2) if cores and gpu_count else None,
        "memory_total_mib": mem_mib,
        "ram_per_vram": round(mem_mib / float(vram_total), 2) if mem_mib and vram_total else None,
        "nvme_count": len([b for b in (host_info.get("block_devices") or []) if b.get("nvme")]),
        "nic_max_gbps": (nic_best[1] / 1000.0) if nic_best else None,
        "nic_max_name": nic_best[0] if nic_best else None,
        "nic_speed_known": nic_speeds_known,
        "secure_boot": host_info.get("secure_boot") or "unknown",
        "kernel": host_info.get("kernel"),
        "os": ("%s %s" % (host_os.get("id"), host_os.get("version_id"))).strip() if host_os.get("id") else None,
        "os_key": os_key(host_os.get("id"), host_os.get("version_id")),
        "os_family": host_os.get("family"),
        "virtualization": virt.get("type") if (virt.get("container") or virt.get("vm")) else None,
    }


def _gpu_rows(gpus):
    """The short per-GPU list the per-GPU checks read."""
    return [
        {
            "index": g["index"],
            "bus_id": g["bus_id"],
            "name": g["name"],
            "model_key": (g["model"] or {}).get("key"),
            "compute_capability": g["compute_capability"],
            "ecc_capable": (g["model"] or {}).get("ecc_capable") if g["model"] else None,
            "ecc_current": g["ecc_current"],
            "ecc_pending": g["ecc_pending"],
            "persistence": g["persistence"],
        }
        for g in gpus
    ]


def node_summary(gpu_info, rdma_info, host_info):
    """Flatten the three facts modules' results for one node (see module doc)."""
    gpu_info = gpu_info or {}
    rdma_info = rdma_info or {}
    gpus, source = _node_gpus(gpu_info)
    summary = _gpu_fields(gpu_info, gpus, source)
    summary.update(_rdma_fields(rdma_info))
    summary.update(_host_fields(host_info or {}, list(rdma_info.get("active_ports") or []),
                                summary["gpu_count"], summary["vram_total_mib"]))
    summary["gpus"] = _gpu_rows(gpus)
    return summary


# --------------------------------------------------------------------------- #
# Profiles
# --------------------------------------------------------------------------- #

def _validate_value(var, key, value):
    kind = PROFILE_KEYS.get(key)
    where = "%s.%s" % (var, key)
    if kind is None:
        raise ProfileError("%s: unknown profile key (known: %s)" % (where, ", ".join(sorted(PROFILE_KEYS))))
    if value is None:
        return None
    if kind == "str":
        if not isinstance(value, str):
            raise ProfileError("%s must be a string, got %r" % (where, value))
        return value
    if kind == "list":
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ProfileError("%s must be a list of GPU model keys or names, got %r" % (where, value))
        return [str(v) for v in value]
    if kind == "cc":
        cc = normalize_cc(value)
        if cc is None:
            raise ProfileError("%s must be a compute capability like '7.5', got %r" % (where, value))
        return cc
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ProfileError("%s must be a non-negative integer, got %r" % (where, value))
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ProfileError("%s must be a non-negative number, got %r" % (where, value))
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ProfileError("%s must be true or false, got %r" % (where, value))
        return value
    if kind == "policy":
        if value not in POLICIES:
            raise ProfileError("%s must be one of %s, got %r" % (where, ", ".join(POLICIES), value))
        return value
    raise ProfileError("%s: unhandled kind %s" % (where, kind))  # pragma: no cover


def resolve_profile(name, builtin, custom=None, builtin_var="preflight_profiles",
                    custom_var="gpufleet_custom_profiles", name_var="gpufleet_profile"):
    """Return ``{name, ...every PROFILE_KEYS key...}`` for ``name``.

    A custom profile of the same name as a built-in one replaces it. ``extends``
    names a profile to start from (chains allowed, cycles refused)."""
    builtin = builtin or {}
    custom = custom or {}
    # Unknown keys first, each with the nearest known key (issue 34).
    problems = profile_problems(custom, PROFILE_KEYS, custom_var) + profile_problems(builtin, PROFILE_KEYS, builtin_var)
    if problems:
        raise ProfileError(problems[0])
    if not isinstance(builtin, dict):
        raise ProfileError("%s must be a mapping of profile name to settings" % builtin_var)
    if not isinstance(custom, dict):
        raise ProfileError("%s must be a mapping of profile name to settings" % custom_var)

    def source(pname):
        if pname in custom:
            return custom_var, custom[pname]
        if pname in builtin:
            return builtin_var, builtin[pname]
        return None, None

    if not isinstance(name, str) or source(name)[0] is None:
        known = sorted(set(builtin) | set(custom))
        raise ProfileError("%s: unknown profile %r (known: %s)" % (name_var, name, ", ".join(known)))

    chain = []
    pname = name
    while pname is not None:
        if pname in [c[0] for c in chain]:
            raise ProfileError("%s: profile %r extends itself through %s"
                               % (custom_var, name, " -> ".join([c[0] for c in chain] + [pname])))
        var, settings = source(pname)
        if var is None:
            known = sorted(set(builtin) | set(custom))
            close = nearest(pname, known)
            raise ProfileError("%s.%s.extends: unknown profile %r (%sknown: %s)" % (
                chain[-1][1], chain[-1][0], pname, "did you mean %s? " % " or ".join(repr(c) for c in close)
                if close else "", ", ".join(known)))
        if not isinstance(settings, dict):
            raise ProfileError("%s.%s must be a mapping, got %r" % (var, pname, settings))
        chain.append((pname, var, settings))
        pname = settings.get("extends")

    resolved = dict.fromkeys(PROFILE_KEYS)
    for pname, var, settings in reversed(chain):
        for key, value in settings.items():
            resolved[key] = _validate_value("%s.%s" % (var, pname), key, value)
    resolved.pop("extends", None)
    resolved["name"] = name
    resolved["extends"] = [c[0] for c in chain[1:]]
    return resolved


# --------------------------------------------------------------------------- #
# Checks
# --------------------------------------------------------------------------- #

def finding(code, severity, node, message, value=None, threshold=None, remediation=None,
            gpu_index=None, gpu_bus_id=None):
    return make_finding(code, severity, node, message, remediation, value=value, threshold=threshold,
                        gpu_index=gpu_index, gpu_bus_id=gpu_bus_id)


@functools.lru_cache(maxsize=512)
def _allow_entry(entry):
    """(lowercased entry, model key it names exactly or None)."""
    e = entry.strip().lower()
    m = lookup_model(entry)
    exact = m["key"] if m and m.get("matched_by") in ("name", "key", "pci_id") else None
    return e, exact


def model_allowed(gpu, allow):
    """True when the GPU matches an allow-list entry: a model key ('h100-sxm5-80gb'),
    a family prefix of keys ('h100' matches 'h100-pcie', not 'h1000'), or a name."""
    key = gpu.get("model_key")
    name = (gpu.get("name") or "").strip().lower()
    for entry in allow:
        e, exact = _allow_entry(entry)
        if key and (key == e or key.startswith(e + "-") or key == exact):
            return True
        if name and name == e:
            return True
    return False


def _gpu_scope(gpus):
    """(gpu_index, gpu_bus_id, 'GPU 3' / 'GPUs 0, 1') for a list of affected GPUs."""
    if len(gpus) == 1:
        return gpus[0]["index"], gpus[0]["bus_id"], "GPU %s" % gpus[0]["index"]
    return None, None, "GPUs %s" % ", ".join(str(g["index"]) for g in gpus)


def _fmt(num):
    if isinstance(num, float) and num.is_integer():
        return str(int(num))
    return str(num)


class _Node:
    """What every check reads: the node, its summary, the profile and the run's context."""

    def __init__(self, node, summary, profile, cluster_size, supported_os, module_signing):
        self.node, self.s, self.p = node, summary, profile
        self.pname = profile.get("name")
        self.gpus = summary.get("gpus") or []
        self.count = summary.get("gpu_count") or 0
        self.src = summary.get("gpu_source")
        self.src_note = " (from %s)" % ("the PCI device id; driver not loaded" if self.src == "pci" else self.src)
        self.cluster_size = cluster_size
        self.supported_os = supported_os
        self.module_signing = module_signing


def _check_driver_error(c):
    if c.s.get("gpu_status") != "driver_error":
        return []
    return [finding(
        "GPU_DRIVER_ERROR", WARN, c.node,
        "%s: nvidia-smi failed (%s); GPU facts come from PCI" % (c.node, c.s.get("gpu_message") or "no message"),
        value="driver_error", threshold="ok",
        remediation="Check dmesg for NVRM errors; the gpu_stack stage reinstalls the planned driver.")]


def _check_missing_from_driver(c):
    drv, pci = c.s.get("driver_gpu_count"), c.s.get("pci_gpu_count")
    if c.s.get("gpu_status") != "ok" or drv is None or pci is None or drv >= pci:
        return []
    return [finding(
        "GPU_MISSING_FROM_DRIVER", FAIL, c.node,
        "%s: the driver sees %d GPU(s) but PCI shows %d" % (c.node, drv, pci),
        value=drv, threshold=pci,
        remediation="A GPU fell off the bus or failed to initialise: check dmesg for Xid 79, reseat or replace it.")]


def _check_gpu_count(c):
    min_gpus = c.p.get("min_gpus_per_node")
    if min_gpus is None or c.count >= min_gpus:
        return []
    return [finding(
        "PROFILE_GPU_COUNT", FAIL, c.node,
        "%s: gpu_count is %d, expected >= %d (profile %s)" % (c.node, c.count, min_gpus, c.pname),
        value=c.count, threshold=min_gpus,
        remediation="Check that every GPU is seated and visible in lspci, or lower min_gpus_per_node in a custom profile.")]


def _check_gpu_models(c):
    allow = c.p.get("gpu_models") or []
    bad = [g for g in c.gpus if not model_allowed(g, allow)] if allow else []
    if not bad:
        return []
    names = sorted({str(g["name"]) for g in bad})
    idx, bus, scope = _gpu_scope(bad) if len(bad) < len(c.gpus) else (None, None, "all GPUs")
    return [finding(
        "PROFILE_GPU_MODEL_NOT_ALLOWED", FAIL, c.node,
        "%s: gpu_model is %s%s on %s, expected one of [%s] (profile %s)"
        % (c.node, ", ".join(repr(n) for n in names), c.src_note, scope, ", ".join(allow), c.pname),
        value=", ".join(names), threshold=list(allow), gpu_index=idx, gpu_bus_id=bus,
        remediation="Use a profile that allows this GPU (gpufleet_profile), or add it to gpu_models in a custom profile.")]


def _check_compute_capability(c):
    min_cc = c.p.get("min_compute_capability")
    if not min_cc:
        return []
    out = []
    floor = _cc_tuple(min_cc)
    old = [g for g in c.gpus if _cc_tuple(g.get("compute_capability")) is not None
           and _cc_tuple(g["compute_capability"]) < floor]
    unknown = [g for g in c.gpus if _cc_tuple(g.get("compute_capability")) is None]
    if old:
        cc = old[0]["compute_capability"]
        out.append(finding(
            "PROFILE_GPU_ARCH_TOO_OLD", FAIL, c.node,
            "%s: compute_capability is %s (%s), expected >= %s (profile %s)" % (c.node, cc, old[0]["name"], min_cc, c.pname),
            value=cc, threshold=min_cc,
            remediation="CUDA 13 and current PyTorch wheels no longer build for this architecture; use newer GPUs."))
    if unknown and not c.p.get("gpu_models"):
        out.append(finding(
            "PROFILE_GPU_MODEL_UNKNOWN", WARN, c.node,
            "%s: compute_capability of %r is unknown (not in the model table), expected >= %s; not checked"
            % (c.node, unknown[0]["name"], min_cc),
            value=unknown[0]["name"], threshold=min_cc,
            remediation="Add the model to plugins/module_utils/gpu_models.py."))
    return out


def _check_vram(c):
    # Nominal size: drivers reserve a few per cent, a T4 '16 GB' shows 15360 MiB.
    min_vram, vram = c.p.get("min_vram_gib"), c.s.get("vram_gib")
    if min_vram is None or vram is None or vram >= min_vram:
        return []
    return [finding(
        "PROFILE_VRAM_LOW", FAIL, c.node,
        "%s: vram_per_gpu is %s GiB (%s), expected >= %s GiB (profile %s)"
        % (c.node, _fmt(vram), c.s.get("vram_source") or "unknown source", _fmt(min_vram), c.pname),
        value=vram, threshold=min_vram,
        remediation="Use GPUs with more memory, or a profile for smaller models (experiments, inference).")]


def _check_cpu_cores_per_gpu(c):
    min_cores = c.p.get("min_cpu_cores_per_gpu")
    if min_cores is None:
        return []
    cpg = c.s.get("cpu_cores_per_gpu")
    if cpg is None:
        # Unknown is not enough: the ratio was not checked, and the report says so.
        return [finding(
            "PROFILE_CPU_CORES_UNKNOWN", WARN, c.node,
            "%s: cpu_cores_per_gpu not checked: the host reported %s CPU cores (%d GPUs), expected >= %s per GPU "
            "(profile %s)" % (c.node, "no count of" if c.s.get("cpu_cores") is None else c.s.get("cpu_cores"),
                              c.count, _fmt(min_cores), c.pname),
            value=None, threshold=min_cores,
            remediation="host_info reads the core count from lscpu, else /proc/cpuinfo: check that either works "
                        "on the node (a container may hide them).")]
    if cpg >= min_cores:
        return []
    return [finding(
        "PROFILE_CPU_CORES_PER_GPU", FAIL, c.node,
        "%s: cpu_cores_per_gpu is %s (%s cores / %s GPUs), expected >= %s (profile %s)"
        % (c.node, _fmt(cpg), c.s.get("cpu_cores"), c.count, _fmt(min_cores), c.pname),
        value=cpg, threshold=min_cores,
        remediation="Data loading and NCCL proxy threads starve with fewer cores; use a host with more cores or fewer GPUs.")]


def _ram_per_vram_unknown(c):
    """Why host RAM / total VRAM is unknown, in words."""
    reasons = []
    if not c.s.get("memory_total_mib"):
        reasons.append("the host reported no memory size (MemTotal in /proc/meminfo)")
    if not c.s.get("vram_total_mib"):
        unknown = sorted({str(g["name"]) for g in c.gpus if not g.get("model_key")})
        reasons.append("the total VRAM is unknown (%s)" % (
            "no driver to read it, and %s not in the model table" % ", ".join(unknown) if unknown
            else "the driver reported no memory size for every GPU"))
    return "; ".join(reasons)


def _check_ram_per_vram(c):
    min_ratio = c.p.get("min_ram_per_vram")
    if min_ratio is None:
        return []
    ratio = c.s.get("ram_per_vram")
    if ratio is None:
        return [finding(
            "PROFILE_RAM_PER_VRAM_UNKNOWN", WARN, c.node,
            "%s: ram_per_vram not checked: %s; expected >= %s (profile %s)"
            % (c.node, _ram_per_vram_unknown(c), _fmt(min_ratio), c.pname),
            value=None, threshold=min_ratio,
            remediation="Check that /proc/meminfo is readable and the GPU model is in plugins/module_utils/gpu_models.py "
                        "(or the driver is loaded), then rerun preflight.")]
    if ratio >= min_ratio * RAM_SLACK:
        return []
    return [finding(
        "PROFILE_RAM_PER_VRAM", FAIL, c.node,
        "%s: ram_per_vram is %s (%s MiB RAM / %s MiB VRAM), expected >= %s (profile %s)"
        % (c.node, _fmt(ratio), c.s.get("memory_total_mib"), c.s.get("vram_total_mib"), _fmt(min_ratio), c.pname),
        value=ratio, threshold=min_ratio,
        remediation="Add host memory: pinned staging buffers, data loaders and checkpoint copies live in host RAM.")]


def _check_nvme(c):
    if not c.p.get("require_nvme") or c.s.get("nvme_count"):
        return []
    return [finding(
        "PROFILE_NO_NVME", FAIL, c.node,
        "%s: nvme_count is 0, expected >= 1 (profile %s)" % (c.node, c.pname),
        value=0, threshold=1,
        remediation="Add a local NVMe drive for the dataset cache and checkpoints.")]


def _check_nic(c):
    min_nic = c.p.get("min_nic_gbps")
    if min_nic is None:
        return []
    nic = c.s.get("nic_max_gbps")
    if nic is None:
        return [finding(
            "PROFILE_NIC_SPEED_UNKNOWN", WARN, c.node,
            "%s: nic_speed is unknown (no NIC reports a link speed), expected >= %s Gb/s (profile %s)"
            % (c.node, _fmt(min_nic), c.pname),
            value=None, threshold=min_nic,
            remediation="Check the NIC with ethtool; virtual NICs report no speed.")]
    if nic >= min_nic:
        return []
    return [finding(
        "PROFILE_NIC_SLOW", FAIL, c.node,
        "%s: nic_speed is %s Gb/s (%s), expected >= %s Gb/s (profile %s)"
        % (c.node, _fmt(nic), c.s.get("nic_max_name"), _fmt(min_nic), c.pname),
        value=nic, threshold=min_nic,
        remediation="Multi-node gradient exchange needs >= 25 Gb/s; use a faster NIC or port.")]


def _check_rdma(c):
    if not c.p.get("require_rdma_multinode") or c.cluster_size <= 1 or c.s.get("rdma_active_ports"):
        return []
    return [finding(
        "PROFILE_RDMA_NOT_ACTIVE", FAIL, c.node,
        "%s: rdma_active_ports is 0 of %d (source %s), expected >= 1 for a %d-node cluster (profile %s)"
        % (c.node, c.s.get("rdma_ports_total") or 0, c.s.get("rdma_source") or "none", c.cluster_size, c.pname),
        value=0, threshold=1,
        remediation="Bring up an InfiniBand/RoCE port (cable, subnet manager: State must be Active), or run single-node.")]


def _check_ecc(c):
    ecc = c.p.get("ecc") or "ignore"
    if ecc == "ignore":
        return []
    out = []
    sev = FAIL if ecc == "required" else WARN
    unsupported = [g for g in c.gpus if g.get("ecc_capable") is False
                   or (g.get("ecc_capable") is None and c.src == "nvidia-smi" and g.get("ecc_current") is None)]
    if unsupported:
        names = sorted({str(g["name"]) for g in unsupported})
        idx, bus, scope = _gpu_scope(unsupported) if len(unsupported) < len(c.gpus) else (None, None, "all GPUs")
        out.append(finding(
            "PROFILE_ECC_UNSUPPORTED", sev, c.node,
            "%s: ecc is unsupported on %s (%s), expected enabled (profile %s, ecc %s)"
            % (c.node, scope, ", ".join(names), c.pname, ecc),
            value="unsupported", threshold="enabled", gpu_index=idx, gpu_bus_id=bus,
            remediation="Consumer GPUs have no ECC memory: silent bit flips corrupt long runs. "
                        "Use data-centre GPUs or a profile that does not require ECC."))
    disabled = [g for g in c.gpus if g not in unsupported and g.get("ecc_current") is False]
    if disabled:
        pending = all(g.get("ecc_pending") for g in disabled)
        idx, bus, scope = _gpu_scope(disabled)
        out.append(finding(
            "PROFILE_ECC_DISABLED", sev, c.node,
            "%s: ecc is disabled on %s%s, expected enabled (profile %s)"
            % (c.node, scope, " (enabled after the next reboot)" if pending else "", c.pname),
            value="disabled, pending enabled" if pending else "disabled", threshold="enabled",
            gpu_index=idx, gpu_bus_id=bus,
            remediation="Reboot to apply the pending ECC mode." if pending
            else "Run 'nvidia-smi -e 1' and reboot (the validate stage checks ECC afterwards)."))
    return out


def _check_persistence(c):
    # Only known once the driver is loaded.
    pers = c.p.get("persistence_mode") or "ignore"
    off = [g for g in c.gpus if g.get("persistence") is False] if pers != "ignore" else []
    if not off:
        return []
    idx, bus, scope = _gpu_scope(off)
    return [finding(
        "PROFILE_PERSISTENCE_OFF", FAIL if pers == "required" else WARN, c.node,
        "%s: persistence_mode is off on %s, expected on (profile %s)" % (c.node, scope, c.pname),
        value="off", threshold="on", gpu_index=idx, gpu_bus_id=bus,
        remediation="Enable nvidia-persistenced (systemctl enable --now nvidia-persistenced); without it every CUDA "
                    "start re-initialises the GPUs.")]


def _check_secure_boot(c):
    # The NVIDIA modules must be signed with an enrolled key, or the driver will not load.
    if c.s.get("secure_boot") != "enabled" or c.module_signing:
        return []
    return [finding(
        "SECURE_BOOT_NO_SIGNING", FAIL, c.node,
        "%s: secure_boot is enabled and no module-signing key is configured, expected a signing plan "
        "(preflight_module_signing) or Secure Boot disabled" % c.node,
        value="enabled", threshold="preflight_module_signing set",
        remediation="Either set preflight_module_signing {key, cert} to a MOK enrolled with mokutil --import, "
                    "or disable Secure Boot in firmware; unsigned nvidia.ko is refused by the kernel.")]


def _check_os(c):
    if not c.supported_os:
        return []
    key = c.s.get("os_key")
    if key in c.supported_os:
        return []
    return [finding(
        "OS_UNSUPPORTED", FAIL, c.node,
        "%s: os is %s, expected one of [%s]" % (c.node, key or "unknown", ", ".join(c.supported_os)),
        value=key, threshold=list(c.supported_os),
        remediation="Reinstall the node with a supported OS; the driver and CUDA repositories exist only for these.")]


# Checks that need no GPU, then those that judge the GPUs (and, as before, the host around them).
_NODE_CHECKS = (_check_driver_error, _check_missing_from_driver, _check_gpu_count)
_GPU_NODE_CHECKS = (_check_gpu_models, _check_compute_capability, _check_vram, _check_cpu_cores_per_gpu,
                    _check_ram_per_vram, _check_nvme, _check_nic, _check_rdma, _check_ecc, _check_persistence,
                    _check_secure_boot, _check_os)


def check_node(node, summary, profile, cluster_size=1, supported_os=None, module_signing=None):
    """Findings for one node against one resolved profile (``resolve_profile``).

    ``supported_os``: list of OS keys ('debian12', 'ubuntu22.04', ...) or None to
    skip; ``module_signing``: a truthy mapping when a Secure Boot module-signing
    key is configured (then Secure Boot is planned for, not a stop). A ratio the
    profile asks for whose facts are unknown is a "not checked" warning, never a pass."""
    context = _Node(node, summary, profile, cluster_size, supported_os, module_signing)
    out = []
    for check in _NODE_CHECKS:
        out.extend(check(context))
    if not context.gpus:
        return out
    for check in _GPU_NODE_CHECKS:
        out.extend(check(context))
    return out
