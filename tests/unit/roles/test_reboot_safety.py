"""The reboot role's checks before a node goes down, and the batched reboot play.

The checks run for real through Ansible on this machine against stand-ins: nvidia-smi replays a
real `--query-compute-apps` capture (tests/fixtures_path FIXTURES, SOURCES.md), scontrol keeps a
node state in a file and answers in scontrol's one-line format (SchedMD/slurm src/api/node_info.c),
modinfo knows the kernels it is told about, and /boot is a directory of empty vmlinuz files.
Nothing here reboots: the role's guard tasks run on their own, and the whole reboot play runs
only with --check, where ansible.builtin.reboot does not act.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import yaml
from fixtures_path import FIXTURES

REPO = Path(__file__).resolve().parents[3]
COMPUTE_APPS = FIXTURES / "nvidia-smi-csv" / "h100-sxm-80gb-hbm3-drv590.48.01-query-compute-apps-load.csv"
BIN = Path(sys.executable).parent
RUNNING = platform.release()
NEWER = "99.1.0-1-amd64"  # sorts after any running kernel

SCONTROL = r"""#!/bin/sh
dir="$(dirname "$0")"
echo "$*" >> "$dir/scontrol.calls"
case "$1" in
  show)
    state="$(cut -d'|' -f1 "$dir/slurm.state")"; reason="$(cut -d'|' -f2 "$dir/slurm.state")"
    printf 'NodeName=%s Arch=x86_64 State=%s ThreadsPerCore=2 CurrentWatts=n/a AveWatts=n/a' "$3" "$state"
    [ "$reason" = none ] || printf ' Reason=%s [root@2026-12-03T08:00:00]' "$reason"
    printf '\n' ;;
  update)
    base="$(cut -d'|' -f1 "$dir/slurm.state" | cut -d+ -f1)"
    case "$3" in
      State=DRAIN) echo "$base+DRAIN|${4#Reason=}" > "$dir/slurm.state" ;;
      State=RESUME) echo "$base|none" > "$dir/slurm.state" ;;
    esac ;;
esac
"""

GUARD_PLAY = """
- name: Check whether the node may reboot
  hosts: all
  gather_facts: false
  tasks:
    - name: Run the reboot role's checks
      ansible.builtin.include_role:
        name: gpufleet.cluster.reboot
        tasks_from: guard.yml
      vars:
        __reboot_slurm_reason: "gpufleet: reboot"
"""


def stub(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


class Node:
    """One stand-in node's probes, in a directory of its own."""

    def __init__(self, root: Path, gpu_apps: str = "idle", kernels=(RUNNING,), modules=(RUNNING,),
                 driver_loaded: bool = True, slurm: str | None = None, request: bool = True):
        self.root = root
        root.mkdir(parents=True)
        header = COMPUTE_APPS.read_text().splitlines()[0]
        if gpu_apps == "busy":
            smi = f"cat '{COMPUTE_APPS}'\n"
        elif gpu_apps == "idle":  # the capture's header with no process rows
            smi = f"echo '{header}'\n"
        elif gpu_apps == "hang":  # answers never: only the role's timeout ends it, and it says so
            smi = f"trap 'echo TERM > \"{root}/nvidia-smi.killed\"; exit 143' TERM\nwhile :; do sleep 1; done\n"
        else:
            smi = "echo 'Unable to determine the device handle for GPU0000:00:09.0: Unknown Error' >&2\nexit 15\n"
        stub(root / "nvidia-smi", f"#!/bin/sh\necho \"$*\" >> '{root}/nvidia-smi.calls'\n" + smi)
        (root / "boot").mkdir()
        for kernel in kernels:
            (root / "boot" / f"vmlinuz-{kernel}").write_text("")
        (root / "modules").write_text("".join(f"{k}\n" for k in modules))
        stub(root / "modinfo", f"""#!/bin/sh
# modinfo -k KERNEL -F version MODULE
if grep -qx "$2" '{root}/modules'; then echo 535.183.01; else echo "modinfo: ERROR: Module $5 not found." >&2; exit 1; fi
""")
        (root / "proc-nvidia").mkdir()
        if driver_loaded:
            (root / "proc-nvidia" / "version").write_text("")
        if slurm:
            stub(root / "scontrol", SCONTROL)
            (root / "slurm.state").write_text(slurm + "\n")
        (root / "requests").mkdir()
        if request:
            (root / "requests" / "driver-installed").write_text("nvidia_driver: driver 535.183.01 installed; load it with a reboot\n")
        self.slurm = slurm is not None

    def hostvars(self) -> dict:
        return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "reboot_request_dir": str(self.root / "requests"), "reboot_boot_dir": str(self.root / "boot"),
                "reboot_nvidia_proc_dir": str(self.root / "proc-nvidia"),
                "reboot_nvidia_smi": str(self.root / "nvidia-smi"), "reboot_modinfo": str(self.root / "modinfo"),
                "reboot_dkms": str(self.root / "no-dkms-here"),
                "reboot_slurm_scontrol": str(self.root / ("scontrol" if self.slurm else "no-scontrol-here")),
                "reboot_slurm_node_name": self.root.name}

    def slurm_state(self) -> str:
        return (self.root / "slurm.state").read_text().strip()

    def nvidia_smi_calls(self) -> str:
        calls = self.root / "nvidia-smi.calls"
        return calls.read_text() if calls.exists() else ""

    def scontrol_calls(self) -> str:
        calls = self.root / "scontrol.calls"
        return calls.read_text() if calls.exists() else ""


def run(tmp_path: Path, nodes: dict, playbook, *args: str) -> subprocess.CompletedProcess:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {
        name: node.hostvars() for name, node in nodes.items()}}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook), *args],
                          capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=600)
    proc.out = proc.stdout + proc.stderr
    return proc


def guard(tmp_path: Path, node: Node, *args: str) -> subprocess.CompletedProcess:
    play = tmp_path / "guard.yml"
    play.write_text(GUARD_PLAY)
    return run(tmp_path, {node.root.name: node}, play, *args)


def test_idle_node_with_its_module_built_may_reboot(tmp_path):
    node = Node(tmp_path / "gpu-a01", gpu_apps="idle", kernels=(RUNNING, NEWER), modules=(RUNNING, NEWER))
    result = guard(tmp_path, node)
    assert result.returncode == 0, result.out[-4000:]


def test_busy_gpus_refuse_the_reboot_and_name_the_processes(tmp_path):
    node = Node(tmp_path / "gpu-a01", gpu_apps="busy")
    result = guard(tmp_path, node)
    assert result.returncode != 0
    assert "gpu-a01: not rebooting: 3 process(es) use the GPUs" in result.out, result.out[-4000:]
    assert "pid 11345 ./gpu_burn on 00000000:00:09.0 (15690 MiB)" in result.out
    assert "pid 11327 /root/tools/memhog" in result.out


def test_busy_gpus_may_be_overridden_by_a_string_boolean(tmp_path):
    node = Node(tmp_path / "gpu-a01", gpu_apps="busy")
    result = guard(tmp_path, node, "-e", "reboot_allow_busy_gpus=true")
    assert result.returncode == 0, result.out[-4000:]


# The limit the hanging stand-in runs into. It bounds the test, it is not a verdict: the stand-in blocks until
# killed, so the timeout path is certain however slow the machine, and the node's other commands (uname, under
# the same limit as a task timeout) have ample time under load.
HANG_LIMIT_S = 20


def test_gpu_processes_that_cannot_be_read_in_time_refuse_the_reboot(tmp_path):
    node = Node(tmp_path / "gpu-a01", gpu_apps="hang")
    result = guard(tmp_path, node, "-e", "reboot_command_timeout=%d" % HANG_LIMIT_S)
    assert result.returncode != 0
    assert (tmp_path / "gpu-a01" / "nvidia-smi.killed").read_text() == "TERM\n", "the role's timeout ended the query"
    assert "did not answer within %ds" % HANG_LIMIT_S in result.out, result.out[-4000:]
    assert "whether a job still uses the GPUs is unknown" in result.out


def test_gpu_processes_that_cannot_be_read_refuse_the_reboot(tmp_path):
    node = Node(tmp_path / "gpu-a01", gpu_apps="error")
    result = guard(tmp_path, node)
    assert result.returncode != 0
    assert "failed (rc 15): Unable to determine the device handle" in result.out, result.out[-4000:]
    assert "whether a job still uses the GPUs is unknown" in result.out


def test_no_loaded_driver_means_no_gpu_process_to_wait_for(tmp_path):
    node = Node(tmp_path / "gpu-a01", gpu_apps="hang", driver_loaded=False)
    result = guard(tmp_path, node)
    assert result.returncode == 0, result.out[-4000:]
    assert node.nvidia_smi_calls() == "", "nvidia-smi is not asked when no NVIDIA module is loaded"


def test_a_new_kernel_without_the_nvidia_module_is_not_booted(tmp_path):
    node = Node(tmp_path / "gpu-a01", kernels=(RUNNING, NEWER), modules=(RUNNING,))
    result = guard(tmp_path, node)
    assert result.returncode != 0
    assert f"the next boot would run kernel {NEWER}" in result.out, result.out[-4000:]
    assert "Module nvidia not found" in result.out and f"dkms autoinstall -k {NEWER}" in result.out


# reboot_slurm_drain_timeout / __reboot_slurm_poll_delay is the number of polls of the wait, not a deadline:
# the stand-in's state is a file, so an idle node is drained at the first poll and a busy one at none,
# however slow the machine. The delay between polls only makes the test short.
def test_slurm_node_is_drained_and_waited_for_before_the_reboot(tmp_path):
    node = Node(tmp_path / "gpu-a01", slurm="IDLE|none")
    result = guard(tmp_path, node, "-e", "reboot_slurm_drain_timeout=5 __reboot_slurm_poll_delay=1")
    assert result.returncode == 0, result.out[-4000:]
    assert node.slurm_state() == "IDLE+DRAIN|gpufleet: reboot"
    # one read, the drain (its own read, then the update), one poll that found the node drained
    assert node.scontrol_calls().splitlines() == ["show node gpu-a01"] * 2 + [
        "update NodeName=gpu-a01 State=DRAIN Reason=gpufleet: reboot", "show node gpu-a01"], node.scontrol_calls()


def test_slurm_node_whose_jobs_do_not_end_is_refused_and_given_back(tmp_path):
    node = Node(tmp_path / "gpu-a01", slurm="MIXED|none")
    play = tmp_path / "reboot.yml"
    play.write_text("- name: Reboot\n  hosts: all\n  gather_facts: false\n  roles:\n    - role: gpufleet.cluster.reboot\n")
    # Not --check: the drain must really happen; the guard fails before the reboot task.
    result = run(tmp_path, {"gpu-a01": node}, play, "-e", "reboot_ok=true reboot_slurm_drain_timeout=2",
                 "-e", "__reboot_slurm_poll_delay=1")
    assert result.returncode != 0
    assert "Wait until no job runs on the node" in result.out, result.out[-4000:]
    assert "TASK [gpufleet.cluster.reboot : Reboot the node]" not in result.out
    assert "State=DRAIN" in node.scontrol_calls()
    # the wait polled the node and gave up when its polls were spent, not on the clock
    polls = node.scontrol_calls().split("State=DRAIN")[1].split("State=RESUME")[0]
    assert polls.count("show node gpu-a01") >= 2, node.scontrol_calls()
    assert node.slurm_state() == "MIXED|none", "the drain gpufleet made for a reboot that did not happen is undone"


def test_reboot_play_goes_in_batches_and_stops_at_the_first_refused_node(tmp_path):
    nodes = {"node1": Node(tmp_path / "node1", gpu_apps="busy"),
             "node2": Node(tmp_path / "node2"), "node3": Node(tmp_path / "node3")}
    result = run(tmp_path, nodes, REPO / "playbooks" / "reboot.yml", "--check",
                 "-e", json.dumps({"gpufleet_reboot_ok": "true"}))
    assert "--check" in result.args  # the play would reboot this machine otherwise
    assert result.returncode != 0
    assert "node1: not rebooting: 3 process(es) use the GPUs" in result.out, result.out[-4000:]
    # node2 and node3 were in later batches, which never started.
    batched = result.out.split("PLAY [Reboot the nodes that need it, once]")[1]
    for name in ("node2", "node3"):
        assert f"[{name}]" not in batched.split("PLAY RECAP")[0], result.out[-4000:]


def test_only_nodes_with_a_request_enter_the_batches_and_reach_the_reboot(tmp_path):
    nodes = {"node1": Node(tmp_path / "node1", request=False), "node2": Node(tmp_path / "node2", request=False),
             "node3": Node(tmp_path / "node3")}
    result = run(tmp_path, nodes, REPO / "playbooks" / "reboot.yml", "--check", "-e", "gpufleet_reboot_ok=true")
    assert "--check" in result.args
    # All three read their requests at once; only node3 has one, so only node3 is batched.
    found = re.search(r"TASK \[gpufleet.cluster.reboot : Find the reboot requests\] \*+\n((?:ok: \[node\d\]\n)+)", result.out)
    assert found and sorted(re.findall(r"node\d", found.group(1))) == ["node1", "node2", "node3"], result.out[-4000:]
    batched = result.out.split("PLAY [Reboot the nodes that need it, once]")[1:]
    assert len(batched) == 1, result.out[-4000:]
    assert re.findall(r"TASK \[gpufleet.cluster.reboot : Find the reboot requests\] \*+\nok: \[(node\d)\]\n\n",
                      batched[0]) == ["node3"], result.out[-4000:]
    # node3 passed every check and got as far as the reboot itself, which ansible.builtin.reboot
    # refuses over a local connection even in check mode ("would reboot the control node").
    assert re.search(r"TASK \[gpufleet.cluster.reboot : Reboot the node\] \*+\n\[ERROR\]: [^\n]*would reboot the control node",
                     result.out), result.out[-4000:]
    assert "not rebooting" not in result.out


def test_the_stack_skips_the_reboot_read_on_a_node_its_record_found_converged(tmp_path):
    """playbooks/gpu_stack.yml imports the reboot plays under the record's flag: a converged node (its record
    watched the request directory, unchanged since a run that left no request) skips the read and the batches,
    and the reboot role itself knows nothing of the record."""
    stack = yaml.safe_load((REPO / "playbooks" / "gpu_stack.yml").read_text())
    imported = next(p for p in stack if p.get("ansible.builtin.import_playbook") == "reboot.yml")
    nodes = {"node1": Node(tmp_path / "node1"), "node2": Node(tmp_path / "node2")}
    play = tmp_path / "stack.yml"
    play.write_text(yaml.safe_dump([
        {"name": "Probe", "hosts": "gpu_nodes", "gather_facts": False, "tasks": [
            {"name": "Stand in for the probe", "ansible.builtin.set_fact": {
                "stack_record": {"converged": "{{ inventory_hostname == 'node1' }}"}}}]},
        {**imported, "ansible.builtin.import_playbook": str(REPO / "playbooks" / "reboot.yml")}]))
    result = run(tmp_path, nodes, play, "--check", "-e", "gpufleet_reboot_ok=true")
    found_play = result.out.split("PLAY [Reboot the nodes that need it, once]")[0]
    assert re.search(r"TASK \[gpufleet.cluster.reboot : Read the reboot requests\] \*+\nskipping: \[node1\]", found_play), \
        result.out[-4000:]
    read = re.search(r"TASK \[gpufleet.cluster.reboot : Find the reboot requests\] \*+\n((?:ok: \[node\d\]\n)+)", found_play)
    assert read and re.findall(r"node\d", read.group(1)) == ["node2"], result.out[-4000:]
    batched = result.out.split("PLAY [Reboot the nodes that need it, once]")[1]
    assert "[node2]" in batched and "[node1]" not in batched.split("PLAY RECAP")[0], result.out[-4000:]


def test_the_reboot_role_knows_nothing_of_the_stack_record():
    text = " ".join(path.read_text() for path in sorted((REPO / "roles" / "reboot").rglob("*")) if path.is_file())
    text += (REPO / "playbooks" / "reboot.yml").read_text()
    for word in ("stack_record", "stack_state", "stack-state", "converged", "clear_dirs", "watch"):
        assert word not in text, word


def test_the_stack_reboots_through_the_batched_play():
    stack = yaml.safe_load((REPO / "playbooks" / "gpu_stack.yml").read_text())
    reboot = [p for p in stack if p.get("ansible.builtin.import_playbook") == "reboot.yml"]
    assert [p["name"] for p in reboot] == ["Reboot the nodes that need it, once, in batches"]
    # Skipped for a converged node by the stack playbook alone: a later reboot play (site.yml's) reads again.
    assert reboot[0]["when"] == "not stack_record.converged | default(false)"
    find, play = yaml.safe_load((REPO / "playbooks" / "reboot.yml").read_text())
    assert "serial" not in find and play["hosts"].endswith(":&{{ gpufleet_reboot_group | default('gpufleet_reboot_requested') }}")
    assert find["tasks"][1]["ansible.builtin.group_by"]["key"] == "{{ gpufleet_reboot_group | default('gpufleet_reboot_requested') }}"
    assert play["max_fail_percentage"] == "{{ gpufleet_reboot_max_fail_percentage | default(0) }}"
    assert play["serial"] == "{{ gpufleet_reboot_serial | default('10%') }}"
