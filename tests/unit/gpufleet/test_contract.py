"""The exit-code contract: every failure path writes summary.json with a one-line reason and exits 2,
nodes that fail checks exit 1, and no input ends in a Python traceback."""

import json

import jsonschema
import pytest
from cli_helpers import REPO, clean_env, closed_port, local_inventory, run_cli

from gpufleet.summary import SCHEMA_PATH

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def _assert_broken(result, artifacts, reason_part):
    assert result.rc == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    summary = result.summary(artifacts)
    jsonschema.validate(summary, SCHEMA)
    assert summary["exit_code"] == 2 and summary["result"] == "run_broken"
    reason = summary["reason"]
    assert reason and "\n" not in reason
    assert reason_part in reason, reason
    return summary


@pytest.mark.parametrize(("extra", "reason_part"), [
    (["-e", "{bad json"], "-e argument 1 (JSON/YAML) is not valid"),
    (["-e", "[1, 2]"], "could not be made into a dictionary"),
    (["-e", "a=1", "-e", "@missing-vars.yml"], "-e argument 2 @missing-vars.yml"),
    (["-e", "gpufleet_reboot_ok"], "word without '='"),
    (["-e", "./vars.yml"], "prepend"),
])
def test_bad_extra_vars_break_the_run_without_echoing_the_value(outside, extra, reason_part):
    inventory = local_inventory(outside / "inv.yml")
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts, *extra], cwd=outside)
    summary = _assert_broken(result, artifacts, reason_part)
    assert "{bad json" not in summary["reason"]  # a value may be a credential: never repeated


def test_unwritable_artifacts_directory_still_gets_a_summary(outside):
    blocker = outside / "a-file"
    blocker.write_text("not a directory\n")
    artifacts = blocker / "out"
    # The fallback is a new temporary directory: this test's own, so the run leaves nothing in /tmp.
    tmp = outside.parent / "tmp"
    tmp.mkdir()
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml"), "--artifacts", artifacts],
                     cwd=outside, env=clean_env(PYTHONPATH=str(REPO), TMPDIR=str(tmp)))
    summary = _assert_broken(result, None, "is not writable")
    assert str(artifacts) in summary["reason"]
    assert result.summary_path().parent.parent == tmp
    assert result.summary_path().parent.name.startswith("gpufleet-summary-")


def test_unparsable_inventory_uses_ansibles_own_failure(outside):
    bad = outside / "bad.yml"
    bad.write_text("gpu_nodes: [unclosed\n")
    artifacts = outside / "out"
    result = run_cli(["run", "validate", "-i", bad, "--artifacts", artifacts], cwd=outside)
    summary = _assert_broken(result, artifacts, "could not be parsed")
    assert str(bad) in summary["reason"] and "YAML" in summary["reason"]
    err = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("gpufleet: run broke:")


def test_missing_inventory_breaks_the_run(outside):
    result = run_cli(["run", "validate", "-i", outside / "nope.yml", "--artifacts", outside / "out"], cwd=outside)
    _assert_broken(result, outside / "out", "does not exist")


def test_limit_matching_nothing_breaks_the_run_with_ansibles_message(outside):
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml"), "--limit", "nosuchhost",
                      "--artifacts", artifacts], cwd=outside)
    summary = _assert_broken(result, artifacts, "--limit 'nosuchhost' matches no host")
    assert "no hosts" in summary["reason"]


@pytest.mark.parametrize(("argv", "reason_part"), [
    (["run", "preflight"], "the following arguments are required: -i/--inventory"),
    (["run", "deploy", "-i", "inv.yml"], "invalid choice: 'deploy'"),
    (["run", "preflight", "-i", "inv.yml", "--forks", "0"], "'0' is not a whole number"),
    (["run", "preflight", "-i", "inv.yml", "--progress-every", "60"], "outside 0 < SECONDS <= 15"),
    (["run", "preflight", "-i", "inv.yml", "--no-such-option"], "unknown option --no-such-option"),
])
def test_command_line_errors_write_a_summary_too(outside, argv, reason_part):
    artifacts = outside / "out"
    result = run_cli([*argv, "--artifacts", artifacts], cwd=outside)
    summary = _assert_broken(result, artifacts, "bad command line: ")
    assert reason_part in summary["reason"]
    assert result.stderr.startswith("usage: gpufleet")
    if "preflight" in argv:
        assert summary["stage"] == "preflight"


def test_every_node_unreachable_breaks_the_run(outside):
    port = closed_port()
    inventory = outside / "inv.ini"
    inventory.write_text("[gpu_nodes]\n" + "".join(
        f"{name} ansible_host=127.0.0.1 ansible_port={port} ansible_connection=ssh\n" for name in ("n1", "n2")))
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], cwd=outside)
    summary = _assert_broken(result, artifacts, "every node was unreachable (n1, n2)")
    assert "Connection refused" in summary["reason"] or "port" in summary["reason"]
    assert summary["failed_nodes"] == ["n1", "n2"]


def test_tags_that_select_nothing_are_not_a_pass(outside):
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", local_inventory(outside / "inv.yml"), "--tags", "no_such_tag",
                      "--artifacts", artifacts], cwd=outside)
    _assert_broken(result, artifacts, "no task ran on any node")


def test_internal_errors_are_caught_with_a_reason(outside, monkeypatch, capsys):
    from gpufleet import cli

    def explode(*args, **kwargs):
        raise ValueError("unexpected\nstate")

    monkeypatch.chdir(outside)
    monkeypatch.setattr(cli, "run_stage", explode)
    monkeypatch.delenv("GPUFLEET_DEBUG", raising=False)
    rc = cli.main(["run", "preflight", "-i", "inv.yml", "--artifacts", str(outside / "out")])
    summary = json.loads((outside / "out" / "summary.json").read_text())
    assert rc == 2 and summary["reason"].startswith("internal error: ValueError: unexpected state")
    assert "Traceback" not in capsys.readouterr().err


def test_no_arguments_prints_help_exits_2_and_writes_nothing(outside):
    result = run_cli([], cwd=outside)
    assert result.rc == 2
    assert result.stderr.startswith("usage: gpufleet") and "run" in result.stderr and "Exit codes" in result.stderr
    assert list(outside.iterdir()) == []


def test_run_help_lists_every_stage_with_a_line_each_in_order(outside):
    from gpufleet.runner import STAGES

    result = run_cli(["run", "--help"], cwd=outside)
    assert result.rc == 0
    lines = result.stdout.splitlines()
    start = lines.index("stages, in the order site runs them:")
    # One entry each; an entry longer than the terminal continues on indented lines (issue 34).
    entries = [line for line in lines[start + 1:] if line.startswith("  ") and not line.startswith("   ")]
    entries = entries[:len(STAGES)]
    listed = [line.split()[0] for line in entries]
    assert listed == ["preflight", "stack", "fabric", "validate", "smoke", "site"] == list(STAGES)
    assert all(len(line.split()) > 3 for line in entries)  # each says what it does
