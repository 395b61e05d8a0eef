# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Filters over plugins/module_utils/gpu_benchmark.py: nccl-tests runs and their verdict.

- ``gpu_info | gpufleet.cluster.gpu_benchmark_node_facts(rdma_info)``: GPUs, model, fabric rates of a node
- ``hosts | gpufleet.cluster.gpu_benchmark_launcher_argv(launcher, prefix, binary, args)``: mpirun/srun command
- ``links | gpufleet.cluster.gpu_benchmark_undirected(exclude)``: one run per unordered pair not yet run
- ``pair_runs | gpufleet.cluster.gpu_benchmark_pair_figures(facts, thresholds)``: pair runs as link figures
- ``nodes | gpufleet.cluster.gpu_benchmark_nccl_verdict(facts, runs, thresholds, fraction)``: the verdict
- ``nodes | gpufleet.cluster.gpu_benchmark_compute_verdict(runs, min_peak_fraction, slow_fraction, expected_gpus)``:
  per-GPU GEMM and memory figures against the datasheet and the cluster, every expected GPU accounted for
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_benchmark as _gb
from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_compute as _gc


def gpu_benchmark_node_facts(gpu_info, rdma_info=None):
    if not isinstance(gpu_info, dict):
        raise AnsibleFilterError("gpu_benchmark_node_facts needs the gpu_info result, got %r" % (gpu_info,))
    return _gb.node_facts(gpu_info, rdma_info if isinstance(rdma_info, dict) else {})


def gpu_benchmark_launcher_argv(hosts, launcher, prefix, binary, args=None):
    try:
        return _gb.launcher_argv(launcher, prefix or [], hosts or [], binary, args or [])
    except ValueError as exc:
        raise AnsibleFilterError("gpu_benchmark_launcher_argv: %s (gpu_benchmark_launcher)" % exc)


def gpu_benchmark_undirected(links, exclude=None):
    return _gb.undirected(links, exclude)


def gpu_benchmark_pair_figures(pair_runs, facts, thresholds=None):
    return _gb.pair_figures(pair_runs or [], facts or {}, thresholds or {})


def gpu_benchmark_nccl_verdict(nodes, facts, runs, thresholds=None, fraction=_gb.DEFAULT_FRACTION):
    if not isinstance(runs, dict):
        raise AnsibleFilterError("gpu_benchmark_nccl_verdict needs the runs dict, got %r" % (runs,))
    return _gb.nccl_verdict(list(nodes or []), facts or {}, runs, thresholds or {}, float(fraction))


def _fraction(name, value):
    """A fraction in (0, 1], or the filter's error naming the knob (None, text, NaN: not a fraction)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not 0 < number <= 1:  # NaN fails the comparison too
        raise AnsibleFilterError("gpu_benchmark_compute_verdict: %s must be a number in (0, 1], got %r" % (name, value))
    return number


def gpu_benchmark_compute_verdict(nodes, runs, min_peak_fraction=_gc.DEFAULT_MIN_PEAK_FRACTION,
                                  slow_fraction=_gc.DEFAULT_SLOW_FRACTION, expected_gpus=None):
    if not isinstance(runs, dict):
        raise AnsibleFilterError("gpu_benchmark_compute_verdict needs node -> run, got %r" % (runs,))
    if expected_gpus is not None and not isinstance(expected_gpus, (dict, int)):
        raise AnsibleFilterError("gpu_benchmark_compute_verdict: expected_gpus must be node -> GPU count or one "
                                 "count, got %r" % (expected_gpus,))
    return _gc.compute_verdict(list(nodes or []), runs, _fraction("gpu_benchmark_min_peak_fraction", min_peak_fraction),
                               _fraction("gpu_benchmark_slow_fraction", slow_fraction), expected_gpus)


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {
            "gpu_benchmark_node_facts": gpu_benchmark_node_facts,
            "gpu_benchmark_launcher_argv": gpu_benchmark_launcher_argv,
            "gpu_benchmark_undirected": gpu_benchmark_undirected,
            "gpu_benchmark_pair_figures": gpu_benchmark_pair_figures,
            "gpu_benchmark_nccl_verdict": gpu_benchmark_nccl_verdict,
            "gpu_benchmark_compute_verdict": gpu_benchmark_compute_verdict,
        }
