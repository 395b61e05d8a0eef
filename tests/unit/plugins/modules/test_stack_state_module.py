"""stack_state: a record on real files, then every way a comparison must refuse to call the node converged."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.module_utils import stack_state as state_utils
from ansible_collections.gpufleet.cluster.plugins.modules import stack_state

KEY = "a" * 64


def call(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            stack_state.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def node(tmp_path):
    """A recorded node: a pin file, a reboot request directory and a command, under key KEY."""
    pin = tmp_path / "etc" / "gpufleet-nccl"
    pin.parent.mkdir()
    pin.write_text("Package: libnccl2\nPin: version 2.19.3-1+cuda12.2\n")
    requests = tmp_path / "reboot-required.d"
    requests.mkdir()
    record = tmp_path / "state" / "stack-state.json"
    watch = {"files": [str(pin)], "dirs": [str(requests)], "commands": [["uname", "-s"]]}
    return {"pin": pin, "requests": requests, "record": record, "watch": watch}


def test_a_recorded_node_is_converged_until_something_moves(capsys, node):
    written = call(capsys, path=str(node["record"]), key=KEY, record=True, watch=node["watch"],
                   installed={"nccl": "2.19.3"})
    assert written["changed"] is True and written["observed"] == 4  # kernel, file, directory, command
    assert oct(node["record"].stat().st_mode & 0o777) == "0o600"
    again = call(capsys, path=str(node["record"]), key=KEY, record=True, watch=node["watch"],
                 installed={"nccl": "2.19.3"})
    assert again["changed"] is False, "the record holds no time stamp"

    same = call(capsys, path=str(node["record"]), key=KEY)
    assert same["converged"] is True and same["drift"] == [] and same["installed"] == {"nccl": "2.19.3"}

    node["pin"].write_text("Package: libnccl2\nPin: version 2.20.5-1+cuda12.4\n")
    (node["requests"] / "driver-installed").write_text("reboot\n")
    moved = call(capsys, path=str(node["record"]), key=KEY)
    assert moved["converged"] is False
    assert [line.split(":")[0] for line in moved["drift"]] == [
        "directory " + str(node["requests"]), "file " + str(node["pin"])]
    assert moved["reason"].startswith("2 observation(s) moved since the record: directory ")


def test_another_key_no_record_or_a_foreign_record_is_not_converged(capsys, node):
    missing = call(capsys, path=str(node["record"]), key=KEY)
    assert missing["converged"] is False and missing["reason"].startswith("no converged state recorded yet")
    parts = {"inputs": {"nccl_hold": "d1", "pytorch_venv": "d2"}, "code": {"roles/nccl/tasks/main.yml": "c1"}}
    call(capsys, path=str(node["record"]), key=KEY, key_parts=parts, record=True, watch=node["watch"])
    other = call(capsys, path=str(node["record"]), key="b" * 64,
                 key_parts={"inputs": {"nccl_hold": "d3", "pytorch_venv": "d2"},
                            "code": {"roles/nccl/tasks/main.yml": "c1", "plugins/modules/repo_packages_info.py": "c2"}})
    assert other["converged"] is False
    assert other["reason"] == ("the roles' variables or code changed since the record: "
                               "code.plugins/modules/repo_packages_info.py, inputs.nccl_hold")
    node["record"].write_text("{not json")
    broken = call(capsys, path=str(node["record"]), key=KEY)
    assert broken["converged"] is False and "unreadable" in broken["reason"]
    node["record"].write_text(json.dumps({"format": 0, "key": KEY, "observed": {}}))
    foreign = call(capsys, path=str(node["record"]), key=KEY)
    assert foreign["converged"] is False and "another format" in foreign["reason"]


def test_nothing_is_recorded_in_check_mode_or_from_what_could_not_be_observed(capsys, node, monkeypatch):
    checked = call(capsys, path=str(node["record"]), key=KEY, record=True, watch=node["watch"], _ansible_check_mode=True)
    assert checked["changed"] is True and not node["record"].exists()
    # A node without systemctl cannot show its services: recording that would let the next run skip on nothing.
    real_which = state_utils.shutil.which
    monkeypatch.setattr(state_utils.shutil, "which", lambda name: None if name == "systemctl" else real_which(name))
    failed = call(capsys, path=str(node["record"]), key=KEY, record=True,
                  watch={**node["watch"], "services": ["nvidia-persistenced"]})
    assert failed["failed"] is True
    assert failed["msg"] == ("cannot record the converged state: could not observe service nvidia-persistenced "
                             "(unobserved: no systemctl)")
    assert not node["record"].exists()


def stand_in(path, script: str):
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def test_a_command_past_its_deadline_is_not_observed_and_names_the_command_and_the_limit(capsys, node, tmp_path):
    """A hung nvidia-smi must not hold the play: the command is killed at the module's timeout."""
    wedged = tmp_path / "wedged"
    smi = stand_in(tmp_path / "nvidia-smi", f'[ -e "{wedged}" ] && exec sleep 300\necho "GPU 0: H100"\n')
    watch = {**node["watch"], "commands": [[str(smi), "-L"]]}
    recorded = call(capsys, path=str(node["record"]), key=KEY, record=True, watch=watch, timeout=2)
    assert recorded["changed"] is True, recorded

    wedged.write_text("")
    compared = call(capsys, path=str(node["record"]), key=KEY, timeout=2)
    assert compared["converged"] is False
    assert compared["drift"] == [f"command {smi} -L: recorded rc 0: GPU 0: H100, now unobserved: "
                                 f"{smi} -L did not answer within 2s (stack_state timeout)"]

    refused = call(capsys, path=str(node["record"]), key=KEY, record=True, watch=watch, timeout=2)
    assert refused["failed"] is True
    assert refused["msg"] == (f"cannot record the converged state: could not observe command {smi} -L "
                              f"(unobserved: {smi} -L did not answer within 2s (stack_state timeout))")
