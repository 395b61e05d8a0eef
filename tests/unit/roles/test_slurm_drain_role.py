"""The Slurm drain task, run through Ansible against a recording scontrol.

Slurm itself is not installed here; the stand-in scontrol keeps the node state in a file and
answers `show node` in scontrol's one-line format, which is all the role reads: the reason comes
last but for the optional Comment/Extra fields, followed by " [user@time]" (SchedMD/slurm
src/api/node_info.c, slurm_sprint_node_table).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCONTROL = r"""#!/bin/sh
state_file="$(dirname "$0")/state"
log="$(dirname "$0")/calls"
echo "$*" >> "$log"
case "$1" in
  show)
    state="$(cut -d'|' -f1 "$state_file")"; reason="$(cut -d'|' -f2 "$state_file")"
    printf 'NodeName=%s Arch=x86_64 State=%s ThreadsPerCore=2 CurrentWatts=n/a AveWatts=n/a' "$3" "$state"
    [ "$reason" = none ] || printf ' Reason=%s [root@2026-12-03T08:00:00] Comment=rack 12' "$reason"
    printf '\n' ;;
  update)
    case "$3" in
      State=DRAIN) echo "IDLE+DRAIN|${4#Reason=}" > "$state_file" ;;
      State=RESUME) echo "IDLE|none" > "$state_file" ;;
    esac ;;
esac
"""

PLAY = """
- name: Drain failing nodes
  hosts: localhost
  gather_facts: false
  roles:
    - role: gpufleet.cluster.slurm_drain
      vars:
        slurm_drain_enabled: "{{ enabled }}"
        slurm_drain_node_name: gpu-a01
        slurm_drain_scontrol: "{{ scontrol }}"
        slurm_drain_state_dir: "{{ state_dir }}"
        slurm_drain_findings: "{{ findings }}"
"""

FAIL = [{"code": "ECC_UNCORRECTABLE_VOLATILE", "severity": "fail", "node": "gpu-a01", "message": "2 errors"},
        {"code": "PCIE_LINK_DEGRADED", "severity": "warn", "node": "gpu-a01", "message": "x8"}]


def _run(tmp_path, findings, initial_state=None, enabled=True, extra_args=()):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    scontrol = bindir / "scontrol"
    scontrol.write_text(SCONTROL)
    scontrol.chmod(0o755)
    if initial_state or not (bindir / "state").exists():
        (bindir / "state").write_text((initial_state or "IDLE|none") + "\n")
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    extra = {"scontrol": str(scontrol), "state_dir": str(tmp_path / "gpufleet"), "findings": findings,
             "ansible_python_interpreter": sys.executable}
    if enabled is not None:
        extra["enabled"] = enabled
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(play), "-e", json.dumps(extra), *extra_args], capture_output=True, text=True, cwd=REPO, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, (bindir / "state").read_text().strip()


def _changed(stdout):
    return int(stdout.rsplit("changed=", 1)[1].split()[0])


def test_failing_node_is_drained_once_and_resumed_when_healthy(tmp_path):
    out, state = _run(tmp_path, FAIL)
    assert state == "IDLE+DRAIN|gpufleet: ECC_UNCORRECTABLE_VOLATILE"
    assert (tmp_path / "gpufleet" / "slurm-drained-by-gpufleet").exists()
    out, state = _run(tmp_path, FAIL)
    assert _changed(out) == 0, "a second run with the same findings must change nothing"
    out, state = _run(tmp_path, [])
    assert state == "IDLE|none"
    assert not (tmp_path / "gpufleet" / "slurm-drained-by-gpufleet").exists()


def test_node_drained_by_someone_else_is_never_resumed(tmp_path):
    out, state = _run(tmp_path, [], initial_state="IDLE+DRAIN|admin: bad fan")
    assert state == "IDLE+DRAIN|admin: bad fan"
    assert "State=RESUME" not in (tmp_path / "bin" / "calls").read_text()
    out, state = _run(tmp_path, FAIL)
    assert state == "IDLE+DRAIN|admin: bad fan", "an operator's drain reason is kept"


def test_disabled_role_never_calls_scontrol(tmp_path):
    _run(tmp_path, FAIL, enabled=False)
    assert not (tmp_path / "bin" / "calls").exists()


def test_operator_drain_after_gpufleet_drain_survives_a_healthy_run(tmp_path):
    _run(tmp_path, FAIL)
    # The operator takes the node over with a reason of their own while it is still drained.
    (tmp_path / "bin" / "state").write_text("IDLE+DRAIN|admin: replacing PSU\n")
    out, state = _run(tmp_path, [])
    assert state == "IDLE+DRAIN|admin: replacing PSU"
    assert "State=RESUME" not in (tmp_path / "bin" / "calls").read_text()
    # The drain is the operator's now: gpufleet forgets it, and a later healthy run leaves it too.
    assert not (tmp_path / "gpufleet" / "slurm-drained-by-gpufleet").exists()
    out, state = _run(tmp_path, [])
    assert state == "IDLE+DRAIN|admin: replacing PSU"


def test_node_resumed_by_the_operator_is_forgotten_not_resumed_again(tmp_path):
    _run(tmp_path, FAIL)
    (tmp_path / "bin" / "state").write_text("IDLE|none\n")
    calls_before = (tmp_path / "bin" / "calls").read_text()
    out, state = _run(tmp_path, [])
    assert state == "IDLE|none"
    assert "State=RESUME" not in (tmp_path / "bin" / "calls").read_text()[len(calls_before):]
    assert not (tmp_path / "gpufleet" / "slurm-drained-by-gpufleet").exists()


def test_string_booleans_from_the_command_line(tmp_path):
    # `-e slurm_drain_enabled=true` arrives as the string "true" (ansible-core 2.19 refuses it in a bare `when`).
    out, state = _run(tmp_path, FAIL, enabled=None, extra_args=["-e", "enabled=true"])
    assert state == "IDLE+DRAIN|gpufleet: ECC_UNCORRECTABLE_VOLATILE"
    calls = (tmp_path / "bin" / "calls").read_text()
    _run(tmp_path, FAIL, enabled=None, extra_args=["-e", "enabled=false"])
    assert (tmp_path / "bin" / "calls").read_text() == calls, "enabled=false must not call scontrol"
