# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_env
short_description: Derive the NCCL environment of a node from its RDMA and topology facts
version_added: "0.1.0"
description:
  - Takes the result of M(gpufleet.cluster.rdma_info) and returns the NCCL settings the node
    needs, with the reasons and warnings behind them.
  - C(NCCL_IB_HCA) lists the Active compute-fabric ports in GPU-affinity order with the exact-match
    C(=) prefix; C(NCCL_IB_GID_INDEX) is set on RoCE; C(NCCL_NET_GDR_LEVEL) when nvidia_peermem is
    loaded; with no Active RDMA port the result falls back to sockets (C(NCCL_IB_DISABLE=1)) and
    warns what that costs.
  - Operator overrides win; an override of null removes a derived key.
positional: _input
options:
  _input:
    description: The rdma_info result (C(cas), C(peermem_loaded)).
    type: dict
    required: true
  topology:
    description: The gpu_info C(topology) (the parse_nvidia_smi_topo result), for GPU-affinity order.
    type: dict
  socket_ifname:
    description: Interface for NCCL bootstrap and socket traffic (the default-route interface).
    type: str
  nics:
    description: host_info C(nics), used when O(socket_ifname) is not given and for the warning.
    type: list
    elements: dict
  gid_tables:
    description:
      - "RoCE GID tables, C({mlx5_0:1: [{index, gid, type}]}), or the tab-separated lines
        C(ca:port index gid type) the nccl_config role reads from sysfs."
    type: raw
  overrides:
    description: Operator NCCL values; they replace derived ones, null removes a key.
    type: dict
  hcas:
    description: Operator list of fabric HCAs (C(mlx5_0) or C(mlx5_0:1)); replaces the auto rule.
    type: list
    elements: str
  gdr_level:
    description: Force C(NCCL_NET_GDR_LEVEL) (only used when nvidia_peermem is loaded).
    type: str
"""

EXAMPLES = r"""
- name: Derive the NCCL environment
  ansible.builtin.set_fact:
    nccl: "{{ rdma | gpufleet.cluster.nccl_env(topology=gpu.topology,
              socket_ifname=ansible_facts['default_ipv4']['interface']) }}"
"""

RETURN = r"""
_value:
  description: "C({env, transport (ib|roce|mixed|socket), hcas, excluded, warnings, gid_index_source, gpu_hca_pairs})."
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_env import derive_nccl_env


def nccl_env(rdma_info, topology=None, socket_ifname=None, nics=None, gid_tables=None,
             overrides=None, hcas=None, gdr_level=None):
    if rdma_info is not None and not isinstance(rdma_info, dict):
        raise AnsibleFilterError("nccl_env expects the rdma_info result (a dict), got %s"
                                 % type(rdma_info).__name__)
    if overrides is not None and not isinstance(overrides, dict):
        raise AnsibleFilterError("nccl_env: overrides must be a dict of NCCL_* names to values")
    return derive_nccl_env(rdma_info or {}, topology=topology or None, socket_ifname=socket_ifname or None,
                           nics=nics, gid_tables=gid_tables, overrides=overrides,
                           hcas=hcas or None, gdr_level=gdr_level or None)


class FilterModule(object):
    def filters(self):
        return {"nccl_env": nccl_env}
