# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""From R620 NVIDIA ships only the open GPU kernel modules (Driver Installation Guide 620, 'Proprietary
Kernel Modules Removed'; issue 35): the plan takes the open flavour there, and a request for the
proprietary one on R620 is refused with the reason and what works."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as data
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import StackError, solve

H100 = {"gpus": ["NVIDIA H100 80GB HBM3"], "cuda": "13.0", "os": "ubuntu24.04"}


def test_a_proprietary_request_on_r620_is_refused_with_the_reason():
    with pytest.raises(StackError) as err:
        solve(dict(H100, driver_branch="620", kernel_modules="proprietary"))
    assert err.value.rule == "PROPRIETARY_MODULES_REMOVED" and err.value.rule in data.RULES
    message = str(err.value)
    assert "R620" in message and "proprietary" in message and "kernel_modules: open" in message
    assert {"kernel_modules": "open"} in err.value.alternatives
    assert any(a.get("driver_branch") and int(a["driver_branch"]) < 620 for a in err.value.alternatives)


def test_proprietary_before_r620_is_still_planned():
    plan = solve(dict(H100, driver_branch="595", kernel_modules="proprietary"))
    assert (plan["driver_branch"], plan["kernel_modules"]) == ("595", "proprietary")


def test_r620_plans_open_modules_even_without_gpus_named():
    plan = solve({"cuda": "13.0", "os": "ubuntu24.04", "driver_branch": "620"})
    assert plan["kernel_modules"] == "open"
    assert "PROPRIETARY_MODULES_REMOVED" in plan["rules_checked"]
    assert solve(dict(H100, driver_branch="620"))["kernel_modules"] == "open"
