"""nvidia_driver's repository key tasks, run for real on this machine (connection local, a scratch destination).

Keys are made by gpg here; the tasks download them over file:// into a temporary file, judge them with
gpufleet.cluster.signing_key_info and only then place them. A file with the pinned key plus another is refused
and nothing reaches the destination; the pinned key alone is placed, and placing it again changes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("gpg") is None or not (VENV_BIN / "ansible-playbook").exists(),
                       reason="needs gpg and ansible-playbook in the venv"),
]


def gpg(home, *args):
    return subprocess.run(["gpg", "--batch", *args], env=dict(os.environ, GNUPGHOME=str(home)), check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    for uid in ("Pinned Repo <pinned@example.invalid>", "Other <other@example.invalid>"):
        gpg(home, "--passphrase", "", "--quick-gen-key", uid, "default", "default", "never")
    fprs = [line.split(":")[9] for line in gpg(home, "--with-colons", "--list-keys").splitlines()
            if line.startswith("fpr:")]
    primaries = [fprs[0], fprs[2]]  # each key: primary fpr, then its subkey's
    out = tmp_path_factory.mktemp("keys")
    (out / "pinned.asc").write_text(gpg(home, "--armor", "--export", primaries[0]))
    (out / "both.asc").write_text(gpg(home, "--armor", "--export", primaries[0], primaries[1]))
    return out, primaries[0]


def place(tmp_path, key_file: Path, pin: str):
    dest = tmp_path / "keyring.gpg"
    playbook = tmp_path / "key.yml"
    playbook.write_text(f"""
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gpufleet.cluster.nvidia_driver
        tasks_from: repository_key.yml
      vars:
        ansible_facts: {{os_family: Debian}}
        __nvidia_driver_key_url: "file://{key_file}"
        __nvidia_driver_key_pin: "{pin}"
        __nvidia_driver_key_dest: "{dest}"
        __nvidia_driver_key_dearmor: true
""")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_BECOME="false")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(playbook)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    return proc, dest


@pytest.mark.skipif(os.geteuid() != 0, reason="the key is placed owned by root")
def test_pinned_key_alone_is_placed_and_placing_it_again_changes_nothing(keys, tmp_path):
    out, pin = keys
    proc, dest = place(tmp_path, out / "pinned.asc", pin)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert dest.read_bytes()[:1] != b"-"  # dearmored, a binary keyring apt reads
    shown = gpg(tmp_path, "--with-colons", "--show-keys", str(dest))
    assert f"fpr:::::::::{pin}:" in shown
    again, dest_again = place(tmp_path, out / "pinned.asc", pin)
    assert dest_again == dest
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-2000:]
    assert not list(Path("/tmp").glob("ansible.*gpufleet-key*"))


def test_key_file_with_the_pin_plus_another_key_is_refused_and_nothing_is_placed(keys, tmp_path):
    out, pin = keys
    proc, dest = place(tmp_path, out / "both.asc", pin)
    assert proc.returncode != 0
    assert "the file holds 2 primary keys" in proc.stdout and "Nothing was trusted" in proc.stdout, proc.stdout[-3000:]
    assert not dest.exists()
