"""Every role task that reaches a network runs with the role's proxy environment.

A node behind a proxy fails wherever a download or a package transaction forgets the proxy, often
after minutes of retries. So every task that can reach a repository or download (the package
modules, get_url, pip, rpm_key, apt_key, uri, the repository query module, and the apt-get, dnf,
yum, pip, curl and wget commands) must carry `environment:` with the role's `__<role>_proxy_env`
(the role's `<role>_proxy_env` knob, default gpufleet_proxy_env, with the cluster's own hosts in
no_proxy) on the task, on a block around it, or through `apply` on the include that brings it in.
A new network task without it fails here, as a command without a deadline fails
tests/unit/roles/test_command_deadlines.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = REPO / "roles"
PREFIXES = ("", "ansible.builtin.", "ansible.legacy.")
NETWORK_MODULES = {prefix + name for prefix in PREFIXES for name in (
    "apt", "dnf", "dnf5", "yum", "package", "get_url", "pip", "rpm_key", "apt_key", "uri", "apt_repository",
    "unarchive", "git")} | {"gpufleet.cluster.repo_packages_info"}  # dnf list refreshes repository metadata
COMMAND_MODULES = {prefix + name for prefix in PREFIXES for name in ("command", "shell", "raw", "script")}
INCLUDES = {prefix + name for prefix in PREFIXES for name in ("include_tasks", "import_tasks")}
# A program that reaches a repository or the internet, as the first word of a command or argv.
NETWORK_PROGRAM = re.compile(r"""(^|[\s'"/\[,])(apt-get|apt|dnf|yum|pip3?|curl|wget)(['"\s,\]]|$)""")


def role_internals(role: Path) -> dict:
    data = {}
    for path in sorted((role / "vars").glob("*.yml")):
        data.update(yaml.safe_load(path.read_text()) or {})
    return data


def expand(text: str, internals: dict, depth: int = 3) -> str:
    """The text with the role's internal variables it names written out (their definitions appended)."""
    out = text
    for _round in range(depth):
        named = set(re.findall(r"\b(__\w+)", out))
        out += "".join(f" {internals[name]}" for name in named if name in internals and str(internals[name]) not in out)
    return out


def is_network_task(task: dict, internals: dict) -> bool:
    module = next((key for key in task if key in NETWORK_MODULES | COMMAND_MODULES), None)
    if module is None:
        return False
    if module in NETWORK_MODULES:
        return True
    args = task[module]
    program = args.get("argv", args.get("cmd", "")) if isinstance(args, dict) else args
    program = program if isinstance(program, str) else " ".join(str(word) for word in program[:4])
    if isinstance(args, dict) and isinstance(args.get("argv"), list):
        words = [str(w) for w in args["argv"]]
        words = words[2:] if words[:1] == ["timeout"] else words
        program = " ".join(words[:1])
    return bool(NETWORK_PROGRAM.search(expand(program, internals)))


def walk(tasks, env: tuple, file: Path):
    """(task, the environments around it) for every task; include_tasks/import_tasks give their file too."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        own = env + ((str(task["environment"]),) if "environment" in task else ())
        if "block" in task:
            for section in ("block", "rescue", "always"):
                yield from walk(task.get(section), own, file)
            continue
        yield task, own, file


def included_file(task: dict, here: Path) -> list[Path]:
    module = next((key for key in task if key in INCLUDES), None)
    if module is None:
        return []
    spec = task[module]
    name = spec.get("file") if isinstance(spec, dict) else spec
    pattern = re.sub(r"\{\{.*?\}\}", "*", str(name))
    return sorted(here.parent.glob(pattern)) or sorted((here.parent.parent / "tasks").glob(pattern))


def role_tasks(role: Path):
    """Every task reached from tasks/main.yml and handlers/main.yml, with what surrounds it, following includes."""
    queue = [(path, ()) for path in (role / "tasks" / "main.yml", role / "handlers" / "main.yml") if path.is_file()]
    seen = set()
    while queue:
        path, env = queue.pop()
        if (path, env) in seen:
            continue
        seen.add((path, env))
        for task, around, file in walk(yaml.safe_load(path.read_text()), env, path):
            module = next((key for key in task if key in INCLUDES), None)
            if module:
                # The included tasks inherit what surrounds the include (blocks, an import's own keyword)
                # and what include_tasks hands over through apply (it may not carry environment itself).
                spec = task[module] if isinstance(task[module], dict) else {}
                applied = spec.get("apply", {}).get("environment")
                passed = around + ((str(applied),) if applied else ())
                queue += [(child, passed) for child in included_file(task, file)]
                continue
            yield task, around, file


def without_proxy(role: Path, root: Path = REPO) -> list[str]:
    internals = role_internals(role)
    wanted = f"__{role.name}_proxy_env"
    return [f"{file.relative_to(root)}: {task.get('name', '(unnamed)')}"
            for task, around, file in role_tasks(role)
            if is_network_task(task, internals) and not any(wanted in expand(e, internals) for e in around)]


def network_roles() -> list[Path]:
    return [role for role in sorted(ROLES.iterdir())
            if any(is_network_task(t, role_internals(role)) for t, _e, _f in role_tasks(role))]


def test_the_scan_sees_the_network_tasks():
    """The check proves something only if it finds what it checks: the package, download and pip tasks."""
    roles = network_roles()
    assert [r.name for r in roles] == ["bandwidth_isolation", "cuda_toolkit", "gpu_benchmark", "gpu_diagnostics", "nccl", "nvidia_driver", "pytorch", "rdma"]
    count = sum(1 for role in roles for task, _e, _f in role_tasks(role) if is_network_task(task, role_internals(role)))
    assert count >= 30


@pytest.mark.parametrize("role", network_roles(), ids=lambda role: role.name)
def test_every_network_task_runs_with_the_roles_proxy_environment(role):
    assert without_proxy(role) == []


@pytest.mark.parametrize("role", network_roles(), ids=lambda role: role.name)
def test_the_proxy_knob_is_declared_defaulted_and_derived(role):
    name = role.name
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert defaults[f"{name}_proxy_env"] == "{{ gpufleet_proxy_env | default({}) }}"
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert spec[f"{name}_proxy_env"]["type"] == "dict" and spec[f"{name}_proxy_env"]["no_log"] is True
    internal = role_internals(role)[f"__{name}_proxy_env"]
    assert f"{name}_proxy_env | gpufleet.cluster.no_proxy(__{name}_cluster_hosts" in internal
    # The hosts are read once per play: every node's no_proxy names the same hosts.
    main = yaml.safe_load((role / "tasks" / "main.yml").read_text())
    hosts = [t for t in main if f"__{name}_cluster_hosts" in t.get("ansible.builtin.set_fact", {})]
    assert len(hosts) == 1 and hosts[0]["run_once"] is True


@pytest.mark.parametrize("task, network", [
    ({"ansible.builtin.apt": {"name": "x"}}, True),
    ({"ansible.builtin.get_url": {"url": "x", "dest": "y"}}, True),
    ({"gpufleet.cluster.repo_packages_info": {"packages": []}}, True),
    ({"ansible.builtin.command": {"argv": ["apt-get", "update", "-q"]}}, True),
    ({"ansible.builtin.command": {"argv": ["timeout", "60", "dnf", "makecache"]}}, True),
    ({"ansible.builtin.command": {"argv": "{{ ['apt-get', 'install', '-y'] + names }}"}}, True),
    ({"ansible.builtin.command": {"argv": "{{ __x_pip_argv }}"}}, True),
    ({"ansible.builtin.shell": "curl -fsSL https://example.invalid | tee x"}, True),
    ({"ansible.builtin.command": {"argv": ["apt-mark", "hold", "x"]}}, False),
    ({"ansible.builtin.command": {"argv": ["apt-cache", "policy", "x"]}}, False),
    ({"ansible.builtin.command": {"argv": ["dpkg-query", "-W"]}}, False),
    ({"ansible.builtin.command": {"argv": ["/opt/venv/bin/python", "-m", "venv", "/opt/venv"]}}, False),
    ({"ansible.builtin.copy": {"dest": "/etc/x", "content": "apt-get"}}, False),
])
def test_what_counts_as_a_network_task(task, network):
    assert is_network_task(task, {"__x_pip_argv": "{{ [venv ~ '/bin/pip', 'install'] }}"}) is network


def test_a_new_network_task_without_the_proxy_fails_the_check(tmp_path):
    role = tmp_path / "roles" / "demo"
    for sub in ("tasks", "vars"):
        (role / sub).mkdir(parents=True)
    (role / "vars" / "main.yml").write_text("__demo_proxy_env: \"{{ demo_proxy_env | gpufleet.cluster.no_proxy([]) }}\"\n")
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([
        {"name": "With it", "ansible.builtin.apt": {"name": "a"}, "environment": "{{ __demo_proxy_env }}"},
        {"name": "Through apply", "ansible.builtin.include_tasks": {
            "file": "install_{{ x }}.yml", "apply": {"environment": "{{ __demo_proxy_env }}"}}},
        {"name": "Plain include", "ansible.builtin.include_tasks": "more.yml"},
        {"name": "In a block", "block": [{"name": "Fetch", "ansible.builtin.get_url": {"url": "u", "dest": "d"}}],
         "environment": "{{ __demo_proxy_env }}"},
    ]))
    (role / "tasks" / "install_Debian.yml").write_text(yaml.safe_dump([{"name": "Inherited", "ansible.builtin.dnf": {"name": "b"}}]))
    (role / "tasks" / "more.yml").write_text(yaml.safe_dump([{"name": "Forgotten", "ansible.builtin.command": {"argv": ["dnf", "install", "-y", "c"]}}]))
    assert without_proxy(role, root=tmp_path) == ["roles/demo/tasks/more.yml: Forgotten"]


def test_a_network_task_sees_the_proxy_and_the_inventorys_hosts_in_no_proxy(tmp_path):
    """Run for real on this machine: the role's own hosts task and its __rdma_proxy_env, with the
    inventory's hostvars, reach a command's environment; a play over two hosts reads the hosts once."""
    bin_dir = Path(sys.executable).parent
    hosts_task = next(t for t in yaml.safe_load((ROLES / "rdma" / "tasks" / "main.yml").read_text())
                      if "__rdma_cluster_hosts" in t.get("ansible.builtin.set_fact", {}))
    probe = {"name": "Print the proxy environment", "ansible.builtin.command": {"argv": ["sh", "-c", "echo $http_proxy $no_proxy"]},
             "environment": "{{ __rdma_proxy_env }}", "changed_when": False, "register": "seen"}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {
        "gpu-a01": {"ansible_host": "127.0.0.1"}, "gpu-a02": {"ansible_host": "127.0.0.2"}, "mirror": {}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "hosts": "gpu-a01,gpu-a02", "gather_facts": False, "vars_files": [str(ROLES / "rdma" / "vars" / "main.yml")],
        "vars": {"rdma_proxy_env": "{{ gpufleet_proxy_env }}"},
        "tasks": [hosts_task, probe, {"ansible.builtin.debug": {"msg": "SEEN {{ seen.stdout }}"}}]}]))
    extra = {"gpufleet_proxy_env": {"http_proxy": "http://proxy.example.internal:3128"},
             "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run([str(bin_dir / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    want = "SEEN http://proxy.example.internal:3128 localhost,127.0.0.1,::1,gpu-a01,gpu-a02,mirror,127.0.0.2"
    assert out.count(want) == 2, out[-3000:]
    # Read once for the play (run_once), not once per node.
    hosts_run = out.split("TASK [Name the inventory's hosts and addresses, for no_proxy]")[1].split("TASK [")[0]
    assert hosts_run.count("ok: [") == 1, hosts_run
