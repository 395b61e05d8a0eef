# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

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
