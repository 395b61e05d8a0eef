# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""`gpufleet compat refresh` against bad answers (issue 35, release data): a malformed or empty index
answer is a clear exit 2 naming the source, never a traceback nor a data module with no releases; fewer
releases than before need --allow-shrink; the module and snapshots are written atomically and the module
is compiled before it replaces the old one; a torch major this gpufleet does not support is reported, not
dropped silently; each release records which channels its CUDA variants were read from."""

from __future__ import annotations

import copy
import errno
import io
import os
import pathlib
import shutil
from pathlib import Path

import pytest

from gpufleet import compat, compat_refresh, compat_sources

REPO = Path(__file__).resolve().parents[3]
SNAPSHOTS = REPO / "tests" / "fixtures" / "compat-sources"
DATA = REPO / "plugins" / "module_utils" / "compat_release_data.py"
TORCH_URL = "https://pypi.org/pypi/torch/json"


@pytest.fixture(scope="module")
def snaps():
    return compat_refresh.load_snapshots(SNAPSHOTS)


@pytest.fixture
def shipped(tmp_path):
    """A copy of the shipped data module, the file a refresh would replace."""
    out = tmp_path / "compat_release_data.py"
    shutil.copyfile(DATA, out)
    return out


def _refresh(monkeypatch, tmp_path, answer, output, *extra):
    monkeypatch.setattr(compat, "read_sources", lambda test_infra, read_on: answer)
    return compat.main(["refresh", "--snapshots", str(tmp_path / "snaps"), "--output", str(output), *extra])


class _Answer(io.BytesIO):
    status = 200
    headers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------- malformed index answers


@pytest.mark.parametrize("body, what", [
    (b"<!DOCTYPE html><html><body>Service unavailable</body></html>", "not JSON"),
    (b'{"info": {"name": "torch"}}', "releases"),
    (b'{"releases": ["2.1.0"]}', "releases"),
    (b'{"releases": {"2.1.0": [{"url": "x"}]}}', "filename"),
    (b'{"releases": {"2.1.0": "torch-2.1.0.whl"}}', "2.1.0"),
])
def test_a_malformed_index_answer_is_exit_2_naming_the_url(monkeypatch, tmp_path, capsys, shipped, body, what):
    monkeypatch.setattr(compat_sources.urllib.request, "urlopen", lambda request, timeout: _Answer(body))
    before = shipped.read_bytes()
    rc = compat.main(["refresh", "--snapshots", str(tmp_path / "snaps"), "--output", str(shipped),
                      "--test-infra", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == compat.EXIT_BROKEN
    assert TORCH_URL in err and what in err and "Traceback" not in err
    assert shipped.read_bytes() == before and not (tmp_path / "snaps").exists()


def test_an_html_page_where_metadata_was_expected_is_refused(monkeypatch):
    monkeypatch.setattr(compat_sources.urllib.request, "urlopen",
                        lambda request, timeout: _Answer(b"<html><body>Not Found</body></html>"))
    entry = {"url": "https://files.example/torch-2.1.0-cp310-cp310-manylinux1_x86_64.whl", "core-metadata": True}
    with pytest.raises(compat_sources.SourceError, match=r"torch-2\.1\.0-cp310.*\.metadata.*METADATA"):
        compat_sources.wheel_metadata(entry, TORCH_URL)


def test_an_empty_answer_never_rewrites_the_data_with_no_releases(monkeypatch, tmp_path, capsys, shipped, snaps):
    empty = copy.deepcopy(snaps)
    empty["pypi-torch"]["releases"] = {}
    before = shipped.read_bytes()
    assert _refresh(monkeypatch, tmp_path, empty, shipped) == compat.EXIT_BROKEN
    err = capsys.readouterr().err
    assert TORCH_URL in err and "no releases" in err
    assert shipped.read_bytes() == before and not (tmp_path / "snaps").exists()


def test_a_release_whose_metadata_had_no_pins_is_refused_not_written_with_none(monkeypatch, tmp_path, capsys,
                                                                               shipped, snaps):
    # What an HTML page read as METADATA gives: no Requires-Dist lines, so no CUDA runtime, NCCL, cuDNN, triton.
    blank = copy.deepcopy(snaps)
    blank["pypi-torch"]["releases"]["2.15.0"]["requires_dist"] = []
    before = shipped.read_bytes()
    assert _refresh(monkeypatch, tmp_path, blank, shipped) == compat.EXIT_BROKEN
    err = capsys.readouterr().err
    assert "torch 2.15.0" in err and "default_cuda_runtime is None" in err and TORCH_URL in err
    assert shipped.read_bytes() == before


def test_fewer_releases_than_before_need_allow_shrink(monkeypatch, tmp_path, capsys, shipped, snaps):
    fewer = copy.deepcopy(snaps)
    del fewer["pypi-torch"]["releases"]["2.15.0"]
    before = shipped.read_bytes()
    assert _refresh(monkeypatch, tmp_path, fewer, shipped) == compat.EXIT_BROKEN
    err = capsys.readouterr().err
    assert "torch 2.15.0" in err and "--allow-shrink" in err
    assert shipped.read_bytes() == before
    assert _refresh(monkeypatch, tmp_path, fewer, shipped, "--allow-shrink") == 0
    written = compat._load_module(shipped, "shrunk_release_data").RELEASE_DATA
    assert "2.15.0" not in written["torch"] and len(written["torch"]) == 27


def test_validation_names_the_release_the_field_and_what_would_work(snaps):
    data = compat_refresh.build_release_data(snaps)
    assert compat_refresh.release_data_problems(data, snaps) == []
    bad = copy.deepcopy(data)
    bad["torch"]["2.6.0"]["variants"] = []
    bad["torch"]["2.6.0"]["cudnn"] = 9
    del bad["torch"]["2.7.0"]["triton"]
    problems = compat_refresh.release_data_problems(bad, snaps)
    assert any(p.startswith("torch 2.6.0: variants is [] (from https://github.com/pytorch/test-infra") for p in problems)
    assert any("torch 2.6.0: cudnn is 9" in p and "a non-empty string" in p for p in problems)
    assert any("torch 2.7.0: triton is missing" in p for p in problems)


def test_a_malformed_snapshot_file_is_exit_2_naming_the_file(tmp_path, capsys):
    snaps_dir = tmp_path / "snaps"
    shutil.copytree(SNAPSHOTS, snaps_dir)
    (snaps_dir / "pypi-torch.json").write_text('{"read": "2026-12-05", "releases": {"2.1.0": ')
    rc = compat.main(["refresh", "--offline", "--snapshots", str(snaps_dir), "--output", str(tmp_path / "out.py")])
    assert rc == compat.EXIT_BROKEN
    err = capsys.readouterr().err
    assert "pypi-torch.json" in err and "Traceback" not in err
    assert not (tmp_path / "out.py").exists()


# ---------------------------------------------------------------- writing


def _full_disk(monkeypatch):
    """Every way of writing a file fails part-way with ENOSPC: a plain write leaves half a file behind."""
    def half_then_full(self, text, *args, **kwargs):
        with open(self, "w", encoding="utf-8") as handle:
            handle.write(text[:len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    def no_space(_descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(pathlib.Path, "write_text", half_then_full)
    monkeypatch.setattr(os, "fsync", no_space)


def test_a_full_disk_leaves_the_old_module_whole(monkeypatch, tmp_path, capsys, shipped, snaps):
    before = shipped.read_bytes()
    _full_disk(monkeypatch)
    assert _refresh(monkeypatch, tmp_path, snaps, shipped) == compat.EXIT_BROKEN
    assert "No space left on device" in capsys.readouterr().err
    assert shipped.read_bytes() == before
    compile(before, str(shipped), "exec")
    assert [p.name for p in shipped.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_rendered_module_that_does_not_compile_never_replaces_the_old_one(monkeypatch, tmp_path, capsys, shipped,
                                                                            snaps):
    before = shipped.read_bytes()
    monkeypatch.setattr(compat_refresh, "render_module", lambda data: "RELEASE_DATA = {\n")
    assert _refresh(monkeypatch, tmp_path, snaps, shipped) == compat.EXIT_BROKEN
    assert "does not compile" in capsys.readouterr().err
    assert shipped.read_bytes() == before


def test_a_link_planted_at_the_data_module_is_refused_not_followed(monkeypatch, tmp_path, capsys, snaps):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "compat_release_data.py"
    link.symlink_to(victim)
    assert _refresh(monkeypatch, tmp_path, snaps, link) == compat.EXIT_BROKEN
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "keep me\n"


def test_snapshots_are_written_as_the_tool_writes_them_and_the_module_reproduces(monkeypatch, tmp_path, shipped,
                                                                                 snaps):
    assert _refresh(monkeypatch, tmp_path, snaps, shipped) == 0
    for name in compat_refresh.SNAPSHOTS:
        assert (tmp_path / "snaps" / ("%s.json" % name)).read_text() == compat_refresh.dump_snapshot(snaps[name])
    assert shipped.read_bytes() == DATA.read_bytes()


# ---------------------------------------------------------------- torch releases this gpufleet does not support


def test_reading_pypi_records_torch_releases_newer_than_supported_without_reading_them(monkeypatch):
    files = [{"filename": "torch-%s-cp312-cp312-manylinux_2_28_x86_64.whl", "url": "x", "upload_time": "2027-01-02"}]
    index = {v: [dict(f, filename=f["filename"] % v) for f in files] for v in ("1.13.1", "2.15.0", "3.0.0")}
    monkeypatch.setattr(compat_sources, "pypi_release_files", lambda name: (index, TORCH_URL))
    read = []

    def metadata(entry, url):
        read.append(entry["filename"])
        return "Metadata-Version: 2.1\nName: torch\nRequires-Dist: triton==3.9.0\n"
    monkeypatch.setattr(compat_sources, "wheel_metadata", metadata)
    snap = compat_sources.snapshot_metadata("torch", compat._is_torch2, "2027-01-03",
                                            note_version=compat._is_newer_than_supported)
    assert list(snap["releases"]) == ["2.15.0"] and snap["unsupported"] == ["3.0.0"]
    assert read == ["torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"]


def test_a_torch_3_release_is_reported_as_seen_not_supported(monkeypatch, tmp_path, capsys, shipped, snaps):
    newer = copy.deepcopy(snaps)
    newer["pypi-torch"]["unsupported"] = ["3.0.0", "3.0.1"]
    assert _refresh(monkeypatch, tmp_path, newer, shipped) == 0
    out = capsys.readouterr().out
    assert "seen, not supported by this gpufleet: torch 3.0.0, 3.0.1" in out
    written = compat._load_module(shipped, "newer_release_data").RELEASE_DATA
    assert written["torch_not_supported"] == ["3.0.0", "3.0.1"]
    assert "3.0.0" not in written["torch"]


def test_show_and_check_say_what_was_seen_and_not_supported(monkeypatch, capsys, snaps):
    newer = copy.deepcopy(snaps)
    newer["pypi-torch"]["unsupported"] = ["3.0.0"]
    monkeypatch.setattr(compat, "read_sources", lambda test_infra, read_on: newer)
    assert compat.main(["refresh", "--check"]) == compat.EXIT_MISSING
    assert "seen, not supported by this gpufleet: torch 3.0.0" in capsys.readouterr().out
    data = compat_refresh.build_release_data(newer)
    assert any("seen, not supported by this gpufleet: torch 3.0.0" in line
               for line in compat.show_lines(data, None, compat.datetime.date(2027, 1, 4)))


# ---------------------------------------------------------------- variant channels


@pytest.mark.parametrize("version, check, channels", [
    ("2.10.0", "agree", {"matrix-release": ["cu126", "cu128", "cu130"], "matrix-test": ["cu126", "cu128", "cu130"],
                         "pypi-default": ["cu128"]}),
    ("2.11.0", "disagree", {"matrix-release": ["cu126", "cu128", "cu130"], "matrix-test": ["cu126", "cu130", "cu132"],
                            "pypi-default": ["cu130"]}),
    ("2.2.2", "one channel", {"matrix-release": ["cu118", "cu121"], "pypi-default": ["cu121"]}),
    ("2.14.0", "one channel", {"matrix-test": ["cu126", "cu130", "cu132", "cu134"], "pypi-default": ["cu130"]}),
    ("2.15.0", "one channel", {"pypi-default": ["cu132"]}),
])
def test_each_release_records_the_channels_its_variants_were_read_from(version, check, channels):
    entry = compat.shipped_data(REPO)["torch"][version]
    assert (entry["variants_check"], entry["variants_channels"]) == (check, channels)


def test_a_default_wheel_outside_the_matrix_list_is_a_disagreement(snaps):
    matrix = {"repo": "pytorch/test-infra", "commits": [
        {"commit": "a" * 40, "date": "2026-01-01", "stable": "2.9.0", "candidate": None,
         "release": ["12.6", "12.8"], "test": None},
        {"commit": "b" * 40, "date": "2025-12-01", "stable": "2.8.0", "candidate": "2.9.0",
         "release": ["12.6"], "test": ["12.6", "12.8"]}]}
    assert compat_refresh.variant_channels(matrix, "2.9.0", "cu128") == (
        {"matrix-release": ["cu126", "cu128"], "matrix-test": ["cu126", "cu128"], "pypi-default": ["cu128"]}, "agree")
    assert compat_refresh.variant_channels(matrix, "2.9.0", "cu130")[1] == "disagree"


def test_the_solver_data_carries_the_variant_check():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_torch import TORCH_RELEASES

    assert TORCH_RELEASES["2.11.0"]["variants_check"] == "disagree"
    assert TORCH_RELEASES["2.15.0"]["variants_channels"] == {"pypi-default": ["cu132"]}


def test_show_marks_a_release_whose_channels_do_not_agree(capsys):
    assert compat.main(["show", "--today", "2027-01-04"]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if x.startswith("  2.11.0 "))
    assert "[variants: disagree: matrix-release cu126,cu128,cu130; matrix-test cu126,cu130,cu132" in line
    assert "[variants" not in next(x for x in lines if x.startswith("  2.10.0 "))
    assert "[variants: one channel: pypi-default cu132]" in next(x for x in lines if x.startswith("  2.15.0 "))
