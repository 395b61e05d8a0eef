# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Documentation for the node_baseline action (the work happens in plugins/action/node_baseline.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_baseline
short_description: Judge each node against its own stored baseline and store new ones
version_added: "0.3.0"
description:
  - Runs on the controller only (an action plugin). Turns one measuring step's result into per-node figures
    (O(kind=compute) every GPU's GEMM and memory figures, O(kind=nccl) the node's own nccl-tests busbw,
    O(kind=links) the node's pair-test figures per peer, tool and device pair), each keyed by the node's
    hardware (GPU model and count; the network, tool and devices of its links).
  - Reads C(BASELINE_DIR/nodes/node-CLUSTER--NODE--KIND.json). A stored baseline is checked as the smoke job
    checks its own (schema, finite positive metrics within plausible bounds, the same node, kind and hardware
    key); one that cannot be used (unreadable, not JSON, nested too deeply, an absurd figure such as 1e-300)
    fails the node with C(NODE_BASELINE_UNUSABLE) and its reasons. A figure more than O(tolerance) below
    the node's baseline, or missing from this run, fails it with C(NODE_REGRESSED). A node without a baseline is
    listed under RV(not_checked).
  - With O(store), writes the baseline of every node not in O(failed_nodes).
options:
  kind:
    description: Which step's figures.
    type: str
    choices: [compute, nccl, links]
    required: true
  cluster:
    description: Cluster name; names the files.
    type: str
    required: true
  result:
    description:
      - The step's result (the compute verdict, the nccl-tests verdict) or, for O(kind=links), the list of link figures.
    type: raw
    required: true
  facts:
    description: Node to its gpu_benchmark_node_facts (O(kind=nccl) keys its hardware by them).
    type: dict
    default: {}
  baseline_dir:
    description: Controller directory of the baselines (the files go in its C(nodes/)).
    type: path
    required: true
  tolerance:
    description: A fall beyond this fraction of the baseline is a regression.
    type: float
    default: 0.10
  store:
    description: Store this run's figures as the baseline of every node that passed.
    type: bool
    default: false
  failed_nodes:
    description: Nodes that failed the step (never stored).
    type: list
    elements: str
    default: []
  recorded_at:
    description: When the figures were measured, written into stored baselines.
    type: str
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Judge each node against its own baseline
  gpufleet.cluster.node_baseline:
    kind: compute
    cluster: "{{ cluster }}"
    result: "{{ compute_result }}"
    baseline_dir: /srv/gpufleet/baselines
  run_once: true
"""

RETURN = r"""
findings:
  description: NODE_REGRESSED and NODE_BASELINE_UNUSABLE findings, one per node at most.
  returned: always
  type: list
  elements: dict
comparisons:
  description: Node to its metrics compared (metric, current, baseline, change, regressed, message).
  returned: always
  type: dict
not_checked:
  description: Nodes without a stored baseline, with the reason.
  returned: always
  type: list
  elements: dict
current:
  description: Node to this run's figures (hardware_key, metrics).
  returned: always
  type: dict
files:
  description: Node to its baseline file.
  returned: always
  type: dict
stored:
  description: Files written (with store).
  returned: always
  type: list
  elements: str
"""
