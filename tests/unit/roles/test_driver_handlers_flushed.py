"""The driver role's handlers (the initramfs rebuild after blacklisting nouveau) run before the next
role of the stack play: a later role that fails must not lose them, since Ansible runs pending
handlers only at the end of a play, and not at all for a host that failed (force_handlers is off).
"""

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def test_driver_role_flushes_its_handlers_last():
    tasks = yaml.safe_load((REPO / "roles/nvidia_driver/tasks/main.yml").read_text())
    assert tasks[-1].get("ansible.builtin.meta") == "flush_handlers", tasks[-1]
    # The handler it flushes is the one the nouveau blacklist notifies.
    handlers = yaml.safe_load((REPO / "roles/nvidia_driver/handlers/main.yml").read_text())
    configure = yaml.safe_load((REPO / "roles/nvidia_driver/tasks/configure.yml").read_text())
    notified = {t["notify"] for t in configure if "notify" in t}
    assert notified <= {h["name"] for h in handlers} and "Rebuild the initramfs" in notified


def test_stack_play_runs_the_driver_role_first():
    plays = yaml.safe_load((REPO / "playbooks/gpu_stack.yml").read_text())
    stack = plays[0]
    assert [t.get("ansible.builtin.include_tasks") for t in stack["tasks"]] == ["tasks/gpu_stack_roles.yml"]
    roles = yaml.safe_load((REPO / "playbooks/tasks/gpu_stack_roles.yml").read_text())
    # The torch index is asked first (check_wheels.yml reads, installs nothing); the first role that
    # installs anything is the driver's.
    includes = [t["ansible.builtin.include_role"] for t in roles if "ansible.builtin.include_role" in t]
    assert [i.get("tasks_from") for i in includes[:1]] == ["check_wheels.yml"]
    installing = [i["name"] for i in includes if i.get("tasks_from") is None]
    assert installing[0] == "gpufleet.cluster.nvidia_driver", installing
    assert not stack.get("force_handlers"), "with force_handlers the flush would be redundant; keep one mechanism"
