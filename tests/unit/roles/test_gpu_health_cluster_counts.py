# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The gpu_health role's wiring of every node's GPU count into the check (issue 25, F14).

Three local hosts carry gpu_info results as the role registers them; the role's own vars file
builds ``cluster_gpu_counts`` from hostvars, and the module judges each node with it: the node
whose GPU is gone from the PCI bus too fails against the majority, the others pass.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[3]
VENV_BIN = _REPO / ".venv" / "bin"

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="no controller venv")

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        __gpu_health_gpu: "{{ facts[inventory_hostname] }}"
    - ansible.builtin.include_vars: %(vars)s
    - gpufleet.cluster.gpu_health_check:
        node: "{{ inventory_hostname }}"
        gpu_info: "{{ __gpu_health_gpu }}"
        thresholds:
          cluster_gpu_counts: "{{ __gpu_health_thresholds.cluster_gpu_counts }}"
          expected_gpu_count: "{{ __gpu_health_thresholds.expected_gpu_count }}"
      vars:
        gpu_health_expected_gpu_count: "{{ profile_count }}"
      register: verdict
    - ansible.builtin.copy:
        content: "{{ verdict | to_json }}"
        dest: "%(out)s/{{ inventory_hostname }}.json"
        mode: "0644"
"""


def _gpu_info(count, pci=None, duplicate=False):
    buses = ["00000000:%02X:00.0" % (0x18 + 0x10 * i) for i in range(count)]
    if duplicate:
        buses.append(buses[-1])
    return {"status": "ok", "driver_gpu_count": len(buses), "pci_gpu_count": count if pci is None else pci,
            # No model name: only the node-level count checks can fail these stand-in GPUs.
            "gpus": [{"index": i, "pci_bus_id": b} for i, b in enumerate(buses)],
            "pci_devices": [{"bus_id": b, "kind": "gpu"} for b in sorted(set(buses))], "missing_from_driver": []}


def _run(tmp_path, facts, profile_count=0):
    tmp_path.mkdir(parents=True, exist_ok=True)
    inventory = tmp_path / "hosts.json"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"hosts": {h: local for h in facts}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY % {"vars": _REPO / "roles" / "gpu_health" / "vars" / "main.yml", "out": tmp_path})
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play),
                           "-e", json.dumps({"facts": facts, "profile_count": profile_count})],
                          cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return {h: json.loads((tmp_path / ("%s.json" % h)).read_text()) for h in facts}


def _fails(verdict):
    return {f["code"]: f for f in verdict["findings"] if f["severity"] == "fail"}


def test_node_without_a_gpu_on_the_bus_fails_against_the_majority(tmp_path):
    facts = {"n1": _gpu_info(8), "n2": _gpu_info(7, duplicate=True), "n3": _gpu_info(8)}
    verdicts = _run(tmp_path / "majority", facts)
    assert _fails(verdicts["n1"]) == {} and _fails(verdicts["n3"]) == {}
    low = _fails(verdicts["n2"])["GPU_COUNT_LOW"]
    assert (low["value"], low["threshold"]) == (7, 8) and "most nodes of the cluster have 8" in low["message"]
    assert verdicts["n2"]["gpu_counts"]["driver"] == 7
    # The profile's count (inventory gpufleet_expected_gpu_count through gpu_health_expected_gpu_count) wins.
    verdicts = _run(tmp_path / "profile", facts, profile_count=9)
    assert all(_fails(v)["GPU_COUNT_LOW"]["threshold"] == 9 for v in verdicts.values())
