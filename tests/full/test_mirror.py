"""`gpufleet mirror` end to end on the simulated cluster (issue 28's acceptance): the mirror is built from
the repositories the nodes normally use (the cluster's HTTP server on the bridge), served by a second HTTP
server on the bridge address (another port, started and ended by PID here), the nodes are cut off from
everything but that server (iptables in each node's network namespace), their OS sources point at the
mirror's OS archive, and playbooks/gpu_stack.yml converges with the printed variables, then re-runs with
changed=0."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gfsim import image as simimage
from gfsim import manifest as simmanifest
from gfsim import repo as simrepo
from simharness import REPO_ROOT, recap

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import FilterModule

pytestmark = [pytest.mark.sim, pytest.mark.slow]
PLAYBOOK = "playbooks/gpu_stack.yml"
STACK_PLAN = FilterModule().filters()["stack_plan"]
CUT_CHAIN = "GFMIRRORCUT"


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def pins_the_repository_holds(inventory: Path) -> dict:
    """The plan of the cluster's request; where the simulated repository's sourced manifest does not hold the
    planned driver or NCCL build (tests/unit/sim/test_plan_against_manifests.py lists such gaps), the inventory
    pins one it holds, as an operator would (gpufleet_driver_version, gpufleet_nccl_version)."""
    group = yaml.safe_load(inventory.read_text())["all"]["children"]["gpu_nodes"]["vars"]
    plan = STACK_PLAN(group["gpufleet_stack_request"], gpus=["NVIDIA H100 80GB HBM3"], os="ubuntu22.04",
                      arch="x86_64", nvswitch=True)
    manifest = simmanifest.for_os("ubuntu22.04")
    pins = {}
    held = [v for v in manifest.driver_upstreams() if v.split(".")[0] == plan["driver_branch"]]
    if plan["driver_recommended_version"] not in held:
        pins["gpufleet_driver_version"] = max(held, key=lambda v: tuple(int(p) for p in v.split(".")))
    if plan["nccl_package_version"] not in manifest.versions("libnccl2"):
        pins["gpufleet_nccl_version"] = next(v for v in manifest.versions("libnccl2") if "+cuda" + plan["cuda_version"] in v)
    return pins


def netns(cluster, node: str) -> str:
    return cluster.state["nodes"][node]["netns"]


def cut_off(cluster, node: str, bridge: str, port: int) -> None:
    """The node may answer SSH and reach the mirror's port; every other connection it opens is refused."""
    def ipt(*args: str) -> None:
        subprocess.run(["ip", "netns", "exec", netns(cluster, node), "iptables", "-w", *args], check=True,
                       capture_output=True)
    ipt("-N", CUT_CHAIN)
    ipt("-A", CUT_CHAIN, "-p", "tcp", "--sport", "22", "-j", "RETURN")
    ipt("-A", CUT_CHAIN, "-p", "tcp", "-d", bridge, "--dport", str(port), "-j", "RETURN")
    ipt("-A", CUT_CHAIN, "-j", "REJECT")
    ipt("-I", "OUTPUT", "-o", "eth0", "-j", CUT_CHAIN)


def reconnect(cluster, node: str) -> None:
    ns = netns(cluster, node)
    subprocess.run(["ip", "netns", "exec", ns, "iptables", "-w", "-D", "OUTPUT", "-o", "eth0", "-j", CUT_CHAIN],
                   capture_output=True, check=False)
    for flag in ("-F", "-X"):
        subprocess.run(["ip", "netns", "exec", ns, "iptables", "-w", flag, CUT_CHAIN], capture_output=True, check=False)


def reaches(cluster, node: str, url: str) -> bool:
    probe = f"python3 -c \"import urllib.request; urllib.request.urlopen('{url}', timeout=5)\""
    return cluster.ssh(node, probe + " && echo REACHED || true").stdout.strip().endswith("REACHED")


def gpufleet_mirror(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUFLEET_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([sys.executable, "-m", "gpufleet", "mirror", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)


def served_paths(log: Path, node_ip: str) -> list[str]:
    # apt asks for a flat repository's files as its index names them (Filename: ./name.deb): read "/./" as "/".
    return [path.replace("/./", "/") for path in
            re.findall(rf"^{re.escape(node_ip)} - - \[[^\]]+\] \"GET (\S+) HTTP/[\d.]+\" 200", log.read_text(), re.M)]


def test_nodes_with_only_the_mirror_in_reach_converge_and_rerun_unchanged(sim_cluster_factory, tmp_path):
    cluster = sim_cluster_factory("mirror", nodes=2, profile=["hgx-h100"], os="ubuntu22.04")
    bridge = cluster.state["bridge_ip"]
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "gpu_nodes").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(cluster.inventory.read_text())
    pins = pins_the_repository_holds(cluster.inventory)
    (inventory / "group_vars" / "gpu_nodes" / "pins.yml").write_text(yaml.safe_dump(pins))

    # 1. The mirror, built from what the nodes normally use (the cluster's repositories and wheel directory).
    port = free_port(bridge)
    url = f"http://{bridge}:{port}"
    mirror = tmp_path / "mirror"
    built = gpufleet_mirror("-i", str(inventory), "--dest", str(mirror), "--url", url, "--key-dir", str(tmp_path / "key"),
                            "--wheel-source", str(simimage.WHEELS),
                            "--os-keyring", str(simrepo.KEY_DIR / "archive-keyring.gpg"))
    assert built.returncode == 0, built.stdout + built.stderr
    variables = yaml.safe_load(built.stdout)
    assert variables["gpufleet_cuda_repo_url"] == "{{ gpufleet_mirror_url }}/compute/cuda/repos"
    os_archive = variables["gpufleet_debian_mirror_url"].replace("{{ gpufleet_mirror_url }}", url)
    (inventory / "group_vars" / "gpu_nodes" / "mirror.yml").write_text(built.stdout)
    manifest = json.loads((mirror / "manifest.json").read_text())
    assert {tuple(t["nodes"]) for t in manifest["targets"]} == {("node1", "node2")}  # same plan and state: once

    log = tmp_path / "mirror-http.log"
    with open(log, "ab") as handle:
        server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", str(port), "--bind", bridge,
                                   "--directory", str(mirror)], stdin=subprocess.DEVNULL, stdout=handle,
                                  stderr=handle, start_new_session=True)
    try:
        _converge_offline(cluster, inventory, mirror, bridge, port, url, os_archive, log, pins)
    finally:
        for node in cluster.nodes:
            reconnect(cluster, node)
        os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def _converge_offline(cluster, inventory: Path, mirror: Path, bridge: str, port: int, url: str, os_archive: str,
                      log: Path, pins: dict) -> None:
    original = f"http://{bridge}:{simrepo.HTTP_PORT}/"
    keyring = base64.b64encode((mirror / "keys" / "gpufleet-mirror.gpg").read_bytes()).decode()
    deadline = time.monotonic() + 30
    while not reaches(cluster, cluster.nodes[0], f"{url}/manifest.json"):
        assert time.monotonic() < deadline, f"the mirror's server on {url} did not answer: {log.read_text()[-2000:]}"
        time.sleep(1)
    for node in cluster.nodes:
        cut_off(cluster, node, bridge, port)
        assert not reaches(cluster, node, original), f"{node} still reaches {original}"
        assert reaches(cluster, node, f"{url}/manifest.json")
        # The site's part: the OS sources point at the mirror's OS archive (no gpufleet role writes them).
        cluster.ssh(node, f"echo {keyring} | base64 -d > /usr/share/keyrings/gpufleet-mirror.gpg && "
                          "printf 'Types: deb\\nURIs: %s\\nSuites: jammy\\nComponents: main\\n"
                          "Signed-By: /usr/share/keyrings/gpufleet-mirror.gpg\\n' "
                          f"{os_archive} > /etc/apt/sources.list.d/ubuntu.sources")
        left = cluster.ssh(node, f"grep -rl ':{simrepo.HTTP_PORT}' /etc/apt/sources.list /etc/apt/sources.list.d "
                                 "2>/dev/null || true").stdout.strip()
        assert left == "", f"{node}: apt sources still name the cluster's repository server: {left}"

    reports = ["-e", json.dumps({"gpufleet_report_dir": str(inventory.parent / "reports"), "gpufleet_reboot_ok": True})]
    first = cluster.playbook(PLAYBOOK, "-i", str(inventory), *reports)
    out = first.stdout + first.stderr
    counts = recap(out)
    for node in cluster.nodes:
        assert counts[node]["failed"] == 0 and counts[node]["unreachable"] == 0, out[-8000:]
    assert first.returncode == 0, out[-8000:]

    plan = STACK_PLAN(yaml.safe_load(cluster.inventory.read_text())["all"]["children"]["gpu_nodes"]["vars"]
                      ["gpufleet_stack_request"], gpus=["NVIDIA H100 80GB HBM3"], os="ubuntu22.04", arch="x86_64",
                      nvswitch=True)
    driver = pins.get("gpufleet_driver_version", plan["driver_recommended_version"])
    # The plan's driver packages: a branch pinning package (nvidia-driver-pinning-595) at its branch, the others
    # at the planned (or pinned) release.
    names = [n for n in plan["packages"]["driver"] if not n.startswith("@")]
    released = [n for n in names if not n.startswith("nvidia-driver-pinning-")]
    assert released, names
    for node in cluster.nodes:
        source = cluster.ssh(node, "cat /etc/apt/sources.list.d/gpufleet-cuda.list").stdout
        assert f"{url}/compute/cuda/repos/ubuntu2204/x86_64/ /" in source, source
        installed = cluster.ssh(node, "dpkg-query -W -f='${Package} ${Version}\\n' " + " ".join(names)).stdout
        for name in released:
            assert re.search(rf"^{re.escape(name)} {re.escape(driver)}-", installed, re.M), installed
        for name in set(names) - set(released):
            assert re.search(rf"^{re.escape(name)} {plan['driver_branch']}", installed, re.M), installed
        torch = cluster.ssh(node, "/opt/gpufleet/venv/bin/python -c 'import torch; print(torch.__version__)'").stdout
        assert torch.strip() == "2.13.0+cpu"
        fetched = served_paths(log, cluster.ip(node))
        assert any(p.startswith(f"/compute/cuda/repos/ubuntu2204/x86_64/{released[0]}_") for p in fetched), fetched
        assert any(p.startswith("/os/ubuntu22.04/pool/main/dkms_") for p in fetched), fetched
        assert any(p.startswith("/wheels/torch-2.13.0") for p in fetched), fetched

    second = cluster.playbook(PLAYBOOK, "-i", str(inventory), *reports)
    again = recap(second.stdout + second.stderr)
    assert second.returncode == 0, (second.stdout + second.stderr)[-6000:]
    for node in cluster.nodes:
        assert again[node]["changed"] == 0 and again[node]["failed"] == 0, (second.stdout + second.stderr)[-6000:]
