# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Slurm node state from ``scontrol show node``, and the drain and resume gpufleet makes.

PRIVATE to the gpufleet.cluster collection. The one place gpufleet reads and changes a node's state
in Slurm: the ``slurm_node`` module (used by the slurm_drain and reboot roles) and the node health
check program (roles/node_healthcheck/files/gpufleet-healthcheck) both call it.

The parser is pure (text in, dicts out) and reads both layouts ``slurm_sprint_node_table``
(SchedMD/slurm src/api/node_info.c) prints: the default one, a field per line or a few per line
indented by three spaces, and ``--oneliner``, the same fields joined by single spaces. Values are
single words except the free-text fields (``OS``, ``Reason``, ``Comment``, ``Extra``), which run to
the next field Slurm prints (before 17.x ``OS=Linux`` shared its line with ``RealMemory``).
``Reason`` carries ``[user@time]`` after its first line, and its further lines (a reason holding line
breaks) are indented by seven more spaces.

``State`` is the base state and its flags joined by ``+`` (``IDLE+DRAIN``, ``DOWN+DRAIN+NOT_RESPONDING``;
before 21.08 a not-responding node was ``IDLE*+DRAIN``, and old releases printed ``DRAINING`` /
``DRAINED``). A node is *drained* in Slurm's sense when it carries the DRAIN flag and no job runs or
completes on it any more (IDLE or DOWN): what a reboot waits for.

``converge`` is the only code that runs ``scontrol update``: it drains a node with a reason, or
resumes a node only while Slurm still shows the drain gpufleet made (the reason it set, recorded in a
file on the node where the caller keeps one), so an operator's drain is never lifted.
"""

from __future__ import annotations

import os
import re

# Every field slurm_sprint_node_table has printed since Slurm 2.x, and the old layout's own.
KNOWN_FIELDS = frozenset("""
    ActiveFeatures AllocCPUs AllocMem AllocTRES Arch AvailableFeatures AveWatts BcastAddr Boards BootTime
    CPUAlloc CPUEfctv CPUErr CPULoad CPUSpecList CPUTot CPUs CapWatts CfgTRES Comment ConsumedJoules Cores
    CoreSpecCount CoresPerSocket CpuBind CurrentWatts ExtSensorsJoules ExtSensorsTemp ExtSensorsWatts Extra
    Features FreeMem Gres GresDrain GresUsed InstanceId InstanceType LastBusyTime LowestJoules MCS_label
    MemSpecLimit NextState NodeAddr NodeHostName NodeName OS Owner Parameters Partition Partitions Port
    RackMidplane RealMemory Reason ReservationName RestrictedCoresPerGPU ResumeAfterTime SlurmdStartTime
    Sockets State SuspendTime TLSCertLastRenewal TLSCertTokenSet Threads ThreadsPerCore TmpDisk Topology
    Version Weight
""".split())
# Fields whose value is free text and may hold spaces (and words that look like fields).
FREE_TEXT_FIELDS = frozenset(("OS", "Reason", "Comment", "Extra"))
# Symbols a base state may end with: * not responding, ~ powered down, # powering up, % powering
# down, $ maintenance, @ reboot pending, ^ reboot issued, ! planned, - (old) completing.
STATE_SYMBOLS = "*~#%$@^!-"
# States whose node runs no job: with the DRAIN flag, the drain is complete.
IDLE_STATES = frozenset(("IDLE", "DOWN", "DRAINED"))

_FIELD = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_]*)=")
_REASON_STAMP = re.compile(r" \[([^\]@\s]*)@([^\]\s]*)\]")
_DEFAULT_INDENT = "   "
_REASON_CONTINUATION = _DEFAULT_INDENT + " " * 7


class SlurmError(Exception):
    """scontrol failed or did not answer: the message names the command, its rc and output."""


def _split_line(line):
    """``[(field, value)]`` of one line. A free-text value runs to the next field Slurm prints (words
    such as ``port=3`` in a reason are its text); a reason ends at the first field after its
    ``[user@time]``, whatever that field's name."""
    found = list(_FIELD.finditer(line))
    fields = []
    i = 0
    while i < len(found):
        name, start = found[i].group(1), found[i].end()
        j = i + 1
        if name in FREE_TEXT_FIELDS:
            stamp = _REASON_STAMP.search(line, start) if name == "Reason" else None
            while j < len(found) and (found[j].start() < stamp.end() if stamp
                                      else found[j].group(1) not in KNOWN_FIELDS):
                j += 1
        end = found[j].start() if j < len(found) else len(line)
        fields.append((name, line[start:end].strip()))
        i = j
    return fields


def parse_state(state):
    """``IDLE*+DRAIN`` -> base state, flags, and what they mean for a drain."""
    parts = (state or "").split("+")
    base = parts[0].rstrip(STATE_SYMBOLS)
    symbols = parts[0][len(base):]
    flags = [f for f in parts[1:] if f]
    drain_flag = "DRAIN" in flags or base in ("DRAIN", "DRAINED", "DRAINING")
    return {
        "state": state,
        "base_state": base,
        "flags": flags,
        "not_responding": "*" in symbols or "NOT_RESPONDING" in flags,
        "drain_flag": drain_flag,
        "drained": drain_flag and base in IDLE_STATES and "COMPLETING" not in flags,
    }


def _node(fields):
    values = dict(fields)
    node = {"name": values.get("NodeName")}
    node.update(parse_state(values.get("State")))
    reason = values.get("Reason")
    stamp = _REASON_STAMP.search(reason or "")
    if stamp:
        rest = reason[stamp.end():].strip()
        reason = reason[:stamp.start()] + ("\n" + rest if rest else "")
    node.update({
        "reason": reason.strip() if reason else None,
        "reason_user": stamp.group(1) if stamp else None,
        "reason_time": stamp.group(2) if stamp else None,
        "fields": values,
    })
    return node


def _records(text):
    """The lines of each node record: each record starts with ``NodeName=``."""
    records = []
    for line in (text or "").replace("\r\n", "\n").split("\n"):
        if line.startswith("NodeName="):
            records.append([line])
        elif line.strip() and records:
            records[-1].append(line)
    return records


def parse_scontrol_show_node(text):
    """Every node record of ``scontrol show node`` (either layout): name, state, base_state, flags,
    not_responding, drain_flag, drained, reason (without its ``[user@time]``), reason_user,
    reason_time and every field as printed (``fields``). Text that is not scontrol's gives ``[]``."""
    nodes = []
    for lines in _records(text):
        fields = []
        for line in lines:
            if fields and fields[-1][0] == "Reason" and line.startswith(_REASON_CONTINUATION):
                fields[-1] = ("Reason", fields[-1][1] + "\n" + line.strip())
            else:
                fields += _split_line(line.strip())
        nodes.append(_node(fields))
    return nodes


def find_node(nodes, name):
    """The record of node ``name``, or None."""
    return next((node for node in nodes if node.get("name") == name), None)


def drain_reason(codes):
    """The reason gpufleet drains a failing node with: its fail-level finding codes, sorted."""
    return "gpufleet: %s" % ",".join(sorted(set(codes)))


def _said(node):
    if node is None or not node["drain_flag"]:
        return "it is no longer drained"
    return 'reason "%s"' % node["reason"]


def plan_drain(name, node, reason, recorded):
    """What to do for a node that must be drained with ``reason``.

    ``recorded`` is the reason of the drain gpufleet recorded for this node ("" none), or None when the
    caller keeps no record. A node already drained keeps its reason (an operator's, or gpufleet's own
    from an earlier run); a record of a drain that is no longer gpufleet's is forgotten.
    """
    if node is None or not node["drain_flag"]:
        return {"action": "drain", "record": "write" if recorded is not None else None,
                "message": 'drained %s with reason "%s"' % (name, reason)}
    if recorded and recorded != node["reason"]:
        return {"action": None, "record": "forget",
                "message": 'not draining %s again: it is drained with %s, not with the "%s" gpufleet recorded; '
                           "that drain belongs to whoever set it" % (name, _said(node), recorded)}
    return {"action": None, "record": None,
            "message": "%s is already drained (%s); left as it is" % (name, _said(node))}


def plan_resume(name, node, expected, recorded):
    """What to do for a node that may go back into service: resume it only while Slurm shows the
    drain gpufleet made (reason ``expected``, from the record when the caller keeps one)."""
    forget = "forget" if recorded else None
    if not expected:
        return {"action": None, "record": None, "message": "gpufleet recorded no drain of %s" % name}
    if node is not None and node["drain_flag"] and node["reason"] == expected:
        return {"action": "resume", "record": forget, "message": 'resumed %s, drained with "%s"' % (name, expected)}
    return {"action": None, "record": forget,
            "message": 'not resuming %s: gpufleet drained it with "%s", but Slurm now says %s; '
                       "that drain belongs to whoever set it" % (name, expected, _said(node))}


def _squeezed(text, limit=300):
    return " ".join((text or "").split())[:limit]


# What makes a Slurm host-list expression of a name: scontrol reads NodeName=gpu[01-02] or gpu01,gpu02 as every
# node in it, so a drain meant for one node would take the whole range out.
_HOST_LIST = re.compile(r"[\[\],\s]")


def check_node_name(name):
    """Raise SlurmError unless ``name`` is one node name (no brackets, commas, whitespace; not empty)."""
    if not name or _HOST_LIST.search(name):
        raise SlurmError("node name %r is a Slurm host-list expression or empty (brackets, commas and whitespace make "
                         "scontrol act on every node it expands to): give one node name, and expand a range explicitly "
                         "in the inventory, one host per node" % (name,))


def show_node(run, scontrol, name):
    """The record of ``scontrol show node NAME``; None when scontrol answered without the node.
    ``run(argv) -> (rc, stdout, stderr)``; rc None means it could not run."""
    check_node_name(name)
    rc, out, err = run([scontrol, "show", "node", name])
    if rc != 0:
        raise SlurmError("%s show node %s failed (rc %s): %s"
                         % (scontrol, name, rc, _squeezed(err or out) or "no output"))
    return find_node(parse_scontrol_show_node(out), name)


def read_record(path):
    """The reason recorded in ``path`` ("" when there is none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return ""


def _keep_record(path, what, reason):
    if what == "write":
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(reason + "\n")
    elif what == "forget" and os.path.exists(path):
        os.remove(path)


def converge(run, scontrol, name, state, reason=None, record_path=None, check_mode=False):
    """Drain (``state="drained"``, with ``reason``) or resume (``state="resumed"``) node ``name``.

    A resume expects ``reason`` or, with ``record_path``, the reason recorded there. Returns the plan
    (``action``, ``record``, ``message``) with ``node`` (what Slurm showed) and ``changed``. Raises
    SlurmError when scontrol fails; in check mode nothing is run or written.
    """
    check_node_name(name)
    recorded = read_record(record_path) if record_path else None
    node = show_node(run, scontrol, name)
    if state == "drained":
        plan = plan_drain(name, node, reason, recorded)
    else:
        plan = plan_resume(name, node, recorded if record_path else reason, recorded)
    if plan["action"] and not check_mode:
        change = ["State=DRAIN", "Reason=%s" % reason] if plan["action"] == "drain" else ["State=RESUME"]
        rc, out, err = run([scontrol, "update", "NodeName=%s" % name] + change)
        if rc != 0:
            raise SlurmError("%s update NodeName=%s %s failed (rc %s): %s"
                             % (scontrol, name, change[0], rc, _squeezed(err or out) or "no output"))
    if record_path and plan["record"] and not check_mode:
        _keep_record(record_path, plan["record"], reason)
    return dict(plan, node=node, changed=bool(plan["action"] or plan["record"]))
