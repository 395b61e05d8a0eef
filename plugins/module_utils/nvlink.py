# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""NVLink and NVSwitch fabric health: ``nvidia-smi nvlink -s`` / ``-e`` parsed and judged.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

Output shapes (reference/health-checks.md e.3): a ``GPU n: <name> (UUID: ...)`` header, then one
``Link k: 25 GB/s`` line per link (``<inactive>`` for a down link); when every link of a GPU is
down nvidia-smi prints ``NVML: Unable to retrieve NVLink information as all links are inactive``
(Azure HPC health checks' test data). ``-e`` prints ``Link k: Replay Errors: 0`` lines.

Judgement and sources:

* a link ``<inactive>`` or a GPU with all links inactive fails (Azure NHC2016, imbue, gcm);
* a link slower than the expected per-link rate fails: checking only for ``<inactive>`` misses a
  degraded link (reference: a stored H200 sample with one link at 1.562 GB/s);
* fewer links than the model has fails (H100/H200 18 x 26.562 GB/s, A100 12 x 25 GB/s: public
  ``nvlink -s`` captures, reference/health-checks.md);
* error counters above ``error_max`` (default 0) warn: gcm ``dcgmi nvlink -e`` flags > 0, imbue warns
  at a total >= 5; they are counters since driver load, so a warn, not a verdict;
* on NVSwitch systems the fabric manager must run (imbue ``systemctl is-active nvidia-fabricmanager``;
  AWS: FM down -> RESET), and every GPU's fabric state is judged by health.check_fabric (Completed/Success
  on Hopper and later, nvidia-smi ``-q`` ``Fabric`` section).
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import make_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import nvlink_for_model
from ansible_collections.gpufleet.cluster.plugins.module_utils.health import check_fabric
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi_nvlink


def expected_nvlink(product_name):
    """(links, GB/s per link) from gpu_models' NVLink table: (0, None) for a part without NVLink, (None, None)
    when the count is not a property of the model or the model is unknown (nvlink_expectation says why)."""
    row = nvlink_for_model(product_name)
    return row["links"], row["gbps"]


def nvlink_expectation(product_name):
    """gpu_models.nvlink_for_model: ``{links, gbps, source, reason, model}``."""
    return nvlink_for_model(product_name)


_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?\s*$")
_LINK_COUNTER = re.compile(r"^\s*Link (\d+): ([A-Za-z][A-Za-z -]*?): (\d+)\s*$")
_ALL_INACTIVE = "all links are inactive"
_ELIDED = re.compile(r"^\s*\[\.\.\.\]\s*$")
_LINK = re.compile(r"^Link \d+:")


def _new_gpu(match):
    return {"gpu_index": int(match.group(1)), "name": match.group(2).strip(), "uuid": match.group(3),
            "links": [], "all_inactive": False, "elided": False}


def _gpu_messages(text):
    """{gpu index: the tool's own lines under that GPU's header that are not link lines} ("Device does not have
    or support Nvlink", a refusal): what nvidia-smi said instead of listing links."""
    messages, index = {}, None
    for line in (text or "").splitlines():
        stripped = line.strip()
        header = _GPU.match(stripped)
        if header:
            index = int(header.group(1))
            continue
        if index is None or not stripped or _ELIDED.match(stripped) or _LINK.match(stripped):
            continue
        messages.setdefault(index, []).append(stripped)
    return {idx: " ".join(lines) for idx, lines in messages.items()}


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` per GPU, built on nvidia_smi.parse_nvidia_smi_nvlink (one parser for
    the format) with what judging needs on top: which GPU had all links inactive, whether the
    capture elides links (``[...]``), so a shortened listing is not read as missing links, and
    ``unchecked``: why a GPU that lists no link cannot be judged (the tool's own words, e.g. "Device
    does not have or support Nvlink"), so an absence is reported as not checked, never as 0 links."""
    parsed = parse_nvidia_smi_nvlink(text)
    all_inactive = _ALL_INACTIVE in str(parsed.get("error") or "")
    elided = any(_ELIDED.match(line) for line in (text or "").splitlines())
    messages = _gpu_messages(text)
    gpus = []
    for gpu in parsed["gpus"]:
        entry = {
            "gpu_index": gpu["index"], "name": gpu["name"], "uuid": gpu["uuid"],
            "links": [{"link": l["link"], "gbps": l["speed_gbps"], "active": l["active"]} for l in gpu["links"]],
            "all_inactive": all_inactive and not gpu["links"],
            "elided": elided,
            "message": messages.get(gpu["index"]),
            "unchecked": None,
        }
        if not entry["links"] and not entry["all_inactive"]:
            entry["unchecked"] = "nvidia-smi nvlink -s listed no link for GPU %s: %s" % (
                gpu["index"], entry["message"] or "no output under its header")
        gpus.append(entry)
    return gpus


def nvlink_not_checked(status):
    """``[{"check": "nvlink", "gpu_index", "reason"}]`` for every GPU the status could not judge."""
    return [{"check": "nvlink", "gpu_index": gpu["gpu_index"], "reason": gpu["unchecked"]}
            for gpu in status or [] if gpu.get("unchecked")]


def parse_nvlink_errors(text):
    """``nvidia-smi nvlink -e``: one dict per GPU, ``links`` maps link -> {counter name: value}."""
    gpus, current = [], None
    for line in (text or "").splitlines():
        header = _GPU.match(line.strip())
        if header:
            current = _new_gpu(header)
            current["links"] = {}
            gpus.append(current)
            continue
        if current is None:
            continue
        if _ELIDED.match(line):
            current["elided"] = True
            continue
        counter = _LINK_COUNTER.match(line)
        if counter:
            current["links"].setdefault(int(counter.group(1)), {})[counter.group(2).strip()] = int(counter.group(3))
    return gpus


def evaluate_nvlink(status, errors, node, expected_links=None, expected_gbps=None, error_max=0,
                    rate_tolerance=0.01):
    """Findings from parsed ``-s`` (and optionally ``-e``) output.

    ``expected_links``/``expected_gbps`` come from the GPU model table; None skips that check
    (and the caller records it as not checked)."""
    findings = []
    for gpu in status or []:
        idx = gpu["gpu_index"]
        if gpu.get("unchecked"):
            continue  # not checked (nvlink_not_checked says why): an absence is not 0 links
        if gpu["all_inactive"]:
            findings.append(make_finding(
                "NVLINK_ALL_INACTIVE", "fail", node, "GPU %s (%s): every NVLink is inactive" % (idx, gpu["name"]),
                "Reseat or replace the GPU baseboard/NVSwitch tray; check nvidia-fabricmanager and dmesg for SXid",
                value=0, threshold=expected_links, gpu_index=idx))
            continue
        inactive = [l["link"] for l in gpu["links"] if not l["active"]]
        if inactive:
            findings.append(make_finding(
                "NVLINK_INACTIVE", "fail", node, "GPU %s: NVLink(s) %s inactive" % (idx, inactive),
                "Reset the GPU (nvidia-smi -r) or reboot; if the link stays down, RMA the part",
                value=inactive, threshold=[], gpu_index=idx))
        if expected_gbps:
            slow = [l for l in gpu["links"] if l["active"] and l["gbps"] < expected_gbps * (1 - rate_tolerance)]
            if slow:
                findings.append(make_finding(
                    "NVLINK_SPEED_DEGRADED", "fail", node,
                    "GPU %s: NVLink(s) %s below %s GB/s (%s)" % (
                        idx, [l["link"] for l in slow], expected_gbps, sorted({l["gbps"] for l in slow})),
                    "Reset the GPU or reboot; a link that trains slow again points at the baseboard or NVSwitch",
                    value=min(l["gbps"] for l in slow), threshold=expected_gbps, gpu_index=idx))
        if expected_links and not gpu["elided"] and len(gpu["links"]) < expected_links:
            findings.append(make_finding(
                "NVLINK_COUNT_LOW", "fail", node,
                "GPU %s: %s NVLinks reported, the model has %s" % (idx, len(gpu["links"]), expected_links),
                "Check the driver and fabric manager; reset the GPU", value=len(gpu["links"]),
                threshold=expected_links, gpu_index=idx))
    for gpu in errors or []:
        for link, counters in sorted(gpu["links"].items()):
            bad = {name: value for name, value in counters.items() if value > error_max}
            if bad:
                findings.append(make_finding(
                    "NVLINK_ERRORS", "warn", node,
                    "GPU %s link %s error counters %s" % (gpu["gpu_index"], link, bad),
                    "Reset the counters (nvidia-smi nvlink -r), run a load, and read them again: rising counters"
                    " mean a marginal link", value=sum(bad.values()), threshold=error_max,
                    gpu_index=gpu["gpu_index"], link=link))
    return findings


def evaluate_fabric(gpus, node, nvswitch_present, fabric_manager_active):
    """NVSwitch systems: the fabric manager running, and every GPU's fabric registration as health judges it
    (health.check_fabric: one judgement for both reports; an HGX A100's GPUs do not register and pass).

    ``gpus`` is gpu_info's list (each with ``fabric`` {state, status}, ``architecture`` and ``model``)."""
    if not nvswitch_present:
        return []
    findings = []
    if not fabric_manager_active:
        findings.append(make_finding(
            "FABRIC_MANAGER_DOWN", "fail", node, "NVSwitch system without a running nvidia-fabricmanager",
            "Install nvidia-fabricmanager at exactly the driver's version and start it; GPUs cannot use NVLink"
            " across the NVSwitches without it", value="inactive", threshold="active"))
    return findings + check_fabric(node, {"gpus": gpus or [], "nvswitch": True})
