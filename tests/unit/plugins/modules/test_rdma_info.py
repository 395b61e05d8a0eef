"""rdma_info: in-process with run_command fed the real ibstat captures, and through Ansible."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import rdma_info

_REPO = Path(__file__).resolve().parents[4]

try:
    from tests.fixtures_path import FIXTURES
except ImportError:  # pragma: no cover
    FIXTURES = _REPO.parent / "shared" / "fixtures"

IBSTAT = FIXTURES / "ibstat"
VENV_BIN = _REPO / ".venv" / "bin"


def run_module(monkeypatch, capsys, args, ibstat=None, rc=0, stderr="", present=True):
    """Run rdma_info.main() with ibstat's output taken from a capture; return (result, calls)."""
    calls = []

    def fake_run_command(self, cmd, *a, **kw):
        calls.append({"cmd": cmd, "environ_update": kw.get("environ_update")})
        return rc, ibstat.read_text() if ibstat else "", stderr

    def fake_get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/sbin/" + name if present else None

    def fake_run_tool(module, cmd, timeout_s, environ_update=None):
        rc_, out, err = fake_run_command(module, cmd, environ_update=environ_update)
        return rc_, out, err, False

    monkeypatch.setattr(rdma_info, "run_tool", fake_run_tool)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake_get_bin_path)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            rdma_info.main()
    return json.loads(capsys.readouterr().out), calls


@pytest.fixture
def no_sysfs(tmp_path):
    return {"ib_sysfs_path": str(tmp_path / "no-infiniband"), "procfs_root": str(tmp_path / "proc"),
            "module_sysfs_path": str(tmp_path / "module")}


def test_ibstat_capture_all_active_roce(monkeypatch, capsys, no_sysfs):
    result, calls = run_module(monkeypatch, capsys, no_sysfs,
                               IBSTAT / "h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt")
    assert calls[0]["cmd"] == ["/usr/sbin/ibstat"]
    assert calls[0]["environ_update"]["LC_ALL"] == "C"
    assert result["changed"] is False
    assert result["source"] == "ibstat" and result["errors"] == [] and result["ibstat_rc"] == 0
    assert len(result["cas"]) == 12 and len(result["active_ports"]) == 12
    assert sorted(p["rate_gbps"] for p in result["active_ports"]) == [100] * 4 + [400] * 8
    assert {p["link_layer"] for p in result["active_ports"]} == {"Ethernet"}
    assert result["peermem_loaded"] is False


def test_ibstat_capture_ports_down(monkeypatch, capsys, no_sysfs):
    result, _calls = run_module(monkeypatch, capsys, no_sysfs,
                                IBSTAT / "h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt")
    assert len(result["cas"]) == 12 and len(result["active_ports"]) == 9
    down = sorted(ca["ca"] for ca in result["cas"] if ca["ports"][0]["state"] == "Down")
    assert down == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert {(p["rate_gbps"], p["link_layer"]) for p in result["active_ports"]} == {
        (400, "InfiniBand"), (100, "Ethernet")}


def test_ibpanic_and_exit_255_are_reported(monkeypatch, capsys, no_sysfs):
    result, _calls = run_module(monkeypatch, capsys, no_sysfs,
                                IBSTAT / "a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt", rc=255)
    assert result["source"] == "ibstat" and len(result["cas"]) == 8 and result["ibstat_rc"] == 255
    assert result["errors"][0].startswith("ibpanic:") and "'mlx5_8'" in result["errors"][0]
    assert result["errors"][-1] == "/usr/sbin/ibstat exited with rc 255"
    assert "failed" not in result or result["failed"] is False


def test_fail_on_error_names_the_command(monkeypatch, capsys, no_sysfs):
    capture = IBSTAT / "a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt"
    result, _calls = run_module(monkeypatch, capsys, dict(no_sysfs, fail_on_error=True), capture, rc=255)
    assert result["failed"] is True
    assert "/usr/sbin/ibstat" in result["msg"] and "ibpanic" in result["msg"]
    assert result["rc"] == 255 and result["stdout"] == capture.read_text() and "stderr" in result


def test_missing_ibstat_and_sysfs_is_a_state(monkeypatch, capsys, no_sysfs):
    result, calls = run_module(monkeypatch, capsys, no_sysfs, present=False)
    assert calls == []
    assert result["source"] == "none" and result["cas"] == [] and result["active_ports"] == []
    assert result["errors"] == [] and result["ibstat_rc"] is None and result["changed"] is False


def _sysfs_ca(base, name, state, phys, rate, layer):
    for rel, text in (("hca_type", "MT4129"), ("fw_ver", "28.39.1002"), ("device/numa_node", "0"),
                      ("ports/1/state", state), ("ports/1/phys_state", phys),
                      ("ports/1/rate", rate), ("ports/1/link_layer", layer)):
        path = base / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def test_sysfs_fallback_when_ibstat_missing(monkeypatch, capsys, tmp_path, no_sysfs):
    ib = tmp_path / "infiniband"
    _sysfs_ca(ib, "mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    _sysfs_ca(ib, "mlx5_1", "1: DOWN", "3: Disabled", "40 Gb/sec (4X QDR)", "Ethernet")
    proc = tmp_path / "proc"
    proc.mkdir()
    # /proc/modules line layout: name size refcount deps state address
    (proc / "modules").write_text("nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n")
    args = dict(no_sysfs, ib_sysfs_path=str(ib), procfs_root=str(proc))
    result, _calls = run_module(monkeypatch, capsys, args, present=False)
    assert result["source"] == "sysfs"
    assert [(c["ca"], c["ports"][0]["state"], c["ports"][0]["physical_state"]) for c in result["cas"]] == [
        ("mlx5_0", "Active", "LinkUp"), ("mlx5_1", "Down", "Disabled")]
    assert result["active_ports"] == [{"ca": "mlx5_0", "port": 1, "rate_gbps": 400, "link_layer": "InfiniBand"}]
    assert result["peermem_loaded"] is True


def test_sysfs_fallback_when_ibstat_lists_nothing(monkeypatch, capsys, tmp_path, no_sysfs):
    ib = tmp_path / "infiniband"
    _sysfs_ca(ib, "mlx5_0", "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand")
    (tmp_path / "module" / "nvidia_peermem").mkdir(parents=True)
    args = dict(no_sysfs, ib_sysfs_path=str(ib))
    result, _calls = run_module(monkeypatch, capsys, args, ibstat=None, rc=255,
                                stderr="ibpanic: [12] main: can't list IB device names: (No such file or directory)")
    assert result["source"] == "sysfs" and result["cas"][0]["ports"][0]["rate_gbps"] == 200
    assert result["errors"][0].startswith("ibpanic:") and result["peermem_loaded"] is True


def test_numa_node_added_from_sysfs(monkeypatch, capsys, tmp_path, no_sysfs):
    ib = tmp_path / "infiniband"
    _sysfs_ca(ib, "mlx5_bond_0", "4: ACTIVE", "5: LinkUp", "200 Gb/sec (2X NDR)", "Ethernet")
    result, _calls = run_module(monkeypatch, capsys, dict(no_sysfs, ib_sysfs_path=str(ib)),
                                IBSTAT / "h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt")
    assert result["source"] == "ibstat"
    numa = {c["ca"]: c.get("numa_node") for c in result["cas"]}
    assert numa["mlx5_bond_0"] == 0 and numa["mlx5_0"] is None


def test_result_matches_return_doc(monkeypatch, capsys, no_sysfs):
    doc = yaml.safe_load(rdma_info.RETURN)
    result, _calls = run_module(monkeypatch, capsys, no_sysfs,
                                IBSTAT / "h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt")
    keys = set(result) - {"changed", "invocation"}
    assert keys == set(doc)
    for key, spec in doc.items():
        assert spec["returned"] == "always"
        if "choices" in spec:
            assert result[key] in spec["choices"]
    ca_doc = doc["cas"]["contains"]
    port_doc = ca_doc["ports"]["contains"]
    for ca in result["cas"]:
        assert set(ca_doc) <= set(ca)
        for port in ca["ports"]:
            assert set(port_doc) <= set(port)
    for port in result["active_ports"]:
        assert set(port) == set(doc["active_ports"]["contains"])


def test_documentation_parses():
    doc = yaml.safe_load(rdma_info.DOCUMENTATION)
    assert doc["module"] == "rdma_info"
    spec = rdma_info.build_module  # options in the doc match the argument spec
    with patch_module_args({}):
        module = spec()
    assert set(doc["options"]) == set(module.argument_spec)
    for name, option in doc["options"].items():
        assert option.get("default") == module.argument_spec[name].get("default"), name
    yaml.safe_load(rdma_info.EXAMPLES)


# ---- through Ansible on this machine ----------------------------------------------------------


def ansible_module(module, args, cwd=_REPO):
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    env["ANSIBLE_PYTHON_INTERPRETER"] = str(VENV_BIN / "python")
    env["ANSIBLE_DEPRECATION_WARNINGS"] = "false"
    env["ANSIBLE_NOCOLOR"] = "1"
    proc = subprocess.run(
        ["ansible", "localhost", "-m", module, "-a", args],
        cwd=str(cwd), env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert "=>" in proc.stdout, proc.stdout + proc.stderr
    status, _sep, body = proc.stdout.partition("=>")
    return status, json.loads(body)


@pytest.mark.skipif(not (VENV_BIN / "ansible").exists(), reason="no controller venv")
def test_through_ansible_with_stub_ibstat(tmp_path):
    capture = IBSTAT / "a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt"
    stub = tmp_path / "ibstat"
    # The stand-in replays the capture and exits as the real ibstat did (255).
    stub.write_text("#!/bin/sh\ncat '%s'\nexit 255\n" % capture)
    stub.chmod(0o755)
    status, result = ansible_module(
        "gpufleet.cluster.rdma_info",
        "ibstat=%s ib_sysfs_path=%s" % (stub, tmp_path / "none"),
    )
    assert "SUCCESS" in status
    assert result["changed"] is False and result["source"] == "ibstat"
    assert len(result["cas"]) == 8 and len(result["active_ports"]) == 8
    assert {p["rate_gbps"] for p in result["active_ports"]} == {200}
    assert any(e.startswith("ibpanic:") for e in result["errors"])
    assert result["ibstat_rc"] == 255


@pytest.mark.skipif(not (VENV_BIN / "ansible").exists(), reason="no controller venv")
def test_through_ansible_on_this_machine():
    status, result = ansible_module("gpufleet.cluster.rdma_info", "")
    assert "SUCCESS" in status and result["changed"] is False
    has_ib = Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir())
    if not has_ib and not any(Path(p, "ibstat").exists() for p in os.environ.get("PATH", "").split(":")):
        assert result["source"] == "none" and result["cas"] == [] and result["active_ports"] == []
    assert isinstance(result["peermem_loaded"], bool)


def test_hung_ibstat_is_killed_at_the_timeout_and_named(monkeypatch, capsys, tmp_path, no_sysfs):
    """A stand-in ibstat that prints the first lines of a real capture and then hangs."""
    capture = IBSTAT / "h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt"
    head = tmp_path / "head.txt"
    head.write_text("\n".join(capture.read_text().splitlines()[:12]) + "\n")
    ibstat = tmp_path / "ibstat"
    ibstat.write_text('#!/bin/sh\ncat "%s"\nsleep 300\n' % head)
    ibstat.chmod(0o755)
    with patch_module_args(dict(no_sysfs, ibstat=str(ibstat), timeout="1")):
        with pytest.raises(SystemExit):
            rdma_info.main()
    result = json.loads(capsys.readouterr().out)
    # rc 124 is the module's own deadline firing; the stand-in's 300 s sleep waited for would end rc 0.
    assert result["ibstat_rc"] == 124
    assert "%s did not answer within 1 s and was killed" % ibstat in result["errors"]
    # The half-printed listing is not taken for the node's ports.
    assert result["cas"] == [] and result["source"] == "none"


def test_non_positive_timeout_is_a_clear_error(capsys, no_sysfs):
    with patch_module_args(dict(no_sysfs, timeout=0)):
        with pytest.raises(SystemExit):
            rdma_info.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] and "timeout must be a positive number of seconds, got 0" in result["msg"]
