# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Pure GPU-node health evaluation: facts in, findings out.

PRIVATE to the gpufleet.cluster collection. Inputs are the return values of the facts modules
(``gpu_info``, ``rdma_info``, ``host_info``) and the kernel log text; the output is a list of
findings in the shape of :mod:`findings`. Nothing here runs a command or imports AnsibleModule,
so the same code is unit-tested on facts built from real captures and run by the
``gpu_health_check`` module on the node.

Threshold sources (reference/health-checks.md (b)); role defaults repeat them with the source:

* uncorrectable ECC > 0 fails: imbue ``ecc.errors.uncorrected.volatile.total != 0``, Meta gcm
  volatile UE > 0 CRITICAL, Azure NHC SRAM UE > 0.
* correctable ECC > 10,000 warns: Azure NHC SRAM CE > 10,000 (there a fail; here on the total, and
  a warn, because single DRAM corrections are benign; gcm uses 50,000,000).
* remapped rows pending / failure: Azure NHC2007, IBM Autopilot ``remapped-rows.sh``, gcm.
* retired pages > 10 (gcm, "threshold of 10 like RSC"), >= 62 of 64 (Azure NHC, table full),
  pending (gcm, Azure).
* HW slowdown active fails (IBM Autopilot ``clocks_event_reasons.hw_slowdown`` Active -> FAIL);
  thermal and power-brake reasons warn (a real healthy 8x H100 capture shows a power brake on
  one GPU while every counter is clean, so it is a signal to look, not a verdict).
* persistence mode off warns (AWS healthcheck, DCGM r1).
* Xid classes: gcm (non-critical 13, 31, 43, 45, 63, 68, 92, 109 -> WARN, others CRITICAL),
  imbue hardware ranges, DeepOps ignores 94.
* host EDAC uncorrected > 0 fails (LBNL NHC ``MCELOG_MAX_UNCORRECTED_RATE`` 0).
* NVLink fabric state not Completed/Success fails (NVIDIA: CUDA cannot use the GPU before it registers,
  error 802); where the node's GPUs must register (NVSwitch with Hopper or later: NVML's fabric info is
  "for Hopper or newer fully supported devices"; GB200/GB300, whose NVSwitches sit in other trays) a GPU
  that reports no state, or N/A, fails too: missing data never passes.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import (
    make_finding,
    sort_findings,
    worst_status,
    format_finding,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_facts import rows as compat_rows
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import BLACKWELL, HOPPER, lookup_model
from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_env import classify_ports

# Xids that gcm reports as WARN (check_syslogs: everything else is CRITICAL) plus 94 (contained
# ECC error, DeepOps NHC ignores it; AWS: MONITOR).
XID_WARN_DEFAULT = [13, 31, 43, 45, 63, 68, 92, 94, 109]

DEFAULTS = {
    "ecc_required": True,
    "ecc_uncorrectable_volatile_max": 0,
    "ecc_uncorrectable_aggregate_max": 0,
    "ecc_correctable_volatile_max": 10000,
    # The node was just rebooted to apply ECC that gpu_health enabled: still pending means it did not take.
    "ecc_pending_fails": False,
    "retired_pages_warn": 10,
    "retired_pages_fail": 62,
    # GPUs every node must have: the profile's count, else the cluster majority (the role passes
    # every node's [PCI count, driver count]), as for the HCAs below.
    "expected_gpu_count": None,
    "cluster_gpu_counts": [],
    "persistence_required": True,
    "pcie_check": True,
    "throttle_fail_reasons": ["hw_slowdown"],
    "throttle_warn_reasons": ["hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"],
    "ib_check": True,
    "ib_expected_ports": [],
    "ib_expected_rate_gbps": None,
    "ib_expected_link_layer": None,
    # HCAs every node must have: the profile's count, else the cluster majority (the role passes it).
    "ib_expected_hca_count": None,
    "ib_cluster_hca_counts": [],
    # NVSwitch SXids whose text says "Non-fatal" warn; "Fatal" ones fail.
    "sxid_check": True,
    "host_ecc_required": False,
    "host_edac_corrected_max": 9,
    "host_edac_uncorrected_max": 0,
    "xid_check": True,
    "xid_warn": XID_WARN_DEFAULT,
    "silenced_codes": [],
}

_NA = {"", "n/a", "[n/a]", "na", "none", "not supported", "[not supported]", "unknown", "null"}


def _options(options):
    merged = dict(DEFAULTS)
    for key, value in (options or {}).items():
        if value is not None or key in ("expected_gpu_count", "ib_expected_rate_gbps",
                                        "ib_expected_link_layer", "ib_expected_hca_count"):
            merged[key] = value
    return merged


def to_bool(value):
    """'Enabled'/'Yes'/'Active'/True -> True, 'Disabled'/'No'/'Not Active'/False -> False, N/A -> None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    text = str(value).strip().lower()
    if text in _NA:
        return None
    if text in ("enabled", "enable", "yes", "true", "on", "active", "1"):
        return True
    if text in ("disabled", "disable", "no", "false", "off", "not active", "inactive", "0"):
        return False
    return None


def to_int(value):
    """Counts from ints or text ('4', '192 bank(s)'); None when unknown or N/A."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    match = re.match(r"^\s*(\d+)", str(value))
    return int(match.group(1)) if match else None


def normalize_bus_id(bus_id):
    """'00000000:18:00.0', '0000:18:00.0', '18:00.0', 'PCI:0000:18:00' -> '0000:18:00.0' (lower)."""
    if not bus_id:
        return None
    text = str(bus_id).strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    match = re.match(r"^(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$", text)
    if not match:
        return text
    domain, bus, dev, func = match.groups()
    return "%04x:%02x:%02x.%s" % (int(domain or "0", 16), int(bus, 16), int(dev, 16), func or "0")


def normalize_reason(name):
    """Clock event reason names from any nvidia-smi source -> 'hw_slowdown', 'gpu_idle', ..."""
    text = str(name or "").strip().lower()
    text = re.sub(r"^clocks?_(event|throttle)_reasons?[._]", "", text)
    text = re.sub(r"[^a-z0-9]+", "_", text).strip("_")
    return {"idle": "gpu_idle", "applications_clocks_setting": "applications_clocks_setting"}.get(
        text, text)


def gpu_model(gpu):
    """The model table entry for a GPU (its key, else its name, else its PCI id); None when unknown."""
    for ident in (gpu.get("model"), gpu.get("name"), gpu.get("pci_device_id")):
        model = lookup_model(ident) if ident else None
        if model:
            return model
    return None


def model_has_ecc(gpu):
    """True when the model table says this is a data-centre GPU with ECC memory."""
    model = gpu_model(gpu)
    return bool(model and model.get("ecc_capable") and model.get("datacenter"))


def model_remaps_rows(gpu):
    """HBM data-centre GPUs from Ampere on (A100, H100, H200, B200) repair memory by row remapping."""
    model = gpu_model(gpu)
    hbm = str(model.get("memory_type") or "").upper().startswith("HBM") if model else False
    return bool(model and model_has_ecc(gpu) and hbm and model.get("architecture") not in ("Pascal", "Volta", "Turing"))


def model_retires_pages(gpu):
    """Data-centre GPUs with ECC before Ampere (P100, V100, T4) repair memory by retiring pages."""
    model = gpu_model(gpu)
    return bool(model and model_has_ecc(gpu) and model.get("architecture") in ("Pascal", "Volta", "Turing"))


def _mig_on(gpu):
    return ((gpu.get("mig_mode") or {}).get("current") or "") == "enabled"


def _gpu_ref(gpu):
    return {"gpu_index": gpu.get("index"), "gpu_bus_id": gpu.get("pci_bus_id")}


def _name(gpu):
    return "GPU%s (%s)" % (gpu.get("index"), gpu.get("pci_bus_id"))


# ---------------------------------------------------------------------------------------------
# ECC-mode remediation planning (the role acts; this only decides)


def ecc_enable_candidates(gpus):
    """GPUs that support ECC, run with it disabled and have no enable pending: ``[index, ...]``."""
    found = []
    for gpu in gpus or []:
        mode = gpu.get("ecc_mode") or {}
        current = to_bool(mode.get("current"))
        pending = to_bool(mode.get("pending"))
        if current is False and pending is not True:
            found.append(gpu.get("index"))
    return found


def persistence_enable_candidates(gpus):
    """GPUs whose persistence mode is reported off: ``[index, ...]``."""
    return [g.get("index") for g in gpus or [] if to_bool(g.get("persistence_mode")) is False]


# ---------------------------------------------------------------------------------------------
# Per-GPU checks


def _ecc_mode_findings(node, gpu, opts, current, pending):
    out = []
    ref = _gpu_ref(gpu)
    mode = gpu.get("ecc_mode") or {}
    if current is None and model_has_ecc(gpu):
        # A data-centre GPU always has an ECC mode: N/A, "Unknown Error" or "[GPU requires reset]"
        # here means the driver cannot read it, which is a sick GPU, not a consumer one.
        out.append(make_finding(
            "ECC_MODE_UNREADABLE", "fail", node,
            "%s (%s) has ECC memory but its ECC mode reads %s" % (
                _name(gpu), gpu.get("name"), mode.get("current") if mode.get("current") is not None else "unknown/N/A"),
            "Reset the GPU (nvidia-smi -r -i %s) or reboot; if it stays unreadable, check dmesg for Xid "
            "errors and RMA the GPU" % gpu.get("index"),
            value=mode.get("current"), threshold="Enabled", counter="ecc.mode.current", **ref))
    elif current is None:
        if opts["ecc_required"]:
            out.append(make_finding(
                "ECC_UNSUPPORTED", "warn", node,
                "%s reports no ECC mode (consumer GPU or N/A); the profile expects ECC" % _name(gpu),
                "Use data-centre GPUs with ECC for training, or set gpu_health_ecc_required: false",
                value=mode.get("current"), threshold="Enabled", counter="ecc.mode.current", **ref))
    elif current is False and opts["ecc_required"]:
        if pending is True and opts["ecc_pending_fails"]:
            out.append(make_finding(
                "ECC_ENABLE_NOT_APPLIED", "fail", node,
                "%s ECC is still Disabled after the reboot that was to enable it (pending Enabled)" % _name(gpu),
                "Reset the GPU (nvidia-smi -r -i %s) or power-cycle the node and check dmesg for Xid errors; "
                "if ECC stays Disabled, take the GPU out of service" % gpu.get("index"),
                value="Disabled", threshold="Enabled", counter="ecc.mode.current", **ref))
        elif pending is True:
            out.append(make_finding(
                "ECC_ENABLE_PENDING_REBOOT", "warn", node,
                "%s ECC is enabled pending a reboot (current Disabled, pending Enabled)" % _name(gpu),
                "Reboot the node (gpufleet_reboot_ok: true lets the reboot role do it); the request is "
                "in /var/lib/gpufleet/reboot-required.d/ecc-mode",
                value="Disabled", threshold="Enabled", counter="ecc.mode.current", **ref))
        else:
            out.append(make_finding(
                "ECC_MODE_DISABLED", "fail", node,
                "%s ECC mode is Disabled (pending Disabled)" % _name(gpu),
                "Enable it: nvidia-smi -i %s -e 1 and reboot (or let gpu_health_ecc_enable do it)"
                % gpu.get("index"),
                value="Disabled", threshold="Enabled", counter="ecc.mode.current", **ref))
    return out


def _unreadable_ecc_counters(gpu):
    """The counters an ECC-enabled GPU should report and does not. Every counter has a value then;
    one without is unknown, not zero. With MIG on, the GPU-level volatile counters read N/A by design
    (real A100 MIG capture): only the aggregate ones are required then."""
    errors = gpu.get("ecc_errors") or {}
    scopes = ("aggregate",) if _mig_on(gpu) else ("volatile", "aggregate")
    unreadable = ["%s.%s" % (scope, kind) for scope in scopes
                  for kind in ("correctable", "uncorrectable")
                  if to_int((errors.get(scope) or {}).get(kind)) is None]
    # A total hides one unreadable kind behind its readable siblings: look at each one listed.
    detail = gpu.get("ecc_errors_detail") or {}
    for scope in scopes:
        for key, value in sorted((detail.get(scope) or {}).items()):
            if "correctable" in key and not isinstance(value, dict) and value is None:
                unreadable.append("%s.%s" % (scope, key))
    return unreadable


def _check_ecc(node, gpu, opts):
    ref = _gpu_ref(gpu)
    mode = gpu.get("ecc_mode") or {}
    current = to_bool(mode.get("current"))
    out = _ecc_mode_findings(node, gpu, opts, current, to_bool(mode.get("pending")))
    errors = gpu.get("ecc_errors") or {}
    checks = (
        ("volatile", "uncorrectable", "ECC_UNCORRECTABLE_VOLATILE", "fail",
         opts["ecc_uncorrectable_volatile_max"],
         "Drain the node; reset the GPU (nvidia-smi -r) or reboot to trigger row remapping; replace "
         "the GPU if errors return"),
        ("aggregate", "uncorrectable", "ECC_UNCORRECTABLE_AGGREGATE", "fail",
         opts["ecc_uncorrectable_aggregate_max"],
         "Check remapped rows/retired pages; open an RMA with the vendor if they are exhausted or "
         "errors keep rising"),
        ("volatile", "correctable", "ECC_CORRECTABLE_HIGH", "warn",
         opts["ecc_correctable_volatile_max"],
         "Watch the counter; run dcgmi diag -r 3 and plan a replacement if it keeps climbing"),
    )
    unreadable = _unreadable_ecc_counters(gpu) if current is True else []
    if unreadable:
        out.append(make_finding(
            "ECC_COUNTERS_UNREADABLE", "fail", node,
            "%s ECC is enabled but its error counters cannot be read: %s" % (_name(gpu), ", ".join(unreadable)),
            "Reset the GPU (nvidia-smi -r -i %s) or reboot; an unreadable counter cannot be judged "
            "healthy" % gpu.get("index"),
            value=unreadable, threshold="readable", counter="ecc.errors", **ref))
    for scope, kind, code, severity, limit, fix in checks:
        value = to_int((errors.get(scope) or {}).get(kind))
        if value is not None and limit is not None and value > limit:
            out.append(make_finding(
                code, severity, node,
                "%s %s %s ECC errors: %d (limit %d)" % (_name(gpu), scope, kind, value, limit),
                fix, value=value, threshold=limit,
                counter="ecc.errors.%s.%s.total" % (
                    "uncorrected" if kind == "uncorrectable" else "corrected", scope),
                **ref))
    return out


def _check_memory_retirement(node, gpu, opts):
    out = []
    ref = _gpu_ref(gpu)
    rows = gpu.get("remapped_rows")
    if rows is None and model_remaps_rows(gpu) and not _mig_on(gpu) and to_bool(
            (gpu.get("ecc_mode") or {}).get("current")) is not False:
        out.append(make_finding(
            "ROW_REMAP_UNREADABLE", "fail", node,
            "%s (%s) repairs memory by row remapping but reports no remapped-rows state" % (
                _name(gpu), gpu.get("name")),
            "Run nvidia-smi -q -d ROW_REMAPPER -i %s; reset the GPU or reboot if it reads N/A or an error"
            % gpu.get("index"),
            value=None, threshold="readable", counter="remapped_rows", **ref))
    elif rows is not None and (to_bool(rows.get("pending")) is None or to_bool(rows.get("failure")) is None):
        out.append(make_finding(
            "ROW_REMAP_UNREADABLE", "fail", node,
            "%s remapped-rows pending/failure cannot be read (pending %s, failure %s)" % (
                _name(gpu), rows.get("pending"), rows.get("failure")),
            "Run nvidia-smi -q -d ROW_REMAPPER -i %s; reset the GPU or reboot if it reads N/A or an error"
            % gpu.get("index"),
            value={"pending": rows.get("pending"), "failure": rows.get("failure")}, threshold="readable",
            counter="remapped_rows", **ref))
    if rows:
        if to_bool(rows.get("pending")):
            out.append(make_finding(
                "ROW_REMAP_PENDING", "fail", node,
                "%s has a row remap pending (uncorrectable remapped rows: %s)"
                % (_name(gpu), rows.get("uncorrectable")),
                "Reset the GPU (nvidia-smi -r -i %s) or reboot so the remap takes effect, then re-check"
                % gpu.get("index"),
                value=True, threshold=False, counter="remapped_rows.pending",
                remapped_uncorrectable=to_int(rows.get("uncorrectable")), **ref))
        if to_bool(rows.get("failure")):
            out.append(make_finding(
                "ROW_REMAP_FAILURE", "fail", node,
                "%s row remapping failed: no spare rows left in a bank" % _name(gpu),
                "Take the GPU out of service and open an RMA (the memory cannot be repaired in place)",
                value=True, threshold=False, counter="remapped_rows.failure", **ref))
    pages = gpu.get("retired_pages")
    ecc_on = to_bool((gpu.get("ecc_mode") or {}).get("current")) is True
    if model_retires_pages(gpu) and ecc_on and (
            not pages or to_int(pages.get("single_bit")) is None or to_int(pages.get("double_bit")) is None):
        # An unreadable count is not 0: without it the page-retirement table cannot be judged.
        out.append(make_finding(
            "RETIRED_PAGES_UNREADABLE", "fail", node,
            "%s (%s) retires pages but its retired-page counts cannot be read (%s)" % (
                _name(gpu), gpu.get("name"), pages if pages else "no retired-pages section"),
            "Run nvidia-smi -q -d PAGE_RETIREMENT -i %s; reset the GPU or reboot if it reads N/A or an error"
            % gpu.get("index"),
            value=pages, threshold="readable", counter="retired_pages", **ref))
    if pages:
        sbe = to_int(pages.get("single_bit")) or 0
        dbe = to_int(pages.get("double_bit")) or 0
        total = sbe + dbe
        if to_bool(pages.get("pending")):
            out.append(make_finding(
                "RETIRED_PAGES_PENDING", "fail", node,
                "%s has page retirement pending (single-bit %d, double-bit %d)" % (_name(gpu), sbe, dbe),
                "Reboot or reset the GPU so the pages are retired (blacklisted) before use",
                value=True, threshold=False, counter="retired_pages.pending", **ref))
        if total >= opts["retired_pages_fail"]:
            out.append(make_finding(
                "RETIRED_PAGES_HIGH", "fail", node,
                "%s retired pages %d (single-bit %d, double-bit %d): the table (64) is nearly full"
                % (_name(gpu), total, sbe, dbe),
                "Replace the GPU (RMA): no room left to retire further pages",
                value=total, threshold=opts["retired_pages_fail"], counter="retired_pages.total", **ref))
        elif total > opts["retired_pages_warn"]:
            out.append(make_finding(
                "RETIRED_PAGES_HIGH", "warn", node,
                "%s retired pages %d (single-bit %d, double-bit %d)" % (_name(gpu), total, sbe, dbe),
                "Watch the count; plan a replacement before it reaches 64",
                value=total, threshold=opts["retired_pages_warn"], counter="retired_pages.total", **ref))
    return out


def _check_persistence(node, gpu, opts):
    if not opts["persistence_required"]:
        return []
    if to_bool(gpu.get("persistence_mode")) is False:
        return [make_finding(
            "PERSISTENCE_MODE_OFF", "warn", node,
            "%s persistence mode is off: each job pays driver init and clocks reset" % _name(gpu),
            "Enable nvidia-persistenced (or nvidia-smi -pm 1; gpu_health_persistence_enable does it)",
            value="Disabled", threshold="Enabled", counter="persistence_mode", **_gpu_ref(gpu))]
    return []


def _check_gpu_state(node, gpu, opts):
    """The driver's own verdicts nvidia-smi reports: reset needed, recovery action, NVLink fabric
    registration, unrepairable memory. Absent fields (older drivers) are not judged."""
    out = []
    ref = _gpu_ref(gpu)
    if gpu.get("reset_required") is True:
        out.append(make_finding(
            "GPU_RESET_REQUIRED", "fail", node,
            "%s reports GPU Reset Required: Yes" % _name(gpu),
            "Drain the node and reset the GPU (nvidia-smi -r -i %s) or reboot" % gpu.get("index"),
            value=True, threshold=False, counter="gpu_reset_status.reset_required", **ref))
    if gpu.get("drain_and_reset_recommended") is True:
        out.append(make_finding(
            "GPU_DRAIN_AND_RESET_RECOMMENDED", "fail", node,
            "%s reports Drain and Reset Recommended: Yes" % _name(gpu),
            "Drain the node's jobs, then reset the GPU (nvidia-smi -r -i %s) or reboot" % gpu.get("index"),
            value=True, threshold=False, counter="gpu_reset_status.drain_and_reset_recommended", **ref))
    action = gpu.get("gpu_recovery_action")
    if action is not None and str(action).strip().lower() not in ("none", ""):
        out.append(make_finding(
            "GPU_RECOVERY_ACTION", "fail", node,
            "%s driver asks for recovery action %s" % (_name(gpu), action),
            "Do what it names (GPU Reset, Node Reboot, Drain P2P, Drain and Reset) before the node runs jobs",
            value=action, threshold="None", counter="gpu_recovery_action", **ref))
    out.extend(_check_fabric_state(node, gpu))
    if (gpu.get("ecc_errors_detail") or {}).get("unrepairable_memory") is True:
        out.append(make_finding(
            "UNREPAIRABLE_MEMORY", "fail", node,
            "%s reports Unrepairable Memory: Yes" % _name(gpu),
            "Take the GPU out of service and open an RMA: its memory cannot be repaired in place",
            value=True, threshold=False, counter="ecc_errors.unrepairable_memory", **ref))
    return out


def _check_fabric_state(node, gpu):
    """A GPU's NVLink fabric registration as the driver reports it: anything but Completed/Success (N/A where the
    GPU does not register) fails. Absent fields (older drivers) are not judged here (_check_fabric_reported)."""
    ref = _gpu_ref(gpu)
    fabric = gpu.get("fabric") or {}
    state, status = fabric.get("state"), fabric.get("status")
    if state is not None or status is not None:
        state_l, status_l = str(state or "").lower(), str(status or "").lower()
        if status_l and status_l not in ("success", "n/a") or state_l and state_l not in ("completed", "n/a"):
            return [make_finding(
                "FABRIC_STATE_FAILURE", "fail", node,
                "%s NVLink fabric state %s, status %s (needs Completed/Success before CUDA can use the GPU)"
                % (_name(gpu), state, status),
                "Check nvidia-fabricmanager (systemctl status, /var/log/fabricmanager.log) and that its version "
                "equals the driver's; restart it, reset the GPUs or reboot",
                value="%s/%s" % (state, status), threshold="Completed/Success", counter="fabric.state", **ref)]
    return []


def _reasons(gpu):
    return {normalize_reason(r) for r in gpu.get("clock_event_reasons_active") or []}


def _check_pcie(node, gpu, opts):
    if not opts["pcie_check"]:
        return []
    out = []
    pcie = gpu.get("pcie") or {}
    idle = "gpu_idle" in _reasons(gpu)
    util = to_int(gpu.get("utilization_gpu"))
    if util is not None and util == 0:
        idle = True
    width_cur, width_max = to_int(pcie.get("width_current")), to_int(pcie.get("width_max"))
    gen_cur, gen_max = to_int(pcie.get("gen_current")), to_int(pcie.get("gen_max"))
    if width_cur is not None and width_max is not None and width_cur < width_max:
        out.append(make_finding(
            "PCIE_LINK_DEGRADED", "warn", node,
            "%s PCIe link width x%d below its max x%d%s" % (
                _name(gpu), width_cur, width_max, " (GPU idle: may be power saving)" if idle else ""),
            "Re-check under load; if it stays narrow, reseat the GPU/riser and check lspci LnkSta",
            value="x%d" % width_cur, threshold="x%d" % width_max, counter="pcie.link.width.current",
            **_gpu_ref(gpu)))
    # Idle GPUs down-train the link generation to save power (reference: Pitfalls), so the
    # generation is only judged when the GPU is busy.
    if gen_cur is not None and gen_max is not None and gen_cur < gen_max and not idle:
        out.append(make_finding(
            "PCIE_LINK_DEGRADED", "warn", node,
            "%s PCIe link gen%d below its max gen%d while not idle" % (_name(gpu), gen_cur, gen_max),
            "Check BIOS PCIe speed settings and the slot/riser; compare with lspci LnkCap/LnkSta",
            value="gen%d" % gen_cur, threshold="gen%d" % gen_max, counter="pcie.link.gen.current",
            **_gpu_ref(gpu)))
    return out


def _check_throttle(node, gpu, opts):
    reasons = _reasons(gpu)
    out = []
    for severity, wanted in (("fail", opts["throttle_fail_reasons"]),
                             ("warn", opts["throttle_warn_reasons"])):
        hit = sorted(reasons & {normalize_reason(w) for w in wanted or []})
        if hit:
            out.append(make_finding(
                "CLOCK_THROTTLE_ACTIVE", severity, node,
                "%s clocks held down by %s (temperature %s C)" % (
                    _name(gpu), ", ".join(hit), gpu.get("temperature_c")),
                "Check cooling, power delivery and the BMC event log; HW slowdown usually means a "
                "power-brake or thermal event from the board",
                value=hit, threshold="not active", counter="clocks_event_reasons.active",
                **_gpu_ref(gpu)))
    return out


def gpu_counts(gpu_info):
    """``{pci, driver, listed, duplicated}`` for one node's ``gpu_info``.

    ``driver`` counts DISTINCT bus ids: nvidia-smi listing one GPU twice must not make up for a GPU
    the driver lost. ``duplicated`` names the bus ids listed more than once.
    """
    gpus = (gpu_info or {}).get("gpus") or []
    seen, duplicated, unnamed = [], [], 0
    for gpu in gpus:
        bus = normalize_bus_id(gpu.get("pci_bus_id"))
        if bus is None:
            unnamed += 1
        elif bus in seen:
            duplicated.append(gpu.get("pci_bus_id"))
        else:
            seen.append(bus)
    driver = len(seen) + unnamed if gpus else to_int((gpu_info or {}).get("driver_gpu_count")) or 0
    return {"pci": to_int((gpu_info or {}).get("pci_gpu_count")), "driver": driver, "listed": len(gpus),
            "duplicated": duplicated}


def node_gpu_count(entry):
    """A node's GPUs for the cluster tally: its PCI count, else its driver's (an int or [pci, driver])."""
    if isinstance(entry, (list, tuple)):
        known = [to_int(c) for c in entry if to_int(c) is not None]
        return known[0] if known else None
    return to_int(entry)


def _majority(counts):
    """The count most entries have (a tie takes the larger: a missing device is the likelier fault);
    None with fewer than two known counts (a lone node is not compared) or when the majority is 0."""
    counts = [c for c in counts if c is not None]
    if len(counts) < 2:
        return None
    tally = {}
    for c in counts:
        tally[c] = tally.get(c, 0) + 1
    return max(tally.items(), key=lambda kv: (kv[1], kv[0]))[0] or None


def expected_gpu_count(options=None):
    """(GPUs each node must have, where that comes from): ``expected_gpu_count`` (the profile) when
    set, else the count most nodes have (``cluster_gpu_counts``), else (None, None)."""
    opts = _options(options)
    explicit = to_int(opts["expected_gpu_count"])
    if explicit:
        return explicit, "the profile expects"
    majority = _majority([node_gpu_count(e) for e in opts["cluster_gpu_counts"] or []])
    return (majority, "most nodes of the cluster have") if majority else (None, None)


def _check_driver_state(node, gpu_info, counts, opts):
    status = gpu_info.get("status") or "ok"
    if status in ("no_driver", "driver_error"):
        return [make_finding(
            "DRIVER_NOT_LOADED", "fail", node,
            "NVIDIA driver not usable (%s): %s" % (status, gpu_info.get("message") or "nvidia-smi failed"),
            "Run playbooks/gpu_stack.yml (driver) and reboot if it asks; check dmesg for NVRM errors",
            value=status, threshold="ok")]
    if status == "no_gpu" and not counts["pci"]:
        return [make_finding(
            "NO_GPUS_FOUND", "fail", node,
            "No NVIDIA GPU on the PCI bus of a host in the GPU group",
            "Check the inventory group, BIOS (above-4G decoding) and that the GPUs are seated",
            value=0, threshold=">= 1")]
    return []


def _duplicates_note(counts):
    if not counts["duplicated"]:
        return ""
    return " (nvidia-smi lists %d entries; %s more than once)" % (counts["listed"], ", ".join(counts["duplicated"]))


def _check_missing_from_driver(node, gpu_info, counts, opts):
    pci_count, driver_count = counts["pci"], counts["driver"]
    if pci_count is None or driver_count >= pci_count or (gpu_info.get("status") in ("no_driver", "driver_error")):
        return []
    missing = list(gpu_info.get("missing_from_driver") or [])
    if not missing:
        seen = {normalize_bus_id(g.get("pci_bus_id")) for g in gpu_info.get("gpus") or []}
        missing = [d.get("bus_id") for d in gpu_info.get("pci_devices") or []
                   if d.get("kind", "gpu") == "gpu" and normalize_bus_id(d.get("bus_id")) not in seen]
    return [make_finding(
        "GPU_MISSING_FROM_DRIVER", "fail", node,
        "Driver sees %d GPU(s), the PCI bus has %d%s%s" % (
            driver_count, pci_count, (": missing " + ", ".join(missing)) if missing else "", _duplicates_note(counts)),
        "Look for Xid 79 (fallen off the bus) in the kernel log; reseat or RMA the GPU; a reboot "
        "may bring it back temporarily",
        value=driver_count, threshold=pci_count, counter="driver_gpu_count",
        gpu_bus_id=missing[0] if len(missing) == 1 else None,
        missing_bus_ids=missing)]


def _check_gpu_count(node, gpu_info, counts, opts):
    """Fewer GPUs than the profile or the cluster majority, on the bus and in the driver alike: a GPU
    dead at boot is gone from both, so only the comparison with other nodes shows it."""
    expected, source = expected_gpu_count(opts)
    have = max(c for c in (counts["pci"], counts["driver"]) if c is not None)
    if not expected or have >= expected:
        return []
    return [make_finding(
        "GPU_COUNT_LOW", "fail", node,
        "Node has %d GPU(s) (PCI bus %s, driver %d%s), %s %d" % (
            have, "unknown" if counts["pci"] is None else counts["pci"], counts["driver"],
            _duplicates_note(counts), source, expected),
        "Check the BMC/SEL and lspci for the missing GPU (dead at boot, unseated, or disabled in the BIOS); "
        "reseat or RMA it, or fix gpufleet_expected_gpu_count if the node is meant to differ",
        value=have, threshold=expected, counter="gpu_count")]


# Architectures whose GPUs register with the NVLink fabric (NVML nvmlDeviceGetGpuFabricInfo: "For Hopper or newer
# fully supported devices"; an HGX A100 reports Fabric State N/A, tests/fixtures/nvidia-smi-xml a100-sxm4-80gb-mig).
FABRIC_REGISTERING_ARCHITECTURES = (HOPPER, BLACKWELL)


def fabric_expected(gpu_info):
    """Why this node's GPUs must report fabric state Completed/Success ("" when they need not): NVSwitches with
    Hopper or later GPUs, or multi-node NVLink GPUs (compat_facts ``imex_domain``: their NVSwitches are in the rack's
    switch trays, so the node sees none)."""
    gpus = gpu_info.get("gpus") or []
    mnnvl = sorted({g.get("model") for g in gpus if g.get("model") in compat_rows("imex_domain")})
    if mnnvl:
        return "multi-node NVLink GPUs (%s)" % ", ".join(mnnvl)
    archs = sorted({g.get("architecture") for g in gpus} & set(FABRIC_REGISTERING_ARCHITECTURES))
    if gpu_info.get("nvswitch") is True and archs:
        return "NVSwitch system with %s GPUs" % "/".join(archs)
    return ""


def _check_fabric_reported(node, gpu_info, counts, opts):
    """Where the GPUs must register with the fabric, a GPU without a state (or with N/A) fails; the state itself
    is judged per GPU (_check_gpu_state)."""
    why = fabric_expected(gpu_info)
    if not why:
        return []
    out = []
    for gpu in gpu_info.get("gpus") or []:
        fabric = gpu.get("fabric") or {}
        if str(fabric.get("state") or "").strip().lower() in _NA:
            out.append(make_finding(
                "FABRIC_STATE_MISSING", "fail", node,
                "%s reports no NVLink fabric state (%s) on a %s" % (_name(gpu), fabric.get("state") or "absent", why),
                "Read nvidia-smi -q's Fabric section: the fabric manager (and NVLSM on NVLink 5, IMEX on NVL72) must "
                "run at the driver's version before the GPU registers; a driver too old to report it cannot be judged",
                value=fabric.get("state"), threshold="Completed/Success", counter="fabric.state", **_gpu_ref(gpu)))
    return out


def check_fabric(node, gpu_info):
    """Every GPU's NVLink fabric registration, judged once for health (check_gpus) and diagnostics
    (nvlink.evaluate_fabric): a state missing where the GPUs must register, and any state not Completed/Success."""
    out = _check_fabric_reported(node, gpu_info, None, None)
    for gpu in gpu_info.get("gpus") or []:
        out.extend(_check_fabric_state(node, gpu))
    return out


_NODE_GPU_CHECKS = (_check_driver_state, _check_missing_from_driver, _check_gpu_count, _check_fabric_reported)
_PER_GPU_CHECKS = (_check_ecc, _check_memory_retirement, _check_gpu_state, _check_persistence, _check_pcie,
                   _check_throttle)


def check_gpus(node, gpu_info, options=None):
    """Node-level driver/count checks and every per-GPU check."""
    opts = _options(options)
    gpu_info = gpu_info or {}
    counts = gpu_counts(gpu_info)
    out = []
    for check in _NODE_GPU_CHECKS:
        out.extend(check(node, gpu_info, counts, opts))
    for gpu in gpu_info.get("gpus") or []:
        for check in _PER_GPU_CHECKS:
            out.extend(check(node, gpu, opts))
    return out


# ---------------------------------------------------------------------------------------------
# InfiniBand / RoCE ports


def expected_hca_count(options=None):
    """HCAs each node must have: ``ib_expected_hca_count`` (the profile) when set, else the count most
    nodes of the cluster have (``ib_cluster_hca_counts``; a tie takes the larger, since a missing HCA
    is the likelier fault), else None (a lone node is not compared)."""
    opts = _options(options)
    explicit = to_int(opts["ib_expected_hca_count"])
    if explicit:
        return explicit
    return _majority([to_int(c) for c in opts["ib_cluster_hca_counts"] or []])


def _port_id(ca, port):
    return "%s:%s" % (ca, port)


def check_ib_ports(node, rdma_info, options=None):
    """Every expected port Active/LinkUp, at the expected rate and link layer.

    Expected ports: ``ib_expected_ports`` (``"mlx5_0"`` or ``"mlx5_0:1"``) when given, else the
    compute-fabric ports chosen by :func:`nccl_env.classify_ports`. Expected rate:
    ``ib_expected_rate_gbps`` when given, else the best rate seen on an Active port of the same
    CA type (a sibling at 400 makes a 200 Gb/s link a finding).
    """
    opts = _options(options)
    if not opts["ib_check"]:
        return []
    rdma_info = rdma_info or {}
    cas = rdma_info.get("cas") or []
    out = []
    for line in rdma_info.get("errors") or []:
        out.append(make_finding(
            "RDMA_TOOL_ERROR", "warn", node, "ibstat reported: %s" % line,
            "Check the named HCA with ibv_devinfo and dmesg (mlx5_core); reload the driver or RMA",
            value=line, threshold=None))
    want_hcas = expected_hca_count(opts)
    if want_hcas and len(cas) < want_hcas:
        out.append(make_finding(
            "IB_HCA_COUNT_LOW", "fail", node,
            "Node has %d RDMA HCA(s) (%s), expected %d" % (
                len(cas), ", ".join(c.get("ca") or "?" for c in cas) or "none", want_hcas),
            "Check that every HCA is seated and its driver (mlx5_core, ib_core) is loaded (ibstat, lspci | grep "
            "Mellanox); rdma_info read them from %s" % (rdma_info.get("source") or "nothing"),
            value=len(cas), threshold=want_hcas, counter="rdma.hca_count"))
    expected = [str(p) for p in opts["ib_expected_ports"] or []]
    classified = classify_ports(cas, expected or None)
    compute = [p for p in classified if p["role"] == "compute"]
    present = {_port_id(p["ca"], p["port"]) for p in classified} | {p["ca"] for p in classified}
    for want in expected:
        if want not in present:
            out.append(make_finding(
                "IB_PORT_MISSING", "fail", node,
                "Expected RDMA port %s is not present on the node" % want,
                "Check that the HCA is seated and its driver (mlx5_core/ib_core) is loaded",
                value="absent", threshold="Active", port_id=want))
    best = {}
    for p in compute:
        if p["state"] == "Active" and p.get("rate_gbps"):
            best[p["ca_type"]] = max(best.get(p["ca_type"], 0), p["rate_gbps"])
    for p in compute:
        pid = _port_id(p["ca"], p["port"])
        extra = {"ca": p["ca"], "port": p["port"]}
        if p["state"] != "Active" or p.get("physical_state") not in (None, "LinkUp"):
            out.append(make_finding(
                "IB_PORT_DOWN", "fail", node,
                "RDMA port %s is %s/%s" % (pid, p["state"], p.get("physical_state")),
                "Check cable and switch port (ibstat, mlxlink -d %s); State Down with LinkUp means no "
                "subnet manager; Polling/Disabled means no link" % p["ca"],
                value="%s/%s" % (p["state"], p.get("physical_state")), threshold="Active/LinkUp",
                **extra))
            continue
        want_rate = opts["ib_expected_rate_gbps"] or best.get(p["ca_type"])
        if want_rate and p.get("rate_gbps") is not None and p["rate_gbps"] < want_rate:
            out.append(make_finding(
                "IB_PORT_RATE_LOW", "fail", node,
                "RDMA port %s runs at %s Gb/s, expected %s" % (pid, p["rate_gbps"], want_rate),
                "Check the cable/transceiver and switch port speed (mlxlink -d %s); reseat or replace "
                "the cable" % p["ca"],
                value=p["rate_gbps"], threshold=want_rate, **extra))
        want_layer = opts["ib_expected_link_layer"]
        if want_layer and (p.get("link_layer") or "").lower() != str(want_layer).lower():
            out.append(make_finding(
                "IB_PORT_LINK_LAYER", "fail", node,
                "RDMA port %s link layer is %s, expected %s" % (pid, p.get("link_layer"), want_layer),
                "Set the port type with mlxconfig (LINK_TYPE_P1) or fix the expectation",
                value=p.get("link_layer"), threshold=want_layer, **extra))
    return out


# ---------------------------------------------------------------------------------------------
# Host memory


def check_host(node, host_info, options=None):
    opts = _options(options)
    memory = (host_info or {}).get("memory") or {}
    out = []
    if not host_info:
        return out
    ecc = memory.get("ecc_active")
    if ecc is None:
        out.append(make_finding(
            "HOST_ECC_UNKNOWN", "fail" if opts["host_ecc_required"] else "warn", node,
            "Host memory ECC state unknown (no EDAC memory controller visible)",
            "Load the platform EDAC driver (e.g. skx_edac, amd64_edac) or install rasdaemon",
            value=None, threshold="active"))
    elif ecc is False:
        out.append(make_finding(
            "HOST_ECC_DISABLED", "fail" if opts["host_ecc_required"] else "warn", node,
            "Host memory ECC is not active",
            "Enable ECC in the BIOS / use ECC DIMMs",
            value=False, threshold=True))
    unc = to_int(memory.get("edac_uncorrected"))
    if unc is not None and unc > opts["host_edac_uncorrected_max"]:
        out.append(make_finding(
            "HOST_EDAC_UNCORRECTED", "fail", node,
            "Host memory uncorrected errors since boot: %d" % unc,
            "Find the DIMM with edac-util -v / ras-mc-ctl --errors and replace it",
            value=unc, threshold=opts["host_edac_uncorrected_max"], counter="edac.ue_count"))
    cor = to_int(memory.get("edac_corrected"))
    if cor is not None and cor > opts["host_edac_corrected_max"]:
        out.append(make_finding(
            "HOST_EDAC_CORRECTED_HIGH", "warn", node,
            "Host memory corrected errors since boot: %d" % cor,
            "Find the DIMM with edac-util -v / ras-mc-ctl --errors and plan its replacement",
            value=cor, threshold=opts["host_edac_corrected_max"], counter="edac.ce_count"))
    return out


# ---------------------------------------------------------------------------------------------
# Xid errors in the kernel log

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)\)"
    r":\s*(?P<xid>\d+)(?:,\s*(?P<rest>.*))?")


def parse_xids(text):
    """``[{xid, bus_id, detail}]`` for each ``NVRM: Xid (PCI:0000:18:00): 79, ...`` line."""
    found = []
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if match:
            found.append({"xid": int(match.group("xid")), "bus_id": normalize_bus_id(match.group("bus")),
                          "detail": (match.group("rest") or "").strip()})
    return found


# NVIDIA open-gpu-kernel-modules, src/common/nvswitch/kernel/inc/common_nvswitch.h NVSWITCH_PRINT_SXID:
# "nvidia-%s: SXid (PCI:" NVLINK_PCI_DEV_FMT "): %05d, " followed by "Fatal, ..." or "Non-fatal, ...".
_SXID = re.compile(
    r"nvidia-(?P<dev>nvswitch\d+): SXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)\)"
    r":\s*(?P<sxid>\d+)(?:,\s*(?P<rest>.*))?")


def parse_sxids(text):
    """``[{sxid, device, bus_id, fatal, detail}]`` for each NVSwitch ``SXid`` kernel line."""
    found = []
    for line in (text or "").splitlines():
        match = _SXID.search(line)
        if match:
            rest = (match.group("rest") or "").strip()
            found.append({"sxid": int(match.group("sxid")), "device": match.group("dev"),
                          "bus_id": normalize_bus_id(match.group("bus")),
                          "fatal": not rest.lower().startswith("non-fatal"), "detail": rest})
    return found


def check_sxids(node, kernel_log, options=None):
    """One finding per (NVSwitch, SXid): fatal ones fail, non-fatal ones warn."""
    opts = _options(options)
    if not opts["sxid_check"] or kernel_log is None:
        return []
    groups = {}
    for event in parse_sxids(kernel_log):
        groups.setdefault((event["bus_id"], event["sxid"]), []).append(event)
    out = []
    for (bus, sxid), events in sorted(groups.items()):
        fatal = any(e["fatal"] for e in events)
        out.append(make_finding(
            "SXID_ERRORS", "fail" if fatal else "warn", node,
            "SXid %d on %s (%s) x%d since boot: %s" % (
                sxid, events[-1]["device"], bus, len(events), events[-1]["detail"][:160]),
            "Look the SXid up in NVIDIA's NVSwitch error catalogue; %s" % (
                "a fatal SXid takes the NVLink fabric down: drain the node, check nvidia-fabricmanager and reboot"
                if fatal else "non-fatal: watch for repeats and for link errors on the named port"),
            value=len(events), threshold=0, sxid=sxid, counter="sxid_%d" % sxid, nvswitch_bus_id=bus))
    return out


def check_xids(node, kernel_log, gpus=None, options=None, kernel_log_error=None):
    """One finding per (GPU, Xid) seen in the kernel log since boot.

    ``kernel_log`` None skips the check; with ``kernel_log_error`` set it also says why (a warn:
    an unread log must not read as a clean one).
    """
    opts = _options(options)
    if not opts["xid_check"]:
        return []
    if kernel_log is None:
        if kernel_log_error:
            return [make_finding(
                "KERNEL_LOG_UNREADABLE", "warn", node,
                "Kernel log since boot could not be read, so Xid errors were not checked: %s"
                % kernel_log_error,
                "Run the health play with become: true, or check journald/dmesg access (kernel.dmesg_restrict)",
                value=None, threshold=None)]
        return []
    by_bus = {normalize_bus_id(g.get("pci_bus_id")): g for g in gpus or []}
    groups = {}
    for event in parse_xids(kernel_log):
        groups.setdefault((event["bus_id"], event["xid"]), []).append(event)
    warn = {int(x) for x in opts["xid_warn"] or []}
    out = []
    for (bus, xid), events in sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        gpu = by_bus.get(bus) or {}
        severity = "warn" if xid in warn else "fail"
        out.append(make_finding(
            "XID_ERRORS", severity, node,
            "Xid %d on %s x%d since boot: %s" % (
                xid, gpu.get("pci_bus_id") or bus, len(events), events[-1]["detail"][:160]),
            "Look the Xid up in NVIDIA's Xid catalogue; %s" % (
                "usually an application fault, watch for repeats" if severity == "warn"
                else "drain the node, reset the GPU or reboot, RMA if it repeats"),
            value=len(events), threshold=0, xid=xid, counter="xid_%d" % xid,
            gpu_index=gpu.get("index"), gpu_bus_id=gpu.get("pci_bus_id") or bus))
    return out


# ---------------------------------------------------------------------------------------------
# Whole node


def evaluate_node(node, gpu_info=None, rdma_info=None, host_info=None, kernel_log=None, options=None,
                  kernel_log_error=None):
    """All checks for one node; findings sorted (fails first)."""
    opts = _options(options)
    findings = []
    if gpu_info is not None:
        findings.extend(check_gpus(node, gpu_info, opts))
    if rdma_info is not None:
        findings.extend(check_ib_ports(node, rdma_info, opts))
    if host_info is not None:
        findings.extend(check_host(node, host_info, opts))
    findings.extend(check_xids(node, kernel_log, (gpu_info or {}).get("gpus"), opts, kernel_log_error))
    findings.extend(check_sxids(node, kernel_log, opts))
    return sort_findings(findings)


def node_result(node, findings, options=None):
    """``{node, status, findings, lines, silenced, counts}``: the per-node health record."""
    opts = _options(options)
    silenced_codes = set(opts["silenced_codes"] or [])
    kept = [f for f in findings if f["code"] not in silenced_codes]
    silenced = [f for f in findings if f["code"] in silenced_codes]
    return {
        "node": node,
        "status": worst_status(kept),
        "findings": kept,
        "lines": [format_finding(f) for f in kept],
        "silenced": silenced,
        "counts": {"fail": sum(1 for f in kept if f["severity"] == "fail"),
                   "warn": sum(1 for f in kept if f["severity"] == "warn")},
    }
