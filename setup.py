"""Bundles the gpufleet.cluster collection into the wheel, so `pip install` gives a working CLI.

The repository root is the collection; the build copies its runtime parts into
gpufleet/_collection/ansible_collections/gpufleet/cluster/ inside the package (not into the source
tree), where gpufleet.collection.locate() finds them. Editable installs keep using the clone itself.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# What ansible-playbook needs at run time, plus the metadata `ansible-galaxy collection list` and
# `gpufleet --version` read, the summary schema and the default ansible.cfg (used only when the user
# has none of their own).
COLLECTION_PARTS = ["galaxy.yml", "meta", "plugins", "roles", "playbooks", "ansible.cfg", "README.md", "LICENSE",
                    "CHANGELOG.md", "docs/run-summary.schema.json"]


class BuildWithCollection(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "gpufleet" / "_collection" / "ansible_collections" / "gpufleet" / "cluster"
        if target.exists():
            shutil.rmtree(target)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        for part in COLLECTION_PARTS:
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(source, target / part, ignore=ignore)
            elif source.is_file():
                (target / part).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / part)
            else:
                raise FileNotFoundError(f"collection part {part} is missing from {ROOT}")


setup(cmdclass={"build_py": BuildWithCollection})
