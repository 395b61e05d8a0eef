#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bandwidth_test
short_description: Run the client side of one bandwidth test (ib_write_bw, ib_read_bw or iperf3) and return its figures
version_added: "0.3.0"
description:
  - Runs the client of one planned test (the C(bandwidth_link_tests) filter plans them), one client per rail
    at the same time, each rail I(repeats) times, and returns each rail's best figure in Gb/s.
  - The server must already run on the far node (the bandwidth_isolation role starts it with
    C(systemd-run)); a client whose server is not listening yet is retried until I(connect_timeout).
  - Output is parsed with the collection's pure parsers (C(perftest), C(iperf3)); a rail without a
    figure has C(gbps) null and the tool's own error, never a zero.
  - Sends traffic to the far node; changes nothing on either node.
options:
  test:
    description:
      - One test as the C(bandwidth_link_tests) filter returns it (C(tool), C(server_address), C(bind),
        C(rails) with C(port), C(client_device), C(client_ib_port)).
    type: dict
    required: true
  seconds:
    description: Seconds each run sends (perftest C(-D), iperf3 C(-t)).
    type: int
    default: 2
  size:
    description: perftest message size in bytes (C(-s)); ignored by iperf3.
    type: int
    default: 1048576
  qps:
    description: perftest queue pairs (C(-q)); ignored by iperf3.
    type: int
    default: 1
  repeats:
    description: Runs per rail; the best figure counts (a shared machine can crowd one run out).
    type: int
    default: 1
  connect_timeout:
    description: Seconds to keep retrying a client whose server is not listening yet.
    type: int
    default: 30
  timeout:
    description: Seconds one client run may take before it is killed (a figure is then missing).
    type: int
    default: 120
seealso:
  - module: gpufleet.cluster.rdma_info
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Run this node's ring test
  gpufleet.cluster.bandwidth_test:
    test: "{{ my_test }}"
    seconds: 2
  register: ring_run
"""

RETURN = r"""
test:
  description: The test as given (so a registered loop carries its plan with its figures).
  returned: always
  type: dict
tool:
  description: The tool that ran.
  returned: always
  type: str
  sample: ib_write_bw
results:
  description: One entry per rail.
  returned: always
  type: list
  elements: dict
  contains:
    rail:
      description: Rail number (the k-th fabric port of each node; 0 on TCP).
      type: int
    gbps:
      description: Best figure over the repeats in Gb/s, null when no run gave one.
      type: float
    samples_gbps:
      description: Each run's figure (null for a run without one).
      type: list
      elements: float
    error:
      description: The tool's own error when no figure came back (connection refused, port down, timeout).
      type: str
    argv:
      description: The client command that ran.
      type: list
      elements: str
    tail:
      description: The last lines the tool printed (stdout and stderr).
      type: str
"""

import threading
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.cluster.plugins.module_utils.bandwidth_plan import TCP_TOOL, client_argv
from ansible_collections.gpufleet.cluster.plugins.module_utils.iperf3 import parse_iperf3_json
from ansible_collections.gpufleet.cluster.plugins.module_utils.perftest import parse_perftest
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool
from ansible_collections.gpufleet.cluster.plugins.module_utils.tool_address import check_test_addresses

RETRY_PAUSE_S = 0.5
# iperf3's words for a server that is not (yet) there or still busy with the previous test.
_IPERF3_RETRY = ("connection refused", "server is busy", "unable to connect")


def _figure(tool, rc, out, err, timed_out):
    """(gbps, error, retry) of one client run."""
    if tool == TCP_TOOL:
        doc = parse_iperf3_json(out)
        error = doc["error"] or (err.strip() if doc["gbps"] is None else None)
        retry = doc["gbps"] is None and any(word in (error or "").lower() for word in _IPERF3_RETRY)
        gbps = doc["gbps"]
    else:
        doc = parse_perftest(out + "\n" + err)
        gbps = doc["bw_avg_gbps"] if rc == 0 else None
        failure = doc["failure"]
        error = failure["detail"] if failure else (None if gbps is not None else "rc=%s: %s" % (rc, (err or out)[-300:].strip()))
        retry = bool(failure) and failure["kind"] == "connect"
    if timed_out:
        return None, "killed after the timeout", False
    return gbps, error, retry


def _run_rail(module, test, rail, params, out):
    argv = client_argv(test, rail, params["seconds"], params["size"], params["qps"])
    samples, error, tail = [], None, ""
    for _repeat in range(max(1, params["repeats"])):
        deadline = time.monotonic() + params["connect_timeout"]
        while True:
            rc, stdout, stderr, timed_out = run_tool(module, argv, params["timeout"])
            gbps, error, retry = _figure(test["tool"], rc, stdout, stderr, timed_out)
            tail = "\n".join((stdout + stderr).strip().splitlines()[-12:])
            if not retry or time.monotonic() > deadline:
                break
            time.sleep(RETRY_PAUSE_S)
        samples.append(gbps)
    measured = [s for s in samples if s is not None]
    out.append({"rail": rail["rail"], "gbps": max(measured) if measured else None, "samples_gbps": samples,
                "error": None if measured else error, "argv": argv, "tail": tail})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            test=dict(type="dict", required=True),
            seconds=dict(type="int", default=2),
            size=dict(type="int", default=1048576),
            qps=dict(type="int", default=1),
            repeats=dict(type="int", default=1),
            connect_timeout=dict(type="int", default=30),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    test = module.params["test"]
    missing = [k for k in ("tool", "server_address", "rails") if not test.get(k)]
    if missing:
        module.fail_json(msg="bandwidth_test: the test has no %s (plan it with the bandwidth_link_tests filter): %r"
                             % (", ".join(missing), test))
    try:
        check_test_addresses(test)
    except ValueError as exc:
        module.fail_json(msg="bandwidth_test: %s" % exc, test=test)
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: no traffic sent", test=test,
                         tool=test["tool"], results=[])
    results = []
    threads = [threading.Thread(target=_run_rail, args=(module, test, rail, module.params, results))
               for rail in test["rails"]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.sort(key=lambda r: r["rail"])
    module.exit_json(changed=False, test=test, tool=test["tool"], results=results)


if __name__ == "__main__":
    main()
