# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""Documentation for the smoke_report action (the work happens in plugins/action/smoke_report.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: smoke_report
short_description: Judge a smoke-test run, compare it with the cluster's baseline and write the reports
version_added: "0.1.0"
description:
  - Runs on the controller only (an action plugin). Reads what the smoke job's launcher printed on
    every node (from C(hostvars[host][node_var])), assembles one report, judges it and writes
    C(smoke.json), C(smoke.junit.xml) (one test case per check), C(smoke.md) and C(smoke_busbw.svg)
    (busbw against message size, this run against the baseline) into O(report_dir).
  - Bus bandwidth is recomputed from the measured time exactly as nccl-tests does
    (algbw = bytes / time, GB = 1e9 bytes; busbw = algbw x 2(n-1)/n for all-reduce) and judged at large
    messages, not as the average of the sweep.
  - Names the nodes that never joined (from the roll call every node runs before torchrun) or whose
    job failed.
  - A baseline is keyed by cluster name and hardware key (GPU model x GPUs per node x nodes x backend).
    With O(store_baseline) a passing run is stored; later runs fail when a metric falls more than
    O(tolerance) below it, naming the metric and both values.
options:
  cluster:
    description: Cluster name; names the report and the baseline file.
    type: str
    required: true
  hosts:
    description: Every host that should take part, in inventory order (normally C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  node_var:
    description:
      - Host variable that holds each node's launch data (address, nproc, gpu_info result, torch probe,
        the registered launcher result as C(run), the node's active RDMA line rate as C(rdma_gbps)).
    type: str
    default: __smoke_test_node
  backend:
    description: The backend the job ran with.
    type: str
    required: true
    choices: [nccl, gloo]
  hparams:
    description: The scaled hyper-parameters (output of gpufleet.cluster.scale_hparams), recorded in the report.
    type: dict
  config:
    description: Job settings recorded in the report; C(large_message_bytes) sets where large messages start.
    type: dict
    default: {}
  thresholds:
    description:
      - Overrides for C(min_busbw_gbps), C(min_loss_drop), C(min_steps_per_s), C(min_samples_per_s).
      - Bandwidth is not judged on gloo unless C(min_busbw_gbps) is set here.
    type: dict
    default: {}
  tolerance:
    description: Allowed fall below the baseline before a metric counts as a regression (0.10 = 10 %).
    type: float
    default: 0.10
  expect_rdma:
    description:
      - The nodes have active RDMA ports; said in the message when a multi-node NCCL run used TCP
        sockets (which fails either way unless O(allow_socket_transport)).
    type: bool
    default: false
  allow_socket_transport:
    description:
      - Accept a multi-node NCCL run whose inter-node transport is TCP sockets (a cluster without
        RDMA). Without it such a run fails.
    type: bool
    default: false
  allow_no_busbw_floor:
    description:
      - Accept a multi-node NCCL run that has no bus-bandwidth floor to be judged against (no
        active RDMA port on some node and no C(min_busbw_gbps) in O(thresholds)). Without it such a
        run fails.
    type: bool
    default: false
  rdma_gbps_per_node:
    description:
      - Active RDMA line rate of one node in Gb/s for the multi-node busbw floor. When omitted, the
        lowest of every node's own rate (C(rdma_gbps) in each node's record) is used, so the floor
        never comes from the host that happens to judge.
    type: float
  sim:
    description: The cluster is simulated; GPUs that nvidia-smi stand-ins report but torch cannot see are expected.
    type: bool
    default: false
  report_dir:
    description: Controller directory for the reports.
    type: path
    required: true
  baseline_dir:
    description: Controller directory for baselines.
    type: path
    required: true
  store_baseline:
    description: Store this run as the baseline when it passed.
    type: bool
    default: false
  fail_on_failure:
    description: Fail the task when the verdict is a failure (the reports are written either way).
    type: bool
    default: true
  notes:
    description: Free-text notes added to the report.
    type: list
    elements: str
    default: []
  started_at:
    description: Start time recorded in the report and in a stored baseline.
    type: raw
attributes:
  check_mode:
    support: none
    description: The smoke_test role skips the job, and so this step, in check mode.
  diff_mode:
    support: none
    description: The reports are written whole; no diff is returned.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only (an action plugin); the nodes are not contacted.
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Judge the run and write the reports
  gpufleet.cluster.smoke_report:
    cluster: "{{ gpufleet_cluster_name }}"
    hosts: "{{ ansible_play_hosts_all }}"
    backend: gloo
    report_dir: reports
    baseline_dir: baselines
  run_once: true
"""

RETURN = r"""
passed:
  description: The verdict.
  returned: always
  type: bool
reasons:
  description: One line per failed check, naming nodes, metrics and values.
  returned: always
  type: list
  elements: str
missing_nodes:
  description: Nodes that never joined the job or whose job failed.
  returned: always
  type: list
  elements: str
busbw_large_gbps:
  description: Peak all-reduce busbw over the large message sizes, GB/s.
  returned: when the job returned a result
  type: float
hardware_key:
  description: The key the baseline is stored under.
  returned: always
  type: str
report_files:
  description: Paths of smoke.json, smoke.junit.xml, smoke.md and smoke_busbw.svg.
  returned: always
  type: dict
baseline_file:
  description: The baseline path for this cluster and hardware.
  returned: always
  type: str
baseline_stored:
  description: Whether this run was stored as the baseline.
  returned: always
  type: bool
"""
