# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: stack_plan
author: gpufleet engineers
version_added: "0.1.0"
short_description: Turn a stack request and the hardware into one consistent GPU software plan
description:
  - Solves driver branch, CUDA toolkit, NCCL, fabric manager, PyTorch wheel and OS packages from
    the sourced data in C(plugins/module_utils/compat_data.py) (tables in docs/compatibility.md).
  - A request that cannot work raises an error that names the rule (for example
    C(CC_NEEDS_NEWER_CUDA)), says why, and lists the nearest requests that work.
options:
  _input:
    description:
      - "C({gpus, cuda, torch, torch_variant?, driver_branch?, driver_compat? (full|minor), os, arch,
        nvswitch, kernel_modules? (open|proprietary|auto), allow_cuda_major_mismatch?, repo_base_url?})."
      - C(gpus) entries are nvidia-smi names, PCI device ids, compute capabilities (C("9.0")),
        gpu_info results or single GPU dicts.
    type: dict
    required: true
  overrides:
    description: Keyword arguments merged over the request (for example C(os=...), C(gpus=...)).
    type: dict
"""

EXAMPLES = r"""
- name: Plan the stack for HGX H100 nodes
  ansible.builtin.set_fact:
    plan: >-
      {{ {'gpus': ['NVIDIA H100 80GB HBM3'], 'cuda': '12.2', 'torch': '2.1.2',
          'os': 'ubuntu22.04', 'arch': 'x86_64', 'nvswitch': true} | gpufleet.cluster.stack_plan }}
  # plan.driver_branch == '535', plan.torch.variant == 'cu121'
"""

RETURN = r"""
_value:
  description:
    - "C({cuda_version, driver_branch, driver_min_version, driver_recommended_version, kernel_modules,
      packages: {driver, toolkit, nccl, fabricmanager}, repository, nccl_version, toolkit_package,
      torch: {version, variant, index_url, torchvision, torchaudio, ...}, gpus, rules_checked, warnings, ...})."
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve


class StackPlanError(AnsibleFilterError):
    """A refused stack request; ``rule`` is the stable rule id."""

    def __init__(self, rule, message, alternatives=None):
        super().__init__(message)
        self.rule = rule
        self.alternatives = alternatives or []


def stack_plan(request, **overrides):
    if overrides:
        if not hasattr(request, "items"):
            raise StackPlanError("BAD_REQUEST", "stack_plan: [BAD_REQUEST] the stack request must be a mapping, not %r." % (request,))
        request = dict(request, **overrides)
    try:
        return solve(request)
    except StackError as exc:
        raise StackPlanError(exc.rule, "stack_plan: [%s] %s" % (exc.rule, exc.args[0]), exc.alternatives)


class FilterModule(object):
    def filters(self):
        return {"stack_plan": stack_plan}
