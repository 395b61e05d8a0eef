#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_diag_info
short_description: Run DCGM diagnostics and read NVLink, fabric and InfiniBand counters, as findings
version_added: "0.2.0"
description:
  - Runs C(dcgmi diag -r LEVEL -j) and judges every test result into findings with DCGM's error
    codes (C(DCGM_FR_*)), severity and remediation.
  - Reads C(nvidia-smi nvlink -s) and C(-e) and judges inactive links, links slower than the model rate,
    rising error counters; on NVSwitch systems the fabric manager and every GPU's fabric state.
  - Reads C(perfquery -x) for each given InfiniBand port and judges its error counters.
  - A check that cannot run (tool missing, command failing) is listed in RV(not_checked) with the
    reason; the DCGM check never passes without a result document.
  - Changes nothing on the node (the diagnostic loads the GPUs while it runs).
options:
  checks:
    description: Which checks to run.
    type: list
    elements: str
    choices: [dcgm, nvlink, fabric, ib_counters]
    default: [dcgm, nvlink, ib_counters]
  level:
    description: DCGM run level (1 software only, 2 adds memory and PCIe, 3 adds stress tests).
    type: int
    choices: [1, 2, 3, 4]
    default: 2
  node:
    description: Node name written into the findings.
    type: str
    required: true
  dcgmi:
    description: Name or path of dcgmi.
    type: str
    default: dcgmi
  diag_timeout:
    description: Seconds dcgmi diag may run before it counts as failed.
    type: int
    default: 1800
  tool_timeout:
    description: Seconds each other tool (nvidia-smi nvlink, perfquery, systemctl) may run before its check
      counts as not checked.
    type: int
    default: 120
  nvlink_error_max:
    description: NVLink error counters above this warn.
    type: int
    default: 0
  ib_ports:
    description: InfiniBand ports to read counters from (rdma_info's C(active_ports)).
    type: list
    elements: dict
    default: []
  ib_counter_fail_max:
    description: Physical/link error counters above this fail.
    type: int
    default: 0
  gpus:
    description: gpu_info's C(gpus) list (product name and fabric state per GPU).
    type: list
    elements: dict
    default: []
  nvswitch_present:
    description: Whether the node has NVSwitches (fabric check).
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.cluster.read_only
notes:
  - Commands run with C(LC_ALL=C).
  - dcgmi needs the host engine (C(nvidia-dcgm) service) running.
seealso:
  - module: gpufleet.cluster.gpu_health_check
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Run DCGM level 2 and the NVLink checks
  gpufleet.cluster.gpu_diag_info:
    node: "{{ inventory_hostname }}"
    level: 2
  register: diag

- name: Fail on fail-level findings
  ansible.builtin.assert:
    that: diag.status != 'fail'
    fail_msg: "{{ diag.findings | selectattr('severity', 'equalto', 'fail') | map(attribute='message') | list }}"
"""

RETURN = r"""
findings:
  description: Findings (code, severity, node, gpu_index, message, remediation, value, threshold, ...).
  returned: always
  type: list
  elements: dict
status:
  description: V(fail) if any finding fails, else V(warn) or V(pass).
  returned: always
  type: str
not_checked:
  description: Checks that could not run, each with C(check) and C(reason).
  returned: always
  type: list
  elements: dict
dcgm:
  description: The DCGM run (level, rc, version, schema, tests_run), or null when not run.
  returned: always
  type: dict
nvlink:
  description: Parsed C(nvlink -s) per GPU, or null when not run.
  returned: always
  type: list
ib_counters:
  description: Parsed perfquery blocks per port (ca, port, counters).
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.dcgm import (
    DcgmParseError,
    evaluate_dcgm,
    parse_dcgm_diag,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import sort_findings, worst_status
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvlink import (
    evaluate_fabric,
    evaluate_nvlink,
    nvlink_expectation,
    nvlink_not_checked,
    parse_nvlink_errors,
    parse_nvlink_status,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.perfquery import (
    evaluate_perfquery,
    parse_perfquery,
    perfquery_not_checked,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool


def _short(text, limit=300):
    return " ".join(str(text or "").split())[:limit]


def run_dcgm(module, params, findings, not_checked):
    dcgmi = module.get_bin_path(params["dcgmi"])
    if not dcgmi:
        findings.extend(evaluate_dcgm(None, params["node"], params["level"], rc=None))
        not_checked.append({"check": "dcgm", "reason": "dcgmi not found (is datacenter-gpu-manager installed?)"})
        return None
    cmd = [dcgmi, "diag", "-r", str(params["level"]), "-j"]
    rc, out, err, timed_out = run_tool(module, cmd, params["diag_timeout"])
    info = {"level": params["level"], "rc": rc, "command": " ".join(cmd), "stderr": _short(err)}
    if timed_out:
        err = "dcgmi diag did not finish within %ss (diag_timeout) and was killed. %s" % (params["diag_timeout"], err)
        info["stderr"] = _short(err)
    try:
        parsed = parse_dcgm_diag(out)
    except DcgmParseError as exc:
        info["error"] = str(exc)
        findings.extend(evaluate_dcgm(None, params["node"], params["level"], rc=rc))
        findings[-1]["message"] += ": %s %s" % (_short(err or out), str(exc)[:200])
        return info
    info.update(version=parsed["version"], schema=parsed["schema"], tests_run=parsed["tests_run"],
                results=len(parsed["results"]), driver_version=parsed["driver_version"])
    findings.extend(evaluate_dcgm(parsed, params["node"], params["level"], rc=rc))
    return info


def run_nvlink(module, params, findings, not_checked):
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        not_checked.append({"check": "nvlink", "reason": "nvidia-smi not found"})
        return None
    rc, out, err, _timed_out = run_tool(module, [smi, "nvlink", "-s"], params["tool_timeout"])
    if rc != 0:
        not_checked.append({"check": "nvlink", "reason": "nvidia-smi nvlink -s exited %s: %s" % (rc, _short(err or out))})
        return None
    status = parse_nvlink_status(out)
    if not status:
        not_checked.append({"check": "nvlink", "reason": "nvidia-smi nvlink -s listed no GPU with NVLink"})
        return []
    rc_e, out_e, err_e, _timed_out = run_tool(module, [smi, "nvlink", "-e"], params["tool_timeout"])
    errors = parse_nvlink_errors(out_e) if rc_e == 0 else []
    if rc_e != 0:
        not_checked.append({"check": "nvlink_errors", "reason": "nvidia-smi nvlink -e exited %s: %s" % (rc_e, _short(err_e))})
    not_checked.extend(nvlink_not_checked(status))
    expectation = nvlink_expectation(status[0]["name"])
    links, gbps = expectation["links"], expectation["gbps"]
    if links is None:
        not_checked.append({"check": "nvlink_speed", "reason": "%s: %s" % (status[0]["name"], expectation["reason"])})
    findings.extend(evaluate_nvlink(status, errors, params["node"], expected_links=links, expected_gbps=gbps,
                                    error_max=params["nvlink_error_max"]))
    return status


def run_fabric(module, params, findings, not_checked):
    if not params["nvswitch_present"]:
        return
    if not params["gpus"]:
        not_checked.append({"check": "fabric", "reason": "no gpu_info facts were given"})
        return
    rc, _out, _err, _timed_out = run_tool(module, ["systemctl", "is-active", "--quiet", "nvidia-fabricmanager.service"],
                                          params["tool_timeout"])
    findings.extend(evaluate_fabric(params["gpus"], params["node"], True, rc == 0))


def run_ib_counters(module, params, findings, not_checked):
    ports = [p for p in params["ib_ports"] if str(p.get("link_layer", "InfiniBand")) == "InfiniBand"]
    if not ports:
        return []
    perfquery = module.get_bin_path("perfquery")
    if not perfquery:
        not_checked.append({"check": "ib_counters", "reason": "perfquery not found (infiniband-diags)"})
        return []
    read = []
    for port in ports:
        cmd = [perfquery, "-x", "-C", str(port["ca"]), "-P", str(port["port"])]
        rc, out, err, _timed_out = run_tool(module, cmd, params["tool_timeout"])
        if rc != 0:
            not_checked.append({"check": "ib_counters", "reason": "%s exited %s: %s" % (" ".join(cmd), rc, _short(err))})
            continue
        blocks = parse_perfquery(out)
        reason = perfquery_not_checked(blocks, out + err)
        if reason:
            not_checked.append({"check": "ib_counters", "reason": "%s: %s" % (" ".join(cmd), reason)})
        read.append({"ca": port["ca"], "port": port["port"], "blocks": blocks})
        findings.extend(evaluate_perfquery(blocks, params["node"], ca=port["ca"],
                                           fail_max=params["ib_counter_fail_max"]))
    return read


def main():
    module = AnsibleModule(
        argument_spec=dict(
            checks=dict(type="list", elements="str", default=["dcgm", "nvlink", "ib_counters"],
                        choices=["dcgm", "nvlink", "fabric", "ib_counters"]),
            level=dict(type="int", default=2, choices=[1, 2, 3, 4]),
            node=dict(type="str", required=True),
            dcgmi=dict(type="str", default="dcgmi"),
            diag_timeout=dict(type="int", default=1800),
            tool_timeout=dict(type="int", default=120),
            nvlink_error_max=dict(type="int", default=0),
            ib_ports=dict(type="list", elements="dict", default=[]),
            ib_counter_fail_max=dict(type="int", default=0),
            gpus=dict(type="list", elements="dict", default=[]),
            nvswitch_present=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    findings, not_checked = [], []
    result = {"dcgm": None, "nvlink": None, "ib_counters": []}
    if "dcgm" in params["checks"]:
        result["dcgm"] = run_dcgm(module, params, findings, not_checked)
    if "nvlink" in params["checks"]:
        result["nvlink"] = run_nvlink(module, params, findings, not_checked)
    if "fabric" in params["checks"]:
        run_fabric(module, params, findings, not_checked)
    if "ib_counters" in params["checks"]:
        result["ib_counters"] = run_ib_counters(module, params, findings, not_checked)
    findings = sort_findings(findings)
    module.exit_json(changed=False, findings=findings, status=worst_status(findings), not_checked=not_checked,
                     **result)


if __name__ == "__main__":
    main()
