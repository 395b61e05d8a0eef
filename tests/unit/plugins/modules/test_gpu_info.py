"""gpu_info: in-process with run_command fed the real captures, and through Ansible on this
machine (no GPU) with stand-in nvidia-smi scripts that replay the captures."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.modules import gpu_info

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sim"))
# The simulator's VPD image (sysfs `vpd` layout); no raw VPD dump of an HGX B200 bridge was found to replay.
from gfsim.hardware import pci_vpd  # noqa: E402

_REPO = Path(__file__).resolve().parents[4]

VENV_BIN = _REPO / ".venv" / "bin"
H100_X8 = FIXTURES / "nvidia-smi-q" / "h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt"
H100_VM = FIXTURES / "nvidia-smi-q" / "h100-sxm-80gb-hbm3-vm-drv590.48.01-cuda13.1-load.txt"
H100_VM_CSV = FIXTURES / "nvidia-smi-csv" / "h100-sxm-80gb-hbm3-drv590.48.01-query-gpu-all-fields-load.csv"
HGX_TOPO = FIXTURES / "topo" / "hgx-h100-8gpu-nv18-8nic-pix-2numa-sglang-issue30401.txt"
V100S_XML = FIXTURES / "nvidia-smi-xml" / "v100s-pcie-32gb-x8-drv460.73.01-cuda11.2.xml"
# The real message and rc of nvidia-smi without a loaded driver (reference/test-infrastructure.md §5).
NO_DRIVER_MSG = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.")
H100_X8_BUSES = ["0000:%s:00.0" % b for b in ("53", "64", "75", "86", "97", "a8", "b9", "ca")]
OLD_DRIVER_CC_ERR = (2, 'Field "compute_cap" is not a valid field to query.\n', "")


def make_sysfs(root, functions):
    """functions: [(sysfs name, vendor, device, class)] -> a fake /sys/bus/pci/devices."""
    root.mkdir(parents=True, exist_ok=True)
    for name, vendor, device, cls in functions:
        d = root / name
        d.mkdir()
        (d / "vendor").write_text(vendor + "\n")
        (d / "device").write_text(device + "\n")
        (d / "class").write_text(cls + "\n")
    return str(root)


def hgx_sysfs(tmp_path, gpus=H100_X8_BUSES, nvswitches=4):
    funcs = [(b, "0x10de", "0x2330", "0x030200") for b in gpus]
    funcs += [("0000:%02x:00.0" % (0x05 + i), "0x10de", "0x22a3", "0x068000") for i in range(nvswitches)]
    funcs += [("0000:00:00.0", "0x8086", "0x09a2", "0x060000"),  # host bridge
              ("0000:17:00.0", "0x15b3", "0x1021", "0x020700")]  # ConnectX-7
    return make_sysfs(tmp_path / "sys", funcs)


def run_module(monkeypatch, capsys, args, outputs, bin_found=True):
    """outputs: {'-q': (rc, out, err), 'topo': ..., '--query-gpu': ...}, keyed by the argument that picks them."""
    calls = []

    def fake_get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if bin_found else None

    def fake_run_command(self, cmd, *a, **kw):
        calls.append({"cmd": cmd, "environ_update": kw.get("environ_update")})
        for key, value in outputs.items():
            if any(c.startswith(key) for c in cmd[1:]):
                return value
        raise AssertionError("unexpected command %r" % (cmd,))

    def fake_run_tool(module, cmd, timeout_s, environ_update=None):
        rc, out, err = fake_run_command(module, cmd, environ_update=environ_update)
        return rc, out, err, False

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake_get_bin_path)
    monkeypatch.setattr(gpu_info, "run_tool", fake_run_tool)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_info.main()
    return json.loads(capsys.readouterr().out), calls


def test_hgx_h100_ok(monkeypatch, capsys, tmp_path):
    result, calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": hgx_sysfs(tmp_path)}, {
        "-q": (0, H100_X8.read_text(), ""), "--query-gpu": OLD_DRIVER_CC_ERR, "topo": (0, HGX_TOPO.read_text(), "")})
    assert calls[0]["cmd"] == ["/usr/bin/nvidia-smi", "-q", "-x"]
    assert calls[0]["environ_update"]["LC_ALL"] == "C" and calls[0]["environ_update"]["LANG"] == "C"
    assert result["changed"] is False and "failed" not in result and "rc" not in result
    assert (result["status"], result["message"]) == ("ok", "")
    assert (result["driver_version"], result["cuda_version"]) == ("535.183.01", "12.2")
    assert (result["driver_gpu_count"], result["pci_gpu_count"], result["pci_nvswitch_count"]) == (8, 8, 4)
    assert result["gpu_count_mismatch"] is False and result["missing_from_driver"] == []
    assert result["nvswitch"] is True
    gpus = [d for d in result["pci_devices"] if d["kind"] == "gpu"]
    assert [d["bus_id"] for d in gpus] == [g["pci_bus_id"] for g in result["gpus"]]
    assert gpus[0] == {"bus_id": "00000000:53:00.0", "sysfs_name": "0000:53:00.0", "vendor_id": "0x10de",
                       "device_id": "0x2330", "class": "0x030200", "kind": "gpu", "model": "NVIDIA H100 80GB HBM3"}
    sw = [d for d in result["pci_devices"] if d["kind"] == "nvswitch"]
    assert len(sw) == 4 and sw[0]["model"].startswith("NVSwitch")
    g = result["gpus"][0]
    assert (g["compute_capability"], g["compute_capability_source"]) == ("9.0", "model_table")
    assert g["remapped_rows"]["pending"] is False and g["power_limit_w"] == 700.0
    assert result["topology"]["nvlink"] is True and result["topology"]["gpus"][7]["nearest_nics"] == ["mlx5_7"]


def test_gpu_fell_off_the_bus(monkeypatch, capsys, tmp_path):
    # A ninth GPU on the bus that the driver does not list.
    sysfs = hgx_sysfs(tmp_path, gpus=H100_X8_BUSES + ["0000:db:00.0"])
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": sysfs, "include_topology": False}, {
        "-q": (0, H100_X8.read_text(), ""), "--query-gpu": OLD_DRIVER_CC_ERR})
    assert result["status"] == "ok"
    assert (result["pci_gpu_count"], result["driver_gpu_count"]) == (9, 8)
    assert result["gpu_count_mismatch"] is True
    assert result["missing_from_driver"] == ["00000000:DB:00.0"]
    assert "00000000:DB:00.0" in result["message"]
    assert result["topology"] is None


def test_compute_cap_from_driver_query(monkeypatch, capsys, tmp_path):
    # Same VM, same driver: the -q capture and the --query-gpu capture.
    sysfs = make_sysfs(tmp_path / "sys", [("0000:00:09.0", "0x10de", "0x2330", "0x030200")])
    result, calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": sysfs}, {
        "-q": (0, H100_VM.read_text(), ""), "--query-gpu": (0, H100_VM_CSV.read_text(), ""),
        "topo": (0, (FIXTURES / "topo" / "h100-single-gpu-vm-drv590.48.01-ansi-header.txt").read_text(), "")})
    g = result["gpus"][0]
    assert (g["compute_capability"], g["compute_capability_source"]) == ("9.0", "nvidia-smi")
    assert result["status"] == "ok" and result["gpu_count_mismatch"] is False
    assert result["topology"]["gpus"][0]["cpu_affinity"] == "0-19"
    assert ["/usr/bin/nvidia-smi", "topo", "-m"] in [c["cmd"] for c in calls]


def test_topology_failure_is_null(monkeypatch, capsys, tmp_path):
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": str(tmp_path / "none")}, {
        "-q": (0, V100S_XML.read_text(), ""), "--query-gpu": OLD_DRIVER_CC_ERR,
        "topo": (3, "", "Failed to get topology\n")})
    assert result["status"] == "ok" and result["topology"] is None
    # sysfs hidden (container): no PCI count, so nothing to disagree with
    assert (result["pci_gpu_count"], result["driver_gpu_count"], result["gpu_count_mismatch"]) == (0, 8, False)
    assert result["nvswitch"] is False
    assert {g["architecture"] for g in result["gpus"]} == {"Volta"}


def test_no_driver_when_gpus_on_bus(monkeypatch, capsys, tmp_path):
    result, calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": hgx_sysfs(tmp_path)}, {}, bin_found=False)
    assert calls == []
    assert result["status"] == "no_driver" and result["pci_gpu_count"] == 8
    assert result["driver_gpu_count"] is None and result["gpus"] == []
    assert "nvidia-smi was not found" in result["message"]


def test_no_gpu_no_tool(monkeypatch, capsys, tmp_path):
    sysfs = make_sysfs(tmp_path / "sys", [("0000:00:02.0", "0x8086", "0x46a6", "0x030000"),  # Intel iGPU
                                          ("0000:01:00.1", "0x10de", "0x22ba", "0x040300")])  # NVIDIA HDMI audio
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": sysfs}, {}, bin_found=False)
    assert result["status"] == "no_gpu" and result["pci_devices"] == [] and result["pci_gpu_count"] == 0


# --------------------------------------------- NVSwitch system, per generation (see gpu_info's DOCUMENTATION)

# Mellanox's vendor-specific VPD keyword as ConnectX cards carry it; the bridge's LPF adds SMDL=SW_MNG
# (FM guide 2.3 §1.3.2 names the field, not its place: the detection looks for the text anywhere).
NIC_VA = "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0"


def b200_sysfs(tmp_path, bridge_vpds):
    """8x B200 (10de:2901) on the H100 board's bus addresses, 8 ConnectX-7 NICs without VPD marker, and one
    ConnectX-7 function (15b3:1021, InfiniBand class) per entry of bridge_vpds, with that VPD (None: no vpd file)."""
    funcs = [(b, "0x10de", "0x2901", "0x030200") for b in H100_X8_BUSES]
    funcs += [("0000:%02x:00.0" % (0x18 + i), "0x15b3", "0x1021", "0x020700") for i in range(8)]
    bridges = ["0000:%02x:00.%d" % (0xe0 + i // 2, i % 2) for i in range(len(bridge_vpds))]
    funcs += [(b, "0x15b3", "0x1021", "0x020700") for b in bridges]
    root = Path(make_sysfs(tmp_path / "sys", funcs))
    for i in range(8):
        (root / ("0000:%02x:00.0" % (0x18 + i)) / "vpd").write_bytes(pci_vpd(NIC_VA))
    for bus, vpd in zip(bridges, bridge_vpds):
        if vpd is not None:
            (root / bus / "vpd").write_bytes(vpd)
    return str(root)


def test_hgx_a100_nvswitch_is_a_pci_bridge(monkeypatch, capsys, tmp_path):
    funcs = [("0000:%02x:00.0" % (0x07 + i), "0x10de", "0x20b2", "0x030200") for i in range(8)]
    funcs += [("0000:%02x:00.0" % (0xc0 + i), "0x10de", "0x1af1", "0x068000") for i in range(6)]
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": make_sysfs(tmp_path / "sys", funcs)}, {},
                                bin_found=False)
    assert (result["pci_nvswitch_count"], result["pci_nvswitch_bridge_count"], result["nvswitch"]) == (6, 0, True)


def test_hgx_b200_nvswitches_seen_through_the_cx7_bridge(monkeypatch, capsys, tmp_path):
    # FM guide 2.3 §1.3.2: two bridge ports, each a full PF and a Limited PF; only the LPFs carry SMDL=SW_MNG.
    lpf = pci_vpd(NIC_VA + ":SMDL=SW_MNG")
    full_pf = pci_vpd(NIC_VA)
    sysfs = b200_sysfs(tmp_path, [lpf, full_pf, lpf, full_pf])
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": sysfs}, {}, bin_found=False)
    assert result["status"] == "no_driver" and result["pci_gpu_count"] == 8
    assert (result["pci_nvswitch_count"], result["pci_nvswitch_bridge_count"], result["nvswitch"]) == (0, 2, True)
    bridges = [d for d in result["pci_devices"] if d["kind"] == "nvswitch_bridge"]
    assert [d["sysfs_name"] for d in bridges] == ["0000:e0:00.0", "0000:e1:00.0"]
    assert (bridges[0]["vendor_id"], bridges[0]["device_id"], bridges[0]["class"]) == ("0x15b3", "0x1021", "0x020700")
    assert "ConnectX-7" in bridges[0]["model"]
    assert {d["model"] for d in result["pci_devices"] if d["kind"] == "gpu"} == {"NVIDIA B200"}


def test_a_vf_of_the_bridge_is_not_counted(monkeypatch, capsys, tmp_path):
    # The public detections skip SR-IOV VFs (a physfn link) before reading VPD; one LPF is counted once.
    lpf = pci_vpd(NIC_VA + ":SMDL=SW_MNG")
    sysfs = Path(b200_sysfs(tmp_path, [lpf, lpf]))
    (sysfs / "0000:e0:00.1" / "physfn").symlink_to(sysfs / "0000:e0:00.0")
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": str(sysfs)}, {}, bin_found=False)
    assert (result["pci_nvswitch_bridge_count"], result["nvswitch"]) == (1, True)


@pytest.mark.parametrize("bridge_vpds", [[], [None, None]], ids=["no-bridge-function", "vpd-unreadable"])
def test_b200_gpu_ids_and_cx7_nics_alone_are_not_an_nvswitch_system(monkeypatch, capsys, tmp_path, bridge_vpds):
    # The B200 GPU id is on PCIe boards and in VMs too; an ordinary CX7 NIC shares the bridge's PCI id.
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": b200_sysfs(tmp_path, bridge_vpds)}, {},
                                bin_found=False)
    assert result["pci_gpu_count"] == 8
    assert (result["pci_nvswitch_count"], result["pci_nvswitch_bridge_count"], result["nvswitch"]) == (0, 0, False)
    assert all(d["kind"] == "gpu" for d in result["pci_devices"])


def test_driver_error_keeps_message_and_rc(monkeypatch, capsys, tmp_path):
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": hgx_sysfs(tmp_path)},
                                {"-q": (9, NO_DRIVER_MSG + "\n", "")})
    assert result["status"] == "driver_error"
    assert result["message"] == NO_DRIVER_MSG and result["nvidia_smi_rc"] == 9
    assert "failed" not in result


def test_no_devices_found_without_pci_gpus_is_no_gpu(monkeypatch, capsys, tmp_path):
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": str(tmp_path / "none")},
                                {"-q": (6, "No devices were found\n", "")})
    assert result["status"] == "no_gpu" and result["message"] == "No devices were found"


def test_unparseable_output_fails_naming_the_command(monkeypatch, capsys, tmp_path):
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": str(tmp_path)}, {"-q": (0, "garbage\n", "")})
    assert result["failed"] is True
    assert "/usr/bin/nvidia-smi -q -x" in result["msg"]
    assert result["stdout"] == "garbage\n" and result["rc"] == 0


# ------------------------------------------------------------ through Ansible

def ansible(*argv):
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_DEPRECATION_WARNINGS"] = "false"
    return subprocess.run([str(VENV_BIN / argv[0])] + list(argv[1:]), cwd=str(_REPO), env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def adhoc(args):
    proc = ansible("ansible", "localhost", "-m", "gpufleet.cluster.gpu_info", "-a", args,
                   "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python"))
    return proc, json.loads(proc.stdout.partition("=>")[2])


def stand_in(tmp_path, body):
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


needs_ansible = pytest.mark.skipif(not (VENV_BIN / "ansible").exists(), reason="no controller venv")


@needs_ansible
@pytest.mark.skipif(not os.path.isdir("/sys/bus/pci/devices"), reason="no sysfs")
def test_ansible_defaults_on_this_machine():
    proc = ansible("ansible", "localhost", "-m", "gpufleet.cluster.gpu_info",
                   "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.partition("=>")[2])
    assert result["changed"] is False
    if not result["pci_gpu_count"] and result["nvidia_smi_path"] is None:  # this build machine
        assert result["status"] == "no_gpu" and result["driver_gpu_count"] is None
    else:  # a real GPU node (tests/gpu/) reports what it finds, but never fails
        assert result["status"] in ("no_driver", "driver_error", "ok")


@needs_ansible
def test_ansible_stand_in_without_driver(tmp_path):
    smi = stand_in(tmp_path, "echo \"%s\"\nexit 9\n" % NO_DRIVER_MSG)
    proc, result = adhoc("nvidia_smi=%s pci_sysfs_path=%s" % (smi, tmp_path / "none"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (result["status"], result["message"], result["nvidia_smi_rc"]) == ("driver_error", NO_DRIVER_MSG, 9)


@needs_ansible
def test_ansible_stand_in_replaying_captures(tmp_path):
    smi = stand_in(tmp_path, (
        'case "$1" in\n'
        '  -q) cat "%s" ;;\n'
        '  topo) cat "%s" ;;\n'
        '  *) echo \'Field "compute_cap" is not a valid field to query.\'; exit 2 ;;\n'
        'esac\n') % (H100_X8, HGX_TOPO))
    proc, result = adhoc("nvidia_smi=%s pci_sysfs_path=%s" % (smi, hgx_sysfs(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["status"] == "ok" and result["changed"] is False
    assert (result["driver_gpu_count"], result["pci_gpu_count"], result["pci_nvswitch_count"]) == (8, 8, 4)
    assert result["gpus"][3]["uuid"] == "GPU-6b932a61-abfd-5ea1-b26a-7dea7f2fa601"
    assert [g["name"] for g in result["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8
    assert result["topology"]["link_types"] == ["NV18"]
    # returned facts match RETURN
    doc = json.loads(ansible("ansible-doc", "--json", "gpufleet.cluster.gpu_info").stdout)["gpufleet.cluster.gpu_info"]
    assert set(result) - {"changed", "invocation", "_ansible_no_log"} == set(doc["return"])
    for g in result["gpus"]:
        assert set(g) == set(doc["return"]["gpus"]["contains"])
    for d in result["pci_devices"]:
        assert set(d) == set(doc["return"]["pci_devices"]["contains"])


@needs_ansible
def test_ansible_doc():
    proc = ansible("ansible-doc", "--json", "gpufleet.cluster.gpu_info")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["gpufleet.cluster.gpu_info"]
    assert set(doc["doc"]["options"]) == {"pci_sysfs_path", "nvidia_smi", "include_topology", "timeout"}
    for key in ("status", "message", "driver_version", "cuda_version", "gpus", "driver_gpu_count",
                "pci_gpu_count", "pci_nvswitch_count", "pci_nvswitch_bridge_count", "pci_devices", "nvswitch",
                "topology"):
        assert key in doc["return"], key


# ------------------------------------------------------------ hung and garbled nvidia-smi (issue 13)

def _with_byte(path, anchor, byte):
    """A real capture with one byte slipped in after ``anchor`` (the edit the test is about)."""
    data = path.read_bytes()
    at = data.index(anchor) + len(anchor)
    return data[:at] + byte + data[at:]


def test_hung_nvidia_smi_is_a_driver_error_within_the_timeout(tmp_path):
    """A stand-in nvidia-smi that never answers, run through the module's own runner."""
    smi = stand_in(tmp_path, "sleep 300\n")
    proc, result = adhoc("nvidia_smi=%s pci_sysfs_path=%s timeout=2" % (smi, hgx_sysfs(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # rc 124 and timed_out come from the module's own deadline: a 300 s sleep waited for would end rc 0.
    assert result["status"] == "driver_error" and result["timed_out"] is True
    assert result["nvidia_smi_rc"] == 124
    assert "did not answer within 2 s" in result["message"] and str(smi) in result["message"]


def _dies(pid, within):
    """True once /proc says the process is gone or a zombie, polled until `within` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_hung_nvidia_smi_child_processes_are_killed_too(tmp_path):
    """The whole process group goes: a sleeping grandchild would otherwise hold the pipes open."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool
    pid_file = tmp_path / "grandchild.pid"
    script = stand_in(tmp_path, "sleep 300 &\necho $! > %s\nwait\n" % pid_file)
    started = time.monotonic()
    rc, _out, _err, timed_out = run_tool(None, [str(script)], 1)
    assert (rc, timed_out) == (124, True)
    # The grandchild was killed with its group, not left to hold the pipes until its sleep ends. Its pipes close
    # in its exit, a moment before the kernel marks it a zombie: on a loaded machine run_tool can return inside
    # that moment (seen: state R), so the state is read until the exit completes, 10 s at most.
    grandchild = int(pid_file.read_text())
    assert _dies(grandchild, within=10), Path(f"/proc/{grandchild}/stat").read_text()
    # A bound on a hang, not on speed: waiting for the grandchild's pipes would take its whole 300 s.
    assert time.monotonic() - started < 150


def test_string_timeout_from_extra_vars_is_typed(tmp_path):
    """-e gpu_timeout=5 arrives as a string; the argument spec makes it an int."""
    smi = stand_in(tmp_path, "sleep 300\n")
    proc = ansible("ansible", "localhost", "-m", "gpufleet.cluster.gpu_info",
                   "-a", "nvidia_smi=%s pci_sysfs_path=%s timeout={{ t }}" % (smi, tmp_path / "none"),
                   "-e", "t=1", "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.partition("=>")[2])
    assert result["timed_out"] is True and "within 1 s" in result["message"]


def test_non_utf8_byte_in_xml_output_gives_a_result(tmp_path):
    """The real 8x V100S XML capture with one 0xff byte put into the product name."""
    garbled = tmp_path / "garbled.xml"
    garbled.write_bytes(_with_byte(V100S_XML, b"<product_name>Tesla V100S", b"\xff"))
    smi = stand_in(tmp_path, 'case "$1" in\n  -q) cat "%s" ;;\n  *) exit 2 ;;\nesac\n' % garbled)
    proc, result = adhoc("nvidia_smi=%s pci_sysfs_path=%s include_topology=false" % (smi, tmp_path / "none"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert result["status"] == "ok" and result["driver_gpu_count"] == 8
    assert result["gpus"][0]["name"] == "Tesla V100S\ufffd-PCIE-32GB"


def test_non_utf8_byte_in_text_output_gives_a_result(tmp_path):
    """The real H100 -q text capture with one 0xfe byte in the product name."""
    garbled = tmp_path / "garbled.txt"
    garbled.write_bytes(_with_byte(H100_X8, b"NVIDIA H100", b"\xfe"))
    smi = stand_in(tmp_path, 'case "$1" in\n  -q) cat "%s" ;;\n  *) exit 2 ;;\nesac\n' % garbled)
    proc, result = adhoc("nvidia_smi=%s pci_sysfs_path=%s include_topology=false" % (smi, tmp_path / "none"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["status"] == "ok" and result["driver_gpu_count"] == 8


def test_xml_nested_too_deep_is_a_clear_error_naming_the_command(tmp_path):
    """The real V100S capture with 5000 nested elements put inside its first <gpu>."""
    deep = _with_byte(V100S_XML, b"</product_name>", b"<a>" * 5000 + b"</a>" * 5000)
    path = tmp_path / "deep.xml"
    path.write_bytes(deep)
    smi = stand_in(tmp_path, 'cat "%s"\n' % path)
    proc, result = adhoc("nvidia_smi=%s pci_sysfs_path=%s include_topology=false" % (smi, tmp_path / "none"))
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "FAILED!" in proc.stdout
    assert "nests deeper than" in result["msg"] and str(smi) in result["msg"]


def test_huge_csv_field_in_compute_cap_query_keeps_the_table_value(monkeypatch, capsys, tmp_path):
    """The real H100 all-fields CSV with one field blown up past csv's 128 KiB field limit."""
    rows = H100_VM_CSV.read_text().splitlines()
    huge = "\n".join([rows[0], '"' + "9" * 200000 + '"' + rows[1][rows[1].index(","):]]) + "\n"
    result, _calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": str(tmp_path / "none")}, {
        "-q": (0, H100_VM.read_text(), ""), "--query-gpu": (0, huge, ""), "topo": (1, "", "")})
    assert result["status"] == "ok" and "failed" not in result
    assert result["gpus"][0]["compute_capability_source"] == "model_table"


def test_hung_node_is_a_named_driver_error_while_the_other_node_finishes(tmp_path):
    """Two hosts in one play: ``hung`` has an nvidia-smi that never answers, ``good`` one that
    replays the real 8x H100 capture. The hung one fails health as DRIVER_NOT_LOADED by name,
    within its timeout; the good one's facts and verdict come back in the same run."""
    (tmp_path / "hung").mkdir()
    (tmp_path / "good").mkdir()
    hung = stand_in(tmp_path / "hung", "sleep 300\n")
    good = stand_in(tmp_path / "good", (
        'case "$1" in\n  -q) cat "%s" ;;\n  *) echo \'Field "compute_cap" is not a valid field to query.\'; exit 2 ;;\n'
        'esac\n') % H100_X8)
    out = tmp_path / "out"
    out.mkdir()
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": str(VENV_BIN / "python")}
    inventory.write_text(json.dumps({"all": {"hosts": {"hung": dict(local, smi=str(hung)),
                                                       "good": dict(local, smi=str(good))}}}))
    play = tmp_path / "play.yml"
    play.write_text("""
- hosts: all
  gather_facts: false
  tasks:
    - gpufleet.cluster.gpu_info:
        nvidia_smi: "{{ smi }}"
        pci_sysfs_path: "%s"
        include_topology: false
        timeout: 3
      register: gpu
    - gpufleet.cluster.gpu_health_check:
        node: "{{ inventory_hostname }}"
        gpu_info: "{{ gpu }}"
        thresholds: {throttle_warn_reasons: [], pcie_check: false}
      register: verdict
    - ansible.builtin.copy:
        content: "{{ {'gpu': gpu, 'verdict': verdict.result} | to_json }}"
        dest: "%s/{{ inventory_hostname }}.json"
        mode: "0644"
""" % (tmp_path / "no-sysfs", out))
    proc = ansible("ansible-playbook", "-i", str(inventory), str(play))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    hung_result = json.loads((out / "hung.json").read_text())
    good_result = json.loads((out / "good.json").read_text())
    assert hung_result["gpu"]["status"] == "driver_error" and hung_result["gpu"]["timed_out"] is True
    assert hung_result["verdict"]["status"] == "fail"
    finding = hung_result["verdict"]["findings"][0]
    assert finding["code"] == "DRIVER_NOT_LOADED" and finding["node"] == "hung"
    assert "did not answer within 3 s" in finding["message"]
    assert good_result["gpu"]["status"] == "ok" and good_result["gpu"]["driver_gpu_count"] == 8
    assert good_result["verdict"]["status"] != "fail", good_result["verdict"]["lines"]


def test_non_positive_timeout_is_a_clear_error(monkeypatch, capsys, tmp_path):
    result, calls = run_module(monkeypatch, capsys, {"pci_sysfs_path": str(tmp_path), "timeout": -5}, {})
    assert result["failed"] and "got -5" in result["msg"] and calls == []
