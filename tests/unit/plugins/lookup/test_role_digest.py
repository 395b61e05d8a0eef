"""role_digest: the stack's record key moves with any file of the stack roles, and only with those."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ansible.errors import AnsibleError

from ansible_collections.gpufleet.cluster.plugins.lookup.role_digest import LookupModule, roles_digest

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
def collection(tmp_path):
    for role in ("nccl", "pytorch"):
        shutil.copytree(REPO / "roles" / role, tmp_path / "roles" / role)
    return tmp_path


def test_a_changed_default_template_or_task_changes_the_digest(collection):
    before = roles_digest(["nccl", "pytorch"], root=str(collection))
    assert before == roles_digest(["nccl", "pytorch"], root=str(collection))
    defaults = collection / "roles" / "nccl" / "defaults" / "main.yml"
    defaults.write_text(defaults.read_text() + "nccl_hold: false\n")
    edited = roles_digest(["nccl", "pytorch"], root=str(collection))
    assert edited != before
    (collection / "roles" / "pytorch" / "files" / "torch_probe.py").unlink()
    assert roles_digest(["nccl", "pytorch"], root=str(collection)) not in (before, edited)


def test_another_role_does_not_move_it_and_an_unknown_role_is_an_error(collection):
    before = roles_digest(["nccl"], root=str(collection))
    (collection / "roles" / "pytorch" / "defaults" / "main.yml").write_text("---\n")
    assert roles_digest(["nccl"], root=str(collection)) == before
    with pytest.raises(AnsibleError, match="no role 'gpu_stack'"):
        roles_digest(["gpu_stack"], root=str(collection))


def test_the_lookup_reads_this_collection():
    (digest,) = LookupModule().run(["nvidia_driver", "cuda_toolkit", "nccl", "pytorch"])
    assert digest == roles_digest(["nvidia_driver", "cuda_toolkit", "nccl", "pytorch"], root=str(REPO))
    assert len(digest) == 64
