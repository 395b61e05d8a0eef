"""The smoke_test role through ansible-playbook on this machine: every host is local (connection
local), the job runs from this venv's torch, reports and work files go under the test's tmp_path."""

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent

EARLIER_PLAY = """
- name: An earlier play of the same run fails some nodes (as health or diagnostics would)
  hosts: all
  gather_facts: false
  tasks:
    - name: Fail the nodes named in fail_before_smoke
      ansible.builtin.fail:
        msg: failed before the smoke job
      when: inventory_hostname in {failed}
"""

PLAY = """
- name: Smoke job on this machine
  hosts: all
  gather_facts: false
  {serial}
  roles:
    - role: gpufleet.cluster.smoke_test
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_role(tmp_path, *extra, hosts=("localhost",), serial=None, forks=None, failed_before=()):
    play = tmp_path / "smoke.yml"
    play.write_text((EARLIER_PLAY.format(failed=list(failed_before)) if failed_before else "")
                    + PLAY.format(serial="serial: %d" % serial if serial else ""))
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("".join("%s ansible_connection=local\n" % h for h in hosts))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", PATH="%s%s%s" % (BIN, os.pathsep, os.environ.get("PATH", "")))
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(play),
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-e", "smoke_test_venv=%s" % BIN.parent,
           "-e", "smoke_test_work_dir=%s" % (tmp_path / "work"),
           "-e", "gpufleet_report_dir=%s" % (tmp_path / "reports"),
           "-e", "gpufleet_baseline_dir=%s" % (tmp_path / "baselines")] + (["-f", str(forks)] if forks else []) + list(extra)
    return subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600, check=False)


def output(proc):
    return proc.stdout[-5000:] + proc.stderr[-2000:]
