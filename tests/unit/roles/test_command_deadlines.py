"""Every command a role or playbook runs on a node has a deadline.

A node whose driver, package manager or scheduler hangs must fail on its own, naming the task and
the limit, while the other nodes finish: so every command, shell, script and raw task carries the
task keyword `timeout:`, runs its program under coreutils `timeout` (argv starting with it: a task
that retries, where the keyword would end the retries at the first hang), or runs in the background
with `async:` (its own bound). A new task without one fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
COMMAND_MODULES = {prefix + name for name in ("command", "shell", "script", "raw")
                   for prefix in ("", "ansible.builtin.", "ansible.legacy.")}
PLAY_SECTIONS = ("pre_tasks", "tasks", "post_tasks", "handlers")
# argv: [timeout, ...] or a Jinja list expression that starts with 'timeout'.
TIMEOUT_ARGV = re.compile(r"""^\s*\{\{\s*\[\s*['"]timeout['"]""")


def task_files() -> list[Path]:
    files = sorted((REPO / "roles").glob("*/tasks/**/*.yml")) + sorted((REPO / "roles").glob("*/handlers/*.yml"))
    return files + sorted((REPO / "playbooks").glob("*.yml")) + sorted((REPO / "playbooks" / "tasks").glob("*.yml"))


def walk(tasks):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        yield task
        for section in ("block", "rescue", "always"):
            yield from walk(task.get(section))


def tasks_of(path: Path):
    data = yaml.safe_load(path.read_text()) or []
    plays = [item for item in data if isinstance(item, dict) and ("hosts" in item or "import_playbook" in item)]
    if not plays:
        yield from walk(data)
        return
    for play in plays:
        for section in PLAY_SECTIONS:
            yield from walk(play.get(section))


def bounded(task: dict, module: str) -> bool:
    if "timeout" in task or "async" in task:
        return True
    args = task[module]
    argv = args.get("argv") if isinstance(args, dict) else None
    if isinstance(argv, list):
        return bool(argv) and argv[0] == "timeout"
    if isinstance(argv, str):
        return bool(TIMEOUT_ARGV.match(argv))
    command = args.get("cmd", "") if isinstance(args, dict) else args
    return isinstance(command, str) and command.split()[:1] == ["timeout"]


def unbounded_commands() -> list[str]:
    found = []
    for path in task_files():
        for task in tasks_of(path):
            module = next((key for key in task if key in COMMAND_MODULES), None)
            if module and not bounded(task, module):
                found.append(f"{path.relative_to(REPO)}: {task.get('name', '(unnamed)')}")
    return found


def test_the_scan_sees_the_command_tasks():
    """The check proves something only if it finds the tasks it checks."""
    count = sum(1 for path in task_files() for task in tasks_of(path) if any(key in COMMAND_MODULES for key in task))
    assert count > 50


def test_every_node_command_has_a_deadline():
    assert unbounded_commands() == []


@pytest.mark.parametrize("task, expected", [
    ({"name": "x", "ansible.builtin.command": {"argv": ["nvidia-smi", "-L"]}}, False),
    ({"name": "x", "ansible.builtin.command": {"argv": ["nvidia-smi", "-L"]}, "timeout": 60}, True),
    ({"name": "x", "ansible.builtin.command": {"argv": ["timeout", "60", "nvidia-smi"]}}, True),
    ({"name": "x", "ansible.builtin.command": {"argv": "{{ ['timeout', '60'] + argv }}"}}, True),
    ({"name": "x", "ansible.builtin.command": {"argv": "{{ [x, 'timeout'] }}"}}, False),
    ({"name": "x", "ansible.builtin.shell": "sleep 1"}, False),
    ({"name": "x", "ansible.builtin.shell": {"cmd": "timeout 5 sleep 1"}}, True),
    ({"name": "x", "ansible.builtin.command": {"argv": ["serve"]}, "async": 300, "poll": 0}, True),
])
def test_what_counts_as_a_deadline(task, expected):
    module = next(key for key in task if key in COMMAND_MODULES)
    assert bounded(task, module) is expected
