"""Issue 34: a configuration mistake is the user's, not the nodes'. Each one exits 2 from `gpufleet run
preflight` before any node task runs, with a first line that names the bad value and what would work, the
whole message in summary.json's reason, no node blamed, and never Ansible's "Finalization of task args" wrapper.

The inventories are local-connection hosts: nothing may reach a node anyway. That no node task ran is read
from the run's events: no task result on a host but the input checks (the configuration check, the roles'
argument validation); the last test shows the same inventory without the mistake does run node tasks."""

import json
import sys

import pytest
from cli_helpers import run_cli

# The tasks that check input, not a node: the configuration check and the roles' argument validation.
INPUT_TASKS = {"Stop on a configuration error", "Validating arguments against arg spec 'main' - Preflight"}


def _inventory(path, group_vars=None, group="gpu_nodes"):
    hosts = {name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
             for name in ("n1", "n2")}
    path.write_text(json.dumps({group: {"hosts": hosts, "vars": group_vars or {}}}))
    return path


def _node_tasks(artifacts):
    """(task, host) of every task result on a host, the input checks left out."""
    ran = []
    for event_file in sorted((artifacts / "runner" / "job_events").glob("*.json")):
        event = json.loads(event_file.read_text())
        data = event.get("event_data") or {}
        if event.get("event", "").startswith("runner_on_") and data.get("host"):
            task = data.get("task", "")
            if task not in INPUT_TASKS and not task.startswith("Validating arguments"):
                ran.append((task, data["host"]))
    return ran


# (id, inventory group vars, extra CLI arguments, text the first line must hold: the bad value, then what works)
MISTAKES = [
    ("request-key-typo", {"gpufleet_stack_request": {"torh": "2.3.0"}}, [], ["gpufleet_stack_request.torh: unknown request key", "did you mean 'torch'?"]),
    ("unknown-cuda", {"gpufleet_stack_request": {"cuda": "12.99"}}, [], ["[UNKNOWN_CUDA]", "12.99", "known toolkits: "]),
    ("unknown-torch", {"gpufleet_stack_request": {"torch": "9.9"}}, [], ["[UNKNOWN_TORCH]", "9.9", "known releases: "]),
    ("unknown-gpu", {"gpufleet_stack_request": {"torch": "2.4.1", "gpus": ["NVIDIA H10 80GB"]}}, [],
     ["'NVIDIA H10 80GB'", "nearest known models: ", "NVIDIA H100 80GB HBM3"]),
    ("request-not-a-mapping", {"gpufleet_stack_request": "2.3.0"}, [], ["'2.3.0'", "must be a mapping such as"]),
    ("driver-compat-typo", {"gpufleet_stack_request": {"driver_compat": "fulll"}}, [],
     ["'fulll'", "\"full\" or \"minor\""]),
    ("unknown-driver-branch", {"gpufleet_stack_request": {"driver_branch": "999"}}, [],
     ["[UNKNOWN_DRIVER_BRANCH]", "'999'", "known branches: "]),
    ("unsupported-os", {"gpufleet_stack_request": {"os": "ubuntu18.04"}}, [],
     ["[UNSUPPORTED_OS]", "'ubuntu18.04'", "Supported: "]),
    ("torch-variant-without-wheel", {"gpufleet_stack_request": {"torch": "2.1.2", "torch_variant": "cu124", "cuda": "12.1"}},
     [], ["[TORCH_NO_WHEEL_FOR_CUDA]", "cu124", "carries cu118, cu121"]),
    ("torch-cuda-major-mismatch", {"gpufleet_stack_request": {"torch": "2.0.1", "cuda": "12.4"}}, [],
     ["[TORCH_CUDA_MAJOR_MISMATCH]", "torch 2.0.1", "allow_cuda_major_mismatch: true"]),
    ("side-by-side-unknown-cuda", {"gpufleet_stack_request": {"cuda": ["11.8", "12.99"]}}, [],
     ["[UNKNOWN_CUDA]", "12.99", "known toolkits: "]),
    ("nvswitch-not-a-bool", {"gpufleet_stack_request": {"nvswitch": "yes please"}}, [],
     ["nvswitch", "'yes please'", "true or false"]),
    ("profile-name-typo", {"gpufleet_profile": "trainig"}, [], ["'trainig'", "did you mean 'training'?"]),
    ("profile-key-typo", {"gpufleet_profile": "big",
                          "gpufleet_custom_profiles": {"big": {"extends": "training", "min_gpu_per_node": 8}}}, [],
     ["big.min_gpu_per_node: unknown profile key", "did you mean 'min_gpus_per_node'?"]),
    ("profile-bad-value", {"gpufleet_profile": "big",
                           "gpufleet_custom_profiles": {"big": {"extends": "training", "min_gpus_per_node": "eight"}}},
     [], ["min_gpus_per_node", "'eight'", "non-negative integer"]),
    ("profile-extends-unknown", {"gpufleet_profile": "big", "gpufleet_custom_profiles": {"big": {"extends": "trainingg"}}},
     [], ["'trainingg'", "unknown profile", "did you mean 'training'?"]),
    ("variable-typo", {"smoke_test_launchr": "srun"}, [], ["'smoke_test_launchr'", "did you mean 'smoke_test_launcher'?"]),
    ("request-variable-typo", {"gpufleet_stack_requst": {"torch": "2.4.1"}}, [],
     ["'gpufleet_stack_requst'", "did you mean 'gpufleet_stack_request'?"]),
    ("extra-var-typo", {}, ["-e", "preflight_mod=warn"], ["'preflight_mod'", "did you mean 'preflight_mode'?"]),
    ("extra-var-request", {}, ["-e", '{"gpufleet_stack_request": {"cuda": "12.99", "torch": "2.4.1"}}'],
     ["[UNKNOWN_CUDA]", "12.99", "known toolkits: "]),
    ("role-variable-choice", {"preflight_mode": "warning"}, [], ["preflight_mode", "warning", "strict, warn"]),
]


# Inventory mistakes: (id, the inventory file's name and bytes, what the first line must hold).
_LOCAL = "{ansible_connection: local}"
INVENTORY_MISTAKES = [
    ("yaml-error", "inv.yml", f"gpu_nodes:\n  hosts:\n    n1: {_LOCAL[:-1]}\n".encode(),
     ["could not be parsed", "inv.yml line 4 column 1", "did not find expected ',' or '}'"]),
    ("not-utf8", "inv.yml", f"gpu_nodes:\n  hosts:\n    n\xe91: {_LOCAL}\n".encode("latin-1"),
     ["inv.yml is not UTF-8 text", "save it as UTF-8"]),
    ("group-typo", "inv.yml", f"gpu_node:\n  hosts:\n    n1: {_LOCAL}\n".encode(),
     ["no hosts in group 'gpu_nodes'", "its group 'gpu_node' a typo", "its groups: gpu_node"]),
]


@pytest.mark.parametrize(("name", "text", "expected"), [m[1:] for m in INVENTORY_MISTAKES],
                         ids=[m[0] for m in INVENTORY_MISTAKES])
def test_an_inventory_mistake_names_the_file_the_place_and_the_fix(outside, name, text, expected):
    inventory = outside / name
    inventory.write_bytes(text)
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], cwd=outside)
    output = result.stdout + result.stderr
    assert result.rc == 2, output
    assert "Traceback" not in output and "surrogates" not in output and "--tags/--skip-tags" not in output
    first = next(line for line in result.stderr.splitlines() if line.startswith("gpufleet: run broke: "))
    for part in expected:
        assert part in first, first
    summary = result.summary(artifacts)
    assert summary["reason"] in first and summary["failed_nodes"] == []
    assert _node_tasks(artifacts) == []


@pytest.mark.parametrize(("group_vars", "extra", "expected"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_a_configuration_mistake_exits_2_before_any_node_task(outside, group_vars, extra, expected):
    inventory = _inventory(outside / "inv.json", group_vars)
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts, *extra], cwd=outside)
    output = result.stdout + result.stderr
    assert result.rc == 2, output
    assert "Finalization of task args" not in output and "Traceback" not in output
    first = next(line for line in result.stderr.splitlines() if line.startswith("gpufleet: run broke: "))
    for part in expected:
        assert part in first, first
    summary = result.summary(artifacts)
    assert summary["exit_code"] == 2 and summary["failed_nodes"] == []
    assert first == "gpufleet: run broke: " + summary["config_errors"][0]  # whole, on the console and in the file
    assert summary["reason"][:400] == summary["config_errors"][0][:400]
    assert "Finalization of task args" not in summary["reason"]
    assert _node_tasks(artifacts) == []


def test_a_correct_configuration_reaches_the_nodes(outside):
    """The other side: the same inventory with nothing wrong runs the node tasks (so the check above can fail)."""
    inventory = _inventory(outside / "inv.json",
                           {"gpufleet_stack_request": {"torch": "2.4.1"}, "smoke_test_launcher": "srun"})
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], cwd=outside)
    assert "[UNKNOWN" not in result.stdout + result.stderr
    assert _node_tasks(artifacts), result.stdout + result.stderr


@pytest.mark.parametrize("mode", ["warn", "strict"])
def test_a_request_the_solver_refuses_after_the_facts_exits_2_in_either_mode(outside, mode):
    """A refusal that needs the nodes' facts (read-only): the solver's rule reaches the user whole, Ansible's
    wrapper cut off, and warn mode does not pass without a plan. Driver branch 535 is too old for CUDA 12.9 on
    every OS, so the test does not depend on the machine's."""
    request = {"cuda": "12.9", "torch": "2.4.1", "driver_branch": "535"}
    inventory = _inventory(outside / "inv.json", {"gpufleet_stack_request": request, "preflight_mode": mode,
                                                  "gpufleet_profile": "experiments"})
    artifacts = outside / "out"
    result = run_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], cwd=outside)
    output = result.stdout + result.stderr
    assert result.rc == 2, output
    assert "Finalization of task args" not in output and "passed" not in result.stdout.splitlines()[-2]
    summary = result.summary(artifacts)
    assert summary["reason"].startswith("[DRIVER_BRANCH_TOO_OLD_FOR_CUDA] driver branch 535 runs CUDA up to 12.2")
    assert summary["ready_nodes"] == []
    # No node is blamed for the request; a GPU-less test node may still fail its own checks (strict stops it).
    assert all(summary["nodes"][node]["findings"] for node in summary["failed_nodes"])
    assert mode == "strict" or summary["failed_nodes"] == []


def _failed(host, task, msg, **data):
    return {"event": "runner_on_failed", "event_data": {"host": host, "task": task, "res": {"msg": msg, **data.pop("res", {})},
                                                        **data}}


@pytest.mark.parametrize(("event", "reason"), [
    # gpu_stack.yml's plan (a set_fact): Ansible wraps the filter's error.
    (_failed("n1", "Compute the stack plan", "Task failed: Finalization of task args for 'ansible.builtin.set_fact' "
             "failed: Error while resolving value for 'gpu_stack_plan': stack_plan: [UNKNOWN_CUDA] CUDA 12.99 is not "
             "in the compatibility data; known toolkits: 12.4, 12.6."),
     "[UNKNOWN_CUDA] CUDA 12.99 is not in the compatibility data; known toolkits: 12.4, 12.6."),
    # A role's argument spec refusing an inventory value.
    (_failed("n1", "Validating arguments against arg spec 'main'", "Validation of arguments failed:\nvalue of "
             "pytorch_variant must be one of: cu118, cu121, got: cu999", task_action="ansible.builtin.validate_argument_spec",
             role="gpufleet.cluster.pytorch",
             res={"argument_errors": ["value of pytorch_variant must be one of: cu118, cu121, got: cu999"]}),
     "[BAD_VARIABLE] the pytorch role's variables: value of pytorch_variant must be one of: cu118, cu121, got: cu999"),
])
def test_any_stage_maps_a_configuration_failure_to_exit_2_and_blames_no_node(event, reason):
    from cli_helpers import Out

    from gpufleet.runner import EventTracker, StageRun, classify, failed_hosts

    tracker = EventTracker(out=Out())
    tracker.handle({"event": "playbook_on_play_start", "event_data": {"play": "Install the planned GPU software stack"}})
    tracker.handle({"event": "playbook_on_task_start", "event_data": {"task": event["event_data"]["task"]}})
    tracker.handle(event)
    tracker.handle({"event": "playbook_on_stats", "event_data": {"failures": {"n1": 1}}})
    run = StageRun(stage="stack", inventory="inv", artifacts=None, rc=2, tracker=tracker, hosts=["n1"],
                   duration_s=1.0, runner_status="failed")
    assert classify(run) == (2, reason)
    assert failed_hosts(run) == set()


def test_the_cli_checks_extra_vars_itself_before_ansible_starts_for_any_stage(outside):
    inventory = _inventory(outside / "inv.json")
    artifacts = outside / "out"
    result = run_cli(["run", "stack", "-i", inventory, "--artifacts", artifacts,
                      "-e", '{"gpufleet_stack_request": {"torh": "2.3.0"}}', "-e", "gpufleet_reboot_okay=true"],
                     cwd=outside)
    assert result.rc == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == ("gpufleet: run broke: [UNKNOWN_VARIABLE] variable 'gpufleet_reboot_okay' is not one of "
                        "gpufleet's and would be ignored; did you mean 'gpufleet_reboot_ok'?")
    assert lines[1].startswith("[UNKNOWN_REQUEST_KEY] gpufleet_stack_request.torh: unknown request key (did you "
                               "mean 'torch'?)")
    summary = result.summary(artifacts)
    assert summary["config_errors"] == [lines[0][len("gpufleet: run broke: "):], lines[1]]
    assert [e.split("]")[0] for e in summary["config_errors"]] == ["[UNKNOWN_VARIABLE", "[UNKNOWN_REQUEST_KEY"]
    assert not (artifacts / "runner" / "job_events").exists()  # ansible-playbook never started


@pytest.mark.parametrize(("stage", "group_vars", "expected"), [
    ("stack", {"gpufleet_stack_request": {"torh": "2.3.0"}},
     "[UNKNOWN_REQUEST_KEY] gpufleet_stack_request.torh: unknown request key (did you mean 'torch'?)"),
    ("validate", {"smoke_test_launchr": "srun"},
     "[UNKNOWN_VARIABLE] variable 'smoke_test_launchr' is not one of gpufleet's and would be ignored; "
     "did you mean 'smoke_test_launcher'?"),
], ids=["stack-request-typo", "validate-variable-typo"])
def test_the_inventorys_configuration_is_checked_before_ansible_starts_for_any_stage(
        outside, stage, group_vars, expected):
    """Not only preflight: `gpufleet run stack` with {torh: 2.3.0} in the inventory once planned the default torch
    (the key ignored with a warning), installed it and exited 0."""
    inventory = _inventory(outside / "inv.json", group_vars)
    artifacts = outside / "out"
    result = run_cli(["run", stage, "-i", inventory, "--artifacts", artifacts], cwd=outside)
    assert result.rc == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[0].startswith("gpufleet: run broke: " + expected), result.stderr
    assert not (artifacts / "runner" / "job_events").exists()  # ansible-playbook never started
