"""Where the gpufleet.cluster collection is, and how Ansible is pointed at it.

Two layouts are supported:
* a clone: the package sits in the repository root, which is the collection, and the committed
  self-link `collections/ansible_collections/gpufleet/cluster -> ../../..` makes FQCNs resolve;
* an installed wheel: setup.py's build step puts the collection beside the package, at
  `site-packages/ansible_collections/gpufleet/cluster` (where the `ansible` package puts its
  collections), so ansible-doc, ansible-playbook and gpufleet all find this one copy.

Either way the runner runs the FQCN playbook (`gpufleet.cluster.preflight`) with that directory first
on ANSIBLE_COLLECTIONS_PATH, followed by the collection paths the user's own configuration names, so
the same command works from any directory with the user's inventory, ansible.cfg and SSH settings
(gpufleet.settings merges the settings the collection needs into the user's).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
NAMESPACE, NAME = "gpufleet", "cluster"


@dataclass(frozen=True)
class Collection:
    root: Path  # the collection's own directory (galaxy.yml, playbooks/, roles/, plugins/)
    collections_dir: Path  # the directory holding ansible_collections/gpufleet/cluster
    source: str  # "clone" or "package"

    @property
    def version(self) -> str:
        for line in (self.root / "galaxy.yml").read_text().splitlines():
            key, _sep, value = line.partition(":")
            if key.strip() == "version":
                return value.strip().strip("'\"")
        return "unknown"


def locate() -> Collection | None:
    """The collection this package runs, or None when neither layout is present."""
    clone = PACKAGE_DIR.parent
    if (clone / "galaxy.yml").is_file() and (clone / "collections" / "ansible_collections" / NAMESPACE / NAME).exists():
        return Collection(root=clone, collections_dir=clone / "collections", source="clone")
    site_packages = PACKAGE_DIR.parent
    root = site_packages / "ansible_collections" / NAMESPACE / NAME
    if (root / "galaxy.yml").is_file():
        return Collection(root=root, collections_dir=site_packages, source="package")
    return None


def playbook_fqcn(stage_playbook: str) -> str:
    """`playbooks/preflight.yml` -> `gpufleet.cluster.preflight` (site is playbooks/site.yml)."""
    return f"{NAMESPACE}.{NAME}.{Path(stage_playbook).stem}"


def user_collections_paths() -> list[str]:
    """The collection paths the user's environment and configuration give Ansible."""
    from ansible import constants

    return [str(p) for p in constants.COLLECTIONS_PATHS]


def ansible_env(collection: Collection | None) -> dict[str, str]:
    """ANSIBLE_COLLECTIONS_PATH with this collection first, then the user's own collection paths."""
    paths = user_collections_paths()
    if collection is not None:
        paths = [str(collection.collections_dir)] + [p for p in paths if p != str(collection.collections_dir)]
    return {"ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(paths)}
