# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: scale_hparams
author: gpufleet engineers
version_added: "0.1.0"
short_description: Scale data-parallel batch size and learning rate to a GPU count
description:
  - Global batch = per-GPU batch x number of GPUs.
  - Learning rate scaled by the square root of the GPU count relative to O(base_gpus)
    (C(lr_scaling=linear) or C(none) on request).
  - Adds a warning when the global batch exceeds O(_input.max_global_batch).
options:
  _input:
    description: C({per_gpu_batch, base_lr, base_gpus=1, max_global_batch?, lr_scaling=sqrt}).
    type: dict
    required: true
  gpus:
    description: Number of GPUs taking part.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Scale the smoke job to 16 GPUs
  ansible.builtin.debug:
    msg: "{{ {'per_gpu_batch': 32, 'base_lr': 0.1, 'base_gpus': 1} | gpufleet.cluster.scale_hparams(16) }}"
  # -> {global_batch: 512, lr: 0.4, warnings: [], ...}
"""

RETURN = r"""
_value:
  description: C({global_batch, lr, gpus, per_gpu_batch, base_lr, base_gpus, lr_scaling, lr_scale, max_global_batch, warnings}).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils.hparams import HparamsError
from ansible_collections.gpufleet.cluster.plugins.module_utils.hparams import scale_hparams as _scale


def scale_hparams(config, gpus):
    try:
        return _scale(config, gpus)
    except HparamsError as exc:
        raise AnsibleFilterError("scale_hparams: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"scale_hparams": scale_hparams}
