#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health_check
short_description: Evaluate GPU-node health from gathered facts and return findings
version_added: "0.1.0"
description:
  - Pure evaluation that runs no command of its own. It takes the results of
    M(gpufleet.cluster.gpu_info), M(gpufleet.cluster.rdma_info), M(gpufleet.cluster.host_info)
    and the kernel log text, and returns findings in the collection's one shape
    C({code, severity, node, gpu_index, gpu_bus_id, value, threshold, message, remediation}).
  - Also says which GPUs need ECC enabling or persistence mode, so a role can act and re-check.
  - Never fails on findings; the caller decides (the gpu_health role fails the node after writing
    its report).
options:
  node:
    description: Node name written into every finding.
    type: str
    required: true
  gpu_info:
    description: The gpu_info result. Omit to skip the GPU checks.
    type: dict
  rdma_info:
    description: The rdma_info result. Omit to skip the port checks.
    type: dict
  host_info:
    description: The host_info result. Omit to skip host memory checks.
    type: dict
  kernel_log:
    description: Kernel log since boot (C(journalctl -k -b) or C(dmesg)); null skips the Xid check.
    type: str
  kernel_log_error:
    description: Why the kernel log could not be read; with O(kernel_log) null it becomes a C(KERNEL_LOG_UNREADABLE) warning.
    type: str
  thresholds:
    description:
      - Overrides of the defaults in C(module_utils/health.py) C(DEFAULTS); an omitted or null key keeps
        the default. Typed, so a value from C(-e) (always a string) arrives as the number or boolean it means.
    type: dict
    default: {}
    suboptions:
      ecc_required:
        description: Fail GPUs with ECC off; GPUs without ECC warn.
        type: bool
      ecc_pending_fails:
        description:
          - The node was just rebooted to apply the ECC mode gpu_health enabled; a GPU still at current Disabled,
            pending Enabled fails (C(ECC_ENABLE_NOT_APPLIED)) instead of warning (C(ECC_ENABLE_PENDING_REBOOT)).
        type: bool
      ecc_uncorrectable_volatile_max:
        description: Volatile uncorrectable ECC errors above this fail.
        type: int
      ecc_uncorrectable_aggregate_max:
        description: Aggregate uncorrectable ECC errors above this fail.
        type: int
      ecc_correctable_volatile_max:
        description: Volatile correctable ECC errors above this warn.
        type: int
      retired_pages_warn:
        description: Retired pages above this warn.
        type: int
      retired_pages_fail:
        description: Retired pages at or above this fail.
        type: int
      expected_gpu_count:
        description:
          - GPUs every node must have (the profile's count); null compares with the majority of
            O(thresholds.cluster_gpu_counts), and with a lone node only the driver with the PCI bus.
        type: int
      cluster_gpu_counts:
        description:
          - Every node's GPUs as C([PCI count, driver count]) (or one count); without
            O(thresholds.expected_gpu_count) the count most nodes have is expected (a tie takes the larger).
        type: list
        elements: raw
      persistence_required:
        description: Warn on persistence mode off.
        type: bool
      pcie_check:
        description: Warn on PCIe links below their max.
        type: bool
      throttle_fail_reasons:
        description: Active clock event reasons that fail.
        type: list
        elements: str
      throttle_warn_reasons:
        description: Active clock event reasons that warn.
        type: list
        elements: str
      ib_check:
        description: Check the RDMA ports.
        type: bool
      ib_expected_ports:
        description: "Ports (C(mlx5_0) or C(mlx5_0:1)) that must be Active."
        type: list
        elements: str
      ib_expected_rate_gbps:
        description: "Minimum port rate in Gb/s; null: the best sibling of the same CA type."
        type: float
      ib_expected_link_layer:
        description: "C(InfiniBand) or C(Ethernet); null: not checked."
        type: str
      ib_expected_hca_count:
        description: HCAs the node must have (the profile's count).
        type: int
      ib_cluster_hca_counts:
        description: Every node's HCA count; without O(thresholds.ib_expected_hca_count) the majority is expected.
        type: list
        elements: int
      sxid_check:
        description: Judge NVSwitch SXid lines in the kernel log (fatal fail, non-fatal warn).
        type: bool
      host_ecc_required:
        description: Fail (not warn) on host memory ECC unknown or off.
        type: bool
      host_edac_corrected_max:
        description: Host corrected memory errors since boot above this warn.
        type: int
      host_edac_uncorrected_max:
        description: Host uncorrected memory errors since boot above this fail.
        type: int
      xid_check:
        description: Judge Xid lines in the kernel log.
        type: bool
      xid_warn:
        description: Xids that only warn; any other Xid fails.
        type: list
        elements: int
      silenced_codes:
        description: Finding codes left out of the verdict (reported under C(silenced)).
        type: list
        elements: str
extends_documentation_fragment:
  - gpufleet.cluster.read_only
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Evaluate health
  gpufleet.cluster.gpu_health_check:
    node: "{{ inventory_hostname }}"
    gpu_info: "{{ gpu }}"
    rdma_info: "{{ rdma }}"
    host_info: "{{ host }}"
    kernel_log: "{{ klog.stdout }}"
    thresholds:
      ecc_correctable_volatile_max: 10000
  register: health
"""

RETURN = r"""
result:
  description: C({node, status (pass|warn|fail), findings, lines, silenced, counts}).
  returned: always
  type: dict
status:
  description: C(pass), C(warn) or C(fail).
  returned: always
  type: str
findings:
  description: The findings, fails first.
  returned: always
  type: list
  elements: dict
lines:
  description: The same findings, one human-readable line each.
  returned: always
  type: list
  elements: str
ecc_enable_gpus:
  description: Indices of GPUs that support ECC, run with it disabled and have no enable pending.
  returned: always
  type: list
  elements: int
persistence_enable_gpus:
  description: Indices of GPUs with persistence mode off.
  returned: always
  type: list
  elements: int
gpu_counts:
  description:
    - C({pci, driver, listed, duplicated}); C(driver) counts distinct PCI bus ids, so a GPU nvidia-smi
      lists twice is counted once, and C(duplicated) names such bus ids.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.cluster.plugins.module_utils.health import (
    DEFAULTS,
    ecc_enable_candidates,
    evaluate_node,
    gpu_counts,
    node_result,
    persistence_enable_candidates,
)


THRESHOLD_SPEC = {
    "ecc_required": {"type": "bool"},
    "ecc_pending_fails": {"type": "bool"},
    "ecc_uncorrectable_volatile_max": {"type": "int"},
    "ecc_uncorrectable_aggregate_max": {"type": "int"},
    "ecc_correctable_volatile_max": {"type": "int"},
    "retired_pages_warn": {"type": "int"},
    "retired_pages_fail": {"type": "int"},
    "expected_gpu_count": {"type": "int"},
    "cluster_gpu_counts": {"type": "list", "elements": "raw"},
    "persistence_required": {"type": "bool"},
    "pcie_check": {"type": "bool"},
    "throttle_fail_reasons": {"type": "list", "elements": "str"},
    "throttle_warn_reasons": {"type": "list", "elements": "str"},
    "ib_check": {"type": "bool"},
    "ib_expected_ports": {"type": "list", "elements": "str"},
    "ib_expected_rate_gbps": {"type": "float"},
    "ib_expected_link_layer": {"type": "str"},
    "ib_expected_hca_count": {"type": "int"},
    "ib_cluster_hca_counts": {"type": "list", "elements": "int"},
    "sxid_check": {"type": "bool"},
    "host_ecc_required": {"type": "bool"},
    "host_edac_corrected_max": {"type": "int"},
    "host_edac_uncorrected_max": {"type": "int"},
    "xid_check": {"type": "bool"},
    "xid_warn": {"type": "list", "elements": "int"},
    "silenced_codes": {"type": "list", "elements": "str"},
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            gpu_info=dict(type="dict"),
            rdma_info=dict(type="dict"),
            host_info=dict(type="dict"),
            kernel_log=dict(type="str", no_log=False),
            kernel_log_error=dict(type="str"),
            thresholds=dict(type="dict", default={}, options=THRESHOLD_SPEC),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unknown = sorted(set(p["thresholds"]) - set(DEFAULTS))
    if unknown:
        module.fail_json(msg="unknown threshold key(s): %s (known: %s)" % (
            ", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    findings = evaluate_node(p["node"], gpu_info=p["gpu_info"], rdma_info=p["rdma_info"],
                             host_info=p["host_info"], kernel_log=p["kernel_log"],
                             options=p["thresholds"], kernel_log_error=p["kernel_log_error"])
    result = node_result(p["node"], findings, p["thresholds"])
    gpus = (p["gpu_info"] or {}).get("gpus") or []
    module.exit_json(
        changed=False,
        result=result,
        status=result["status"],
        findings=result["findings"],
        lines=result["lines"],
        ecc_enable_gpus=ecc_enable_candidates(gpus),
        persistence_enable_gpus=persistence_enable_candidates(gpus),
        gpu_counts=gpu_counts(p["gpu_info"]),
    )


if __name__ == "__main__":
    main()
