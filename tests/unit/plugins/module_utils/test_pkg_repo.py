"""pkg_repo: apt-cache / dnf / gpg parsers on real captures (tests/fixtures/repo/SOURCES.md), and the plan check."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import pkg_repo

REPO_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "repo"


def capture(name: str) -> str:
    return (REPO_FIXTURES / name).read_text(encoding="utf-8")


def test_apt_policy_of_nvidias_fabric_manager_lists_every_version_newest_first():
    policy = pkg_repo.parse_apt_policy(capture("apt-cache-policy-cuda-drivers-fabricmanager-ubuntu2204-ubuntu2004.txt"))
    entry = policy["cuda-drivers-fabricmanager"]
    assert entry["installed"] is None and entry["candidate"] is None
    assert entry["versions"] == ["550.54.14-1", "545.23.08-1", "545.23.06-1", "535.161.07-1", "535.154.05-1"]
    assert entry["repository_versions"] == entry["versions"]
    assert entry["sources"]["535.161.07-1"][0].startswith("https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204")


def test_apt_policy_with_installed_and_candidate():
    policy = pkg_repo.parse_apt_policy(capture("apt-policy-libnccl-dev-ubuntu2204.txt"))
    entry = policy["libnccl-dev"]
    assert entry["installed"] is None
    assert entry["candidate"] == "2.28.9-1+cuda13.0"
    assert entry["versions"][:2] == ["2.28.9-1+cuda13.0", "2.28.9-1+cuda12.9"]
    assert len(entry["versions"]) == 5


def test_apt_policy_marks_the_installed_version_and_keeps_dpkg_status_apart():
    policy = pkg_repo.parse_apt_policy(capture("apt-cache-policy-nvidia-driver-390-installed-ubuntu1804.txt"))
    entry = policy["nvidia-driver-390"]
    assert entry["installed"] == "390.77-0ubuntu0.18.04.1"
    assert entry["versions"] == ["390.77-0ubuntu0.18.04.1"]
    assert entry["sources"]["390.77-0ubuntu0.18.04.1"] == [
        "http://archive.ubuntu.com/ubuntu bionic-updates/restricted amd64 Packages", "/var/lib/dpkg/status"]
    assert pkg_repo.apt_offered(policy) == {"nvidia-driver-390": ["390.77-0ubuntu0.18.04.1"]}


def test_apt_policy_of_several_names_and_an_unknown_one_is_the_concatenation():
    text = capture("apt-policy-libnccl-dev-ubuntu2204.txt") + capture(
        "apt-cache-policy-cuda-drivers-fabricmanager-ubuntu2204-ubuntu2004.txt")
    policy = pkg_repo.parse_apt_policy(text)
    assert sorted(policy) == ["cuda-drivers-fabricmanager", "libnccl-dev"]


def test_dnf_list_showduplicates_rows():
    listing = pkg_repo.parse_dnf_list(capture("yum-list-showduplicates-nvidia-fabric-manager-rhel7.txt"))
    assert listing == {"nvidia-fabric-manager": {"installed": [], "available": ["460.91.03-1", "460.106.00-1"],
                                                 "arch": "x86_64"}}
    listing = pkg_repo.parse_dnf_list(capture("dnf-list-nvidia-fabric-manager-glob-rhel8.txt"))
    assert sorted(listing) == ["nvidia-fabric-manager", "nvidia-fabric-manager-devel"]
    one = pkg_repo.parse_dnf_list(capture("yum-list-showduplicates-nvidia-fabric-manager-cuda-rhel8.txt"))
    assert one["nvidia-fabric-manager"]["available"] == ["495.29.05-1"]


@pytest.mark.parametrize("name,streams", [
    ("dnf-module-list-nvidia-driver-rhel9-preview.txt",
     ["latest", "latest-dkms", "latest-open-gpu", "open-dkms", "535", "535-dkms", "535-open", "535-open-gpu"]),
    ("dnf-module-list-nvidia-driver-rhel8-enabled.txt", ["latest", "latest-dkms", "open-dkms"]),
])
def test_dnf_module_list_streams_without_flags(name, streams):
    assert pkg_repo.parse_dnf_module_list(capture(name)) == {"nvidia-driver": streams}


def test_upstream_version_drops_epoch_and_release():
    assert pkg_repo.upstream_version("535.104.05-0ubuntu1") == "535.104.05"
    assert pkg_repo.upstream_version("3:535.104.05-1.el9") == "535.104.05"
    assert pkg_repo.upstream_version("535.104.05") == "535.104.05"


@pytest.mark.parametrize("scheme, offered, request_, newest", [
    # dpkg: a letter sorts after the end of a digit run (2.19.rc1 is newer), an epoch wins over everything after it.
    ("deb", ["2.19.3-1", "2.19.rc1-1"], {"name": "pkg", "version": "", "match": "any"}, "2.19.rc1-1"),
    ("deb", ["2.1-1", "1:2.0~rc1-1", "2.0-1"], {"name": "pkg", "version": "", "match": "any"}, "1:2.0~rc1-1"),
    # Several packagings of the planned upstream: the newest revision, whatever order the tool listed them in.
    ("deb", ["535.104.05-0ubuntu1", "535.104.05-1", "535.104.05-0ubuntu1~22.04"],
     {"name": "pkg", "version": "535.104.05", "match": "upstream"}, "535.104.05-1"),
    ("rpm", ["535.104.05-1.el9", "535.104.05-2.el9", "535.54.03-9.el9"],
     {"name": "pkg", "version": "535.104.05", "match": "upstream"}, "535.104.05-2.el9"),
    ("rpm", ["535.104.05-1.el9", "3:535.104.05-1.el9"], {"name": "pkg", "version": "535.104.05", "match": "upstream"},
     "3:535.104.05-1.el9"),
    ("rpm", ["1.0~rc1-1", "1.0-1"], {"name": "pkg", "version": "", "match": "any"}, "1.0-1"),
])
def test_the_newest_match_is_picked_by_the_package_managers_rules(scheme, offered, request_, newest):
    assert pkg_repo.resolve_request(request_, {"pkg": offered}, scheme=scheme)["version"] == newest


def test_what_the_repository_offers_instead_is_listed_newest_first_by_dpkgs_rules():
    result = pkg_repo.resolve_request({"name": "pkg", "version": "2.19.4", "match": "upstream"},
                                      {"pkg": ["2.19.3~rc1-1", "2.19.3-1", "2.19.rc1-1"]}, scheme="deb")
    assert result["problem"] == "pkg 2.19.4 is not in the repository; it offers pkg 2.19.rc1, 2.19.3, 2.19.3~rc1"


def test_plan_check_finds_versions_and_names_what_the_repository_offers_instead():
    policy = pkg_repo.parse_apt_policy(capture("apt-cache-policy-cuda-drivers-fabricmanager-ubuntu2204-ubuntu2004.txt")
                                       + capture("apt-policy-libnccl-dev-ubuntu2204.txt"))
    offered = pkg_repo.apt_offered(policy)
    names = ["cuda-drivers-fabricmanager", "libnccl-dev", "cuda-drivers-535", "cuda-drivers-fabricmanager-535"]
    ok = pkg_repo.check_requests([
        {"name": "cuda-drivers-fabricmanager", "version": "535.161.07", "match": "upstream"},
        {"name": "libnccl-dev", "version": "2.28.7-1+cuda12.9", "match": "exact"},
    ], offered, names, scheme="deb")
    assert ok["ok"] and ok["resolved"] == {"cuda-drivers-fabricmanager": "535.161.07-1", "libnccl-dev": "2.28.7-1+cuda12.9"}

    bad = pkg_repo.check_requests([
        {"name": "cuda-drivers-fabricmanager", "version": "535.104.05", "match": "upstream"},
        {"name": "cuda-drivers-fabricmanager-53", "version": "535.104.05", "match": "upstream"},
        {"name": "libnccl-dev", "version": "2.18.3-1+cuda12.2", "match": "exact"},
    ], offered, names, scheme="deb")
    assert not bad["ok"] and len(bad["missing"]) == 3
    assert bad["missing"][0]["problem"] == (
        "cuda-drivers-fabricmanager 535.104.05 is not in the repository; it offers cuda-drivers-fabricmanager "
        "550.54.14, 545.23.08, 545.23.06, 535.161.07, 535.154.05")
    assert bad["missing"][1]["candidates"] == ["cuda-drivers-fabricmanager", "cuda-drivers-fabricmanager-535"]
    assert "2.28.9-1+cuda13.0" in bad["missing"][2]["problem"]


def test_dnf_module_streams_are_checked_by_name():
    offered = pkg_repo.dnf_offered({}, pkg_repo.parse_dnf_module_list(capture("dnf-module-list-nvidia-driver-rhel9-preview.txt")))
    result = pkg_repo.check_requests([{"name": "@nvidia-driver:535-open", "version": "", "match": "any"},
                                      {"name": "@nvidia-driver:570-open", "version": "", "match": "any"}],
                                     offered, list(offered), scheme="rpm")
    assert [r["found"] for r in result["packages"]] == [True, False]
    assert "@nvidia-driver:535-open" in result["missing"][0]["candidates"]


def _gpg(home, *args, stdin=None):
    env = dict(os.environ, GNUPGHOME=str(home))
    return subprocess.run(["gpg", "--batch", *args], env=env, check=True, capture_output=True, text=True, input=stdin).stdout


@pytest.fixture(scope="module")
def two_keys(tmp_path_factory):
    """Two real keys made by gpg, each with an encryption subkey: (colons of key A alone, colons of A+B in one file, fpr A, fpr B)."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    fprs = []
    for uid in ("Pinned Repo <pinned@example.invalid>", "Other <other@example.invalid>"):
        _gpg(home, "--passphrase", "", "--quick-gen-key", uid, "default", "default", "never")
    colons = _gpg(home, "--with-colons", "--list-keys")
    fprs = pkg_repo.primary_key_fingerprints(colons)
    one = _gpg(home, "--armor", "--export", fprs[0])
    both = _gpg(home, "--armor", "--export", fprs[0], fprs[1])
    yield (_gpg(home, "--with-colons", "--show-keys", stdin=one), _gpg(home, "--with-colons", "--show-keys", stdin=both),
           fprs[0], fprs[1])
    # Key generation started a gpg-agent for this home: end it with the fixture.
    subprocess.run(["gpgconf", "--kill", "all"], env=dict(os.environ, GNUPGHOME=str(home)), check=False)


def test_signing_key_with_only_the_pinned_key_is_accepted_subkeys_do_not_count(two_keys):
    one, _both, fpr_a, _fpr_b = two_keys
    assert one.count("\nfpr:") + one.startswith("fpr:") == 2  # primary + its encryption subkey
    assert pkg_repo.check_signing_key(one, fpr_a.lower()) == {"ok": True, "fingerprints": [fpr_a], "reason": ""}


def test_signing_key_file_with_the_pin_plus_another_key_is_refused(two_keys):
    _one, both, fpr_a, fpr_b = two_keys
    verdict = pkg_repo.check_signing_key(both, fpr_a)
    assert not verdict["ok"]
    assert verdict["fingerprints"] == [fpr_a, fpr_b]
    assert "2 primary keys" in verdict["reason"]


def test_signing_key_that_is_not_the_pin_or_empty_is_refused(two_keys):
    one, _both, _fpr_a, fpr_b = two_keys
    assert "the pin is " + fpr_b in pkg_repo.check_signing_key(one, fpr_b)["reason"]
    assert pkg_repo.check_signing_key("", fpr_b)["reason"] == "the file holds no OpenPGP public key"
