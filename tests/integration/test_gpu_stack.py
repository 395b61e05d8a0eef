"""playbooks/gpu_stack.yml on the simulated cluster, for real: apt, dpkg, the local signed repository.

One 3-node HGX H100 cluster walks through the life of a stack:
  1. first converge with CUDA 12.1: node1 is fresh; node2 trusts a different, self-consistent key
     (apt rejects the repository's signature, the run names it, the others finish); node3 already
     has a different driver that satisfies the plan (535.104.05, proprietary) and keeps it;
  2. the plan moves to CUDA 12.2: toolkit, NCCL and the /usr/local/cuda default upgrade cleanly;
  3. a second converge reports changed=0 on every node; --check reports no change;
  4. every planned package is installed, held and pinned, and apt-get upgrade would move none of them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile

import pytest
import yaml

from gfsim import cluster as simlib

PLAYBOOK = "playbooks/gpu_stack.yml"
pytestmark = [pytest.mark.sim, pytest.mark.slow]


def recap(output: str) -> dict:
    """PLAY RECAP counters per host, summed over the plays of the run."""
    totals: dict = {}
    for host, fields in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M):
        counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", fields)}
        for key, value in counts.items():
            totals.setdefault(host, {}).setdefault(key, 0)
            totals[host][key] = max(totals[host][key], value)
    return totals


def wrong_key() -> tuple[str, str]:
    """A fresh signing key the repository was not signed with: (armored public key, fingerprint)."""
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, GNUPGHOME=home)
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Not NVIDIA <wrong@example.invalid>",
                        "ed25519", "sign", "never"], env=env, check=True, capture_output=True)
        armored = subprocess.run(["gpg", "--batch", "--armor", "--export"], env=env, check=True,
                                 capture_output=True, text=True).stdout
        colons = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys"], env=env, check=True,
                                capture_output=True, text=True).stdout
    fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
    return armored, fpr


def dpkg(cluster, node: str) -> dict:
    out = cluster.ssh(node, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' "
                            "'nvidia-driver-*' 'nvidia-fabricmanager-*' 'cuda-toolkit-*' libnccl2 libnccl-dev").stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2][1] == "i":
            found[parts[0]] = {"version": parts[1], "held": parts[2][0] == "h"}
    return found


@pytest.fixture(scope="module")
def stack_cluster(tmp_path_factory):
    from conftest import bring_up, free_subnet, sim_skip_reason, tear_down

    reason = sim_skip_reason()
    if reason:
        pytest.skip(reason)
    name = "stackit"
    try:
        cluster = bring_up(name, free_subnet(), 3, profile=["hgx-h100"])
        yield cluster
    finally:
        tear_down(name)


def test_gpu_stack_lifecycle(stack_cluster, tmp_path):
    c = stack_cluster
    reports = tmp_path / "reports"
    # node3: a different driver that satisfies the plan, installed the way NVIDIA documents it.
    simlib.install_driver(c.state, "node3", "535.104.05")
    # node2: a self-consistent key that did not sign the repository.
    armored, fpr = wrong_key()
    assert c.ssh("node2", f"cat > /root/wrong-key.asc <<'EOF'\n{armored}\nEOF").returncode == 0
    extra = tmp_path / "wrong-key.yml"
    extra.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"node2": {
        "gpufleet_cuda_repo_key_url": "file:///root/wrong-key.asc",
        "gpufleet_cuda_repo_key_fingerprint": fpr}}}}}}))
    request = ["-e", json.dumps({"gpufleet_stack_request": {"cuda": "12.1", "torch": "2.1.2"},
                                 "gpufleet_report_dir": str(reports)})]

    # 1. First converge, CUDA 12.1.
    first = c.playbook(PLAYBOOK, "-i", str(extra), *request)
    out = first.stdout + first.stderr
    counts = recap(out)
    assert counts["node2"]["failed"] == 1, out[-3000:]
    assert counts["node1"]["failed"] == 0 and counts["node3"]["failed"] == 0, out[-6000:]
    assert re.search(r"node2: apt could not use the CUDA repository.*(NO_PUBKEY|not signed)", out, re.S), out[-4000:]
    assert "signature did not verify" in out
    assert "nvidia-driver-535" not in json.dumps(dpkg(c, "node2"))

    node1 = dpkg(c, "node1")
    assert node1["nvidia-driver-535-open"] == {"version": "535.183.01-1", "held": True}
    assert node1["nvidia-fabricmanager-535"] == {"version": "535.183.01-1", "held": True}
    assert node1["cuda-toolkit-12-1"]["held"]
    assert node1["libnccl2"] == {"version": "2.18.3-1+cuda12.1", "held": True}
    assert node1["libnccl-dev"] == {"version": "2.18.3-1+cuda12.1", "held": True}
    assert c.ssh("node1", "ls /var/lib/gpufleet/reboot-required.d").stdout.split() == [
        "driver-installed", "nouveau-blacklisted"]
    # The kept driver is untouched: same package, same version, no reboot asked for it.
    node3 = dpkg(c, "node3")
    assert node3["nvidia-driver-535"]["version"] == "535.104.05-1"
    assert "nvidia-driver-535-open" not in node3
    assert node3["nvidia-fabricmanager-535"]["version"] == "535.104.05-1"
    assert c.ssh("node3", "ls /var/lib/gpufleet/reboot-required.d 2>/dev/null").stdout.strip() == ""
    assert "keeping installed driver nvidia-driver-535 535.104.05" in out
    assert c.ssh("node3", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"

    # 2. The plan moves to CUDA 12.2 (the cluster without the bad-key node).
    request = ["-e", json.dumps({"gpufleet_report_dir": str(reports)}), "--limit", "node1,node3"]
    upgrade = c.playbook(PLAYBOOK, *request)
    out = upgrade.stdout + upgrade.stderr
    assert upgrade.returncode == 0, out[-6000:]
    for node in ("node1", "node3"):
        pkgs = dpkg(c, node)
        assert pkgs["cuda-toolkit-12-2"]["held"], node
        assert pkgs["libnccl2"] == {"version": "2.18.3-1+cuda12.2", "held": True}, node
        assert pkgs["libnccl-dev"] == {"version": "2.18.3-1+cuda12.2", "held": True}, node
        assert c.ssh(node, "readlink -f /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.2"
        assert "release 12.2" in c.ssh(node, "bash -lc 'nvcc --version'").stdout
        # Held and pinned: a full upgrade would move nothing in the stack.
        sim = c.ssh(node, "apt-get -s -o Debug::NoLocking=1 upgrade").stdout
        assert not re.search(r"^Inst (nvidia|cuda|libnccl)", sim, re.M), sim

    # 3. Nothing left to do: a second converge and a check run change nothing.
    again = c.playbook(PLAYBOOK, *request)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert all(v["changed"] == 0 for v in recap(out).values()), out[-6000:]
    check = c.playbook(PLAYBOOK, "--check", *request)
    out = check.stdout + check.stderr
    assert check.returncode == 0, out[-4000:]
    assert all(v["changed"] == 0 for v in recap(out).values()), out[-6000:]

    # 4. The facts and the report show the planned versions on every converged node.
    stack = json.loads((reports / "stack.json").read_text())
    by_node = {n["node"]: n for n in stack["nodes"]}
    assert by_node["node1"]["installed"]["driver"] == "535.183.01"
    assert by_node["node3"]["installed"]["driver"] == "535.104.05"
    for node in ("node1", "node3"):
        installed = by_node[node]["installed"]
        assert installed["cuda_toolkits"] == ["12.2"] and installed["cuda_default"] == "12.2"
        assert installed["nccl"] == "2.18.3-1+cuda12.2"
        assert installed["torch"]["version"] == "2.13.0+cpu"
        fact = json.loads(c.ssh(node, "cat /etc/ansible/facts.d/gpufleet_stack.fact").stdout)
        assert fact["installed"] == installed
