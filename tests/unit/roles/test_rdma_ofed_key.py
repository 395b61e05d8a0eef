"""The vendor RDMA (DOCA/MLNX_OFED) signing key: checked before apt or dnf may trust it.

The key tasks run for real through Ansible on this machine (gpg, get_url from a file:// URL) and
write the keyring into a temporary directory. The key files are real: Debian's archive keys as
this machine's debian-archive-keyring package ships them (one file of ten primary keys, and single
keys with and without a signing subkey).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
KEYRINGS = Path("/usr/share/keyrings")
ALL_DEBIAN_KEYS = KEYRINGS / "debian-archive-keyring.gpg"
BOOKWORM_AUTOMATIC = KEYRINGS / "debian-archive-bookworm-automatic.gpg"  # primary + signing subkey
BOOKWORM_STABLE = KEYRINGS / "debian-archive-bookworm-stable.gpg"  # primary only
BOOKWORM_AUTOMATIC_ASC = Path("/etc/apt/trusted.gpg.d/debian-archive-bookworm-automatic.asc")

pytestmark = pytest.mark.skipif(not ALL_DEBIAN_KEYS.exists() or not BOOKWORM_AUTOMATIC_ASC.exists(),
                                reason="debian-archive-keyring is not installed on this machine")

PLAY = """
- name: Check and install the vendor RDMA signing key
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run the key tasks of the rdma role
      ansible.builtin.include_role:
        name: gpufleet.cluster.rdma
        tasks_from: ofed_key.yml
"""


def colons(path: Path) -> list[tuple[str, str]]:
    out = subprocess.run(["gpg", "--batch", "--with-colons", "--show-keys", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return [(line.split(":")[0], line.split(":")[9]) for line in out.splitlines() if line.startswith("fpr:")
            or line.startswith(("pub:", "sub:"))]


def fingerprints(path: Path) -> tuple[list[str], list[str]]:
    """(primary, subkey) fingerprints of a key file, read with gpg."""
    primary, sub, owner = [], [], None
    for kind, value in colons(path):
        if kind in ("pub", "sub"):
            owner = kind
        elif owner == "pub":
            primary.append(value)
            owner = None
        elif owner == "sub":
            sub.append(value)
            owner = None
    return primary, sub


def short_scratch(tmp_path: Path) -> Path:
    """/tmp/ofedXXXX for this test (linked from tmp_path so pytest's clean-up finds it)."""
    link = tmp_path / "tmp"
    if not link.exists():
        link.symlink_to(tempfile.mkdtemp(prefix="ofed", dir="/tmp"))
    return link.resolve()


@pytest.fixture(autouse=True)
def _remove_short_scratch(tmp_path):
    yield
    if (tmp_path / "tmp").is_symlink():
        shutil.rmtree((tmp_path / "tmp").resolve(), ignore_errors=True)


def run_key_tasks(tmp_path: Path, key_file: Path, pin: str, *args: str) -> subprocess.CompletedProcess:
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    keyring = tmp_path / "keyrings" / "gpufleet-ofed.asc"
    extra = {"rdma_ofed_repo_key_url": f"file://{key_file}", "rdma_ofed_repo_key_fingerprint": pin,
             "__rdma_ofed_keyring": str(keyring), "ansible_python_interpreter": sys.executable}
    # The role's scratch directory is made under TMPDIR: this test's own, so runs beside it cannot mix in.
    # A short path: gpg-agent's socket lives in that directory, and a socket path has at most 107 bytes.
    scratch = short_scratch(tmp_path)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), TMPDIR=str(scratch),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(play), "-e", json.dumps(extra), *args], capture_output=True, text=True, cwd=REPO,
                          env=env, check=False)


def changed(out: str) -> int:
    return int(out.rsplit("changed=", 1)[1].split()[0])


@pytest.mark.parametrize("key_file", [BOOKWORM_AUTOMATIC, BOOKWORM_AUTOMATIC_ASC], ids=["binary", "armored"])
def test_the_pinned_key_alone_is_installed(tmp_path, key_file):
    (primary,), (subkey,) = fingerprints(key_file)
    # The pin as people paste it: lower case, in groups of four.
    pin = " ".join(re.findall("....", primary.lower()))
    run = run_key_tasks(tmp_path, key_file, pin)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    keyring = tmp_path / "keyrings" / "gpufleet-ofed.asc"
    assert keyring.read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert fingerprints(keyring) == ([primary], [subkey]), "the key and its own signing subkey, nothing else"
    assert oct(keyring.stat().st_mode & 0o777) == "0o644"
    again = run_key_tasks(tmp_path, key_file, pin)
    assert again.returncode == 0 and changed(again.stdout) == 0, again.stdout[-3000:]
    # Nothing of the download or the scratch keyring is left behind.
    assert not list(short_scratch(tmp_path).rglob("*gpufleet-ofed-key*"))


def test_a_file_with_several_keys_is_refused_even_when_the_pin_is_among_them(tmp_path):
    primaries, _subkeys = fingerprints(ALL_DEBIAN_KEYS)
    assert len(primaries) > 1
    run = run_key_tasks(tmp_path, ALL_DEBIAN_KEYS, primaries[0])
    assert run.returncode != 0
    assert f"holds {len(primaries)} primary keys" in run.stdout, run.stdout[-3000:]
    assert "localhost" in run.stdout and f"file://{ALL_DEBIAN_KEYS}" in run.stdout
    assert not (tmp_path / "keyrings" / "gpufleet-ofed.asc").exists()


def test_a_pin_that_names_a_subkey_is_refused(tmp_path):
    _primaries, (subkey,) = fingerprints(BOOKWORM_AUTOMATIC)
    run = run_key_tasks(tmp_path, BOOKWORM_AUTOMATIC, subkey)
    assert run.returncode != 0
    assert "is not the pinned key" in run.stdout, run.stdout[-3000:]
    assert not (tmp_path / "keyrings" / "gpufleet-ofed.asc").exists()


def test_a_wrong_key_never_replaces_the_trusted_one(tmp_path):
    (primary,), _subkeys = fingerprints(BOOKWORM_AUTOMATIC)
    assert run_key_tasks(tmp_path, BOOKWORM_AUTOMATIC, primary).returncode == 0
    keyring = tmp_path / "keyrings" / "gpufleet-ofed.asc"
    trusted = keyring.read_bytes()
    # The mirror now serves another (real, valid) key; the pin stays.
    run = run_key_tasks(tmp_path, BOOKWORM_STABLE, primary)
    assert run.returncode != 0
    assert fingerprints(BOOKWORM_STABLE)[0][0] in run.stdout, run.stdout[-3000:]
    assert keyring.read_bytes() == trusted


def test_check_mode_checks_the_key_and_writes_nothing(tmp_path):
    (primary,), _subkeys = fingerprints(BOOKWORM_STABLE)
    run = run_key_tasks(tmp_path, BOOKWORM_STABLE, primary, "--check")
    assert run.returncode == 0, run.stdout[-3000:]
    assert changed(run.stdout) == 2, "check mode reports the directory and the keyring it would write"
    assert not (tmp_path / "keyrings").exists()
    wrong = run_key_tasks(tmp_path, ALL_DEBIAN_KEYS, primary, "--check")
    assert wrong.returncode != 0, "a key that would be refused is refused in check mode too"
