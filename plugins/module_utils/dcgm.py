# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""``dcgmi diag -j`` output: parse it, and judge it into findings.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

Two document shapes exist (reference/health-checks.md, "DCGM JSON key drift"):

* DCGM 3.x: top key ``"DCGM GPU Diagnostic"``; a result names its GPUs with ``gpu_ids`` (``"0,1,2"``
  or a bare number) or ``gpu_id``; statuses such as ``PASS``/``Pass``; ``null`` can stand between
  tests (a real 3.1.0 capture does this).
* DCGM 4.x: top key ``"DCGM Diagnostic"``; a result names ``entity_group``/``entity_id``; a test has
  a ``test_summary``; versions sit under ``metadata`` (``"Driver Version Detected"``).

dcgmi may print text before the JSON (a banner, a warning), so the document starts at the first
``{``. Warnings carry ``error_id`` (``dcgmErrorCode`` in DCGM's ``dcgmlib/dcgm_errors.h``),
``error_category`` and ``error_severity``; their names below come from that header (NVIDIA/DCGM
72fa3fe). Exit status: 0 pass, 226 = ``DCGM_ST_NVVS_ERROR`` (-30) when a test failed, 205 =
``DCGM_ST_NVVS_ISOLATE_ERROR`` (-51) when an isolate-priority error is present (DCGM issue #158 and
reference/health-checks.md).
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding

# dcgmError_t values from dcgmlib/dcgm_errors.h (NVIDIA/DCGM @ 72fa3fe), the ones a diagnostic
# reports most; any other id is reported as DCGM_FR_<id>.
DCGM_ERRORS = {
    3: "DCGM_FR_PCI_REPLAY_RATE", 4: "DCGM_FR_VOLATILE_DBE_DETECTED", 5: "DCGM_FR_VOLATILE_SBE_DETECTED",
    6: "DCGM_FR_PENDING_PAGE_RETIREMENTS", 7: "DCGM_FR_RETIRED_PAGES_LIMIT",
    8: "DCGM_FR_RETIRED_PAGES_DBE_LIMIT", 9: "DCGM_FR_CORRUPT_INFOROM", 10: "DCGM_FR_CLOCKS_EVENT_THERMAL",
    12: "DCGM_FR_CLOCKS_EVENT_POWER", 13: "DCGM_FR_NVLINK_ERROR_THRESHOLD", 14: "DCGM_FR_NVLINK_DOWN",
    15: "DCGM_FR_NVSWITCH_FATAL_ERROR", 17: "DCGM_FR_NVSWITCH_DOWN", 19: "DCGM_FR_NVML_API",
    20: "DCGM_FR_DEVICE_COUNT_MISMATCH", 23: "DCGM_FR_DENYLISTED_DRIVER", 25: "DCGM_FR_GRAPHICS_PROCESSES",
    26: "DCGM_FR_HOSTENGINE_CONN", 28: "DCGM_FR_BAD_CUDA_ENV", 29: "DCGM_FR_PERSISTENCE_MODE",
    30: "DCGM_FR_LOW_BANDWIDTH", 31: "DCGM_FR_HIGH_LATENCY", 40: "DCGM_FR_THERMAL_VIOLATIONS",
    42: "DCGM_FR_TEMP_VIOLATION", 45: "DCGM_FR_PCIE_GENERATION", 46: "DCGM_FR_PCIE_WIDTH",
    52: "DCGM_FR_FAULTY_MEMORY", 55: "DCGM_FR_ECC_DISABLED", 57: "DCGM_FR_CUDA_DBE",
    58: "DCGM_FR_MEMORY_MISMATCH", 62: "DCGM_FR_MEMORY_BANDWIDTH", 63: "DCGM_FR_TARGET_POWER",
    70: "DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", 71: "DCGM_FR_NVLINK_ERROR_CRITICAL",
    80: "DCGM_FR_ROW_REMAP_FAILURE", 81: "DCGM_FR_UNCONTAINED_ERROR", 84: "DCGM_FR_UNCORRECTABLE_ROW_REMAP",
    85: "DCGM_FR_PENDING_ROW_REMAP", 99: "DCGM_FR_GPU_EXPECTED_NVLINKS_UP", 101: "DCGM_FR_XID_ERROR",
    103: "DCGM_FR_DBE_VIOLATION", 104: "DCGM_FR_PCIE_REPLAY_VIOLATION", 108: "DCGM_FR_CUDA_FM_NOT_INITIALIZED",
    109: "DCGM_FR_SXID_ERROR", 110: "DCGM_FR_GFLOPS_THRESHOLD_VIOLATION",
    112: "DCGM_FR_FABRIC_MANAGER_TRAINING_ERROR", 118: "DCGM_FR_SRAM_THRESHOLD", 120: "DCGM_FR_FALLEN_OFF_BUS",
    125: "DCGM_FR_GPU_RECOVERY_RESET", 126: "DCGM_FR_GPU_RECOVERY_REBOOT", 128: "DCGM_FR_GPU_RECOVERY_DRAIN_RESET",
}
# dcgmErrorSeverity_t and dcgmErrorCategory_t, same header.
DCGM_SEVERITIES = {0: "NONE", 1: "MONITOR", 2: "ISOLATE", 3: "UNKNOWN", 4: "TRIAGE", 5: "CONFIG", 6: "RESET"}
DCGM_CATEGORIES = {
    0: "NONE", 1: "PERF_THRESHOLD", 2: "PERF_VIOLATION", 3: "SOFTWARE_CONFIG", 4: "SOFTWARE_LIBRARY",
    5: "SOFTWARE_XID", 6: "SOFTWARE_CUDA", 7: "SOFTWARE_EUD", 8: "SOFTWARE_OTHER", 9: "HARDWARE_THERMAL",
    10: "HARDWARE_MEMORY", 11: "HARDWARE_NVLINK", 12: "HARDWARE_NVSWITCH", 13: "HARDWARE_PCIE",
    14: "HARDWARE_POWER", 15: "HARDWARE_OTHER", 16: "INTERNAL_OTHER",
}
# What an operator does for each DCGM severity (the header's comments, turned into an action).
SEVERITY_REMEDIATION = {
    "MONITOR": "The GPU can run work; watch it and rerun dcgmi diag -r 2",
    "ISOLATE": "Take the GPU out of service (drain the node) and open an RMA case with the dcgmi diag -r 3 output",
    "TRIAGE": "Drain the node and triage: rerun dcgmi diag -r 3 and read nvvs.log in /var/log/nvidia-dcgm",
    "CONFIG": "Fix the node's configuration as the message says, then rerun dcgmi diag",
    "RESET": "Drain the node, reset the GPU (or reboot) and rerun dcgmi diag -r 2",
    "UNKNOWN": "Drain the node and triage with dcgmi diag -r 3",
}
EXIT_MEANINGS = {0: "pass", 226: "a test failed (DCGM_ST_NVVS_ERROR)",
                 205: "an isolate-priority error (DCGM_ST_NVVS_ISOLATE_ERROR)"}

# Tests each run level adds (reference/health-checks.md, DCGM 4.6 FillTestVectors; 3.x names for
# the same plugins in parentheses). A level is complete only when its tests reported.
LEVEL_TESTS = {
    1: ["software"],
    2: ["software", "memory", "pcie"],
    3: ["software", "memory", "pcie", "diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth"],
}
# DCGM 3.x printed per-check names where 4.x prints the plugin name.
TEST_ALIASES = {
    "gpu memory": "memory", "pcie": "pcie", "diagnostic": "diagnostic", "targeted stress": "targeted_stress",
    "targeted power": "targeted_power", "memory bandwidth": "memory_bandwidth", "sm stress": "sm_stress",
    "denylist": "software", "nvml library": "software", "cuda main library": "software",
    "permissions and os-related blocks": "software", "permissions and os blocks": "software",
    "persistence mode": "software", "environmental variables": "software", "environment variables": "software",
    "page retirement/row remap": "software", "graphics processes": "software", "inforom": "software",
    "fabric manager": "software",
}
_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip",
           "not run": "not_run", "notrun": "not_run"}


class DcgmParseError(ValueError):
    """The text holds no dcgmi diag JSON document."""


def normalize_status(raw):
    """``PASS``/``Pass``/``pass`` -> ``pass``; anything unrecognised is ``unknown``, never a pass."""
    return _STATUS.get(str(raw or "").strip().lower(), "unknown")


def canonical_test(name):
    key = str(name or "").strip().lower()
    return TEST_ALIASES.get(key, key.replace(" ", "_"))


def _gpu_ids(result):
    if "entity_id" in result:
        if str(result.get("entity_group", "GPU")).upper() not in ("GPU", ""):
            return []
        return [int(result["entity_id"])]
    raw = result.get("gpu_ids", result.get("gpu_id"))
    if raw is None or raw == "":
        return []
    if isinstance(raw, int):
        return [raw]
    return [int(part) for part in re.split(r"[,\s]+", str(raw)) if part.strip().isdigit()]


def _warning(item):
    if isinstance(item, str):
        return {"error_id": None, "error": None, "category": None, "severity": None, "message": item}
    error_id = item.get("error_id", item.get("error_code"))
    category = item.get("error_category")
    severity = item.get("error_severity")
    return {
        "error_id": error_id,
        "error": DCGM_ERRORS.get(error_id, "DCGM_FR_%s" % error_id) if isinstance(error_id, int) else None,
        "category": DCGM_CATEGORIES.get(category, category),
        "severity": DCGM_SEVERITIES.get(severity, severity),
        "message": item.get("warning") or item.get("message") or "",
    }


def _as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _diag_document(text):
    """(document, offset): the first JSON object in ``text`` with a DCGM key (else the first object at all): dcgmi
    (or a wrapper) may print text before it, with braces of its own, and after it. Raises DcgmParseError naming
    what was there instead."""
    decoder = json.JSONDecoder()
    start, first_error, fallback = text.find("{"), None, None
    if start < 0:
        raise DcgmParseError("no JSON document in dcgmi output: %r" % text.strip()[:200])
    while start >= 0:
        try:
            doc, _end = decoder.raw_decode(text, start)
        except ValueError as exc:
            first_error = first_error or (exc, start)
        else:
            if isinstance(doc, dict) and ("DCGM Diagnostic" in doc or "DCGM GPU Diagnostic" in doc):
                return doc, start
            fallback = fallback if fallback is not None else (doc, start)
        start = text.find("{", start + 1)
    if fallback is not None and isinstance(fallback[0], dict):
        return fallback  # a JSON object without a DCGM key: the caller names its keys
    exc, at = first_error or (ValueError("no object"), 0)
    raise DcgmParseError("dcgmi output is not valid JSON (%s): %r" % (exc, text[at:at + 200]))


def parse_dcgm_diag(text):
    """Parse ``dcgmi diag -j`` output into plain data; raise DcgmParseError when there is no document."""
    text = text or ""
    doc, start = _diag_document(text)
    if "DCGM Diagnostic" in doc:
        schema, root = "4", doc["DCGM Diagnostic"]
    elif "DCGM GPU Diagnostic" in doc:
        schema, root = "3", doc["DCGM GPU Diagnostic"]
    else:
        raise DcgmParseError("dcgmi JSON has neither 'DCGM Diagnostic' nor 'DCGM GPU Diagnostic': keys %s"
                             % sorted(doc))
    root = root or {}
    metadata = doc.get("metadata") or {}
    results, summaries = [], {}
    for category in _as_list(root.get("test_categories")):
        if not isinstance(category, dict):
            continue
        for test in _as_list(category.get("tests")):
            if not isinstance(test, dict):  # 3.x prints null between tests
                continue
            name = test.get("name")
            summary = test.get("test_summary") or {}
            if summary.get("status") is not None:
                summaries[name] = normalize_status(summary.get("status"))
            for result in _as_list(test.get("results")):
                if not isinstance(result, dict):
                    continue
                results.append({
                    "category": category.get("category"),
                    "test": name,
                    "plugin": canonical_test(name),
                    "gpu_ids": _gpu_ids(result),
                    "status": normalize_status(result.get("status")),
                    "raw_status": result.get("status"),
                    "warnings": [_warning(w) for w in _as_list(result.get("warnings", result.get("warning")))],
                    "info": [str(i) for i in _as_list(result.get("info"))],
                })
    return {
        "schema": schema,
        "version": root.get("version") or metadata.get("version"),
        "driver_version": (root.get("driver_version_detected") or root.get("Driver Version Detected")
                           or metadata.get("Driver Version Detected")),
        "runtime_error": root.get("runtime_error") or doc.get("runtime_error"),
        "preamble": text[:start].strip(),
        "results": results,
        "test_summaries": summaries,
        "tests_run": sorted({r["plugin"] for r in results if r["status"] in ("pass", "fail", "warn")}),
    }


def _finding_for(node, result, warning, severity, level):
    code = warning["error"] if warning and warning.get("error") else "DCGM_TEST_%s" % (
        "FAILED" if severity == "fail" else "WARNING")
    dcgm_severity = (warning or {}).get("severity") or "UNKNOWN"
    message = "dcgmi diag -r %s: test %r %s" % (level, result["test"], result["raw_status"])
    if warning and warning.get("message"):
        message += ": " + warning["message"]
    gpu = result["gpu_ids"][0] if len(result["gpu_ids"]) == 1 else None
    return make_finding(
        code, severity, node, message,
        SEVERITY_REMEDIATION.get(str(dcgm_severity), SEVERITY_REMEDIATION["UNKNOWN"]),
        value=result["raw_status"], threshold="Pass", gpu_index=gpu, test=result["test"],
        dcgm_error_id=(warning or {}).get("error_id"), dcgm_severity=dcgm_severity,
        dcgm_category=(warning or {}).get("category"), gpu_ids=result["gpu_ids"], source="dcgmi diag",
    )


def evaluate_dcgm(parsed, node, level, rc=0, require_level_complete=True):
    """Findings for one node's diag run. ``parsed`` None means dcgmi printed no document.

    No evidence fails: no document, no results, or a level whose tests did not all report."""
    findings = []
    if parsed is None:
        return [make_finding("DCGM_NO_RESULTS", "fail", node,
                             ("dcgmi diag -r %s did not run" % level) if rc is None else
                             "dcgmi diag -r %s produced no result document (exit %s)" % (level, rc),
                             "Check that nv-hostengine runs (systemctl status nvidia-dcgm) and rerun "
                             "dcgmi diag -r %s -j by hand" % level, value=rc, source="dcgmi diag")]
    if parsed.get("runtime_error"):
        findings.append(make_finding("DCGM_RUN_ERROR", "fail", node,
                                     "dcgmi diag -r %s: %s" % (level, parsed["runtime_error"]),
                                     "Read nv-hostengine.log and nvvs.log in /var/log/nvidia-dcgm",
                                     value=rc, source="dcgmi diag"))
    for result in parsed["results"]:
        if result["status"] not in ("fail", "warn"):
            continue
        severity = result["status"]
        warnings = result["warnings"] or [None]
        for warning in warnings:
            findings.append(_finding_for(node, result, warning, severity, level))
    failed = any(f["severity"] == "fail" for f in findings)
    if rc not in (0, None) and not failed:
        findings.append(make_finding("DCGM_RUN_ERROR", "fail", node,
                                     "dcgmi diag -r %s exited %s (%s) but its document names no failing test"
                                     % (level, rc, EXIT_MEANINGS.get(rc, "unexpected exit status")),
                                     "Read nvvs.log in /var/log/nvidia-dcgm and rerun the diagnostic",
                                     value=rc, threshold=0, source="dcgmi diag"))
    if not parsed["tests_run"]:
        findings.append(make_finding("DCGM_NO_RESULTS", "fail", node,
                                     "dcgmi diag -r %s ran no test (every result skipped or missing)" % level,
                                     "Check the GPU is supported by this DCGM and not in use; rerun by hand",
                                     value=0, source="dcgmi diag"))
    elif require_level_complete:
        missing = [t for t in LEVEL_TESTS.get(int(level), []) if t not in parsed["tests_run"]
                   and not any(r["plugin"] == t for r in parsed["results"] if r["status"] == "fail")]
        if missing:
            findings.append(make_finding(
                "DCGM_LEVEL_INCOMPLETE", "fail", node,
                "dcgmi diag -r %s did not report %s: those checks are not done" % (level, ", ".join(missing)),
                "Rerun dcgmi diag -r %s; a skipped test usually means the GPU is busy or unsupported" % level,
                value=parsed["tests_run"], threshold=LEVEL_TESTS[int(level)], source="dcgmi diag"))
    return findings
