# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""Controller side of the smoke test: judge the run, compare with the baseline, write the reports.

Runs in the controller process (no module is shipped to a node): it reads what each node's
launcher printed from ``hostvars``, builds the report with the pure functions in
module_utils/smoke_report.py and writes smoke.json, smoke.junit.xml, smoke.md and
smoke_busbw.svg. Documentation lives in plugins/modules/smoke_report.py.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import tempfile
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer, smoke_report as sr
from ansible_collections.gpufleet.cluster.plugins.module_utils import smoke_parse as sp, smoke_render as srd, smoke_verdict as sv

__metaclass__ = type

_ARGS = {
    "cluster": {"type": "str", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "node_var": {"type": "str", "default": "__smoke_test_node"},
    "backend": {"type": "str", "required": True, "choices": ["nccl", "gloo"]},
    "hparams": {"type": "dict", "default": None},
    "config": {"type": "dict", "default": {}},
    "thresholds": {"type": "dict", "default": {}},
    "tolerance": {"type": "float", "default": 0.10},
    "expect_rdma": {"type": "bool", "default": False},
    "allow_socket_transport": {"type": "bool", "default": False},
    "allow_no_busbw_floor": {"type": "bool", "default": False},
    "rdma_gbps_per_node": {"type": "float", "default": None},
    "sim": {"type": "bool", "default": False},
    "report_dir": {"type": "path", "required": True},
    "baseline_dir": {"type": "path", "required": True},
    "store_baseline": {"type": "bool", "default": False},
    "fail_on_failure": {"type": "bool", "default": True},
    "notes": {"type": "list", "elements": "str", "default": []},
    "started_at": {"type": "raw", "default": None},
}


def _write(path, text):
    """Write atomically so a reader (CI, a browser) never sees half a report."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".smoke-", dir=directory)
    # A lone surrogate (a tool's undecodable bytes) in the Markdown is written as its escape, not a crash.
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def parse_launcher_output(node):
    """The launcher's JSON from a registered command result; {'error': ...} when there is none."""
    run = (node or {}).get("run")
    if not run:
        return None
    stdout = run.get("stdout") or ""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    stderr = (run.get("stderr") or "").strip().splitlines()
    return {"error": "launcher gave no JSON (rc %s): %s" % (run.get("rc"), " | ".join(stderr[-5:]) or run.get("msg") or "no output"),
            "log_tail": stderr[-40:]}


def read_baseline(path):
    """(parsed JSON or None, why it could not be read or None); a missing file is no baseline."""
    if not os.path.exists(path):
        return None, None
    try:
        with open(path, "r", encoding="utf-8") as fh:
            document = json.load(fh)
    except (OSError, ValueError) as exc:
        return None, "cannot read %s: %s" % (path, to_native(exc))
    except RecursionError:
        return None, "cannot read %s: it is nested too deeply to be a baseline" % path
    if document is None:
        # A file holding `null` is a broken baseline, not an absent one.
        return None, "%s holds JSON null, need an object" % path
    return document, None


def collect_nodes(hostvars, hosts, node_var):
    """({host: node record}, {host: launcher output}, {host: nccl-tests log}) from what each node published."""
    nodes, outputs, nccl_tests_logs = {}, {}, {}
    for host in hosts:
        try:
            node = hostvars[host].get(node_var)
        except KeyError:
            node = None
        if not node:
            continue
        node = dict(node)
        if not node.get("ready", True):
            # Unready nodes were left out of the launch; build_report names them from outputs.
            outputs[host] = {"error": node.get("not_ready_reason") or "node not ready"}
            continue
        nodes[host] = node
        outputs[host] = parse_launcher_output(node)
        if node.get("nccl_tests_log") or node.get("nccl_tests_rc") not in (None, ""):
            nccl_tests_logs[host] = {"text": node.get("nccl_tests_log") or "",
                                     "rc": node.get("nccl_tests_rc")}
    return nodes, outputs, nccl_tests_logs


def write_reports(report, baseline, report_dir):
    """smoke.json, smoke.junit.xml, smoke.md and smoke_busbw.svg; their paths land in report["report_files"]."""
    try:
        os.makedirs(report_dir, exist_ok=True)
        paths = {
            "json": os.path.join(report_dir, "smoke.json"),
            "junit": os.path.join(report_dir, "smoke.junit.xml"),
            "markdown": os.path.join(report_dir, "smoke.md"),
            "chart": os.path.join(report_dir, "smoke_busbw.svg"),
        }
        _write(paths["chart"], srd.render_svg(report, baseline))
        _write(paths["junit"], srd.render_junit(report))
        _write(paths["markdown"], srd.render_markdown(report, os.path.basename(paths["chart"]), baseline))
        report["report_files"] = paths
        _write(paths["json"], report_writer.render_json(report))
    except OSError as exc:
        raise AnsibleActionFail("cannot write the smoke reports to %s: %s" % (report_dir, to_native(exc)))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    @staticmethod
    def _store_baseline(report, baseline_dir, baseline_path):
        """Store a passing run as the baseline, unless the document would not pass its own checks."""
        if not report["verdict"]["passed"]:
            report["notes"].append("baseline not stored: the run failed")
            return False
        document = sv.make_baseline(report)
        problems = sv.baseline_problems(document, report)
        if problems:
            report["notes"].append("baseline not stored: %s" % "; ".join(problems))
            return False
        os.makedirs(baseline_dir, exist_ok=True)
        _write(baseline_path, json.dumps(document, indent=2) + "\n")
        report["baseline"]["stored"] = True
        return True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=_ARGS)
        nodes, outputs, nccl_tests_logs = collect_nodes((task_vars or {}).get("hostvars", {}), args["hosts"],
                                                        args["node_var"])
        report = sr.build_report(
            cluster=args["cluster"], expected=args["hosts"], nodes=nodes, outputs=outputs, backend=args["backend"],
            hparams=args["hparams"], config=args["config"], nccl_tests_logs=nccl_tests_logs,
            started_at=args["started_at"] or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), notes=args["notes"])
        baseline_dir = args["baseline_dir"]
        baseline_path = os.path.join(baseline_dir, sr.baseline_filename(args["cluster"], report["hardware_key"]))
        baseline, baseline_error = read_baseline(baseline_path)
        thresholds = sv.resolve_thresholds(report, args["thresholds"], args["rdma_gbps_per_node"])
        sv.evaluate(report, thresholds, baseline=baseline, tolerance=args["tolerance"],
                    expect_rdma=args["expect_rdma"], sim=args["sim"],
                    allow_socket_transport=args["allow_socket_transport"],
                    allow_no_busbw_floor=args["allow_no_busbw_floor"], baseline_error=baseline_error)
        report["baseline"]["file"] = baseline_path
        # Only a baseline that passed its own checks is drawn or tabulated next to this run.
        if not report["baseline"]["usable"]:
            baseline = None
        changed = False
        if args["store_baseline"]:
            changed = self._store_baseline(report, baseline_dir, baseline_path)
        write_reports(report, baseline, args["report_dir"])
        verdict = report["verdict"]
        sweep = report.get("sweep") or {}
        result.update({
            "changed": changed,
            "passed": verdict["passed"],
            "reasons": verdict["reasons"],
            "missing_nodes": [m["node"] for m in report["missing_nodes"]],
            "backend": report["backend"],
            "world_size": report["world_size"],
            "busbw_large_gbps": sweep.get("busbw_large_gbps"),
            "hardware_key": report["hardware_key"],
            "report_files": report["report_files"],
            "baseline_file": baseline_path,
            "baseline_stored": report["baseline"]["stored"],
        })
        if verdict["passed"]:
            result["msg"] = "smoke test passed: %s ranks on %d node(s), backend %s, large-message busbw %s GB/s" % (
                report["world_size"], report["nnodes"], report["backend"], sp._fmt(sweep.get("busbw_large_gbps"), 3))
        else:
            result["msg"] = "smoke test FAILED: " + " | ".join(verdict["reasons"])
            if args["fail_on_failure"]:
                result["failed"] = True
        return result
