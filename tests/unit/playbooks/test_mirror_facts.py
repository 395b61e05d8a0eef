"""playbooks/mirror_facts.yml reads what gpu_stack installs: the same plan tasks, the same pytorch wiring."""

from pathlib import Path

import yaml

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"


def _load(name: str):
    return yaml.safe_load((PLAYBOOKS / name).read_text())


def test_both_playbooks_plan_through_the_same_tasks_file():
    facts = _load("mirror_facts.yml")[0]["tasks"]
    stack = _load("gpu_stack.yml")[0]["pre_tasks"]
    for tasks in (facts, stack):
        assert [t.get("ansible.builtin.import_tasks") for t in tasks if "ansible.builtin.import_tasks" in t] == [
            "tasks/gpu_stack_plan.yml"]


def test_the_pytorch_role_is_read_with_gpu_stacks_wiring():
    stack_vars = _load("gpu_stack.yml")[0]["vars"]
    wired = {name: value for name, value in stack_vars.items() if name.startswith("pytorch_")}
    record = next(t for t in _load("mirror_facts.yml")[0]["tasks"] if t["name"] == "Note what this node needs")
    assert record["vars"] == wired
