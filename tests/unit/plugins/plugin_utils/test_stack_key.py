"""The record's key is derived from the roles, not from lists (issue 26): on a copy of the collection, a
variable added to one role's argument spec, or a change to only a module the roles call, changes the key,
with no edit outside that role or that module; what the roles do not run does not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import stack_state
from ansible_collections.gpufleet.cluster.plugins.plugin_utils import stack_key

REPO = Path(__file__).resolve().parents[4]
ROLES = ["nvidia_driver", "cuda_toolkit", "nccl", "pytorch"]
SECRET = "glpat-Zx81kQ2TOKEN"


@pytest.fixture
def tree(tmp_path):
    """A copy of the collection's plugins and stack roles."""
    shutil.copytree(REPO / "plugins", tmp_path / "plugins", ignore=shutil.ignore_patterns("__pycache__"))
    for role in ROLES:
        shutil.copytree(REPO / "roles" / role, tmp_path / "roles" / role)
    return tmp_path


def defaults_only(name, defaults, _internals=None):
    return defaults.get(name, "(unset)")


def parts_of(root, resolve=defaults_only) -> dict:
    return stack_key.key_parts(ROLES, resolve, root=str(root), extra_names=("stack_record",))


def key(root, resolve=defaults_only):
    parts = parts_of(root, resolve)
    return stack_key.key_of(parts), parts


def changed(before: dict, after: dict) -> list[str]:
    return sorted("%s.%s" % (part, name) for part in ("inputs", "code")
                  for name in set(before[part]) | set(after[part]) if before[part].get(name) != after[part].get(name))


def test_the_code_is_every_plugin_the_roles_run_and_nothing_else():
    files = stack_key.code_files(ROLES, root=str(REPO), extra_names=("stack_record",))
    for called in ("plugins/modules/repo_packages_info.py", "plugins/modules/signing_key_info.py",
                   "plugins/modules/nvidia_driver_info.py", "plugins/modules/wheel_index_info.py",
                   "plugins/modules/package_holds_info.py", "plugins/filter/no_proxy.py", "plugins/filter/versions.py",
                   "plugins/filter/driver_decision.py",
                   # imported by those, found through the imports
                   "plugins/module_utils/pkg_repo.py", "plugins/module_utils/wheel_index.py",
                   "plugins/module_utils/driver_decision.py", "plugins/module_utils/run_tool.py",
                   # the record's own code
                   "plugins/action/stack_record.py", "plugins/modules/stack_state.py",
                   "plugins/module_utils/stack_state.py", "plugins/plugin_utils/stack_key.py",
                   "roles/pytorch/files/torch_probe.py", "roles/nccl/tasks/main.yml"):
        assert called in files, called
    for unrelated in ("plugins/modules/bandwidth_test.py", "plugins/filter/homogeneity.py",
                      "plugins/module_utils/stack_solver.py", "roles/reboot/tasks/main.yml"):
        assert unrelated not in files, unrelated


@pytest.mark.parametrize("path", ["plugins/modules/repo_packages_info.py", "plugins/module_utils/pkg_repo.py",
                                  "plugins/filter/no_proxy.py", "plugins/modules/stack_state.py"])
def test_changing_only_a_module_the_roles_call_changes_the_key(tree, path):
    before_key, before = key(tree)
    with open(tree / path, "a", encoding="utf-8") as handle:
        handle.write("\n# an upgrade that touches only this file\n")
    after_key, after = key(tree)
    assert after_key != before_key
    assert changed(before, after) == ["code." + path]


def test_changing_a_plugin_the_roles_do_not_run_leaves_the_key(tree):
    before_key = key(tree)[0]
    with open(tree / "plugins/modules/bandwidth_test.py", "a", encoding="utf-8") as handle:
        handle.write("\n# not the stack's\n")
    assert key(tree)[0] == before_key


def test_a_variable_added_to_a_role_s_argument_spec_changes_the_key(tree):
    """The edit stays inside roles/nccl: the spec and the default, nothing in playbooks/ or a list."""
    before_key, before = key(tree)
    spec_path = tree / "roles/nccl/meta/argument_specs.yml"
    spec = yaml.safe_load(spec_path.read_text())
    knob = {"type": "str", "default": "a", "description": "A knob added in a later release."}
    spec["argument_specs"]["main"]["options"]["nccl_new_knob"] = knob
    spec_path.write_text(yaml.safe_dump(spec))
    with open(tree / "roles/nccl/defaults/main.yml", "a", encoding="utf-8") as handle:
        handle.write('nccl_new_knob: "a"\n')
    added_key, added = key(tree)
    assert added_key != before_key and "nccl_new_knob" in added["inputs"] and "nccl_new_knob" not in before["inputs"]
    # An operator's value for it (inventory, extra vars) is a new key again.
    set_key = key(tree, lambda name, *role: "b" if name == "nccl_new_knob" else defaults_only(name, *role))[0]
    assert set_key != added_key


def test_a_lock_file_a_role_reads_on_the_controller_is_keyed_by_content(tree, tmp_path):
    assert stack_key.controller_file_options("pytorch", stack_key.role_options("pytorch", str(tree)), str(tree)) == [
        "pytorch_requirements_lock"]
    lock = tmp_path / "requirements.lock"
    lock.write_text("torch==2.1.2+cu121 \\\n    --hash=sha256:aa\n")

    def with_lock(name, *role):
        return str(lock) if name == "pytorch_requirements_lock" else defaults_only(name, *role)
    before = parts_of(tree, with_lock)
    lock.write_text("torch==2.1.2+cu121 \\\n    --hash=sha256:bb\n")
    after = parts_of(tree, with_lock)
    assert changed(before, after) == ["inputs.pytorch_requirements_lock (content)"]


def test_values_go_in_by_digest_only(tree):
    def with_token(name, *role):
        return "https://%s@example.com/simple" % SECRET if name == "pytorch_index_url" else defaults_only(name, *role)
    parts = parts_of(tree, with_token)
    assert SECRET not in json.dumps(parts)


def test_a_name_the_collection_does_not_have_stops_the_key_with_the_file_and_the_name(tree):
    with open(tree / "roles/nccl/tasks/main.yml", "a", encoding="utf-8") as handle:
        handle.write("\n- name: Call a module that is not there\n  gpufleet.cluster.no_such_module: {}\n")
    with pytest.raises(stack_key.StackKeyError, match=r"roles/nccl/tasks/main.yml names gpufleet.cluster.no_such_module"):
        key(tree)


def test_a_role_without_argument_specs_is_refused(tree):
    (tree / "roles/nccl/meta/argument_specs.yml").unlink()
    with pytest.raises(stack_key.StackKeyError, match="role nccl declares no argument_specs"):
        key(tree)


def test_a_node_recorded_before_a_module_only_upgrade_is_not_converged_after_it(tree, tmp_path, capsys):
    """The chain the stack play runs: record under the key, upgrade one module the roles call, probe again."""
    def node(**args):
        with patch_module_args({"path": str(tmp_path / "stack-state.json"), **args}):
            with pytest.raises(SystemExit):
                stack_state.main()
        return json.loads(capsys.readouterr().out)
    recorded_key, recorded = key(tree)
    node(key=recorded_key, key_parts=recorded, record=True, watch={"commands": [["true"]]})
    assert node(key=recorded_key, key_parts=recorded)["converged"] is True
    with open(tree / "plugins/modules/signing_key_info.py", "a", encoding="utf-8") as handle:
        handle.write("\n# the upgrade\n")
    upgraded_key, upgraded = key(tree)
    probe = node(key=upgraded_key, key_parts=upgraded)
    assert probe["converged"] is False
    assert probe["reason"].endswith("changed since the record: code.plugins/modules/signing_key_info.py"), probe


def play_key(root):
    parts = stack_key.key_parts(ROLES, defaults_only, root=str(root), extra_names=("stack_record",),
                                play=str(root / "playbooks" / "gpu_stack.yml"))
    return stack_key.key_of(parts), parts


def test_the_play_s_files_are_the_playbook_and_every_task_file_it_includes():
    files = stack_key.play_files(str(REPO / "playbooks" / "gpu_stack.yml"), root=str(REPO))
    assert files["playbooks/gpu_stack.yml"] == str(REPO / "playbooks" / "gpu_stack.yml")
    assert {"playbooks/tasks/gpu_stack_roles.yml", "playbooks/tasks/gpu_stack_plan.yml",
            "playbooks/tasks/gpu_stack_node_record.yml", "playbooks/tasks/gpu_stack_loaded_driver.yml"} <= set(files)
    # another playbook's tasks, and an imported playbook, are not this play's
    assert "playbooks/tasks/validate_health.yml" not in files and "playbooks/reboot.yml" not in files


def test_changing_only_the_stack_roles_task_file_changes_the_key(tree):
    """issue 35 N4: which roles run, their entry points and the wheel check live in gpu_stack_roles.yml."""
    shutil.copytree(REPO / "playbooks", tree / "playbooks")
    before_key, before = play_key(tree)
    roles_file = tree / "playbooks/tasks/gpu_stack_roles.yml"
    tasks = yaml.safe_load(roles_file.read_text())
    roles_file.write_text(yaml.safe_dump([task for task in tasks if "check_wheels" not in json.dumps(task)]))
    after_key, after = play_key(tree)
    assert after_key != before_key
    assert changed(before, after) == ["code.playbooks/tasks/gpu_stack_roles.yml"]


def test_a_role_the_stack_task_file_starts_to_run_is_followed(tree):
    shutil.copytree(REPO / "playbooks", tree / "playbooks")
    shutil.copytree(REPO / "roles" / "reboot", tree / "roles" / "reboot")
    assert "roles/reboot/tasks/main.yml" not in play_key(tree)[1]["code"]
    with open(tree / "playbooks/tasks/gpu_stack_roles.yml", "a", encoding="utf-8") as handle:
        handle.write("\n- name: Run one more role\n  ansible.builtin.include_role:\n    name: gpufleet.cluster.reboot\n")
    before = play_key(tree)[1]
    assert "roles/reboot/tasks/main.yml" in before["code"]
    with open(tree / "roles/reboot/tasks/main.yml", "a", encoding="utf-8") as handle:
        handle.write("\n# a change to that role only\n")
    assert changed(before, play_key(tree)[1]) == ["code.roles/reboot/tasks/main.yml"]


def test_a_templated_task_file_name_stops_the_key_with_the_file_and_the_value(tree):
    shutil.copytree(REPO / "playbooks", tree / "playbooks")
    with open(tree / "playbooks/tasks/gpu_stack_roles.yml", "a", encoding="utf-8") as handle:
        handle.write("\n- name: Include a computed file\n  ansible.builtin.include_tasks: \"{{ which }}.yml\"\n")
    with pytest.raises(stack_key.StackKeyError, match=r"playbooks/tasks/gpu_stack_roles.yml includes '\{\{ which \}\}.yml'"):
        play_key(tree)
