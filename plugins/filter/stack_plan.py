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
    the sourced data in C(plugins/module_utils/compat_cuda.py), C(compat_drivers.py),
    C(compat_torch.py) and C(compat_packages.py) (tables and sources in docs/compatibility.md).
  - A request without C(cuda) gets the newest toolkit of the mission range 11.7-12.2 that the
    hardware, the OS repository and the torch release run, else the oldest newer one (Blackwell gets
    12.8), with a warning that says so.
  - A request that cannot work raises an error that names the rule (for example
    C(CC_NEEDS_NEWER_CUDA), C(REPO_LACKS_CUDA), C(OPEN_MODULES_REQUIRED)), says why, and lists the
    nearest requests that work.
  - The returned keys are a contract for the roles (PLAN_CONTRACT.md); see RETURN.
options:
  _input:
    description:
      - "C({gpus, cuda?, torch?, torch_variant?, driver_branch?, driver_compat? (full|minor), os, arch,
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
  # plan.driver_branch == '535', plan.driver_min_version == '535.104.05' (12.2 installs 12.2.2),
  # plan.packages.driver == ['nvidia-kernel-open-535', 'cuda-drivers-535'],
  # plan.packages.fabricmanager == ['nvidia-fabricmanager-535'], plan.torch.variant == 'cu121'

- name: Plan a B200 cluster without naming CUDA (gets 12.8, driver R580, open modules)
  ansible.builtin.set_fact:
    plan: "{{ {'gpus': ['NVIDIA B200'], 'torch': '2.7.0', 'os': 'rhel9'} | gpufleet.cluster.stack_plan }}"
  # plan.packages.driver == ['@nvidia-driver:580-open'], plan.packages.fabricmanager == [] (no NVSwitch given)
"""

RETURN = r"""
_value:
  description: One consistent plan; every key below is part of the contract the roles code against.
  type: dict
  contains:
    os:
      description: Normalised OS key (C(ubuntu22.04), C(debian12), C(rhel9), ...).
      type: str
    package_family:
      description: C(apt) or C(dnf).
      type: str
    repository:
      description: NVIDIA CUDA repository URL, C(<base>/<distro>/<arch>/).
      type: str
    repository_cuda_releases:
      description: The CUDA X.Y toolkits NVIDIA's repository for C(os) carries (sourced bounds only).
      type: list
      elements: str
    cuda_version:
      description: Toolkit X.Y; C(toolkit_full_version) is the update C(cuda-toolkit-X-Y) installs.
      type: str
    driver_branch:
      description: Driver branch, for example C("535").
      type: str
    driver_min_version:
      description:
        - The lowest driver that runs what is really installed with full features (Table 3 for
          C(toolkit_full_version), raised to the wheel's floor), or the minor-version floor with
          C(driver_compat=minor). A node below it is upgraded.
      type: str
    driver_recommended_version:
      description: Upstream driver version to install; fabric manager is installed at exactly this version.
      type: str
    kernel_modules:
      description: C(open) or C(proprietary).
      type: str
    packages:
      description:
        - C(driver) package names without versions in NVIDIA's documented install order for the OS,
          branch and flavour (apt C([nvidia-kernel-open-535, cuda-drivers-535]); dnf the module spec
          C([@nvidia-driver:535-open])).
        - C(fabricmanager) names without versions, C([]) without NVSwitch (apt
          C(nvidia-fabricmanager-<B>), from R580 C(nvidia-fabricmanager); dnf C(nvidia-fabric-manager)).
        - C(toolkit) C([cuda-toolkit-X-Y]); C(nccl) apt C(name=version), dnf C(name-version).
      type: dict
    driver_flavour_packages:
      description: C({open, proprietary}) driver package names of both flavours on that OS and branch.
      type: dict
    driver_flavour_switch:
      description:
        - NVIDIA's documented steps from the other flavour to the planned one, in order; each
          C({action, packages, options, source, verified}) with C(action) one of C(remove),
          C(install) or C(module-switch) (dnf C(dnf -y module switch-to <stream> --allowerasing)).
      type: list
      elements: dict
    driver_install_commands:
      description: NVIDIA's documented install commands for this OS, branch and flavour (for people and reports).
      type: list
      elements: str
    driver_packages_verified:
      description: C({packages, switch}) booleans; false where the names follow NVIDIA's pattern but were not read verbatim.
      type: dict
    driver_branch_eol:
      description: True when the branch is end of life (a warning names a supported branch).
      type: bool
    torch:
      description: C({version, variant, index_url, torchvision, torchaudio, driver_floor, ...}) or null.
      type: dict
    warnings:
      description: Things the operator should read.
      type: list
      elements: str
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
