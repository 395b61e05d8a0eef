"""One smoke job is one play batch, started on all its nodes at once.

A play with ``serial`` would run one job per batch and judge each against the whole play (the
other batches' nodes as "unreachable"); with fewer forks than nodes, Ansible starts the last
launchers after the others' roll call gave up. Both are refused before anything runs, saying what
to change. Checked with local hosts, no job is started.
"""

from smoke_play import output, run_role


def test_a_play_in_batches_is_refused(tmp_path):
    proc = run_role(tmp_path, hosts=("n1", "n2"), serial=1)
    assert proc.returncode == 2, output(proc)
    assert ("The smoke job runs over all its nodes at once, but this play runs them in batches of 1 of 2 (serial). "
            "Remove serial from the play") in proc.stdout
    assert not (tmp_path / "work").exists()


def test_fewer_forks_than_nodes_is_refused(tmp_path):
    proc = run_role(tmp_path, hosts=("n1", "n2", "n3"), forks=2)
    assert proc.returncode == 2, output(proc)
    assert "starts the launcher on all 3 nodes at once, but Ansible runs at most 2 at a time (forks)" in proc.stdout
    assert "Set forks to at least 3" in proc.stdout
    assert not (tmp_path / "work").exists()


def test_a_stack_planned_without_pytorch_is_a_configuration_conflict_named_before_anything_runs(tmp_path):
    """torch: none (issue 34) installs no PyTorch; the smoke job says so with a rule code gpufleet reads as a
    configuration error (exit 2), and nothing is copied to the node."""
    proc = run_role(tmp_path, "-e", '{"gpufleet_stack_request": {"cuda": "12.2", "torch": "none"}}')
    assert proc.returncode == 2, output(proc)
    assert "[SMOKE_NEEDS_TORCH] the smoke job trains with PyTorch, but gpufleet_stack_request says torch: none" \
        in " ".join(proc.stdout.split())
    assert not (tmp_path / "work").exists()
