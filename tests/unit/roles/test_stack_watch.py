"""A converged node skips the stack roles only while nothing they manage moved (issue 17). That holds only
if the record watches everything a task of theirs writes: every file, package, hold, service and changing
command of nvidia_driver, cuda_toolkit, nccl and pytorch, and the files the stack playbook writes itself.

These tests read the roles' task files and fail when a task writes something the role's watch list
(`__<role>_watch` and the platform lists it includes, in vars/) does not name, so a new task cannot
quietly escape the record. They also pin the record's key: every input an operator can set.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = ["nvidia_driver", "cuda_toolkit", "nccl", "pytorch"]
WRITERS = {"copy", "template", "file", "lineinfile", "blockinfile", "get_url", "yum_repository", "rpm_key", "apt",
           "dnf", "package", "dpkg_selections", "systemd_service", "command", "shell", "script", "replace",
           "unarchive", "pip"}

# What a task writes -> the token in the watch list that covers it, where the two are not spelled alike.
COVERED_BY = {
    # Temporary key files, removed in the same block: nothing left on the node to watch.
    ("nvidia_driver", "{{ __nvidia_driver_key_tmp.path }}"): None,
    ("nvidia_driver", "{{ item }}@Remove the temporary key files"): None,
    ("nvidia_driver", "{{ __nvidia_driver_key_dest }}"): "__nvidia_driver_keyring",  # and __nvidia_driver_rpm_key_file
    ("nvidia_driver", "{{ __nvidia_driver_state_file | dirname }}"): "__nvidia_driver_state_file",
    ("nvidia_driver", "{{ nvidia_driver_reboot_request_dir }}/{{ item.key }}"): "nvidia_driver_reboot_request_dir",
    ("nvidia_driver", "{{ __nvidia_driver_repo_id }}"): "/etc/yum.repos.d/{{ __nvidia_driver_repo_id }}.repo",
    # Holds and installs of the driver: its packages are all among the names the decision looks at.
    ("nvidia_driver", "Hold the driver packages"): "__nvidia_driver_query_names",
    ("nvidia_driver", "Release the holds on the installed driver packages"): "__nvidia_driver_query_names",
    ("nvidia_driver", "Put the released holds back"): "__nvidia_driver_query_names",
    ("nvidia_driver", "Remove the other flavour as NVIDIA documents the switch"): "__nvidia_driver_query_names",
    ("nvidia_driver", "Install the driver and fabric manager at their exact versions in one transaction"):
        "__nvidia_driver_query_names",
    ("nvidia_driver", "{{ __nvidia_driver_decision.install_args }}"): "__nvidia_driver_query_names",
    ("nvidia_driver", "Release the version locks on the driver being replaced"): "/etc/dnf/plugins/versionlock.list",
    ("nvidia_driver", "Lock each driver package at the installed version"): "/etc/dnf/plugins/versionlock.list",
    ("nvidia_driver", "Reset the driver module when the plan switches its stream"): "/etc/dnf/modules.d/nvidia-driver.module",
    ("nvidia_driver", "Enable the driver's module stream"): "/etc/dnf/modules.d/nvidia-driver.module",
    # Follows from the nouveau blacklist (watched) changing.
    ("nvidia_driver", "Rebuild the initramfs"): "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf",
    # The NVLink services (fabric manager, IMEX) are both in the watched services; NVLSM's modules follow from the
    # modules-load file (watched) the role writes beside loading them.
    ("nvidia_driver", "{{ item }}@Enable fabric manager and IMEX"): "__nvidia_driver_imex_service",
    ("nvidia_driver", "Load the NVLink Subnet Manager's kernel modules now"): "__nvidia_driver_nvlsm_modules_file",
    ("cuda_toolkit", "Hold the toolkit packages"): "__cuda_toolkit_packages",
    ("cuda_toolkit", "Lock each toolkit metapackage at its installed version"): "/etc/dnf/plugins/versionlock.list",
    ("cuda_toolkit", "Point the cuda alternative at the default toolkit"): "__cuda_toolkit_home",
    ("cuda_toolkit", "python3-dnf-plugin-versionlock"): "python3-dnf-plugin-versionlock",
    # Follows from the linker path file (watched) changing.
    ("cuda_toolkit", "Refresh the dynamic linker cache"): "/etc/ld.so.conf.d/gpufleet-cuda.conf",
    ("nccl", "{{ __nccl_names | map('regex_replace', '$', '=' ~ nccl_version_string) | list }}"): "__nccl_names",
    ("nccl", "{{ __nccl_names | map('regex_replace', '$', '-' ~ nccl_version_string) | list }}"): "__nccl_names",
    ("nccl", "{{ item }}@Hold NCCL"): "__nccl_names",
    ("nccl", "Release the version lock when the plan moved NCCL"): "/etc/dnf/plugins/versionlock.list",
    ("nccl", "Lock each NCCL package"): "/etc/dnf/plugins/versionlock.list",
    ("nccl", "python3-dnf-plugin-versionlock"): "python3-dnf-plugin-versionlock",
    ("nccl", "{{ __nccl_hold_record | dirname }}"): "__nccl_hold_record",
    # The other toolkits' NCCL builds: each directory's VERSION file (watched) names what was unpacked there.
    ("nccl", "{{ __nccl_other_dir }}"): "nccl_side_by_side_dir",
    ("nccl", "{{ __nccl_other_dir }}/VERSION"): "nccl_side_by_side_dir",
    ("nccl", "Unpack the packages into it"): "nccl_side_by_side_dir",
    ("nccl", "{{ __nccl_other_tmp.path }}"): None,
    ("pytorch", "Create the virtual environment"): "{{ pytorch_venv }}",
    ("pytorch", "Install torch at the planned versions"): "{{ pytorch_venv }}",
    ("pytorch", "{{ pytorch_venv }}/{{ __pytorch_verified_file }}"): "{{ pytorch_venv }}",
    ("pytorch", "{{ __pytorch_lock_dest }}"): "{{ pytorch_venv }}",
}


def tasks_of(path: Path):
    def walk(tasks):
        for task in tasks or []:
            for key in ("block", "rescue", "always"):
                yield from walk(task.get(key))
            yield task
    yield from walk(yaml.safe_load(path.read_text()))


def writes(task: dict):
    """(module, what it writes) for a task that can change the node; None for one that cannot."""
    for key, args in task.items():
        module = key.rsplit(".", 1)[-1]
        if module not in WRITERS or not (key.startswith("ansible.builtin.") or key == module):
            continue
        if module in ("command", "shell", "script"):
            if task.get("changed_when", True) in (False, "false"):
                return None
            return module, task["name"]
        args = args if isinstance(args, dict) else {}
        target = args.get("dest") or args.get("path") or args.get("key") or args.get("name")
        if target == "{{ item }}":
            target = "{{ item }}@" + task["name"]
        if module in ("apt", "dnf", "package") and not target:
            return None
        return module, target if not isinstance(target, list) else " ".join(target)
    return None


def watch_text(role: str) -> str:
    """The raw text of every watch definition of the role (vars/*.yml, keys containing 'watch')."""
    chunks = []
    for path in sorted((REPO / "roles" / role / "vars").glob("*.yml")):
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            if "watch" in name:
                chunks.append(yaml.safe_dump({name: value}, width=10000))
    return "\n".join(chunks)


def writing_tasks(role: str):
    for path in sorted((REPO / "roles" / role).glob("*/*.yml")):
        if path.parent.name not in ("tasks", "handlers"):
            continue
        for task in tasks_of(path):
            found = writes(task)
            if found:
                yield path.relative_to(REPO), task["name"], found


def names(token: str, text: str) -> bool:
    """Whether the watch text names token; a bare "{{ variable }}" counts where the variable is used."""
    bare = re.fullmatch(r"\{\{\s*(\w+)\s*\}\}", token)
    return token in text or bool(bare and re.search(r"\b%s\b" % bare.group(1), text))


@pytest.mark.parametrize("role", ROLES)
def test_every_thing_a_stack_role_writes_is_watched(role):
    text = watch_text(role)
    assert "__%s_watch" % role in text
    uncovered, found = [], 0
    for path, name, (module, target) in writing_tasks(role):
        found += 1
        key = (role, target) if (role, target) in COVERED_BY else (role, name)
        if key in COVERED_BY:
            token = COVERED_BY[key]
        else:
            token = target
        if token is not None and not names(token, text):
            uncovered.append("%s: %r (%s) writes %r, which %s's watch list does not name" % (
                path, name, module, target, role))
    assert found >= 3, "the task walk found too little: %d" % found
    assert not uncovered, "\n".join(uncovered)


def test_every_mapping_is_still_used():
    """A mapping whose task is gone would hide nothing, but would make the table lie."""
    seen = set()
    for role in ROLES:
        for _path, name, (_module, target) in writing_tasks(role):
            seen.update({(role, target), (role, name)})
    assert set(COVERED_BY) - seen == set()


def test_the_watch_lists_are_published_by_each_role():
    for role in ROLES:
        main = (REPO / "roles" / role / "tasks" / "main.yml").read_text()
        assert '%s_watch: "{{ __%s_watch }}"' % (role, role) in main


def stack_plays():
    return yaml.safe_load((REPO / "playbooks" / "gpu_stack.yml").read_text())


def play_tasks(play: dict) -> list[dict]:
    """The play's tasks with the task files it includes (playbooks/tasks/) in their place."""
    out = []
    for task in play["tasks"]:
        included = task.get("ansible.builtin.include_tasks")
        out.extend(yaml.safe_load((REPO / "playbooks" / included).read_text()) if included else [task])
    return out


def test_the_files_the_stack_playbook_writes_on_the_node_are_watched():
    record = next(play for play in stack_plays() if play.get("name") == "Record the installed stack")
    tasks = play_tasks(record)
    recording = next(task for task in tasks if "gpufleet.cluster.stack_record" in task)
    watch = recording["gpufleet.cluster.stack_record"]["watch"]["files"]
    assert "Write the stack as a local fact" in [task["name"] for task in tasks]
    node_writes = [task for task in tasks if writes(task) and task.get("delegate_to") != "localhost"
                   and not task["name"].startswith("Ask nvidia-smi")]
    targets = [writes(task)[1] for task in node_writes]
    assert "/etc/ansible/facts.d/gpufleet_stack.fact" in targets
    for target in targets:
        if target == "/etc/ansible/facts.d":  # the directory only holds the fact file
            continue
        assert target in watch, target
    # The record takes every probed role's <role>_watch (plugins/action/stack_record.py): the probe names them all.
    # (the pytorch role only when the plan has torch: tests/unit/playbooks/test_gpu_stack_no_torch.py renders both)
    probe = next(task for task in stack_plays()[0]["pre_tasks"] if "gpufleet.cluster.stack_record" in task)
    roles = probe["gpufleet.cluster.stack_record"]["roles"]
    assert all("'%s'" % role in roles for role in ROLES), roles


def test_the_stack_roles_read_gpufleet_variables_only_through_declared_defaults():
    """The record's key holds every variable a role declares, at the value the role sees: a gpufleet_* variable
    a role read elsewhere (a task, its vars/) would change what the role does without changing the key."""
    for role in ROLES:
        specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
        declared = {name for entry in specs["argument_specs"].values() for name in entry.get("options") or {}}
        defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
        assert set(defaults) <= declared, set(defaults) - declared
        for path in sorted((REPO / "roles" / role).rglob("*.yml")) + sorted((REPO / "roles" / role).rglob("*.j2")):
            if path.parent.name == "defaults":
                continue
            expressions = re.findall(r"\{\{.*?\}\}|\{%.*?%\}", path.read_text(), re.DOTALL)
            read = re.findall(r"\bgpufleet_[a-z0-9_]+", " ".join(expressions))
            assert read == [], "%s reads %s outside the role's declared defaults" % (path.relative_to(REPO), read)
