# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""slurm_node against a stand-in scontrol that answers `show node` with a real capture
(tests/fixtures/slurm, SOURCES.md) and records every other call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from fixtures_path import FIXTURES

from ansible_collections.gpufleet.cluster.plugins.modules import slurm_node

GPU_NODES = FIXTURES / "slurm" / "show-node-17.11-4-nodes-gpu-allocated-idle-drain.txt"


def call(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            slurm_node.main()
    return json.loads(capsys.readouterr().out)


def scontrol(tmp_path: Path, body: str) -> str:
    path = tmp_path / "scontrol"
    path.write_text("#!/bin/sh\necho \"$*\" >> '%s'\n%s\n" % (tmp_path / "calls", body))
    path.chmod(0o755)
    return str(path)


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_query_returns_the_parsed_node(capsys, tmp_path):
    result = call(capsys, name="oxygen-04", scontrol=scontrol(tmp_path, f"cat '{GPU_NODES}'"))
    assert result["found"] is True and result["changed"] is False and result["action"] == ""
    node = result["node"]
    assert (node["state"], node["drain_flag"], node["drained"], node["reason"]) == ("IDLE+DRAIN", True, True, "memory issues?")
    assert calls(tmp_path) == ["show node oxygen-04"]


@pytest.mark.parametrize("body, words", [
    ("echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; exit 1",
     "show node gpu-a01 failed (rc 1): slurm_load_node error: Unable to contact slurm controller"),
    ("exec sleep 30", "did not answer within 1s (timeout)"),
    ("echo 'Node gpu-a01 not found'", "show node gpu-a01 did not list the node"),
])
def test_a_node_slurm_does_not_answer_for_is_not_found_with_the_reason(capsys, tmp_path, body, words):
    result = call(capsys, name="gpu-a01", scontrol=scontrol(tmp_path, body), timeout=1)
    assert result["found"] is False and result["node"] == {} and "failed" not in result
    assert words in result["message"], result["message"]


def test_a_missing_scontrol_is_not_found(capsys, tmp_path):
    result = call(capsys, name="gpu-a01", scontrol=str(tmp_path / "no-scontrol-here"))
    assert result["found"] is False and "rc 127" in result["message"]


def test_drain_writes_the_record_and_resume_forgets_it(capsys, tmp_path):
    record = tmp_path / "state" / "slurm-drained-by-gpufleet"
    idle = scontrol(tmp_path, f"cat '{GPU_NODES}'")
    drained = call(capsys, name="cricket", state="drained", reason="gpufleet: XID_79", record=str(record), scontrol=idle)
    assert drained["changed"] is True and drained["action"] == "drain"
    assert calls(tmp_path)[-1] == "update NodeName=cricket State=DRAIN Reason=gpufleet: XID_79"
    assert record.read_text() == "gpufleet: XID_79\n"
    # Slurm now shows the drain with gpufleet's reason (the capture's drained node, renamed and re-reasoned).
    ours = tmp_path / "ours.txt"
    ours.write_text(GPU_NODES.read_text().replace("oxygen-04", "cricket-x").replace("memory issues?", "gpufleet: XID_79"))
    resumed = call(capsys, name="cricket-x", state="resumed", record=str(record), scontrol=scontrol(tmp_path, f"cat '{ours}'"))
    assert resumed["changed"] is True and resumed["action"] == "resume" and not record.exists()
    assert calls(tmp_path)[-1] == "update NodeName=cricket-x State=RESUME"


def test_a_failing_update_fails_the_task_naming_the_node(capsys, tmp_path):
    body = f"case \"$1\" in show) cat '{GPU_NODES}' ;; *) echo 'Invalid node state specified' >&2; exit 1 ;; esac"
    result = call(capsys, name="cricket", state="drained", reason="gpufleet: XID_79", scontrol=scontrol(tmp_path, body))
    assert result["failed"] is True
    assert result["msg"] == ("cricket: %s update NodeName=cricket State=DRAIN failed (rc 1): Invalid node state specified"
                             % (tmp_path / "scontrol"))


@pytest.mark.parametrize("args, words", [
    ({"state": "drained"}, "state is drained but all of the following are missing: reason"),
    ({"state": "resumed"}, "state is resumed but any of the following are missing: reason, record"),
    ({"state": "drained", "reason": "gpufleet: X\nState=RESUME"}, "reason must be one line of text"),
    ({"timeout": 0}, "timeout must be a positive number of seconds, got 0"),
])
def test_bad_input_is_refused_before_scontrol_runs(capsys, tmp_path, args, words):
    result = call(capsys, name="cricket", scontrol=scontrol(tmp_path, "exit 0"), **args)
    assert result["failed"] is True and words in result["msg"], result["msg"]
    assert not (tmp_path / "calls").exists()


@pytest.mark.parametrize("state", ["query", "drained", "resumed"])
@pytest.mark.parametrize("name", ["gpu[01-02]", "gpu01,gpu02", "gpu01 gpu02", "gpu01\tgpu02", " gpu01", ""])
def test_a_host_list_expression_is_refused_before_scontrol_runs(capsys, tmp_path, state, name):
    """issue 35 N11: scontrol reads NodeName=gpu[01-02] as a range and would drain every node in it."""
    result = call(capsys, name=name, state=state, reason="gpufleet: XID_79", record=str(tmp_path / "record"),
                  scontrol=scontrol(tmp_path, f"cat '{GPU_NODES}'"))
    assert result["failed"] is True, result
    assert repr(name) in result["msg"] and "give one node name" in result["msg"], result["msg"]
    assert not (tmp_path / "calls").exists()
