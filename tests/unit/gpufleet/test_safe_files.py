# -*- coding: utf-8 -*-
"""gpufleet.safe_files: atomic writes that never follow a planted link."""

import os

import pytest

from gpufleet.safe_files import UnsafePath, open_existing, write_atomically


def test_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "data.txt"
    target.write_text("old")
    write_atomically(target, "new text")
    assert target.read_text() == "new text"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt"]


def test_bytes_and_mode(tmp_path):
    target = tmp_path / "key"
    write_atomically(target, b"\x00\x01", mode=0o600)
    assert target.read_bytes() == b"\x00\x01"
    assert oct(target.stat().st_mode & 0o777) == "0o600"


def test_a_link_at_the_target_is_refused_and_its_file_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "marker"
    link.symlink_to(victim)
    with pytest.raises(UnsafePath, match="symbolic link"):
        write_atomically(link, "x")
    assert victim.read_text() == "precious"
    assert link.is_symlink()


def test_a_directory_at_the_target_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafePath, match="not a regular file"):
        write_atomically(tmp_path / "d", "x")


def test_a_failed_write_leaves_no_temporary(tmp_path, monkeypatch):
    def broken(*_):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="No space"):
        write_atomically(tmp_path / "f", "x")
    assert list(tmp_path.iterdir()) == []


def test_open_existing_refuses_a_link_and_opens_a_file(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "l").symlink_to(victim)
    with pytest.raises(UnsafePath):
        open_existing(tmp_path / "l", os.O_RDWR | os.O_CREAT)
    descriptor = open_existing(tmp_path / "new", os.O_RDWR | os.O_CREAT)
    os.close(descriptor)
    assert (tmp_path / "new").is_file()
    assert victim.read_text() == "precious"
