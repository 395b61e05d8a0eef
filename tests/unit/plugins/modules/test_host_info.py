"""host_info: through Ansible on this machine, and in-process with lscpu fed the real capture."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import host_info

_REPO = Path(__file__).resolve().parents[4]

try:
    from tests.fixtures_path import FIXTURES
except ImportError:  # pragma: no cover
    FIXTURES = _REPO.parent / "shared" / "fixtures"

VENV_BIN = _REPO / ".venv" / "bin"
LSCPU_DELLA = FIXTURES / "host" / "lscpu-della-h100-node-2x-xeon-8468.txt"


def run_module(monkeypatch, capsys, args, outputs=None):
    """Run host_info.main(); ``outputs`` maps a tool name to (rc, stdout, stderr), others absent."""
    outputs = outputs or {}
    calls = []

    def fake_get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if name in outputs else None

    def fake_run_command(self, cmd, *a, **kw):
        calls.append({"cmd": cmd, "environ_update": kw.get("environ_update")})
        return outputs[os.path.basename(cmd[0])]

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake_get_bin_path)

    def fake_run_tool(module, cmd, timeout_s, environ_update=None):
        rc_, out, err = fake_run_command(module, cmd, environ_update=environ_update)
        return rc_, out, err, False

    monkeypatch.setattr(host_info, "run_tool", fake_run_tool)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            host_info.main()
    return json.loads(capsys.readouterr().out), calls


def test_lscpu_capture_through_the_module(monkeypatch, capsys):
    result, calls = run_module(monkeypatch, capsys, {}, {"lscpu": (0, LSCPU_DELLA.read_text(), "")})
    assert calls[0]["cmd"] == ["/usr/bin/lscpu"] and calls[0]["environ_update"]["LC_ALL"] == "C"
    assert result["changed"] is False
    assert result["cpu"] == {"model": "Intel(R) Xeon(R) Platinum 8468", "sockets": 2, "cores": 96,
                             "threads": 96, "numa_nodes": 2, "source": "lscpu"}


def test_missing_tools_fall_back_to_files(monkeypatch, capsys):
    result, calls = run_module(monkeypatch, capsys, {})
    assert calls == []
    assert result["cpu"]["source"] == "cpuinfo"
    assert result["cpu"]["threads"] == os.cpu_count()
    assert result["cpu"]["cores"] >= 1 and result["cpu"]["numa_nodes"] >= 1
    assert result["secure_boot"] in ("enabled", "disabled", "unknown")


def test_mokutil_and_systemd_detect_virt(monkeypatch, capsys):
    outputs = {
        "mokutil": (0, "SecureBoot enabled\n", ""),
        "systemd-detect-virt": (1, "none\n", ""),
        "lscpu": (0, LSCPU_DELLA.read_text(), ""),
    }
    result, calls = run_module(monkeypatch, capsys, {}, outputs)
    assert result["secure_boot"] == "enabled"
    assert ["/usr/bin/mokutil", "--sb-state"] in [c["cmd"] for c in calls]
    assert ["/usr/bin/systemd-detect-virt", "--vm"] in [c["cmd"] for c in calls]


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_redirected_trees(monkeypatch, capsys, tmp_path):
    """A simulated node: everything comes from its sys/proc/etc; tools are not used."""
    sysfs, procfs, root = tmp_path / "sys", tmp_path / "proc", tmp_path / "root"
    _write(procfs / "meminfo", (Path("/proc/meminfo").read_text().strip()))
    _write(procfs / "cpuinfo", Path("/proc/cpuinfo").read_text().strip())
    _write(procfs / "sys" / "kernel" / "osrelease", "5.15.0-105-generic")
    _write(root / "etc" / "os-release", Path("/etc/os-release").read_text().strip())
    mc = sysfs / "devices" / "system" / "edac" / "mc" / "mc0"
    _write(mc / "ce_count", "7")
    _write(mc / "ue_count", "0")
    _write(mc / "dimm0" / "dimm_edac_mode", "SECDED")
    for node in ("node0", "node1"):
        (sysfs / "devices" / "system" / "node" / node).mkdir(parents=True)
    _write(sysfs / "block" / "nvme0n1" / "size", "1000215216")
    _write(sysfs / "block" / "nvme0n1" / "queue" / "rotational", "0")
    _write(sysfs / "class" / "net" / "eth0" / "mtu", "9000")
    _write(sysfs / "class" / "net" / "eth0" / "carrier", "1")
    _write(sysfs / "class" / "net" / "eth0" / "speed", "100000")
    outputs = {"lscpu": (0, LSCPU_DELLA.read_text(), ""), "mokutil": (0, "SecureBoot enabled\n", "")}
    args = {"sysfs_root": str(sysfs), "procfs_root": str(procfs), "root_path": str(root)}
    result, calls = run_module(monkeypatch, capsys, args, outputs)
    assert calls == []  # live tools would describe the real host, not the tree
    assert result["kernel"] == "5.15.0-105-generic"
    assert result["cpu"]["source"] == "cpuinfo" and result["cpu"]["numa_nodes"] == 2
    mem = result["memory"]
    assert (mem["ecc_active"], mem["edac_corrected"], mem["edac_uncorrected"]) == (True, 7, 0)
    assert mem["total_mib"] > 0
    assert result["block_devices"] == [{"name": "nvme0n1", "nvme": True, "size_bytes": 1000215216 * 512,
                                        "rotational": False, "model": None, "removable": None}]
    nic = result["nics"][0]
    assert (nic["name"], nic["speed_mbps"], nic["link"], nic["mtu"]) == ("eth0", 100000, True, 9000)
    assert result["secure_boot"] == "unknown"
    assert result["virtualization"]["container"] is False
    assert result["os"]["id"]


def test_result_matches_return_doc(monkeypatch, capsys):
    doc = yaml.safe_load(host_info.RETURN)
    result, _calls = run_module(monkeypatch, capsys, {}, {"lscpu": (0, LSCPU_DELLA.read_text(), "")})
    assert set(result) - {"changed", "invocation"} == set(doc)
    for key, spec in doc.items():
        assert spec["returned"] == "always"
        if "choices" in spec:
            assert result[key] in spec["choices"]
        if spec["type"] == "dict":
            assert set(spec["contains"]) <= set(result[key]), key
        if spec["type"] == "list":
            for item in result[key]:
                assert set(spec["contains"]) <= set(item), key


def test_documentation_matches_argument_spec():
    doc = yaml.safe_load(host_info.DOCUMENTATION)
    with patch_module_args({}):
        module = host_info.build_module()
    assert set(doc["options"]) == set(module.argument_spec)
    for name, option in doc["options"].items():
        assert option.get("default") == module.argument_spec[name].get("default"), name
    yaml.safe_load(host_info.EXAMPLES)


# ---- through Ansible on this machine ----------------------------------------------------------


def _ansible(*argv):
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    env["ANSIBLE_DEPRECATION_WARNINGS"] = "false"
    env["ANSIBLE_NOCOLOR"] = "1"
    return subprocess.run(list(argv), cwd=str(_REPO), env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(not (VENV_BIN / "ansible").exists(), reason="no controller venv")
def test_host_info_through_ansible_on_this_machine():
    proc = _ansible("ansible", "localhost", "-m", "gpufleet.cluster.host_info",
                    "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python"))
    assert "SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.partition("=>")[2])
    assert result["changed"] is False
    cpu = result["cpu"]
    assert cpu["threads"] == os.cpu_count() and 1 <= cpu["cores"] <= cpu["threads"]
    assert cpu["sockets"] >= 1 and cpu["numa_nodes"] >= 1 and cpu["model"]
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert result["memory"]["total_mib"] == pages // (1024 * 1024) > 0
    if not Path("/sys/devices/system/edac/mc").is_dir():
        assert result["memory"]["ecc_active"] is None  # unknown, not "off"
    assert result["kernel"] == os.uname().release
    names = {n["name"] for n in result["nics"]}
    assert "lo" not in names and names <= set(os.listdir("/sys/class/net"))
    assert all(not d["name"].startswith(("loop", "zram", "ram")) for d in result["block_devices"])
    virt = result["virtualization"]
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        assert virt["container"] is True and virt["type"] == virt["container_type"]
    if "hypervisor" in Path("/proc/cpuinfo").read_text().split():
        assert virt["vm"] is True
    os_release = Path("/etc/os-release").read_text()
    assert 'ID=%s' % result["os"]["id"] in os_release or 'ID="%s"' % result["os"]["id"] in os_release
    assert result["secure_boot"] in ("enabled", "disabled", "unknown")


@pytest.mark.skipif(not (VENV_BIN / "ansible").exists(), reason="no controller venv")
def test_ansible_doc_renders_both_modules():
    for name in ("gpufleet.cluster.host_info", "gpufleet.cluster.rdma_info"):
        proc = _ansible("ansible-doc", "--json", name)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)[name]
        assert doc["doc"]["module"] == name.rsplit(".", 1)[1]
        assert doc["return"] and doc["examples"]


def test_hung_lscpu_falls_back_to_cpuinfo_within_the_timeout(monkeypatch, capsys, tmp_path):
    lscpu = tmp_path / "lscpu"
    lscpu.write_text("#!/bin/sh\nsleep 300\n")
    lscpu.chmod(0o755)

    def fake_get_bin_path(self, name, required=False, opt_dirs=None):
        return str(lscpu) if name == "lscpu" else None

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake_get_bin_path)
    started = time.monotonic()
    with patch_module_args({"timeout": "1"}):
        with pytest.raises(SystemExit):
            host_info.main()
    result = json.loads(capsys.readouterr().out)
    # A bound on a hang, not on speed: the stand-in's 300 s sleep waited for would exceed it by far.
    assert time.monotonic() - started < 150
    assert result["cpu"]["source"] == "cpuinfo" and result["cpu"]["threads"] == os.cpu_count()
