"""execution-environment.yml: an AWX/AAP execution environment that carries this collection.

Without a container runtime (none here) the image itself is not built. What is checked:

- the definition uses only what ansible-builder's schema 3 knows, and every file it names exists;
- its Python requirements are pyproject.toml's controller dependencies for the image's Python;
- it ships the same collection as the wheel and the tarball (setup.py's collection_files: what
  galaxy.yml's build_ignore keeps), one entry per top-level part;
- with ansible-builder at hand (``pip install .[ee]``, or ANSIBLE_BUILDER=/path/to/ansible-builder),
  ``ansible-builder create`` writes the build context; either way the context's galaxy step is replayed
  here: ansible-galaxy installs the collection from it, and a playbook of the installed collection
  passes --syntax-check.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

REPO = Path(__file__).resolve().parents[2]
EE_FILE = REPO / "execution-environment.yml"
BIN = Path(sys.executable).parent
# ansible-builder 3.x, schema 3 (ansible_builder/ee_schema.py: schema_v3).
TOP_LEVEL = {"version", "images", "dependencies", "additional_build_files", "additional_build_steps",
             "build_arg_defaults", "options"}
DEPENDENCY_KEYS = {"python", "galaxy", "system", "python_interpreter", "ansible_core", "ansible_runner", "exclude"}
# Where ansible-builder puts the build context's _build/ before the galaxy step (COPY _build /build).
CONTAINER_BUILD_DIR = "/build"


def definition() -> dict:
    return yaml.safe_load(EE_FILE.read_text())


def image_python_version(ee: dict) -> str:
    interpreter = ee["dependencies"]["python_interpreter"]
    match = re.search(r"python(3\.\d+)$", interpreter["python_path"])
    assert match, f"python_path {interpreter['python_path']!r} does not name a versioned interpreter"
    assert interpreter["package_system"] == "python" + match.group(1), "package_system and python_path disagree"
    return match.group(1)


def requirement_map(lines, python_version: str) -> dict[str, SpecifierSet]:
    env = {"python_version": python_version, "python_full_version": python_version + ".0"}
    out = {}
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(env):
            name = re.sub(r"[-_.]+", "-", req.name).lower()
            assert name not in out, f"{name} is listed twice"
            out[name] = req.specifier
    return out


def collection_parts() -> list[str]:
    """The top-level parts of what the wheel and the tarball hold: setup.py's own collection_files(),
    run here from setup.py's source (importing setup.py would run setup())."""
    tree = ast.parse((REPO / "setup.py").read_text())
    names = ("collection_files", "ALWAYS_IGNORED", "IGNORED_DIR_NAMES")
    wanted = [node for node in tree.body
              if isinstance(node, ast.FunctionDef) and node.name in names
              or isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in names]
    assert len(wanted) == 3, "setup.py has no collection_files() with its ignore lists"
    namespace: dict = {}
    exec(compile(ast.Module(body=[*ast.parse("import fnmatch, os\nfrom pathlib import Path\nimport yaml").body,
                                  *wanted], type_ignores=[]), "setup.py", "exec"), namespace)  # noqa: S102
    files = namespace["collection_files"](REPO)
    return sorted({f.parts[0] if len(f.parts) > 1 else str(f) for f in files})


def ansible_builder() -> str | None:
    for candidate in (os.environ.get("ANSIBLE_BUILDER"), str(BIN / "ansible-builder"), shutil.which("ansible-builder")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_definition_is_schema_3_with_only_known_sections():
    ee = definition()
    assert ee["version"] == 3
    assert set(ee) <= TOP_LEVEL, f"unknown top-level keys: {sorted(set(ee) - TOP_LEVEL)}"
    assert set(ee["dependencies"]) <= DEPENDENCY_KEYS, sorted(set(ee["dependencies"]) - DEPENDENCY_KEYS)
    assert ee["images"]["base_image"]["name"].strip()
    for key in ("ansible_core", "ansible_runner"):
        assert set(ee["dependencies"][key]) == {"package_pip"}, key
    for entry in ee.get("additional_build_files", []):
        assert set(entry) == {"src", "dest"}, entry
        assert not Path(entry["dest"]).is_absolute() and ".." not in Path(entry["dest"]).parts, entry


def test_python_requirements_are_pyprojects_controller_dependencies():
    ee = definition()
    deps = ee["dependencies"]
    version = image_python_version(ee)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert SpecifierSet(project["requires-python"]).contains(version + ".0"), (
        f"the image's Python {version} is outside requires-python {project['requires-python']}")
    wanted = requirement_map(project["dependencies"], version)
    python = deps.get("python") or []
    assert isinstance(python, list), "keep dependencies.python inline so this test can read it"
    shipped = requirement_map([deps["ansible_core"]["package_pip"], deps["ansible_runner"]["package_pip"], *python],
                              version)
    assert shipped == wanted
    assert set(requirement_map([deps["ansible_core"]["package_pip"]], version)) == {"ansible-core"}
    assert set(requirement_map([deps["ansible_runner"]["package_pip"]], version)) == {"ansible-runner"}


def test_every_named_file_exists_and_the_collection_parts_are_the_wheels():
    ee = definition()
    for key in ("python", "system", "galaxy"):
        value = ee["dependencies"].get(key)
        if isinstance(value, str) and "\n" not in value:
            assert (REPO / value).is_file(), f"dependencies.{key}: {value} does not exist"
    sources = []
    for entry in ee["additional_build_files"]:
        matches = list(REPO.glob(entry["src"]))
        assert matches, f"additional_build_files: {entry['src']} matches nothing"
        src = Path(entry["src"])
        # Directories are copied by content into dest, files into dest/: both must land where they sit in the repo.
        expected_dest = Path("gpufleet_cluster") / (src if (REPO / src).is_dir() else src.parent)
        assert Path(entry["dest"]) == expected_dest, entry
        sources.append(entry["src"])
    assert sorted(sources) == sorted(collection_parts())
    galaxy = ee["dependencies"]["galaxy"]
    assert galaxy == {"collections": [{"name": f"{CONTAINER_BUILD_DIR}/gpufleet_cluster", "type": "dir"}]}


def assemble_context_by_hand(ee: dict, build: Path):
    """What ansible-builder's create does with this definition's _build/: the copied files and requirements.yml."""
    for entry in ee["additional_build_files"]:
        dest = build / entry["dest"]
        dest.mkdir(parents=True, exist_ok=True)
        for src in REPO.glob(entry["src"]):
            if src.is_dir():
                shutil.copytree(src, dest, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dest / src.name)
    (build / "requirements.yml").write_text(yaml.safe_dump(ee["dependencies"]["galaxy"]))


def isolated_env(collections: Path) -> dict:
    # Only the target path: a gpufleet.cluster installed elsewhere on this machine must not count as installed.
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1",
                ANSIBLE_NOCOLOR="1", PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def replay_galaxy_step(build: Path, tmp_path: Path) -> Path:
    """The EE's galaxy step (ansible-galaxy collection install -r requirements.yml) on this machine."""
    requirements = build / "requirements.yml"
    text = requirements.read_text().replace(f"{CONTAINER_BUILD_DIR}/", f"{build}/")
    requirements.write_text(text)
    collections = tmp_path / "collections"
    env = isolated_env(collections)
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "-r", str(requirements),
                           "--collections-path", str(collections)], cwd=build, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    installed = collections / "ansible_collections" / "gpufleet" / "cluster"
    assert "gpufleet.cluster:0.1.0 was installed successfully" in proc.stdout, proc.stdout[-2000:]
    for needed in ("MANIFEST.json", "meta/runtime.yml", "roles/smoke_test/files/gpufleet_smoke.py",
                   "plugins/action/smoke_report.py", "playbooks/site.yml", "docs/run-summary.schema.json"):
        assert (installed / needed).is_file(), needed
    # What build_ignore keeps out stays out (the simulator, the integration tiers), and no self-link loop.
    assert not (installed / "tests" / "sim").exists() and not (installed / "tests" / "full").exists()
    assert not (installed / "collections").exists()
    # The installed collection alone resolves its FQCN playbooks (no checkout, no self-link).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", "gpufleet.cluster.site"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert str(installed / "playbooks" / "site.yml") in proc.stdout
    return installed


@pytest.mark.skipif(ansible_builder() is None, reason="ansible-builder is not installed (pip install .[ee], "
                    "or ANSIBLE_BUILDER=/path/to/ansible-builder)")
def test_ansible_builder_creates_a_context_whose_galaxy_step_installs_the_collection(tmp_path):
    context = tmp_path / "context"
    proc = subprocess.run([ansible_builder(), "create", "-f", str(EE_FILE), "-c", str(context)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Complete! The build context can be found at" in proc.stdout
    ee = definition()
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()).read_text()
    interpreter = ee["dependencies"]["python_interpreter"]
    assert f'ARG EE_BASE_IMAGE="{ee["images"]["base_image"]["name"]}"' in containerfile
    assert f'ARG PYCMD="{interpreter["python_path"]}"' in containerfile
    refs = f'{ee["dependencies"]["ansible_core"]["package_pip"]} {ee["dependencies"]["ansible_runner"]["package_pip"]}'
    assert f'ARG ANSIBLE_INSTALL_REFS="{refs}"' in containerfile
    assert "ansible-galaxy collection install" in containerfile and "COPY _build /build" in containerfile
    build = context / "_build"
    assert (build / "requirements.txt").read_text().split() == ee["dependencies"]["python"]
    assert (build / "bindep.txt").read_text().splitlines() == ee["dependencies"]["system"]
    replay_galaxy_step(build, tmp_path)


def test_context_assembled_as_ansible_builder_does_installs_the_collection(tmp_path):
    build = tmp_path / "_build"
    assemble_context_by_hand(definition(), build)
    replay_galaxy_step(build, tmp_path)
