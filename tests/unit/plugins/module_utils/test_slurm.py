# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The Slurm parser on real `scontrol show node` captures (tests/fixtures/slurm, SOURCES.md), and the
drain / resume decisions gpufleet makes from them."""

from __future__ import annotations

import pytest
from fixtures_path import FIXTURES

from ansible_collections.gpufleet.cluster.plugins.module_utils import slurm

SLURM = FIXTURES / "slurm"
GPU_NODES = "show-node-17.11-4-nodes-gpu-allocated-idle-drain.txt"

# file -> {node: (state, base_state, flags, not_responding, drain_flag, drained, reason, reason_user, reason_time)}
TABLE = {
    GPU_NODES: {
        "cortex-01": ("ALLOCATED", "ALLOCATED", [], False, False, False, None, None, None),
        "dumfries-002": ("ALLOCATED", "ALLOCATED", [], False, False, False, None, None, None),
        "oxygen-04": ("IDLE+DRAIN", "IDLE", ["DRAIN"], False, True, True, "memory issues?", "root", "2019-01-29T10:42:12"),
        "cricket": ("IDLE", "IDLE", [], False, False, False, None, None, None),
    },
    "show-node-2.x-layout-down-not-responding.txt": {
        "adev1": ("DOWN*", "DOWN", [], True, False, False, "Not responding", "slurm", "06/02-14:01:24"),
    },
    "show-node-2.x-layout-allocated.txt": {
        "adev13": ("ALLOCATED", "ALLOCATED", [], False, False, False, None, None, None),
    },
    # Old releases name the drain in the base state: DRAINING while a job still runs, DRAINED after.
    "show-node-2.x-layout-draining.txt": {
        "adev13": ("DRAINING", "DRAINING", [], False, True, False, None, None, None),
    },
    "show-node-2.x-layout-drained.txt": {
        "adev13": ("DRAINED", "DRAINED", [], False, True, True, None, None, None),
    },
    "show-nodes-15.08-idle-os-beside-memory.txt": {
        "node0001": ("IDLE", "IDLE", [], False, False, False, None, None, None),
    },
}


def read(name: str) -> str:
    return (SLURM / name).read_text(encoding="utf-8")


def one_line(text: str) -> str:
    """The same records as `scontrol --oneliner` prints them: slurm_sprint_node_table joins the fields
    with " " where the default layout has "\\n   " (SchedMD/slurm src/api/node_info.c)."""
    return "\n".join(record.strip().replace("\n   ", " ") for record in text.split("\n\n") if record.strip()) + "\n"


@pytest.mark.parametrize("name", sorted(TABLE))
@pytest.mark.parametrize("layout", ["default", "oneliner"])
def test_every_capture_gives_each_node_its_state_and_reason(name, layout):
    text = read(name) if layout == "default" else one_line(read(name))
    nodes = slurm.parse_scontrol_show_node(text)
    got = {n["name"]: (n["state"], n["base_state"], n["flags"], n["not_responding"], n["drain_flag"], n["drained"],
                       n["reason"], n["reason_user"], n["reason_time"]) for n in nodes}
    assert got == TABLE[name]


def test_fields_keep_their_values_spaces_and_equals_signs_included():
    cortex, _dumfries, oxygen, cricket = slurm.parse_scontrol_show_node(read(GPU_NODES))
    assert cortex["fields"]["OS"] == "Linux 4.14.61-aufs-1 #1 SMP Tue Aug 7 18:13:22 IDT 2018"
    assert cortex["fields"]["CfgTRES"] == "cpu=16,mem=257860M,billing=16,gres/gpu=8"
    assert cortex["fields"]["GresUsed"] == "gpu:m60:8(IDX:0-7)"
    assert oxygen["fields"]["AllocTRES"] == "" and oxygen["fields"]["Reason"] == "memory issues? [root@2019-01-29T10:42:12]"
    assert cricket["fields"]["NodeHostName"] == "cricket" and "Version" not in cricket["fields"]
    # Before 17.x the OS field was only the kernel's name, on the memory line.
    (old,) = slurm.parse_scontrol_show_node(read("show-nodes-15.08-idle-os-beside-memory.txt"))
    assert old["fields"]["OS"] == "Linux" and old["fields"]["RealMemory"] == "23780"
    assert old["fields"]["MCS_label"] == "groupA"


@pytest.mark.parametrize("layout", ["default", "oneliner"])
def test_free_text_fields_hold_spaces_and_braces(layout):
    def parse(name):
        text = read(name)
        return slurm.parse_scontrol_show_node(text if layout == "default" else one_line(text))

    (cloud,) = parse("show-nodes-grep-extra-instance-cloud-node.txt")
    assert cloud["fields"]["Extra"] == "arbitrary string"
    assert (cloud["fields"]["InstanceId"], cloud["fields"]["InstanceType"]) == ("12345", "m7g.medium")
    assert [n["fields"]["Extra"] for n in parse("show-nodes-grep-extra-json-3-nodes.txt")] == [
        '{ "load": 0.99 }', '{ "load": 0.75 }', '{ "load": 0.45 }']


def with_reason(reason_lines: str) -> str:
    """The drained GPU node of the 17.11 capture, its Reason line replaced as node_info.c prints it."""
    record = read(GPU_NODES).split("\n\n")[2]
    return record.replace("   Reason=memory issues? [root@2019-01-29T10:42:12]", reason_lines)


@pytest.mark.parametrize("layout", ["default", "oneliner"])
@pytest.mark.parametrize("reason_lines, reason", [
    # Words that look like fields are the reason's text up to its [user@time].
    ("   Reason=bad cable port=3 Comment=see ticket [admin@2024-12-03T17:06:40]", "bad cable port=3 Comment=see ticket"),
    # A reason with a line break: the next lines are indented by seven more spaces.
    ("   Reason=gpufleet: ECC_UNCORRECTABLE_VOLATILE [root@2024-12-03T17:06:40]\n          second line",
     "gpufleet: ECC_UNCORRECTABLE_VOLATILE\nsecond line"),
    # Fields after the reason end it, whatever their name.
    ("   Reason=gets too hot [mw445520@2024-12-03T17:06:40]\n   Comment=rack 12\n   Topology=default:s1",
     "gets too hot"),
])
def test_a_reason_ends_where_slurm_ends_it(layout, reason_lines, reason):
    text = with_reason(reason_lines)
    (node,) = slurm.parse_scontrol_show_node(text if layout == "default" else one_line(text))
    assert node["reason"] == reason and node["drain_flag"]
    assert node["fields"].get("Comment") in (None, "rack 12")


@pytest.mark.parametrize("state, drain_flag, drained, not_responding", [
    ("IDLE+DRAIN", True, True, False),
    ("MIXED+DRAIN", True, False, False),             # jobs still run: draining
    ("ALLOCATED+DRAIN", True, False, False),
    ("IDLE+COMPLETING+DRAIN", True, False, False),   # a job is still completing
    ("DOWN+DRAIN+NOT_RESPONDING", True, True, True),  # 21.08 and later
    ("IDLE*+DRAIN", True, True, True),               # before 21.08
    ("IDLE+DRAIN+DYNAMIC_NORM+POWERED_DOWN", True, True, False),
    ("IDLE~", False, False, False),
    ("MIXED", False, False, False),
])
def test_state_flags_as_node_state_string_complete_joins_them(state, drain_flag, drained, not_responding):
    parsed = slurm.parse_state(state)
    assert (parsed["drain_flag"], parsed["drained"], parsed["not_responding"]) == (drain_flag, drained, not_responding)


def test_text_that_is_not_scontrols_gives_no_node():
    assert slurm.parse_scontrol_show_node("") == []
    assert slurm.parse_scontrol_show_node("Node gpu-a01 not found\n") == []
    assert slurm.find_node(slurm.parse_scontrol_show_node(read(GPU_NODES)), "gpu-a01") is None


def test_drain_reason_is_the_sorted_codes():
    assert slurm.drain_reason(["PCIE_LINK_DEGRADED", "ECC_UNCORRECTABLE_VOLATILE", "PCIE_LINK_DEGRADED"]) == \
        "gpufleet: ECC_UNCORRECTABLE_VOLATILE,PCIE_LINK_DEGRADED"


class Scontrol:
    """scontrol answering `show node` with a capture, recording every call."""

    def __init__(self, text, rc=0, err=""):
        self.text, self.rc, self.err, self.calls = text, rc, err, []

    def __call__(self, argv):
        self.calls.append(argv[1:])
        return (self.rc, self.text, self.err) if argv[1] == "show" else (0, "", "")


OURS = "gpufleet: ECC_UNCORRECTABLE_VOLATILE"


def test_a_node_an_operator_drained_keeps_the_drain_and_gpufleet_forgets_its_record(tmp_path):
    record = tmp_path / "state" / "slurm-drained-by-gpufleet"
    record.parent.mkdir()
    record.write_text(OURS + "\n")
    run = Scontrol(read(GPU_NODES))
    resumed = slurm.converge(run, "scontrol", "oxygen-04", "resumed", record_path=str(record))
    assert resumed["action"] is None and resumed["changed"] and not record.exists()
    assert 'gpufleet drained it with "%s", but Slurm now says reason "memory issues?"' % OURS in resumed["message"]
    drained = slurm.converge(run, "scontrol", "oxygen-04", "drained", reason=OURS, record_path=str(record))
    assert drained["action"] is None and not drained["changed"] and not record.exists()
    assert [c[0] for c in run.calls] == ["show", "show"], "no update of a node someone else drained"


def test_only_the_drain_gpufleet_made_is_resumed(tmp_path):
    run = Scontrol(read(GPU_NODES))
    resumed = slurm.converge(run, "scontrol", "oxygen-04", "resumed", reason="memory issues?")
    assert resumed["action"] == "resume" and resumed["changed"]
    assert run.calls[-1] == ["update", "NodeName=oxygen-04", "State=RESUME"]
    record = tmp_path / "record"
    assert slurm.converge(run, "scontrol", "oxygen-04", "resumed", record_path=str(record))["message"] == \
        "gpufleet recorded no drain of oxygen-04"
    assert run.calls[-1][0] == "show"


def test_a_node_drained_again_after_an_operator_resumed_it_keeps_its_new_record(tmp_path):
    """The operator resumed a node gpufleet had drained; it fails again: the new drain is gpufleet's, so
    its record must stay (the old role wrote it, then deleted it in the same run)."""
    record = tmp_path / "slurm-drained-by-gpufleet"
    record.write_text("gpufleet: XID_79\n")
    run = Scontrol(read(GPU_NODES))
    drained = slurm.converge(run, "scontrol", "cricket", "drained", reason=OURS, record_path=str(record))
    assert drained["action"] == "drain" and drained["record"] == "write"
    assert run.calls[-1] == ["update", "NodeName=cricket", "State=DRAIN", "Reason=" + OURS]
    assert record.read_text() == OURS + "\n"


def test_check_mode_changes_nothing(tmp_path):
    record = tmp_path / "record"
    run = Scontrol(read(GPU_NODES))
    drained = slurm.converge(run, "scontrol", "cricket", "drained", reason=OURS, record_path=str(record), check_mode=True)
    assert drained["changed"] and drained["action"] == "drain"
    assert [c[0] for c in run.calls] == ["show"] and not record.exists()


@pytest.mark.parametrize("rc, err, words", [
    (1, "Node gpu-a01 not found", "scontrol show node gpu-a01 failed (rc 1): Node gpu-a01 not found"),
    (None, "scontrol not found", "failed (rc None): scontrol not found"),
    (124, "", "failed (rc 124): no output"),
])
def test_a_failing_scontrol_is_an_error_naming_the_command(rc, err, words):
    run = Scontrol("", rc=rc, err=err)
    with pytest.raises(slurm.SlurmError, match=words.replace("(", r"\(").replace(")", r"\)")):
        slurm.converge(run, "scontrol", "gpu-a01", "drained", reason=OURS)
    assert [c[0] for c in run.calls] == ["show"]


@pytest.mark.parametrize("name", ["gpu[01-02]", "gpu01,gpu02", "gpu01 gpu02"])
def test_converge_refuses_a_host_list_expression_before_running_anything(name):
    """issue 35 N11: every caller of converge (the module, the health-check program) gets the refusal."""
    ran = []
    with pytest.raises(slurm.SlurmError, match=r"give one node name"):
        slurm.converge(lambda argv: ran.append(argv) or (0, "", ""), "scontrol", name, "drained", reason="gpufleet: X")
    assert ran == []
