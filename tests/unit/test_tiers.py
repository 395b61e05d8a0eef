"""The tiers' bookkeeping without a cluster: the input hash that keys the converged image and gates the
full tier, the full tier's record as .ci/run reads it, and the scheduler that keeps the fleet on one worker."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import tiers


@pytest.fixture
def tree(tmp_path):
    """A small git checkout holding one file under each kind of full-tier input."""
    root = tmp_path / "repo"
    for rel in ("roles/r/tasks/main.yml", "tests/sim/gfsim/a.py", "molecule/default/molecule.yml", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}\n")
    (root / ".gitignore").write_text("ignored/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    (root / "tests").mkdir(exist_ok=True)
    return root


def test_the_hash_follows_content_of_inputs_only(tree):
    before = tiers.full_tier_hash(tree)
    assert tiers.full_tier_hash(tree) == before   # stable
    (tree / "README.md").write_text("not an input\n")
    (tree / "ignored").mkdir()
    (tree / "ignored" / "x.yml").write_text("ignored by git\n")
    assert tiers.full_tier_hash(tree) == before
    (tree / "roles/r/tasks/main.yml").write_text("changed\n")   # an uncommitted edit counts
    assert tiers.full_tier_hash(tree) != before


def test_markdown_under_the_inputs_is_no_input(tree):
    before = tiers.full_tier_hash(tree)
    (tree / "roles/r/README.md").write_text("# r\nwhat the role does\n")
    assert tiers.full_tier_hash(tree) == before
    (tree / "roles/r/tasks/extra.yml").write_text("---\n")
    assert tiers.full_tier_hash(tree) != before


def test_an_untracked_new_input_and_a_deleted_one_count(tree):
    before = tiers.full_tier_hash(tree)
    (tree / "roles/r/defaults").mkdir()
    (tree / "roles/r/defaults/main.yml").write_text("new: 1\n")
    added = tiers.full_tier_hash(tree)
    assert added != before
    (tree / "tests/sim/gfsim/a.py").unlink()
    assert tiers.full_tier_hash(tree) not in (before, added)


def test_the_record_gates_the_full_tier(tree):
    ok, why = tiers.check_full(tree)
    assert not ok and "missing" in why
    tiers.record_full(123.4, tree)
    ok, why = tiers.check_full(tree)
    assert ok, why
    record = json.loads((tree / "tests" / "full-tier-passed.json").read_text())
    assert record["seconds"] == 123 and record["inputs_sha256"] == tiers.full_tier_hash(tree)
    (tree / "molecule/default/molecule.yml").write_text("changed\n")
    ok, why = tiers.check_full(tree)
    assert not ok and "changed since it passed" in why
    (tree / "tests" / "full-tier-passed.json").write_text("{not json")
    assert tiers.check_full(tree)[0] is False


def test_outside_git_every_file_under_the_inputs_counts(tree):
    shutil.rmtree(tree / ".git")
    before = tiers.full_tier_hash(tree)
    (tree / "roles/r/tasks/main.yml").write_text("changed\n")
    assert tiers.full_tier_hash(tree) != before


def test_every_fleet_test_is_one_work_unit_and_every_other_test_its_own():
    assert tiers.fleet_scope("tests/integration/test_converge.py::test_a") == "fleet"
    assert tiers.fleet_scope("tests/integration/test_faults_smoke.py::test_b[x]") == "fleet"
    assert tiers.fleet_scope("tests/unit/test_tiers.py::test_c") == "tests/unit/test_tiers.py::test_c"
    if tiers.fleet_scheduler is not None:   # the scheduler xdist gets uses exactly that split
        assert tiers.fleet_scheduler._split_scope(None, "tests/integration/x.py::t") == "fleet"


def test_the_fleet_leads_then_the_slow_tests_then_torch_then_the_rest_and_the_full_tier_keeps_its_order():
    run = [("tests/unit/a.py::t", set()), ("tests/unit/b.py::t", {"torch"}), ("tests/full/c.py::t", {"slow"}),
           ("tests/unit/d.py::t", {"slow", "torch"}), ("tests/integration/test_faults_smoke.py::t", {"sim"}),
           ("tests/gpu/e.py::t", {"slow"})]
    ordered = sorted(run, key=lambda test: tiers.run_rank(*test))
    assert [test[0] for test in ordered] == [
        "tests/integration/test_faults_smoke.py::t", "tests/unit/d.py::t", "tests/gpu/e.py::t", "tests/unit/b.py::t",
        "tests/unit/a.py::t", "tests/full/c.py::t"]


def test_this_runs_collection_is_in_that_order(request):
    """tests/conftest.py sorts by run_rank after every other collection hook (the fleet's phase sort included)."""
    ranks = [tiers.run_rank(item.nodeid, item.keywords) for item in request.session.items]
    assert ranks == sorted(ranks)
