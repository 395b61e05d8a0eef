"""The fleet's fresh node: `--check` reports what would change, fails nothing and changes nothing;
and Ansible reaches the nodes with SSH host-key checking on.

The fresh node has no driver, no CUDA repository and no RDMA stack, so every task that reads what an
earlier task would have installed meets its absence; none of that may fail a check run.
playbooks/validate.yml is left out on purpose: on a node without a driver its health verdict is a
real failure (DRIVER_NOT_LOADED), not a check-mode defect.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

import fleet as fleet_lib
from simharness import REPO_ROOT, recap

pytestmark = pytest.mark.sim
FRESH = fleet_lib.FRESH

# What a run could change on a node: packages, holds, configuration, gpufleet's own state.
SNAPSHOT = ("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort; "
            "find /etc /usr/local /var/lib/gpufleet /opt/gpufleet -xdev "
            "\\( -path /etc/ld.so.cache -o -path '/etc/ssh/ssh_host_*' \\) -prune -o "
            "-printf '%p %s %m %T@\\n' 2>/dev/null | sort")


@pytest.mark.parametrize("playbook", ["playbooks/preflight.yml", "playbooks/gpu_stack.yml", "playbooks/fabric.yml"])
def test_check_run_on_the_fresh_node_fails_nothing_and_changes_nothing(fleet, tmp_path, playbook):
    before = fleet.sim.ssh(FRESH, SNAPSHOT).stdout
    run = fleet.playbook(playbook, "--check", "--limit", "molecule_fresh",
                         "-e", json.dumps({"gpufleet_report_dir": str(tmp_path / "reports")}))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    counts = recap(out)
    assert set(counts) == {FRESH}, out[-3000:]
    assert counts[FRESH]["failed"] == 0 and counts[FRESH]["unreachable"] == 0, out[-6000:]
    # A fresh node has something to install: a check run that reports nothing did not look.
    if playbook != "playbooks/preflight.yml":  # preflight only reads
        assert counts[FRESH]["changed"] > 0, out[-6000:]
    assert fleet.sim.ssh(FRESH, SNAPSHOT).stdout == before, f"{FRESH} changed under --check"
    # A check run writes no report that would describe what is not there.
    assert not (tmp_path / "reports" / "stack.json").exists()


def test_host_keys_are_checked_against_the_sims_own_known_hosts(fleet, tmp_path):
    c = fleet.sim
    inventory = yaml.safe_load(c.inventory.read_text())
    group = inventory["all"]["children"]["gpu_nodes"]["vars"]
    assert "StrictHostKeyChecking=yes" in group["ansible_ssh_common_args"]
    ok = c.ansible("gpu_nodes", "-m", "ansible.builtin.ping")
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # Without the sim's known_hosts (and an empty home), the repository's ansible.cfg refuses the nodes.
    bare = dict(inventory)
    bare["all"]["children"]["gpu_nodes"]["vars"] = {k: v for k, v in group.items() if k != "ansible_ssh_common_args"}
    (tmp_path / "bare.yml").write_text(yaml.safe_dump(bare))
    env = c.env() | {"HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    refused = subprocess.run([shutil.which("ansible", path=env["PATH"]), "-i", str(tmp_path / "bare.yml"), "gpu_nodes",
                              "-m", "ansible.builtin.ping"], cwd=REPO_ROOT, env=env,
                             capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode != 0
    assert (refused.stdout + refused.stderr).count("Host key verification failed") >= len(c.nodes), refused.stdout

    # A known_hosts that names another key for the nodes' addresses is refused too.
    known = re.search(r"UserKnownHostsFile=(\S+)", group["ansible_ssh_common_args"]).group(1)
    other_key = (c.inventory.parent / "ssh" / "id_ed25519.pub").read_text().split()[:2]
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text("".join(f"{line.split()[0]} {other_key[0]} {other_key[1]}\n"
                             for line in open(known) if line.strip()))
    group_wrong = dict(group, ansible_ssh_common_args=group["ansible_ssh_common_args"].replace(known, str(wrong)))
    bare["all"]["children"]["gpu_nodes"]["vars"] = group_wrong
    (tmp_path / "wrong.yml").write_text(yaml.safe_dump(bare))
    changed_key = subprocess.run([shutil.which("ansible", path=env["PATH"]), "-i", str(tmp_path / "wrong.yml"), "gpu_nodes",
                                  "-m", "ansible.builtin.ping"], cwd=REPO_ROOT, env=env,
                                 capture_output=True, text=True, timeout=300, check=False)
    assert changed_key.returncode != 0
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in changed_key.stdout + changed_key.stderr
