"""`pip install` puts the collection where Ansible looks (site-packages/ansible_collections), so Ansible's
own tools and gpufleet find the same copy from any directory; the collection also installs with
ansible-galaxy from git; its tests need nothing beside the checkout."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cli_helpers import REPO, clean_env, local_inventory, run_cli

FILTERS = ["homogeneity", "homogeneity_findings", "preflight_report", "preflight_markdown", "preflight_summary_table",
           "preflight_failure_messages", "preflight_console", "nccl_env", "preflight_node_summary",
           "preflight_profile", "preflight_findings", "scale_hparams", "stack_plan", "bandwidth_verdict",
           "bandwidth_ring_links", "bandwidth_slow_links", "bandwidth_isolation_pairs", "bandwidth_confirm_pairs",
           "bandwidth_pair_figures", "findings_junit", "report_dir"]


def _copy_of_the_clone(work: Path) -> Path:
    """The working tree's files (tracked and new, not ignored), so a build leaves nothing in the clone."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    source = work / "src"
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, source / rel)
    return source


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from a copy of the working tree."""
    work = tmp_path_factory.mktemp("wheel")
    source = _copy_of_the_clone(work)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(work / "dist"), str(source)], check=True, capture_output=True)
    return next((work / "dist").glob("gpufleet-*.whl"))


def test_wheel_carries_the_collection_and_not_the_tests(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    root = "ansible_collections/gpufleet/cluster/"
    for needed in ("galaxy.yml", "meta/runtime.yml", "playbooks/preflight.yml", "playbooks/site.yml",
                   "roles/preflight/tasks/main.yml", "roles/nvidia_driver/meta/argument_specs.yml",
                   "plugins/modules/gpu_info.py", "ansible.cfg", "LICENSE", "docs/run-summary.schema.json"):
        assert root + needed in names, needed
    # What galaxy.yml's build_ignore keeps out of the tarball stays out of the wheel's copy too.
    for left_out in ("tools/", "molecule/", "tests/sim/", "tests/unit/gpufleet/", "gpufleet/", "collections/"):
        assert not any(n.startswith(root + left_out) for n in names), left_out
    assert not any("__pycache__" in n or n.startswith("gpufleet/_collection/") for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Python: <3.14,>=3.10" in metadata
    assert not re.search(r"Requires-Dist: (pytest|molecule|ansible-lint|torch)\b(?!.*extra)", metadata)


def test_a_build_writes_nothing_into_the_clone(wheel):
    """setuptools' build/ and gpufleet.egg-info go to a scratch directory: a read-only clone installs, and a
    writable one keeps no litter (before, both landed in the clone and a read-only one failed)."""
    source = wheel.parent.parent / "src"
    assert sorted(p.name for p in source.iterdir() if p.name == "build" or p.name.endswith(".egg-info")) == []


def test_installed_wheel_runs_a_stage_from_another_directory(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(PYTHONPATH=str(target))
    version = run_cli(["--version"], cwd=elsewhere, env=env)
    assert version.rc == 0 and f"(package: {target / 'ansible_collections' / 'gpufleet' / 'cluster'})" in version.stdout
    artifacts = elsewhere / "out"
    result = run_cli(["run", "preflight", "-i", local_inventory(elsewhere / "inv.yml", hosts=("n1",)),
                      "--artifacts", artifacts], cwd=elsewhere, env=env)
    summary = json.loads((artifacts / "summary.json").read_text())
    assert result.rc == summary["exit_code"] and result.rc in (0, 1), result.stderr  # fails checks without a GPU
    assert summary["stage_names"] == {"Check the configuration before touching the nodes": "preflight",
                                      "Preflight the GPU nodes": "preflight"}
    assert (artifacts / "reports" / "preflight.json").is_file()


def readme_install_commands() -> list[str]:
    """The first two lines of the README's install block (the venv with the CLI, the inventory copy)."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("Install the CLI"):].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines()[:2]]


def test_the_readme_install_lines_are_found():
    lines = readme_install_commands()
    assert lines[0].startswith("python3 -m venv ~/") and "pip install ~/gpufleet" in lines[0]
    assert lines[1].startswith("cp -r ~/gpufleet/inventory/")


@pytest.mark.slow
def test_pip_install_puts_the_collection_where_ansibles_own_tools_find_it(tmp_path):
    """The README's two install commands, run from $HOME with the clone at ~/gpufleet (a fresh venv, `pip install`
    of the clone, not editable), then Ansible's own commands from elsewhere."""
    home = tmp_path / "home"
    home.mkdir()
    source = _copy_of_the_clone(tmp_path).rename(home / "gpufleet")
    # The user's own python3, not the test venv's: the test venv's bin leaves PATH.
    user_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent)
    install = subprocess.run(["bash", "-euc", " && ".join(readme_install_commands())], cwd=home, capture_output=True,
                             text=True, check=False, timeout=900,
                             env={**clean_env(HOME=str(home)), "EDITOR": "true", "PATH": user_path})
    assert install.returncode == 0, install.stderr[-3000:]
    venv = home / ".gpufleet-venv"
    assert not any(source.glob("**/pyvenv.cfg")) and (home / "my-cluster" / "hosts.yml").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    inventory = local_inventory(elsewhere / "inv.yml", hosts=("n1",))
    env = {k: v for k, v in clean_env(HOME=str(tmp_path / "home")).items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin"

    def run(*command):
        return subprocess.run([str(venv / "bin" / command[0]), *command[1:]], cwd=elsewhere, env=env,
                              capture_output=True, text=True, check=False, timeout=300)

    for command in (["ansible-doc", "gpufleet.cluster.gpu_info"], ["ansible-doc", "-t", "role",
                                                                   "gpufleet.cluster.nvidia_driver"]):
        proc = run(*command)
        assert proc.returncode == 0 and "gpufleet" in proc.stdout, (command, proc.stdout[-2000:], proc.stderr[-2000:])
    playbook = run("ansible-playbook", "gpufleet.cluster.preflight", "-i", str(inventory))
    # Without a GPU here the node fails preflight's checks (rc 2), but the play was found and ran.
    assert "PLAY RECAP" in playbook.stdout and re.search(r"n1\s+: ok=[1-9]", playbook.stdout), \
        playbook.stdout[-2000:] + playbook.stderr[-2000:]
    site_packages = next(venv.glob("lib/python3*/site-packages"))
    installed = site_packages / "ansible_collections" / "gpufleet" / "cluster"
    assert installed.is_dir()
    version = subprocess.run([str(venv / "bin" / "gpufleet"), "--version"], cwd=elsewhere, env=env,
                             capture_output=True, text=True, check=True).stdout
    assert f"(package: {installed})" in version  # gpufleet runs that same copy


def test_collection_installs_from_git_with_ansible_galaxy(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    requirements = tmp_path / "requirements.yml"
    # the form docs/examples/requirements.yml documents, pointed at this clone
    example = (REPO / "docs" / "examples" / "requirements.yml").read_text()
    assert "type: git" in example
    requirements.write_text(f"---\ncollections:\n  - name: git+file://{REPO}\n    type: git\n    version: {head}\n")
    dest = tmp_path / "collections"
    env = clean_env()
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-galaxy"), "collection", "install", "-r",
                           str(requirements), "-p", str(dest)], capture_output=True, text=True, env=env, check=False,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = dest / "ansible_collections" / "gpufleet" / "cluster"
    assert (installed / "MANIFEST.json").is_file() and (installed / "tests" / "fixtures" / "SOURCES.md").is_file()
    check = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i", "localhost,",
                            "gpufleet.cluster.site"], capture_output=True, text=True, cwd=tmp_path, check=False,
                           env={**env, "ANSIBLE_COLLECTIONS_PATH": str(dest)})
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_filter_shows_its_own_documentation():
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-t", "filter", "--json",
                           *[f"gpufleet.cluster.{name}" for name in FILTERS]], capture_output=True, text=True,
                          cwd=REPO, env=clean_env(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")), check=False)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    for name in FILTERS:
        doc = docs[f"gpufleet.cluster.{name}"]["doc"]
        assert doc["name"] == name, (name, doc["name"])
        assert doc["short_description"] and doc.get("description")


def test_fixtures_live_in_the_project_with_their_sources():
    from fixtures_path import FIXTURES

    assert FIXTURES == REPO / "tests" / "fixtures"
    captures = [p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "SOURCES.md"]
    assert len(captures) >= 40
    for path in captures:
        # Listed in the top SOURCES.md, or in one at the root of its set (e.g. repo/, diagnostics/).
        dirs = [d for d in path.parents if d == FIXTURES or FIXTURES in d.parents]
        listed = [d / "SOURCES.md" for d in dirs if (d / "SOURCES.md").exists()]
        assert any(path.name in f.read_text() for f in listed), f"{path} is not listed in a SOURCES.md"
    assert "shared" not in os.fspath(FIXTURES)
