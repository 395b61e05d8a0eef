"""The dnf path of the stack roles, checked without a RHEL machine.

The apt path runs for real on the simulated cluster (tests/integration/test_gpu_stack.py); no RHEL
node exists here, so these tests load the roles the way Ansible does (defaults, then vars/ for the
fact set, most specific last), render every module argument of the RHEL task files against a
Rocky/RHEL fact set and the registered results those tasks would see, and check that each module
exists and accepts every argument it is given.

The driver decision itself is Python (plugins/module_utils/driver_decision.py), table-tested on real detection
output in tests/unit/plugins/module_utils/test_driver_decision.py; here the role's dnf tasks render what it decided.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import fragment_loader, init_plugin_loader, module_loader
from ansible.template import Templar, trust_as_template
from ansible.utils.plugin_docs import get_docstring

from ansible_collections.gpufleet.cluster.plugins.module_utils import driver_decision

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
    if fqcn.startswith("gpufleet.cluster."):
        # Our own modules: their DOCUMENTATION, read from the file (no collection finder needed).
        path = ROLES_DIR.parent / "plugins" / "modules" / (fqcn.split(".")[-1] + ".py")
        assert path.is_file(), f"module {fqcn} does not exist"
        text = path.read_text()
        doc = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
        return set(doc.get("options", {}))
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
            assert module.startswith(("ansible.builtin.", "gpufleet.cluster.")), f"{path.name}: {task['name']}: {module} is not FQCN"
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


PLAN_DNF = {"nvidia_driver_branch": "535", "nvidia_driver_min_version": "535.104.05", "nvidia_driver_version": "535.183.01",
            "nvidia_driver_packages": ["@nvidia-driver:535-open"], "nvidia_driver_fabricmanager_packages": ["nvidia-fabric-manager"],
            "nvidia_driver_flavour_packages": {"open": ["@nvidia-driver:535-open"], "proprietary": ["@nvidia-driver:535-dkms"]},
            "nvidia_driver_fabricmanager": True}


@pytest.mark.parametrize("facts_name", sorted(FACTS))
def test_driver_repository_and_packages_render_for_rhel(facts_name):
    facts = FACTS[facts_name]
    variables = role_vars("nvidia_driver", facts, nvidia_driver_rpm_key_fingerprint=FPR, **PLAN_DNF)
    target = {"upstream": "535.183.01", "packages": {}}
    plan = render(Templar(loader=LOADER, variables=variables), trust_as_template("{{ __nvidia_driver_plan }}"))
    decision = driver_decision.decide(driver_decision.describe_node("dnf", {}, plan["flavour_packages"]), plan,
                                      {"ok": True, "resolved": {}})
    variables.update({"__nvidia_driver_target": decision["target"], "__nvidia_driver_decision": decision,
                      "__nvidia_driver_node": {"current": None, "installed": {}},
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
    # dnf trusts the file the key check accepted, never the URL.
    assert repo["gpgkey"] == "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-gpufleet-cuda"
    assert repo["name"] == f"cuda-rhel{major}-{arch}"
    assert render(templar, trust_as_template("{{ __nvidia_driver_key_url }}")) == base + "/D42D0685.pub"

    key = render(templar, tasks["Import the verified key into rpm's keyring"]["ansible.builtin.rpm_key"])
    assert key == {"key": "/etc/pki/rpm-gpg/RPM-GPG-KEY-gpufleet-cuda", "fingerprint": FPR, "state": "present"}

    stream = render(templar, tasks["Enable the driver's module stream"]["ansible.builtin.command"])
    assert stream["argv"] == ["dnf", "module", "enable", "-y", "nvidia-driver:535-open"]
    assert render(templar, trust_as_template("{{ __nvidia_driver_stream_requests }}")) == [{"name": "@nvidia-driver:535-open"}]
    requests = driver_decision.repository_requests(plan)
    assert {"name": "nvidia-fabric-manager", "version": "535.183.01", "match": "upstream"} in requests
    assert {"name": "kmod-nvidia-open-dkms", "version": "535.183.01", "match": "upstream"} in requests

    install = tasks["Install the driver and fabric manager at their exact versions"]
    names = render(templar, install["ansible.builtin.dnf"])["name"]
    assert names == ["nvidia-driver-535.183.01", "nvidia-driver-cuda-535.183.01", "nvidia-driver-libs-535.183.01",
                     "kmod-nvidia-open-dkms-535.183.01", "nvidia-fabric-manager-535.183.01"]
    build = render(templar, tasks["Install the kernel headers for the running kernel and DKMS"]["ansible.builtin.dnf"])
    assert build["name"] == [f"kernel-devel-{facts['kernel']}", f"kernel-headers-{facts['kernel']}", "dkms"]

    lock = tasks["Lock each driver package at the installed version"]
    items = render(templar, lock["loop"])
    assert items[-1] == {"name": "nvidia-fabric-manager", "version": "535.183.01"}
    locked = [item["name"] for item in items
              if not render(templar, trust_as_template("{{ " + lock["when"] + " }}"), {"item": item})]
    assert locked == ["nvidia-driver"], "a package already in versionlock list must not be locked again"
    item = {"name": "nvidia-driver-cuda", "version": "535.183.01"}
    assert render(templar, lock["ansible.builtin.command"], {"item": item})["argv"] == [
        "dnf", "versionlock", "add", "nvidia-driver-cuda-535.183.01"]


def test_the_plans_module_stream_names_the_flavour():
    variables = role_vars("nvidia_driver", FACTS["rocky9"], nvidia_driver_kernel_modules="proprietary", nvidia_driver_branch="550",
                          nvidia_driver_packages=["@nvidia-driver:550-dkms"])
    templar = Templar(loader=LOADER, variables=variables)
    assert render(templar, trust_as_template("{{ __nvidia_driver_module_stream }}")) == "nvidia-driver:550-dkms"
    assert "kmod-nvidia-latest-dkms" in render(templar, trust_as_template("{{ __nvidia_driver_plan.rpm_packages }}"))


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

    # Another toolkit's NCCL build (a side-by-side plan): fetched by dnf, unpacked with rpm2cpio under its CUDA.
    other = {"__nccl_other": "2.16.2-1+cuda11.8"}
    steps = {t["name"]: t for t in walk(load(ROLES_DIR / "nccl/tasks/side_by_side.yml")) if "name" in t}
    assert render(templar, steps["Download the NCCL packages of that build from the CUDA repository"]["ansible.builtin.command"]["argv"],
                  other) == ["dnf", "download", "-q", "libnccl-2.16.2-1+cuda11.8", "libnccl-devel-2.16.2-1+cuda11.8"]
    unpack = render(templar, steps["Unpack the packages into it"]["ansible.builtin.command"], {**other, "item": {"path": "/t/x.rpm"}})
    assert unpack["argv"][:2] == ["sh", "-c"] and unpack["argv"][-2:] == ["/t/x.rpm", "/opt/gpufleet/nccl/cuda-11.8"]


@pytest.mark.parametrize("role", STACK_ROLES)
@pytest.mark.parametrize("facts, supported", [
    # RHEL 8 is outside the one OS list (python 3.6; tests/unit/roles/test_supported_os_roles.py walks the list).
    (FACTS["rocky9"], True), (FACTS["rhel8"], False),
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
        assert "Debian 12, RedHat 9, Rocky 9, Ubuntu 20.04, Ubuntu 22.04, Ubuntu 24.04" in msg


def _play_var(name: str, plan: dict):
    play = load(ROLES_DIR.parent / "playbooks" / "gpu_stack.yml")[0]
    templar = Templar(loader=LOADER, variables={"gpu_stack_plan": plan, **{k: v for k, v in play["vars"].items() if k != name}})
    return render(templar, play["vars"][name])


@pytest.mark.parametrize("family, nccl, names", [
    ("apt", ["libnccl2=2.19.3-1+cuda12.2", "libnccl-dev=2.19.3-1+cuda12.2"], ["libnccl2", "libnccl-dev"]),
    ("dnf", ["libnccl-2.19.3-1+cuda12.2", "libnccl-devel-2.19.3-1+cuda12.2"], ["libnccl", "libnccl-devel"]),
])
def test_playbook_asks_the_repository_for_toolkit_and_nccl_too(family, nccl, names):
    plan = {"package_family": family, "nccl_package_version": "2.19.3-1+cuda12.2",
            "packages": {"toolkit": ["cuda-toolkit-12-2"], "nccl": nccl, "driver": ["x"]}}
    assert _play_var("gpu_stack_repo_check", plan) == [
        {"name": "cuda-toolkit-12-2", "version": "", "match": "any"},
        *({"name": n, "version": "2.19.3-1+cuda12.2", "match": "exact"} for n in names)]
