"""The simulated cluster itself, on clusters of its own: Ubuntu identity, the signed manifest-built
repository, reboots, branch changes, faults in the replayed output, a .run driver, and a clean tear-down
after a normal and a failed bring-up. (The basics every fast-tier test relies on run there too:
tests/integration/test_cluster_sanity.py.)"""

from __future__ import annotations

import yaml
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from simharness import SIM_DIR, SIMCLUSTER, bring_up, cluster, free_subnet, simlib, tear_down

sys.path.insert(0, str(SIM_DIR))
from gfsim import manifest as manifest_lib  # noqa: E402

UBUNTU = manifest_lib.load_all()["ubuntu2204"]
UBUNTU_REPO = "/compute/cuda/repos/ubuntu2204/x86_64"


def newest(manifest, name: str) -> str:
    """The highest version of a driver package the manifest lists (what apt picks)."""
    versions = manifest.versions(name)
    assert versions, f"{manifest.repository} has no {name}"
    return max(versions, key=lambda v: tuple(int(x) for x in v.split("-")[0].split(".")))


def leftovers(name: str) -> list[str]:
    """Everything of cluster `name` that the host still shows (shared with molecule's destroy)."""
    return simlib.leftovers(name)


# --- a cluster of our own: Ubuntu 22.04 nodes with a packaged R535 driver -----------------

@pytest.fixture(scope="module")
def driver_cluster():
    with cluster("simtest", 2, profile=["hgx-h100", "node2=a100-sxm4"], preinstall=["driver=535.183.01"],
                 os="ubuntu22.04") as running:
        yield running


def test_ubuntu_nodes_give_ubuntu_2204_facts(driver_cluster):
    out = driver_cluster.ansible("node1", "-m", "ansible.builtin.setup", "-a",
                                 "filter=ansible_distribution*,ansible_os_family,ansible_lsb")
    assert out.returncode == 0, out.stdout + out.stderr
    facts = yaml.safe_load(out.stdout.split(" => ", 1)[1])["ansible_facts"]   # json or the yaml callback
    assert facts["ansible_distribution"] == "Ubuntu"
    assert facts["ansible_distribution_version"] == "22.04"
    assert facts["ansible_distribution_release"] == "jammy"
    assert facts["ansible_os_family"] == "Debian"
    sources = driver_cluster.ssh("node1", "cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list")
    assert "Suites: jammy" in sources.stdout and f"{UBUNTU_REPO}/ /" in sources.stdout, sources.stdout


def test_the_repository_serves_what_the_manifest_lists_and_nothing_else(driver_cluster):
    madison = driver_cluster.ssh("node1", "apt-cache madison cuda-drivers-535")
    served = {line.split("|")[1].strip() for line in madison.stdout.splitlines() if UBUNTU_REPO in line}
    assert served == set(UBUNTU.versions("cuda-drivers-535")), madison.stdout
    # NVIDIA's documented R535 open install resolves from the manifest-built repository ...
    sim = driver_cluster.ssh("node1", "apt-get install -s -y nvidia-kernel-open-535 cuda-drivers-535 2>&1")
    assert sim.returncode == 0, sim.stdout
    assert "Inst nvidia-dkms-535-open" in sim.stdout and "Remv nvidia-dkms-535 " in sim.stdout, sim.stdout
    # ... and the name NVIDIA's repository does not carry fails, as on a real server.
    bad = driver_cluster.ssh("node1", "apt-get install -s -y nvidia-driver-535-open 2>&1")
    assert bad.returncode != 0 and "Unable to locate package nvidia-driver-535-open" in bad.stdout, bad.stdout


def test_cuda_toolkit_installs_from_the_signed_repository(driver_cluster):
    out = driver_cluster.ssh("node1", "apt-get update 2>&1; DEBIAN_FRONTEND=noninteractive "
                                      "apt-get install -y cuda-toolkit-12-2 2>&1; /usr/local/cuda/bin/nvcc --version")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "NO_PUBKEY" not in out.stdout and "GPG error" not in out.stdout
    assert "Cuda compilation tools, release 12.2, V12.2.140" in out.stdout
    policy = driver_cluster.ssh("node1", "apt-cache policy cuda-toolkit-12-2")
    assert UBUNTU_REPO in policy.stdout


def test_a_repository_signed_with_another_key_is_refused(driver_cluster):
    flat = simlib.state_dir(driver_cluster.name) / "www" / UBUNTU.path
    with tempfile.TemporaryDirectory() as home:
        simlib.repo.resign_flat_repo(flat, Path(home))
    try:
        out = driver_cluster.ssh("node2", "rm -rf /var/lib/apt/lists/*cuda*; apt-get update 2>&1; "
                                          "DEBIAN_FRONTEND=noninteractive apt-get install -y cuda-toolkit-12-1 2>&1")
        assert out.returncode != 0, out.stdout
        assert "NO_PUBKEY" in out.stdout and "signatures couldn't be verified" in out.stdout, out.stdout
    finally:
        simlib.repo.sign_release(flat, simlib.repo.GNUPGHOME, simlib.repo.ensure_key())
    again = driver_cluster.ssh("node2", "apt-get update 2>&1")
    assert "NO_PUBKEY" not in again.stdout


def test_ecc_pending_becomes_current_after_a_reboot(driver_cluster):
    query = "nvidia-smi --query-gpu=ecc.mode.current,ecc.mode.pending --format=csv,noheader -i 0"
    assert driver_cluster.ssh("node1", query).stdout.strip() == "Enabled, Enabled"
    out = driver_cluster.ssh("node1", "nvidia-smi -e 0")
    assert "Reboot required." in out.stdout
    assert driver_cluster.ssh("node1", query).stdout.strip() == "Enabled, Disabled"
    boot_id = driver_cluster.ssh("node1", "cat /proc/sys/kernel/random/boot_id").stdout
    driver_cluster.ssh("node1", "(sleep 1; systemctl reboot) >/dev/null 2>&1 &")
    driver_cluster.wait_rebooted("node1", boot_id)
    assert driver_cluster.ssh("node1", query).stdout.strip() == "Disabled, Disabled"
    # Same file system after the reboot: the toolkit or at least the driver is still there.
    assert driver_cluster.ssh("node1", "dpkg-query -W -f='${Version}' nvidia-driver-535").stdout == "535.183.01-0ubuntu1"
    driver_cluster.ssh("node1", "nvidia-smi -e 1")


def test_reported_driver_follows_the_installed_package(driver_cluster):
    """A branch change (R535 -> R550, proprietary): install the new set, remove the old in the
    same transaction (apt will not drop the old branch on its own, see the manifests' Conflicts)."""
    q = "nvidia-smi -q | grep -E '^(Driver|CUDA) Version'"
    before = driver_cluster.ssh("node2", "nvidia-smi -q -x | grep -E '<(driver|cuda)_version>'").stdout
    assert "535.183.01" in before and "<cuda_version>12.2</cuda_version>" in before
    new = newest(UBUNTU, "nvidia-driver-550").split("-")[0]
    install = " ".join(UBUNTU.preinstall_pins(new, "proprietary"))
    remove = " ".join(p.split("=")[0] + "-" for p in UBUNTU.preinstall_pins("535.183.01", "proprietary"))
    out = driver_cluster.ssh("node2", f"DEBIAN_FRONTEND=noninteractive apt-get install -y {install} {remove} 2>&1")
    assert out.returncode == 0, out.stdout
    after = driver_cluster.ssh("node2", "nvidia-smi -q -x | grep -E '<(driver|cuda)_version>'").stdout
    assert f"<driver_version>{new}</driver_version>" in after and "<cuda_version>12.4</cuda_version>" in after
    text = driver_cluster.ssh("node1", q).stdout
    assert "535.183.01" in text and "12.2" in text


def test_fabric_manager_refuses_a_different_driver_version(driver_cluster):
    out = driver_cluster.ssh("node1", "DEBIAN_FRONTEND=noninteractive apt-get install -y "
                                      "nvidia-fabricmanager-535=535.104.05-1 >/dev/null 2>&1; "
                                      "systemctl start nvidia-fabricmanager; systemctl is-active nvidia-fabricmanager")
    assert out.stdout.strip() != "active"
    out = driver_cluster.ssh("node1", "DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades "
                                      "nvidia-fabricmanager-535=535.183.01-1 >/dev/null 2>&1; "
                                      "systemctl restart nvidia-fabricmanager; sleep 0.5; "
                                      "systemctl is-active nvidia-fabricmanager")
    assert out.stdout.strip() == "active"


def test_faults_show_in_the_replayed_output(driver_cluster):
    c = driver_cluster
    q = "nvidia-smi --query-gpu=ecc.errors.uncorrected.volatile.total --format=csv,noheader -i 0"
    assert c.ssh("node1", q).stdout.strip() == "0"
    c.fault("node1", "ecc-uncorrectable")
    c.fault("node1", "gpu-missing")
    try:
        assert c.ssh("node1", q).stdout.strip() == "2"
        text = c.ssh("node1", "nvidia-smi -q").stdout
        assert "Attached GPUs                             : 7" in text
        assert c.ssh("node1", "ls /opt/gpufleet-sim/sys/bus/pci/devices | wc -l").stdout.strip() == "12"
    finally:
        c.clear("node1")
    assert c.ssh("node1", q).stdout.strip() == "0"
    # XML captures keep their format under faults.
    c.fault("node2", "remap-pending")
    try:
        xml = c.ssh("node2", "nvidia-smi -q -x").stdout
        assert xml.startswith("<?xml") and "<remapped_row_pending>Yes</remapped_row_pending>" in xml
    finally:
        c.clear("node2", "remap-pending")
    # IB: ibstat appears with infiniband-diags and replays the capture; a port goes down.
    out = c.ssh("node1", "DEBIAN_FRONTEND=noninteractive apt-get install -y infiniband-diags >/dev/null 2>&1; ibstat")
    assert out.returncode == 0 and out.stdout.count("State: Active") >= 8, out.stdout + out.stderr
    c.fault("node1", "ib-port-down")
    try:
        out = c.ssh("node1", "ibstat mlx5_0")
        assert "State: Down" in out.stdout and "Physical state: Disabled" in out.stdout
    finally:
        c.clear("node1")


def test_link_cut_isolates_the_node_but_not_from_the_controller(driver_cluster):
    c = driver_cluster
    probe = f"timeout 3 bash -c 'echo > /dev/tcp/{c.ip('node2')}/22' && echo open || echo closed"
    assert c.ssh("node1", probe).stdout.strip() == "open"
    c.fault("node1", "link-cut")
    try:
        assert c.ssh("node1", probe).stdout.strip() == "closed"
    finally:
        c.clear("node1", "link-cut")
    assert c.ssh("node1", probe).stdout.strip() == "open"


def test_userspace_without_its_module_shows_as_a_version_mismatch(driver_cluster):
    """Only the utilities moved (as after an upgrade whose module did not build): NVML refuses."""
    c = driver_cluster
    out = c.ssh("node2", "DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades "
                         "nvidia-utils-550=550.54.15-0ubuntu1 >/dev/null 2>&1; nvidia-smi; echo rc=$?")
    assert "Failed to initialize NVML: Driver/library version mismatch" in out.stdout, out.stdout
    assert "rc=18" in out.stdout


def test_flavour_switch_replaces_the_proprietary_module_with_the_open_one(driver_cluster):
    c = driver_cluster
    version = "535.183.01-0ubuntu1"
    # At a held version every open package is named (apt would otherwise take the newest dkms-open).
    out = c.ssh("node1", f"DEBIAN_FRONTEND=noninteractive apt-get install -y nvidia-kernel-open-535={version} "
                         f"nvidia-dkms-535-open={version} nvidia-kernel-source-535-open={version} 2>&1")
    assert out.returncode == 0, out.stdout
    assert c.ssh("node1", "cat /usr/lib/gpufleet-sim/kernel_module").stdout == "535.183.01 open\n"
    status = c.ssh("node1", "dpkg-query -W -f='${Status}' nvidia-dkms-535 nvidia-dkms-535-open")
    assert status.stdout.count("install ok installed") == 1, status.stdout
    assert c.ssh("node1", "nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0").stdout.strip() \
        == "535.183.01"


# --- a driver installed with NVIDIA's .run installer -----------------------------------------

def test_runfile_driver_works_but_no_package_owns_it():
    name = "simrun"
    try:
        cluster = bring_up(name, free_subnet(), 1, preinstall=["driver-run=535.183.01"], os="ubuntu22.04")
        out = cluster.ssh("node1", "nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u; "
                                   "dpkg -S /usr/bin/nvidia-smi; echo dpkg-rc=$?; "
                                   "dpkg-query -W 'nvidia-*' 'cuda-drivers*' 2>&1; test -x /usr/bin/nvidia-uninstall && echo uninstaller")
        lines = out.stdout.splitlines()
        assert lines[0] == "535.183.01", out.stdout
        assert "dpkg-rc=1" in lines and "uninstaller" in lines, out.stdout
        assert not [line for line in lines if line.startswith(("nvidia-", "cuda-drivers")) and "\t" in line], out.stdout
    finally:
        tear_down(name)


# --- tear-down ------------------------------------------------------------------------------

def test_down_leaves_nothing_behind():
    name = "simdown"
    cluster = bring_up(name, free_subnet(), 2)
    assert leftovers(name), "the probe must see a running cluster"
    assert cluster.ssh("node1", "true").returncode == 0
    tear_down(name)
    assert leftovers(name) == []


def test_a_failed_bring_up_leaves_nothing_behind(tmp_path):
    name = "simfail"
    bogus = tmp_path / "not-a-capture.txt"
    bogus.write_text("this is not nvidia-smi output\n")
    proc = subprocess.run([sys.executable, str(SIMCLUSTER), "up", "--name", name, "--subnet", free_subnet(),
                           "--nodes", "2", "--capture", f"node2={bogus}"], capture_output=True, text=True,
                          timeout=600, check=False)
    try:
        assert proc.returncode != 0
        assert "not an nvidia-smi" in proc.stderr
        assert leftovers(name) == []
    finally:
        tear_down(name)
