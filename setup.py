"""Installs the gpufleet.cluster collection with the CLI, where Ansible looks for collections.

The repository root is the collection; the build puts a copy of it at
`ansible_collections/gpufleet/cluster/` beside the `gpufleet` package in site-packages (the place the
`ansible` package puts its collections), so `ansible-doc gpufleet.cluster.gpu_info`,
`ansible-playbook gpufleet.cluster.preflight` and `gpufleet run` all find this one installed copy.
The copy holds what the collection tarball holds: the files galaxy.yml's build_ignore keeps out stay
out of both, so there is one list of what users get. galaxy.yml itself comes along (ansible-galaxy
would write MANIFEST.json instead) because `gpufleet --version` and ansible-doc read it.
Editable installs keep using the clone itself.
"""

import atexit
import fnmatch
import os
import shutil
import tempfile
from pathlib import Path

import yaml
from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# What ansible-galaxy always leaves out of a collection build, besides galaxy.yml's build_ignore.
ALWAYS_IGNORED = ["MANIFEST.json", "FILES.json", ".git", "*.pyc", "*.retry", "tests/output",
                  "gpufleet-cluster-*.tar.gz"]
IGNORED_DIR_NAMES = {"CVS", ".bzr", ".hg", ".git", ".svn", "__pycache__", ".tox", ".pytest_cache"}


def collection_files(root: Path) -> list[Path]:
    """The files of the collection as `ansible-galaxy collection build` selects them, relative to root."""
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    patterns = ALWAYS_IGNORED + list(galaxy.get("build_ignore") or [])
    found = []
    for directory, dirs, files in os.walk(root):
        rel_dir = Path(directory).relative_to(root)
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIR_NAMES and not os.path.islink(Path(directory, d))
                         and not any(fnmatch.fnmatch((rel_dir / d).as_posix(), p) for p in patterns))
        found.extend(rel_dir / f for f in sorted(files)
                     if not any(fnmatch.fnmatch((rel_dir / f).as_posix(), p) for p in patterns))
    return found


class BuildWithCollection(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        if not (ROOT / "galaxy.yml").is_file() or not (ROOT / "roles").is_dir():
            raise FileNotFoundError(f"{ROOT} is not a gpufleet clone (no galaxy.yml or roles/); build the wheel "
                                    "from a clone, which is the collection")
        target = Path(self.build_lib) / "ansible_collections" / "gpufleet" / "cluster"
        if target.exists():
            shutil.rmtree(target)
        for rel in collection_files(ROOT):
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, target / rel, follow_symlinks=True)


def scratch_options() -> dict:
    """setuptools writes build/ and gpufleet.egg-info into the source tree by default: a read-only clone (a
    shared checkout, a package build as another user) could not be installed, and a writable one was left with
    litter. Both go to a temporary directory of this build process instead, removed when it ends."""
    scratch = Path(tempfile.mkdtemp(prefix="gpufleet-build-"))
    atexit.register(shutil.rmtree, scratch, True)
    return {"build": {"build_base": str(scratch / "build")}, "egg_info": {"egg_base": str(scratch)}}


setup(cmdclass={"build_py": BuildWithCollection}, options=scratch_options())
