"""The converged-state observations: each kind of drift the stack roles would correct must change one.

Files, links, listings and trees are observed on real paths under tmp_path; packages through this
machine's real dpkg-query (the CI machine is Debian); commands through real programs.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import stack_state


def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_an_edited_file_a_new_mode_and_a_removed_file_each_change_the_signature(tmp_path):
    path = tmp_path / "gpufleet-nccl"
    path.write_text("Package: libnccl2\nPin: version 2.19.3-1+cuda12.2\nPin-Priority: 1001\n")
    os.chmod(path, 0o644)
    recorded = stack_state.file_signature(str(path))
    assert recorded.startswith("file ") and " 0644 sha256 " in recorded
    path.write_text("Package: libnccl2\nPin: version 2.20.5-1+cuda12.4\nPin-Priority: 1001\n")
    edited = stack_state.file_signature(str(path))
    assert edited != recorded
    os.chmod(path, 0o666)
    assert stack_state.file_signature(str(path)) not in (recorded, edited)
    path.unlink()
    assert stack_state.file_signature(str(path)) == "absent"


def test_a_link_is_followed_link_by_link(tmp_path):
    # /usr/local/cuda -> /etc/alternatives/cuda -> /usr/local/cuda-12.2, as update-alternatives leaves it.
    for version in ("12.2", "12.4"):
        (tmp_path / f"cuda-{version}").mkdir()
    alternative = tmp_path / "alternatives-cuda"
    alternative.symlink_to(tmp_path / "cuda-12.2")
    home = tmp_path / "cuda"
    home.symlink_to(alternative)
    recorded = stack_state.file_signature(str(home))
    assert recorded == f"link -> {alternative} (resolves to {tmp_path / 'cuda-12.2'})"
    alternative.unlink()
    alternative.symlink_to(tmp_path / "cuda-12.4")  # the middle link re-pointed, the first untouched
    assert stack_state.file_signature(str(home)) != recorded


def test_a_large_file_is_identified_by_size_and_mtime(tmp_path):
    path = tmp_path / "nvcc"
    path.write_bytes(b"\0" * (stack_state.CONTENT_HASH_MAX_BYTES + 1))
    recorded = stack_state.file_signature(str(path))
    assert " size %d mtime " % (stack_state.CONTENT_HASH_MAX_BYTES + 1) in recorded
    os.utime(path, ns=(1, 1))
    assert stack_state.file_signature(str(path)) != recorded


def test_a_new_reboot_request_changes_the_listing(tmp_path):
    requests = tmp_path / "reboot-required.d"
    assert stack_state.dir_listing(str(requests)) == "absent"
    requests.mkdir()
    assert stack_state.dir_listing(str(requests)) == "empty"
    (requests / "driver-installed").write_text("nvidia_driver: driver 550.127.08 installed\n")
    assert stack_state.dir_listing(str(requests)).startswith("driver-installed file ")


@pytest.mark.parametrize("runner", [run, None], ids=["find", "python-walk"])
def test_a_venv_tree_moves_with_any_file_but_not_with_bytecode(tmp_path, runner):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "torch"
    site.mkdir(parents=True)
    init = site / "__init__.py"
    init.write_text("__version__ = '2.4.1'\n")
    recorded = stack_state.tree_signature(str(tmp_path / "venv"), runner)
    assert recorded.startswith("tree of 1 files sha256 ")
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"bytecode")
    assert stack_state.tree_signature(str(tmp_path / "venv"), runner) == recorded
    init.write_text("__version__ = '2.4.1'\nraise ImportError('edited')\n")
    edited = stack_state.tree_signature(str(tmp_path / "venv"), runner)
    assert edited != recorded
    (site / "extra.py").write_text("")
    added = stack_state.tree_signature(str(tmp_path / "venv"), runner)
    assert added.startswith("tree of 2 files") and added not in (recorded, edited)
    os.chmod(site / "extra.py", 0o600)
    assert stack_state.tree_signature(str(tmp_path / "venv"), runner) != added


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="needs dpkg (the CI machine is Debian)")
def test_packages_are_read_through_dpkg_with_selection_state_and_version():
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "bash"], capture_output=True, text=True,
                             check=True).stdout
    seen = stack_state.observe({"packages": ["bash", "gpufleet-no-such-package"]}, run)
    # "install ok installed": the selection (install, or hold once held), then dpkg's state.
    assert seen["package bash"] == "install ok installed " + version
    assert seen["package gpufleet-no-such-package"] == "absent"


def test_a_hold_or_a_version_change_in_dpkg_output_is_a_drift():
    names = ["libnccl2", "libnccl-dev"]
    held = stack_state.parse_dpkg_query(names, "libnccl2\t2.19.3-1+cuda12.2\thold ok installed\n"
                                               "libnccl-dev\t2.19.3-1+cuda12.2\thold ok installed\n")
    unheld = stack_state.parse_dpkg_query(names, "libnccl2\t2.19.3-1+cuda12.2\tinstall ok installed\n"
                                                 "libnccl-dev\t2.19.3-1+cuda12.2\thold ok installed\n")
    moved = stack_state.parse_dpkg_query(names, "libnccl2\t2.20.5-1+cuda12.4\thold ok installed\n"
                                                "libnccl-dev\t2.19.3-1+cuda12.2\thold ok installed\n")
    record = {"package " + k: v for k, v in held.items()}
    assert stack_state.drift(record, {"package " + k: v for k, v in unheld.items()}) == [
        "package libnccl2: recorded hold ok installed 2.19.3-1+cuda12.2, now install ok installed 2.19.3-1+cuda12.2"]
    assert stack_state.drift(record, {"package " + k: v for k, v in moved.items()}) == [
        "package libnccl2: recorded hold ok installed 2.19.3-1+cuda12.2, now hold ok installed 2.20.5-1+cuda12.4"]
    assert stack_state.drift(record, dict(record)) == []


def test_what_could_not_be_observed_is_never_unchanged():
    record = {"package libnccl2": "unobserved: the package query failed (rc 2: locked)"}
    assert stack_state.drift(record, dict(record)) == [
        "package libnccl2: recorded unobserved: the package query failed (rc 2: locked), "
        "now unobserved: the package query failed (rc 2: locked)"]
    # dpkg's own "unknown" selection (a name it knows but never installed) is an observation like any other.
    known = stack_state.parse_dpkg_query(["nvidia-kernel-dkms"], "nvidia-kernel-dkms\t\tunknown ok not-installed\n")
    assert known == {"nvidia-kernel-dkms": "unknown ok not-installed (no version)"}
    assert stack_state.drift(known, dict(known)) == []
    # An observation the record lacks, or one no longer taken, is a drift too.
    assert stack_state.drift({}, {"kernel": "6.1.0"}) == ["kernel: recorded not recorded, now 6.1.0"]
    assert stack_state.drift({"kernel": "6.1.0"}, {}) == ["kernel: recorded 6.1.0, now not observed"]


def test_commands_record_output_and_exit_code_and_a_missing_program():
    seen = stack_state.observe({"commands": [["sh", "-c", "echo GPU 0: NVIDIA H100; exit 3"],
                                             ["gpufleet-no-such-program", "-L"]]}, run)
    assert seen["command sh -c echo GPU 0: NVIDIA H100; exit 3"] == "rc 3: GPU 0: NVIDIA H100"
    assert seen["command gpufleet-no-such-program -L"] == "not installed"
    assert seen["kernel"] == os.uname().release


def test_the_watch_list_is_canonical():
    assert stack_state.normalise_watch({"files": ["/b", "/a", "/b", ""], "commands": [["nvidia-smi", "-L"]] * 2}) == {
        "files": ["/a", "/b"], "dirs": [], "packages": [], "services": [], "venvs": [],
        "commands": [["nvidia-smi", "-L"]]}
