"""The dnf path of the stack roles, checked without a RHEL machine.

The apt path runs for real on the simulated cluster (tests/integration/test_gpu_stack.py); no RHEL
node exists here, so these tests load the roles the way Ansible does (defaults, then vars/ for the
fact set, most specific last), render every module argument of the RHEL task files against a
Rocky/RHEL fact set and the registered results those tasks would see, and check that each module
exists and accepts every argument it is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import fragment_loader, init_plugin_loader, module_loader
from ansible.template import Templar, trust_as_template
from ansible.utils.plugin_docs import get_docstring

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"
STACK_ROLES = ["nvidia_driver", "cuda_toolkit", "nccl", "pytorch"]
TASK_KEYWORDS = {
    "name", "when", "register", "vars", "loop", "loop_control", "block", "rescue", "always", "changed_when",
    "failed_when", "check_mode", "notify", "environment", "become", "tags", "until", "retries", "delay",
    "no_log", "ignore_errors", "delegate_to", "run_once", "listen",
}
FREE_FORM = {"ansible.builtin.command": {"argv", "cmd", "creates", "removes", "chdir", "stdin", "_raw_params"},
             "ansible.builtin.shell": {"cmd", "creates", "removes", "chdir", "executable", "_raw_params"},
             "ansible.builtin.script": {"cmd", "creates", "removes", "chdir", "executable", "_raw_params"}}

FACTS = {
    "rocky9": {"distribution": "Rocky", "distribution_version": "9.3", "distribution_major_version": "9",
               "os_family": "RedHat", "architecture": "x86_64", "kernel": "5.14.0-362.8.1.el9_3.x86_64"},
    "rhel8": {"distribution": "RedHat", "distribution_version": "8.9", "distribution_major_version": "8",
              "os_family": "RedHat", "architecture": "aarch64", "kernel": "4.18.0-513.5.1.el8_9.aarch64"},
}
FPR = "610C7B14E068A878070D4E2F8B87B5B1D42D0685"  # any 40 hex digits: the test checks it is passed through

init_plugin_loader()
LOADER = DataLoader()


def load(path: Path):
    return LOADER.load_from_file(str(path), trusted_as_template=True)


def role_vars(role: str, facts: dict, **extra) -> dict:
    """defaults < vars/main < os_family < distribution < distribution_major, as tasks/set_vars.yml loads them."""
    out = dict(load(ROLES_DIR / role / "defaults/main.yml") or {})
    out.update(load(ROLES_DIR / role / "vars/main.yml") or {})
    for name in (facts["os_family"], facts["distribution"], f"{facts['distribution']}_{facts['distribution_major_version']}"):
        path = ROLES_DIR / role / "vars" / f"{name}.yml"
        if path.is_file():
            out.update(load(path) or {})
    out.update(extra)
    out.update({"ansible_facts": facts, "inventory_hostname": "gpu-r01", "ansible_check_mode": False,
                "role_path": str(ROLES_DIR / role), "ansible_managed": "Ansible managed"})
    return out


def walk(tasks):
    for task in tasks or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from walk(task.get(section))


def module_of(task: dict) -> str | None:
    keys = [k for k in task if k not in TASK_KEYWORDS]
    return keys[0] if keys else None


def render(templar: Templar, value, task_vars: dict | None = None):
    if task_vars:
        templar = templar.copy_with_new_env(available_variables={**templar.available_variables, **task_vars})
    return templar.template(value)


def module_options(fqcn: str) -> set[str]:
    ctx = module_loader.find_plugin_with_context(fqcn)
    assert ctx.resolved, f"module {fqcn} does not exist"
    doc = get_docstring(ctx.plugin_resolved_path, fragment_loader=fragment_loader)[0]
    options = set(doc.get("options", {}))
    for opt in doc.get("options", {}).values():
        options.update(opt.get("aliases", []))
    return options


@pytest.mark.parametrize("role", STACK_ROLES)
def test_every_module_in_the_rhel_path_exists_and_accepts_its_arguments(role):
    files = [ROLES_DIR / role / "tasks" / name for name in ("main.yml", "set_vars.yml", "install_RedHat.yml")
             if (ROLES_DIR / role / "tasks" / name).is_file()]
    files += [p for p in (ROLES_DIR / role / "tasks").glob("*.yml") if not p.name.startswith("install_")]
    seen = set()
    for path in files:
        for task in walk(load(path)):
            module = module_of(task)
            if module is None:
                continue
            assert module.startswith("ansible.builtin."), f"{path.name}: {task['name']}: {module} is not FQCN builtin"
            if path.name == "install_RedHat.yml":
                assert module not in {"ansible.builtin.apt", "ansible.builtin.dpkg_selections", "ansible.builtin.apt_repository",
                                      "ansible.builtin.deb822_repository"}, f"{task['name']} uses {module} on the dnf path"
            args = task[module]
            if not isinstance(args, dict):
                assert module in FREE_FORM or module.endswith(("include_tasks", "include_vars", ".meta")), task["name"]
                continue
            if module == "ansible.builtin.set_fact":
                continue
            allowed = FREE_FORM.get(module) or module_options(module)
            unknown = set(args) - allowed
            assert not unknown, f"{path.name}: {task['name']}: {module} has no option(s) {sorted(unknown)}"
            seen.add(module)
    if role in ("nvidia_driver", "cuda_toolkit", "nccl"):
        assert "ansible.builtin.dnf" in seen


@pytest.mark.parametrize("facts_name", sorted(FACTS))
def test_driver_repository_and_packages_render_for_rhel(facts_name):
    facts = FACTS[facts_name]
    variables = role_vars("nvidia_driver", facts, nvidia_driver_rpm_key_fingerprint=FPR, nvidia_driver_fabricmanager=True,
                          nvidia_driver_branch="535", nvidia_driver_min_version="535.54.03")
    target = {"package": "nvidia-driver", "version": "3:535.183.01-1.el9", "upstream": "535.183.01"}
    variables.update({"__nvidia_driver_target": target, "__nvidia_driver_action": "install", "__nvidia_driver_old_fm": [],
                      "__nvidia_driver_current": None, "__nvidia_driver_repo": {"changed": False},
                      "__nvidia_driver_install": {"changed": False},
                      "__nvidia_driver_locks": {"stdout": "nvidia-driver-3:535.183.01-1.el9.*\n"}})
    templar = Templar(loader=LOADER, variables=variables)
    tasks = {t["name"]: t for t in walk(load(ROLES_DIR / "nvidia_driver/tasks/install_RedHat.yml")) if "name" in t}
    arch = "x86_64" if facts["architecture"] == "x86_64" else "sbsa"
    major = facts["distribution_major_version"]
    base = f"https://developer.download.nvidia.com/compute/cuda/repos/rhel{major}/{arch}"

    repo = render(templar, tasks["Write the CUDA repository definition"]["ansible.builtin.yum_repository"])
    assert repo["baseurl"] == base + "/"
    assert repo["gpgcheck"] is True
    assert repo["gpgkey"] == base + "/D42D0685.pub"
    assert repo["name"] == f"cuda-rhel{major}-{arch}"

    key = render(templar, tasks["Import the repository signing key after checking its fingerprint"]["ansible.builtin.rpm_key"])
    assert key == {"key": base + "/D42D0685.pub", "fingerprint": FPR, "state": "present"}

    stream = render(templar, tasks["Enable the driver's module stream"]["ansible.builtin.command"])
    assert stream["argv"] == ["dnf", "module", "enable", "-y", "nvidia-driver:535-open"]

    install = tasks["Install the driver and fabric manager at their exact versions"]
    names = render(templar, install["vars"]["__nvidia_driver_rpm_names"])
    assert names == ["nvidia-driver-535.183.01", "nvidia-driver-cuda-535.183.01", "nvidia-driver-libs-535.183.01",
                     "kmod-nvidia-open-dkms-535.183.01", "nvidia-fabric-manager-535.183.01"]
    build = render(templar, tasks["Install the kernel headers for the running kernel and DKMS"]["ansible.builtin.dnf"])
    assert build["name"] == [f"kernel-devel-{facts['kernel']}", f"kernel-headers-{facts['kernel']}", "dkms"]

    lock = tasks["Lock each driver package at the installed version"]
    items = render(templar, lock["loop"])
    assert items[-1] == "nvidia-fabric-manager"
    locked = [item for item in items
              if not render(templar, trust_as_template("{{ " + lock["when"] + " }}"), {"item": item})]
    assert locked == ["nvidia-driver"], "a package already in versionlock list must not be locked again"
    assert render(templar, lock["ansible.builtin.command"], {"item": "nvidia-driver-cuda"})["argv"] == [
        "dnf", "versionlock", "add", "nvidia-driver-cuda-535.183.01"]


def test_proprietary_modules_pick_the_dkms_stream_and_kmod():
    variables = role_vars("nvidia_driver", FACTS["rocky9"], nvidia_driver_kernel_modules="proprietary", nvidia_driver_branch="550")
    templar = Templar(loader=LOADER, variables=variables)
    assert render(templar, trust_as_template("{{ __nvidia_driver_module_stream }}")) == "nvidia-driver:550-dkms"
    assert "kmod-nvidia-latest-dkms" in render(templar, trust_as_template("{{ __nvidia_driver_rpm_packages }}"))


def _collect_and_decide(rpm_stdout: str, repoquery: list[str], **extra):
    variables = role_vars("nvidia_driver", FACTS["rocky9"], nvidia_driver_branch="535",
                          nvidia_driver_min_version="535.54.03", **extra)
    variables["__nvidia_driver_rpm"] = {"stdout_lines": rpm_stdout.splitlines()}
    variables["__nvidia_driver_repoquery"] = {"stdout_lines": repoquery}
    templar = Templar(loader=LOADER, variables=variables)
    collect = next(t for t in walk(load(ROLES_DIR / "nvidia_driver/tasks/install_RedHat.yml"))
                   if t.get("name") == "Collect what is installed and what the repository offers")
    facts = render(templar, collect["ansible.builtin.set_fact"], collect["vars"])
    variables.update(facts)
    templar = Templar(loader=LOADER, variables=variables)
    decide = load(ROLES_DIR / "nvidia_driver/tasks/decide.yml")
    computed = render(templar, decide[0]["ansible.builtin.set_fact"])
    variables.update(computed)
    templar = Templar(loader=LOADER, variables=variables)
    record = render(templar, decide[3]["ansible.builtin.set_fact"])
    stop = decide[1]
    stops = all(render(templar, trust_as_template("{{ " + cond + " }}")) for cond in stop["when"])
    return facts, record, stops


REPOQUERY = ["3:525.147.05-1.el9", "3:535.104.05-1.el9", "3:535.183.01-1.el9", "3:550.127.05-1.el9"]
RPM_NOT_INSTALLED = ("package nvidia-driver is not installed\npackage kmod-nvidia-open-dkms is not installed\n"
                     "package kmod-nvidia-latest-dkms is not installed\npackage nvidia-fabric-manager is not installed\n")


def test_rhel_fresh_node_installs_the_newest_in_the_branch():
    facts, record, stops = _collect_and_decide(RPM_NOT_INSTALLED, REPOQUERY)
    assert facts["__nvidia_driver_current"] is None
    assert record["__nvidia_driver_action"] == "install"
    assert record["__nvidia_driver_target"] == {"package": "nvidia-driver", "version": "3:535.183.01-1.el9",
                                                "upstream": "535.183.01"}
    assert not stops


def test_rhel_satisfying_driver_is_kept():
    rpm = ("nvidia-driver 3:535.104.05-1.el9 535.104.05\nkmod-nvidia-latest-dkms 3:535.104.05-1.el9 535.104.05\n"
           "package kmod-nvidia-open-dkms is not installed\n")
    facts, record, stops = _collect_and_decide(rpm, REPOQUERY)
    assert facts["__nvidia_driver_current"]["flavor"] == "proprietary"
    assert record["__nvidia_driver_action"] == "keep"
    assert record["__nvidia_driver_target"]["upstream"] == "535.104.05"
    assert not stops


def test_rhel_unsatisfying_driver_stops_unless_replace_is_allowed():
    rpm = "nvidia-driver 3:525.147.05-1.el9 525.147.05\nkmod-nvidia-open-dkms 3:525.147.05-1.el9 525.147.05\n"
    _facts, _record, stops = _collect_and_decide(rpm, REPOQUERY)
    assert stops
    _facts, record, stops = _collect_and_decide(rpm, REPOQUERY, nvidia_driver_allow_replace=True)
    assert not stops
    assert record["__nvidia_driver_action"] == "replace"
    assert record["__nvidia_driver_target"]["upstream"] == "535.183.01"


@pytest.mark.parametrize("facts_name", sorted(FACTS))
def test_toolkit_and_nccl_render_for_rhel(facts_name):
    facts = FACTS[facts_name]
    templar = Templar(loader=LOADER, variables=role_vars("cuda_toolkit", facts, cuda_toolkit_versions=["12.1", "12.2"]))
    tasks = {t["name"]: t for t in walk(load(ROLES_DIR / "cuda_toolkit/tasks/install_RedHat.yml")) if "name" in t}
    assert render(templar, tasks["Install the CUDA toolkits"]["ansible.builtin.dnf"])["name"] == [
        "cuda-toolkit-12-1", "cuda-toolkit-12-2"]
    assert render(templar, trust_as_template("{{ __cuda_toolkit_alternatives }}")) == "alternatives"

    templar = Templar(loader=LOADER, variables=role_vars("nccl", facts, nccl_version_string="2.18.3-1+cuda12.2"))
    tasks = {t["name"]: t for t in walk(load(ROLES_DIR / "nccl/tasks/install_RedHat.yml")) if "name" in t}
    assert render(templar, tasks["Install NCCL at the planned version"]["ansible.builtin.dnf"])["name"] == [
        "libnccl-2.18.3-1+cuda12.2", "libnccl-devel-2.18.3-1+cuda12.2"]
    lock = tasks["Lock each NCCL package"]
    assert render(templar, lock["ansible.builtin.command"], {"item": "libnccl"})["argv"] == [
        "dnf", "versionlock", "add", "libnccl-2.18.3-1+cuda12.2"]


@pytest.mark.parametrize("role", STACK_ROLES)
@pytest.mark.parametrize("facts, supported", [
    (FACTS["rocky9"], True), (FACTS["rhel8"], True),
    ({"distribution": "Fedora", "distribution_version": "39", "distribution_major_version": "39", "os_family": "RedHat"}, False),
    ({"distribution": "Ubuntu", "distribution_version": "23.10", "distribution_major_version": "23", "os_family": "Debian"}, False),
    ({"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22", "os_family": "Debian"}, True),
])
def test_unknown_os_stops_listing_the_supported_ones(role, facts, supported):
    templar = Templar(loader=LOADER, variables=role_vars(role, facts))
    fail = next(t for t in load(ROLES_DIR / role / "tasks/set_vars.yml") if "ansible.builtin.fail" in t)
    fires = render(templar, trust_as_template("{{ " + fail["when"] + " }}"))
    assert fires is (not supported)
    if fires:
        msg = render(templar, fail["ansible.builtin.fail"]["msg"])
        assert "is not supported" in msg
        assert "Ubuntu 20.04, Ubuntu 22.04, Ubuntu 24.04, Debian 12, RedHat 8, RedHat 9, Rocky 8, Rocky 9" in msg
