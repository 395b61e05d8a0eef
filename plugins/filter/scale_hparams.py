# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

# Documentation: plugins/filter/<name>.yml, one file per filter, so `ansible-doc -t filter` shows each its own.

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
