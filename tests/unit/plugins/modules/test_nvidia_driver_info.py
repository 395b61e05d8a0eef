"""nvidia_driver_info: the detection commands answered by real captures (tests/fixtures/driver/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import nvidia_driver_info

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "driver"
R535_OPEN = "dpkg-query-ubuntu2204-r535-open-535.54.03.txt"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def run(monkeypatch, capsys, args, answers):
    """answers: list of (argv prefix, (rc, stdout, stderr)); the first prefix that matches answers."""
    calls = []

    def fake_run_tool(module, argv, timeout_s, environ_update=None):
        calls.append(argv)
        for prefix, reply in answers:
            if argv[:len(prefix)] == prefix:
                return (*reply, False)
        raise AssertionError(f"unexpected command {argv}")

    monkeypatch.setattr(nvidia_driver_info, "run_tool", fake_run_tool)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            nvidia_driver_info.main()
    return json.loads(capsys.readouterr().out), calls


def test_apt_owner_its_version_and_the_old_branchs_packages(monkeypatch, capsys, tmp_path):
    state = tmp_path / "nvidia-driver-packages.json"
    state.write_text('["nvidia-kernel-open-535", "cuda-drivers-535", "nvidia-fabricmanager-535"]\n')
    result, calls = run(monkeypatch, capsys, {
        "names": ["nvidia-driver-pinning-595", "nvidia-open", "@ignored:stream"], "manager": "apt",
        "flavour_packages": {"open": ["nvidia-driver-pinning-595", "nvidia-open"],
                             "proprietary": ["nvidia-driver-pinning-595", "cuda-drivers"]},
        "kmod_flavours": {"nvidia-dkms-open": "open"}, "state_file": str(state)},
        [(["sh", "-c"], (0, fixture("files-packaged.txt"), "")),
         (["dpkg", "-S"], (0, fixture("dpkg-S-ubuntu2204-r535.txt"), "")),
         (["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n", "*-535"], (0, fixture(R535_OPEN), "")),
         (["dpkg-query"], (1, fixture(R535_OPEN), "dpkg-query: no packages found matching nvidia-open\n"))])
    assert calls[1] == ["dpkg", "-S", "/usr/bin/nvidia-smi"]
    assert calls[2][3:] == ["nvidia-utils-535", "nvidia-driver-pinning-595", "nvidia-open", "cuda-drivers",
                            "nvidia-dkms-open", "nvidia-kernel-open-535", "cuda-drivers-535", "nvidia-fabricmanager-535"]
    assert calls[3][3:] == ["*-535", "*-535-open"]
    assert result["changed"] is False and result["manager"] == "apt"
    assert result["current"]["package"] == "nvidia-utils-535" and result["current"]["branch"] == "535"
    assert result["branch_packages"] == ["cuda-drivers-535", "nvidia-kernel-open-535", "nvidia-utils-535"]
    assert result["previous"] == ["nvidia-kernel-open-535", "cuda-drivers-535", "nvidia-fabricmanager-535"]


def test_run_file_driver_is_read_from_nvidia_smi(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {"names": ["nvidia-open"], "manager": "apt"},
                        [(["sh", "-c"], (0, fixture("files-runfile.txt"), "")),
                         (["dpkg", "-S"], (1, fixture("dpkg-S-runfile.txt"), fixture("dpkg-S-runfile.stderr.txt"))),
                         (["dpkg-query"], (1, "", "")),
                         (["nvidia-smi"], (0, fixture("nvidia-smi-driver-version-runfile.txt"), ""))])
    assert calls[1] == ["dpkg", "-S", "/usr/bin/nvidia-smi"]
    assert result["current"] == {"kind": "unpackaged", "files": ["/usr/bin/nvidia-smi"], "upstream": "535.183.01",
                                 "uninstaller": "/usr/bin/nvidia-uninstall"}


def test_rpm_family_asks_rpm(monkeypatch, capsys):
    capture = fixture("rpm-qa-rhel9-r570-open.txt")
    owner = next(line for line in capture.splitlines() if line.startswith("nvidia-driver-cuda-570")) + "\n"
    result, calls = run(monkeypatch, capsys, {
        "names": ["nvidia-driver-cuda", "@nvidia-driver:580-open"], "manager": "dnf",
        "kmod_flavours": {"kmod-nvidia-open-dkms": "open", "kmod-nvidia-latest-dkms": "proprietary"}},
        [(["sh", "-c"], (0, fixture("files-packaged.txt"), "")), (["rpm", "-qf"], (0, owner, "")),
         (["rpm", "-q"], (1, capture + fixture("rpm-q-not-installed.txt"), ""))])
    assert calls[1] == ["rpm", "-qf", "/usr/bin/nvidia-smi"]
    assert calls[2] == ["rpm", "-q", "nvidia-driver-cuda", "kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms"]
    assert result["current"]["flavour"] == "open" and result["current"]["upstream"] == "570.124.06"
    assert result["branch_packages"] == [] and result["held"] == []


def test_fresh_node_asks_nothing_of_the_owners(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {"names": ["nvidia-open"], "manager": "apt"},
                        [(["sh", "-c"], (0, "", "")), (["dpkg-query"], (1, "nvidia-open  un \n", ""))])
    assert [c[0] for c in calls] == ["sh", "dpkg-query"]
    assert result["current"] is None and result["installed"] == {}
