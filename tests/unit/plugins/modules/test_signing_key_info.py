"""signing_key_info on real keys made by gpg here: a revoked or expired pinned key is refused, and the
module writes nothing on the node (no ~/.gnupg, no scratch left behind), as its documentation says.

The keys are generated in a throwaway GNUPGHOME: one valid, one that expired in 2021 (made with
--faked-system-time 2020), one whose exported file carries its own revocation certificate.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.module_utils import pkg_repo
from ansible_collections.gpufleet.cluster.plugins.modules import signing_key_info

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="needs gpg")


def gpg(home, *args, stdin=None):
    return subprocess.run(["gpg", "--batch", "--passphrase", "", *args], env=dict(os.environ, GNUPGHOME=str(home)),
                          check=True, capture_output=True, text=True, input=stdin, timeout=120).stdout


def fingerprint_of(home, uid):
    return pkg_repo.primary_key_fingerprints(gpg(home, "--with-colons", "--list-keys", uid))[0]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """{name: (key file, fingerprint)} for a valid, an expired and a revoked key."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    out = tmp_path_factory.mktemp("keys")
    gpg(home, "--quick-gen-key", "Valid <valid@example.invalid>", "ed25519", "sign", "never")
    gpg(home, "--faked-system-time", "20200101T000000", "--quick-gen-key", "Expired <expired@example.invalid>",
        "ed25519", "sign", "1y")
    gpg(home, "--quick-gen-key", "Revoked <revoked@example.invalid>", "ed25519", "sign", "never")
    revoked = fingerprint_of(home, "revoked@example.invalid")
    # gpg stores a revocation certificate for every key it makes, its armor line disarmed by a leading ':'.
    certificate = (home / "openpgp-revocs.d" / f"{revoked}.rev").read_text().replace(":-----BEGIN", "-----BEGIN")
    gpg(home, "--import", stdin=certificate)
    made = {}
    for name in ("valid", "expired", "revoked"):
        path = out / f"{name}.asc"
        path.write_text(gpg(home, "--armor", "--export", f"{name}@example.invalid"))
        made[name] = (path, fingerprint_of(home, f"{name}@example.invalid"))
    yield made
    subprocess.run(["gpgconf", "--kill", "all"], env=dict(os.environ, GNUPGHOME=str(home)), check=False)


@pytest.fixture
def bare_node(tmp_path, monkeypatch):
    """A HOME without ~/.gnupg and a private temporary directory, to see what the module leaves."""
    home, scratch = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    scratch.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GNUPGHOME", raising=False)
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return home, scratch


def judge(capsys, path, fingerprint):
    with patch_module_args({"path": str(path), "fingerprint": fingerprint}):
        with pytest.raises(SystemExit):
            signing_key_info.main()
    return json.loads(capsys.readouterr().out)


def test_the_valid_pinned_key_is_accepted_and_nothing_is_written(capsys, keys, bare_node):
    home, scratch = bare_node
    path, fpr = keys["valid"]
    verdict = judge(capsys, path, fpr)
    assert verdict["ok"] is True and verdict["changed"] is False, verdict
    assert not (home / ".gnupg").exists(), "the read-only judge wrote ~/.gnupg"
    assert list(scratch.iterdir()) == [], "the judge left its gpg home behind"


def test_an_expired_pinned_key_is_refused(capsys, keys, bare_node):
    path, fpr = keys["expired"]
    verdict = judge(capsys, path, fpr)
    assert verdict["ok"] is False, verdict
    assert verdict["fingerprints"] == [fpr]
    assert f"the pinned key {fpr} is in the file but it expired on 2020-12-31" in verdict["reason"]
    assert not (bare_node[0] / ".gnupg").exists()


def test_a_revoked_pinned_key_is_refused(capsys, keys, bare_node):
    path, fpr = keys["revoked"]
    verdict = judge(capsys, path, fpr)
    assert verdict["ok"] is False, verdict
    assert f"the pinned key {fpr} is in the file but it is revoked" in verdict["reason"]
    assert not (bare_node[0] / ".gnupg").exists()


def test_a_key_valid_today_is_refused_once_past_its_expiry():
    """The expiry is compared with the time given, not only with gpg's own validity flag."""
    colons = "pub:-:255:22:AAAA:1577836800:1609372800::-:::sc:::::ed25519:::0:\nfpr:::::::::" + "A" * 40 + ":\n"
    assert pkg_repo.check_signing_key(colons, "A" * 40, now=1600000000)["ok"] is True
    late = pkg_repo.check_signing_key(colons, "A" * 40, now=1700000000)
    assert late["ok"] is False and "expired on 2020-12-31" in late["reason"]
