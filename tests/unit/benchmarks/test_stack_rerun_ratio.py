"""benchmarks/stack_rerun_ratio.py: its arguments and its arithmetic, with ansible-playbook stood in for (the
measurement itself needs a converged cluster and is the integrator's to run)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("stack_rerun_ratio", REPO / "benchmarks" / "stack_rerun_ratio.py")
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)

RECAP = "PLAY RECAP ***\nnode1 : ok=15 changed={c} unreachable=0 failed=0\nnode2 : ok=15 changed=0 unreachable=0\n"


def test_the_ratio_is_the_ratio_of_the_medians():
    result = bench.summarise([9.0, 9.4, 9.2], [4.1, 3.9, 4.0], [0, 0, 0], 15)
    assert result["stack_rerun_median_s"] == 9.2 and result["empty_play_median_s"] == 4.0
    assert result["ratio"] == 2.3 and result["no_change"] is True and result["runs"] == 3


@pytest.mark.parametrize("stack, empty, words", [([], [], "one empty play per stack re-run"),
                                                 ([1.0, 2.0], [1.0], "one empty play per stack re-run"),
                                                 ([1.0], [0.0], "no ratio")])
def test_figures_that_give_no_ratio_are_refused(stack, empty, words):
    with pytest.raises(ValueError, match=words):
        bench.summarise(stack, empty, [0] * len(stack), 0)


def test_changed_tasks_are_summed_from_the_recap_only():
    assert bench.changed_tasks("TASK [x] changed=9\n" + RECAP.format(c=2)) == 2


def test_without_an_inventory_the_simulated_cluster_s_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.simlib, "state_dir", lambda name: tmp_path / name)
    with pytest.raises(SystemExit):
        bench.parse_args(["--sim-name", "scale8"])
    (tmp_path / "scale8").mkdir()
    (tmp_path / "scale8" / "inventory.yml").write_text("all: {}\n")
    args = bench.parse_args(["--sim-name", "scale8"])
    assert args.inventory == tmp_path / "scale8" / "inventory.yml" and args.runs == 3 and not args.converge


def test_bad_arguments_are_refused_with_what_is_wrong(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["-i", str(tmp_path / "nowhere.yml")])
    assert "no such inventory" in capsys.readouterr().err
    (tmp_path / "inv.yml").write_text("all: {}\n")
    with pytest.raises(SystemExit):
        bench.parse_args(["-i", str(tmp_path / "inv.yml"), "--runs", "0"])
    assert "--runs must be at least 1" in capsys.readouterr().err


def test_main_alternates_the_plays_converges_first_and_fails_a_run_that_changed(tmp_path, capsys):
    (tmp_path / "inv.yml").write_text("all: {}\n")
    calls = []
    times = iter([100.0, 9.0, 4.0, 11.0, 5.0])  # the converge, then stack / empty pairs

    def run(cmd):
        calls.append("stack" if "playbooks/gpu_stack.yml" in cmd else "empty")
        changed = 1 if len(calls) == 4 else 0
        return next(times), "TASK [a]\nTASK [b]\n" + RECAP.format(c=changed)
    rc = bench.main(["-i", str(tmp_path / "inv.yml"), "--runs", "2", "--converge", "--json", str(tmp_path / "r.json")],
                    run=run)
    assert calls == ["stack", "stack", "empty", "stack", "empty"]
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["ratio"] == 2.22 and result["stack_tasks"] == 2  # (9+11)/2 over (4+5)/2
    assert result["changed_per_run"] == [0, 1] and rc == 1
    assert "= 2.22x" in capsys.readouterr().out
