"""host.py: parsers on real captures (and this machine's own output), readers on tmp trees."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils.host import (
    EFIVAR_SECUREBOOT,
    detect_virtualization,
    parse_cpuinfo,
    parse_efivar_secureboot,
    parse_environ_container,
    parse_lscpu,
    parse_meminfo,
    parse_mokutil_sb_state,
    parse_os_release,
    read_block_devices,
    read_edac,
    read_nics,
    read_numa_nodes,
    read_secure_boot_efivar,
    vm_type_from_dmi,
)

_REPO = Path(__file__).resolve().parents[4]

try:
    from tests.fixtures_path import FIXTURES
except ImportError:  # pragma: no cover
    FIXTURES = _REPO.parent / "shared" / "fixtures"

LSCPU_DELLA = FIXTURES / "host" / "lscpu-della-h100-node-2x-xeon-8468.txt"


def test_every_lscpu_capture_parses():
    files = sorted((FIXTURES / "host").glob("lscpu-*.txt"))
    assert files
    for path in files:
        cpu = parse_lscpu(path.read_text())
        assert cpu["model"] and cpu["threads"] and cpu["cores"] and cpu["sockets"], path.name


def test_parse_lscpu_della_h100_node():
    cpu = parse_lscpu(LSCPU_DELLA.read_text())
    assert cpu["model"] == "Intel(R) Xeon(R) Platinum 8468"
    assert (cpu["sockets"], cpu["cores"], cpu["threads"], cpu["numa_nodes"]) == (2, 96, 96, 2)
    assert cpu["threads_per_core"] == 1
    assert cpu["architecture"] == "x86_64" and cpu["vendor"] == "GenuineIntel"
    # Interleaved NUMA lists: even CPUs on node 0, odd on node 1.
    assert cpu["numa_cpus"][0].split(",")[:3] == ["0", "2", "4"]
    assert cpu["numa_cpus"][1].split(",")[-1] == "95"
    assert "avx512f" in cpu["flags"] and "hypervisor" not in cpu["flags"]
    assert cpu["hypervisor_vendor"] is None


def test_parse_lscpu_layout_agnostic():
    text = LSCPU_DELLA.read_text()
    want = parse_lscpu(text)
    assert parse_lscpu(text.replace("\n", "\r\n"))["cores"] == want["cores"]
    # util-linux >= 2.37 indents keys under their section; the values stay the same.
    indented = "\n".join(("  " + line if i % 2 else line) for i, line in enumerate(text.splitlines()))
    got = parse_lscpu(indented)
    assert {k: got[k] for k in ("model", "sockets", "cores", "threads", "numa_nodes")} == {
        k: want[k] for k in ("model", "sockets", "cores", "threads", "numa_nodes")}


def test_parse_lscpu_empty():
    cpu = parse_lscpu("")
    assert cpu["model"] is None and cpu["cores"] is None and cpu["threads"] is None


@pytest.mark.skipif(not shutil.which("lscpu"), reason="lscpu not installed")
def test_parse_lscpu_and_cpuinfo_agree_on_this_machine():
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True,
                         env={"LANG": "C", "LC_ALL": "C", "PATH": os.environ.get("PATH", "")}).stdout
    lscpu = parse_lscpu(out)
    cpuinfo = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert lscpu["threads"] == os.cpu_count() == cpuinfo["threads"]
    assert lscpu["cores"] >= 1 and lscpu["sockets"] >= 1
    assert lscpu["cores"] * lscpu["threads_per_core"] == lscpu["threads"]
    if cpuinfo["model"]:
        assert lscpu["model"] == cpuinfo["model"]
    assert ("hypervisor" in lscpu["flags"]) == cpuinfo["hypervisor"]


def test_parse_meminfo_this_machine():
    mem = parse_meminfo(Path("/proc/meminfo").read_text())
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert mem["total_mib"] == pages // (1024 * 1024)
    assert parse_meminfo("") == {"total_mib": None, "available_mib": None}


def test_parse_os_release_this_machine():
    info = parse_os_release(Path("/etc/os-release").read_text())
    assert info["id"] and info["version_id"]
    if info["id"] in ("debian", "ubuntu"):
        assert info["family"] == "debian"


@pytest.mark.parametrize(
    "text, family",
    [
        ('ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n', "redhat"),
        ("ID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"22.04\"\n", "debian"),
        ('ID="sles"\nVERSION_ID="15.5"\n', "suse"),
        ("ID=arch\n", "arch"),
    ],
)
def test_parse_os_release_family(text, family):
    assert parse_os_release(text)["family"] == family


def test_secure_boot_parsers():
    assert parse_mokutil_sb_state("SecureBoot enabled\n") == "enabled"
    assert parse_mokutil_sb_state("SecureBoot disabled\nPlatform is in Setup Mode\n") == "disabled"
    assert parse_mokutil_sb_state("EFI variables are not supported on this system\n") == "unknown"
    assert parse_efivar_secureboot(b"\x06\x00\x00\x00\x01") == "enabled"
    assert parse_efivar_secureboot(b"\x06\x00\x00\x00\x00") == "disabled"
    assert parse_efivar_secureboot(b"") == "unknown"


def test_read_secure_boot_efivar(tmp_path):
    assert read_secure_boot_efivar(str(tmp_path)) == "unknown"
    var = tmp_path / "firmware" / "efi" / "efivars" / EFIVAR_SECUREBOOT
    var.parent.mkdir(parents=True)
    var.write_bytes(b"\x06\x00\x00\x00\x01")
    assert read_secure_boot_efivar(str(tmp_path)) == "enabled"
    var.write_bytes(b"\x06\x00\x00\x00\x00")
    assert read_secure_boot_efivar(str(tmp_path)) == "disabled"


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_read_edac_absent_is_unknown(tmp_path):
    edac = read_edac(str(tmp_path))
    assert edac["ecc_active"] is None
    assert edac["edac_corrected"] is None and edac["edac_uncorrected"] is None


def test_read_edac_counts_and_modes(tmp_path):
    mc = tmp_path / "devices" / "system" / "edac" / "mc"
    _write(mc / "mc0" / "ce_count", "3")
    _write(mc / "mc0" / "ue_count", "0")
    _write(mc / "mc0" / "dimm0" / "dimm_edac_mode", "SECDED")
    _write(mc / "mc1" / "ce_count", "2")
    _write(mc / "mc1" / "ue_count", "1")
    _write(mc / "mc1" / "csrow0" / "edac_mode", "S4ECD4ED")
    edac = read_edac(str(tmp_path))
    assert edac["ecc_active"] is True
    assert (edac["edac_corrected"], edac["edac_uncorrected"], edac["edac_controllers"]) == (5, 1, 2)
    assert edac["edac_modes"] == ["S4ECD4ED", "SECDED"]


def test_read_edac_modes_none_or_missing(tmp_path):
    mc = tmp_path / "devices" / "system" / "edac" / "mc" / "mc0"
    _write(mc / "ce_count", "0")
    _write(mc / "ue_count", "0")
    edac = read_edac(str(tmp_path))
    assert edac["ecc_active"] is None and edac["edac_corrected"] == 0  # controller, mode unknown
    _write(mc / "dimm0" / "dimm_edac_mode", "Unknown")
    _write(mc / "dimm1" / "dimm_edac_mode", "None")
    assert read_edac(str(tmp_path))["ecc_active"] is False


def test_read_block_devices(tmp_path):
    block = tmp_path / "block"
    _write(block / "nvme0n1" / "size", "7501476528")
    _write(block / "nvme0n1" / "queue" / "rotational", "0")
    _write(block / "nvme0n1" / "device" / "model", "SAMSUNG MZQL27T6HBLA-00A07              ")
    _write(block / "nvme1c1n1" / "size", "7501476528")
    _write(block / "nvme1c1n1" / "hidden", "1")
    _write(block / "sda" / "size", "3907029168")
    _write(block / "sda" / "queue" / "rotational", "1")
    _write(block / "sda" / "removable", "0")
    for skip in ("loop0", "ram0", "zram0"):
        _write(block / skip / "size", "0")
    devices = {d["name"]: d for d in read_block_devices(str(tmp_path))}
    assert sorted(devices) == ["nvme0n1", "sda"]
    assert devices["nvme0n1"] == {"name": "nvme0n1", "nvme": True, "size_bytes": 7501476528 * 512,
                                  "rotational": False, "model": "SAMSUNG MZQL27T6HBLA-00A07", "removable": None}
    assert devices["sda"]["nvme"] is False and devices["sda"]["rotational"] is True
    assert devices["sda"]["model"] is None


def test_read_nics(tmp_path):
    net = tmp_path / "class" / "net"
    drivers = tmp_path / "bus" / "pci" / "drivers" / "mlx5_core"
    drivers.mkdir(parents=True)
    pci = tmp_path / "devices" / "pci0000:00" / "0000:18:00.0"
    pci.mkdir(parents=True)
    os.symlink(drivers, pci / "driver")
    up = net / "ens21f0np0"
    _write(up / "speed", "400000")
    _write(up / "carrier", "1")
    _write(up / "mtu", "9000")
    _write(up / "address", "b8:3f:d2:6e:27:04")
    _write(up / "operstate", "up")
    os.symlink(pci, up / "device")
    down = net / "ens22f0"
    _write(down / "speed", "-1")
    _write(down / "carrier", "0")
    _write(down / "mtu", "1500")
    _write(down / "operstate", "down")
    _write(net / "lo" / "mtu", "65536")
    bridge = net / "br0"
    _write(bridge / "mtu", "1500")
    _write(bridge / "operstate", "up")  # no carrier/speed file readable
    nics = {n["name"]: n for n in read_nics(str(tmp_path))}
    assert sorted(nics) == ["br0", "ens21f0np0", "ens22f0"]
    assert nics["ens21f0np0"]["speed_mbps"] == 400000 and nics["ens21f0np0"]["link"] is True
    assert nics["ens21f0np0"]["driver"] == "mlx5_core" and nics["ens21f0np0"]["mtu"] == 9000
    assert nics["ens21f0np0"]["virtual"] is False
    assert nics["ens22f0"]["speed_mbps"] is None and nics["ens22f0"]["link"] is False
    assert nics["br0"]["driver"] is None and nics["br0"]["virtual"] is True and nics["br0"]["link"] is True


def test_read_numa_nodes(tmp_path):
    assert read_numa_nodes(str(tmp_path)) is None
    for name in ("node0", "node1", "possible", "has_cpu"):
        (tmp_path / "devices" / "system" / "node" / name).mkdir(parents=True)
    assert read_numa_nodes(str(tmp_path)) == 2


def test_detect_virtualization_from_files(tmp_path):
    root, sysfs, procfs = tmp_path / "root", tmp_path / "sys", tmp_path / "proc"
    for d in (root, sysfs, procfs):
        d.mkdir()
    assert detect_virtualization(str(root), str(sysfs), str(procfs)) == {
        "container": False, "vm": False, "container_type": None, "vm_type": None}
    (root / ".dockerenv").write_text("")
    _write(sysfs / "class" / "dmi" / "id" / "product_name", "Virtual Machine")
    _write(sysfs / "class" / "dmi" / "id" / "sys_vendor", "Microsoft Corporation")
    got = detect_virtualization(str(root), str(sysfs), str(procfs))
    assert got == {"container": True, "vm": True, "container_type": "docker", "vm_type": "microsoft"}
    (procfs / "1").mkdir()
    (procfs / "1" / "environ").write_bytes(b"PATH=/usr/bin\0container=podman\0")
    assert detect_virtualization(str(root), str(sysfs), str(procfs))["container_type"] == "podman"


def test_detect_virtualization_this_machine():
    got = detect_virtualization()
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        assert got["container"] is True
    if "hypervisor" in Path("/proc/cpuinfo").read_text():
        assert got["vm"] is True


def test_small_helpers():
    assert parse_environ_container(b"HOME=/\0container=lxc\0") == "lxc"
    assert parse_environ_container(b"HOME=/\0") is None
    assert vm_type_from_dmi("KVM", "Red Hat") == "kvm"
    assert vm_type_from_dmi("PowerEdge XE9680", "Dell Inc.") is None
    assert vm_type_from_dmi("p5.48xlarge", "Amazon EC2") == "amazon"
    assert vm_type_from_dmi("p5.metal", "Amazon EC2") is None
