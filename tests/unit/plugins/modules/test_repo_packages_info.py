"""repo_packages_info: the module with apt-cache / dnf answered by real captures (tests/fixtures/repo)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import repo_packages_info

REPO_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "repo"


def run(monkeypatch, capsys, args, answers, tools=("apt-cache",)):
    """answers: list of (argv prefix, (rc, stdout, stderr)); the first prefix that matches answers."""
    calls = []

    def fake_run_tool(module, argv, timeout_s, environ_update=None):
        calls.append(argv)
        for prefix, reply in answers:
            if argv[:len(prefix)] == prefix:
                return (*reply, False)
        raise AssertionError(f"unexpected command {argv}")

    monkeypatch.setattr(repo_packages_info, "run_tool", fake_run_tool)
    monkeypatch.setattr(repo_packages_info.shutil, "which",
                        lambda name: f"/usr/bin/{name}" if name in tools else None)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            repo_packages_info.main()
    return json.loads(capsys.readouterr().out), calls


def test_apt_missing_version_fails_the_check_with_the_offered_versions(monkeypatch, capsys):
    policy = (REPO_FIXTURES / "apt-cache-policy-cuda-drivers-fabricmanager-ubuntu2204-ubuntu2004.txt").read_text()
    result, calls = run(monkeypatch, capsys,
                        {"packages": [{"name": "cuda-drivers-fabricmanager", "version": "535.161.07"},
                                      {"name": "nvidia-driver-535-open", "version": "535.161.07"}]},
                        [(["apt-cache", "policy"], (0, policy, "")),
                         (["apt-cache", "pkgnames"], (0, "nvidia-driver-535\nnvidia-kernel-open-535\nbash\n", ""))])
    assert calls[0] == ["apt-cache", "policy", "cuda-drivers-fabricmanager", "nvidia-driver-535-open"]
    assert result["changed"] is False and result["ok"] is False
    assert result["resolved"] == {"cuda-drivers-fabricmanager": "535.161.07-1"}
    assert result["message"] == ("nvidia-driver-535-open is not in the repository; it offers nvidia-driver-535")


def test_dnf_streams_and_packages(monkeypatch, capsys):
    listing = (REPO_FIXTURES / "yum-list-showduplicates-nvidia-fabric-manager-rhel7.txt").read_text()
    modules = (REPO_FIXTURES / "dnf-module-list-nvidia-driver-rhel9-preview.txt").read_text()
    result, calls = run(monkeypatch, capsys,
                        {"packages": [{"name": "@nvidia-driver:535-open"},
                                      {"name": "nvidia-fabric-manager", "version": "460.106.00"}]},
                        [(["dnf", "-q", "list", "--showduplicates"], (0, listing, "")),
                         (["dnf", "-q", "module", "list"], (0, modules, ""))], tools=("dnf",))
    assert result["ok"] is True and result["manager"] == "dnf"
    assert result["resolved"] == {"@nvidia-driver:535-open": "", "nvidia-fabric-manager": "460.106.00-1"}


def test_no_package_manager_is_a_clear_failure(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {"packages": [{"name": "x"}]}, [], tools=())
    assert not calls
    assert result["failed"] and "neither apt-cache nor dnf" in result["msg"]


def test_a_hung_apt_cache_is_killed_at_the_deadline_and_named(monkeypatch, capsys, tmp_path):
    """The real deadline, with a stand-in apt-cache that never answers (no coreutils timeout needed)."""
    hung = tmp_path / "apt-cache"
    hung.write_text("#!/bin/sh\nexec sleep 300\n")
    hung.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with patch_module_args({"packages": [{"name": "libnccl2"}], "manager": "apt", "timeout": 1}):
        with pytest.raises(SystemExit):
            repo_packages_info.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert result["msg"] == "apt-cache policy libnccl2 did not answer within 1s (repo_packages_info timeout)"
