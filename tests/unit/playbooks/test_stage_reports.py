"""Every stage's play writes a JUnit file through the one report writer, into the one default directory.

Static: the playbooks name the stage roles, the roles' tasks write <stage>.junit.xml with the
findings_junit filter (the smoke test through its action plugin), JUnit XML is rendered in
plugins/module_utils/report_writer.py only, and every <role>_report_dir default is the report_dir filter.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]

# stage -> (playbook, role, JUnit file)
STAGES = {
    "preflight": ("preflight.yml", "preflight", "preflight.junit.xml"),
    "health": ("validate.yml", "gpu_health", "health.junit.xml"),
    "diagnostics": ("validate.yml", "gpu_diagnostics", "diagnostics.junit.xml"),
    "bandwidth": ("validate.yml", "bandwidth_isolation", "bandwidth.junit.xml"),
    "smoke": ("smoke_test.yml", "smoke_test", "smoke.junit.xml"),
}
REPORT_DIR_DEFAULT = "{{ gpufleet_report_dir | default(none) | gpufleet.cluster.report_dir }}"


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _roles_of(playbook):
    names = set()
    for item in _walk(yaml.safe_load((REPO / "playbooks" / playbook).read_text())):
        if str(item.get("ansible.builtin.import_tasks", "")).startswith("tasks/"):  # the playbooks' own task files
            names |= _roles_of(item["ansible.builtin.import_tasks"])
        name = item.get("role") or (item.get("ansible.builtin.import_role") or item.get("ansible.builtin.include_role")
                                    or {}).get("name")
        if isinstance(name, str):
            names.add(name.rsplit(".", 1)[-1])
    return names


def _tasks(role):
    for path in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
        yield from _walk(yaml.safe_load(path.read_text()) or [])


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_each_stage_writes_a_junit_file(stage):
    playbook, role, junit = STAGES[stage]
    assert role in _roles_of(playbook), "%s does not run the %s role" % (playbook, role)
    if stage == "smoke":
        assert any("gpufleet.cluster.smoke_report" in task for task in _tasks(role))
        action = (REPO / "plugins" / "action" / "smoke_report.py").read_text()
        assert '"%s"' % junit in action and "srd.render_junit(report)" in action
        return
    writers = [task["ansible.builtin.copy"] for task in _tasks(role)
               if str((task.get("ansible.builtin.copy") or {}).get("dest", "")).endswith("/" + junit)]
    assert writers, "no task of the %s role writes %s" % (role, junit)
    assert all("gpufleet.cluster.findings_junit(" in writer["content"] for writer in writers)


def test_junit_is_rendered_in_one_place():
    writers = sorted(str(path.relative_to(REPO)) for path in (REPO / "plugins").rglob("*.py")
                     if "<testsuites" in path.read_text())
    assert writers == ["plugins/module_utils/report_writer.py"]


def test_every_report_dir_has_the_one_default():
    defaults = {}
    for path in sorted(REPO.glob("roles/*/defaults/main.yml")):
        for key, value in (yaml.safe_load(path.read_text()) or {}).items():
            if key.endswith("_report_dir"):
                defaults[key] = str(value).strip()
    assert {"preflight_report_dir", "gpu_health_report_dir", "gpu_diagnostics_report_dir",
            "bandwidth_isolation_report_dir", "smoke_test_report_dir"} <= set(defaults)
    assert {k: v for k, v in defaults.items() if v != REPORT_DIR_DEFAULT} == {}
    spelled_out = [str(path.relative_to(REPO)) for path in list(REPO.glob("roles/*/*/*.yml")) + list(REPO.glob("playbooks/*.yml"))
                   if re.search(r"lookup\('ansible.builtin.env', 'GPUFLEET_REPORT_DIR'\)", path.read_text())]
    assert spelled_out == []
