# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""`gpufleet compat refresh/show`: the shipped release data is exactly what the recorded source
snapshots give, and each reading rule does what it says (no network: the range reader is served
from 127.0.0.1)."""

from __future__ import annotations

import copy
import http.server
import io
import json
import threading
import zipfile
from pathlib import Path

import pytest

from gpufleet import compat, compat_refresh, compat_sources

REPO = Path(__file__).resolve().parents[3]
SNAPSHOTS = REPO / "tests" / "fixtures" / "compat-sources"
DATA = REPO / "plugins" / "module_utils" / "compat_release_data.py"


@pytest.fixture(scope="module")
def snaps():
    return compat_refresh.load_snapshots(SNAPSHOTS)


def test_refresh_reproduces_the_shipped_data_byte_for_byte(snaps):
    assert compat_refresh.render_module(compat_refresh.build_release_data(snaps)) == DATA.read_text()


def test_the_offline_command_writes_the_same_file(tmp_path):
    out = tmp_path / "data.py"
    assert compat.main(["refresh", "--offline", "--snapshots", str(SNAPSHOTS), "--output", str(out)]) == 0
    assert out.read_bytes() == DATA.read_bytes()


def test_every_torch_2_release_pypi_serves_is_in_the_data(snaps):
    data = compat.shipped_data(REPO)
    on_pypi = sorted(snaps["pypi-torch"]["releases"], key=compat_refresh.version_key)
    assert "2.15.0" in on_pypi and "2.10.0" in on_pypi
    assert on_pypi == list(data["torch"])
    for version, entry in data["torch"].items():
        assert entry["variants"] and entry["default_variant"] in entry["variants"], version
        assert entry["variants_source"], version


@pytest.mark.parametrize("version, variants, default, nccl, vision, audio", [
    ("2.1.2", ["cu118", "cu121"], "cu121", "2.18.1", "0.16.2", "2.1.2"),
    ("2.6.0", ["cu118", "cu124", "cu126"], "cu124", "2.21.5", "0.21.0", "2.6.0"),
    ("2.10.0", ["cu126", "cu128", "cu130"], "cu128", "2.27.5", "0.25.0", "2.10.0"),
    ("2.12.0", ["cu126", "cu130", "cu132"], "cu130", "2.29.7", "0.27.0", ""),  # torchaudio: none pins 2.12
    ("2.14.0", ["cu126", "cu130", "cu132", "cu134"], "cu130", "2.30.7", "0.29.0", ""),
    ("2.15.0", ["cu132"], "cu132", "2.30.7", "", ""),
])
def test_release_facts_read_from_the_snapshots(version, variants, default, nccl, vision, audio):
    entry = compat.shipped_data(REPO)["torch"][version]
    assert (entry["variants"], entry["default_variant"], entry["bundled_nccl"]) == (variants, default, nccl)
    assert (entry["torchvision"], entry["torchaudio"]) == (vision, audio)


@pytest.mark.parametrize("line, name, specs", [
    ('nvidia-nccl-cu12 (==2.18.1) ; platform_system == "Linux" and platform_machine == "x86_64"',
     "nvidia-nccl-cu12", [("==", "2.18.1")]),
    ('cuda-toolkit[cudart,nvrtc]==13.0.2; platform_system == "Linux"', "cuda-toolkit", [("==", "13.0.2")]),
    ("torch (>=2.14.0)", "torch", [(">=", "2.14.0")]),
    ('triton~=3.9.0; platform_system == "Linux"', "triton", [("~=", "3.9.0")]),
])
def test_requirement_lines_old_and_new_forms(line, name, specs):
    assert compat_refresh.parse_requirement(line) == (name, specs)


@pytest.mark.parametrize("requires, cuda", [
    (["nvidia-cuda-runtime-cu11 (==11.7.99) ; x"], ("11.7", "11.7.99")),
    (["nvidia-cuda-runtime-cu12==12.8.90; x"], ("12.8", "12.8.90")),
    (["cuda-toolkit[cudart]==13.2.2; x"], ("13.2", "13.2.2")),
    (["nvidia-nccl-cu13==2.30.7"], (None, None)),
])
def test_the_default_wheels_cuda_comes_from_its_runtime_pin(requires, cuda):
    assert compat_refresh.wheel_cuda(compat_refresh.exact_pins(requires)) == cuda


def _companions(*entries):
    return {"releases": {v: {"wheel": w, "requires_dist": r} for v, w, r in entries}}


def test_companions_exact_pin_then_same_minor_then_same_version():
    snap = _companions(("0.29.0", "tv-0.29.0-cp310-cp310-x.whl", ["torch (==2.14.0)"]),
                       ("0.29.2", "tv-0.29.2-py3-none-x.whl", ["torch (>=2.14.0)"]),
                       ("2.11.0", "ta-2.11.0-cp310-cp310-x.whl", []))
    assert compat_refresh.companion_for(snap, "2.14.0") == "0.29.0"   # the exact pin beats a newer >=
    assert compat_refresh.companion_for(snap, "2.14.1") == "0.29.2"   # >= within the same minor
    assert compat_refresh.companion_for(snap, "2.15.0") == ""         # not across minors
    assert compat_refresh.companion_for(snap, "2.11.0") == "2.11.0"   # no requirement: the same version


def test_build_matrix_stable_then_candidate_then_missing(snaps):
    matrix = snaps[compat_refresh.MATRIX_SNAPSHOT]
    assert compat_refresh.matrix_variants(matrix, "2.13.0")[0] == ["cu126", "cu130", "cu132"]
    variants, where = compat_refresh.matrix_variants(matrix, "2.14.0")
    assert variants == ["cu126", "cu130", "cu132", "cu134"] and "test channel, candidate" in where
    assert compat_refresh.matrix_variants(matrix, "2.15.0") == ([], None)


def test_matrix_fields_reads_the_script_and_skips_a_broken_one():
    text = ('CUDA_ARCHES_DICT = {"nightly": ["13.4"], "test": ["13.0"], "release": ["12.6", "13.0"]}\n'
            'CURRENT_STABLE_VERSION = "2.13.0"\nCURRENT_CANDIDATE_VERSION = "2.14.0"\n')
    assert compat_sources.matrix_fields(text) == {"stable": "2.13.0", "candidate": "2.14.0",
                                                  "release": ["12.6", "13.0"], "test": ["13.0"]}
    assert compat_sources.matrix_fields("def broken(:\n") is None


def test_the_wheel_pip_would_install_stands_for_the_release():
    files = [{"filename": n} for n in (
        "torch-2.10.0-cp310-cp310-manylinux_2_28_x86_64.whl", "torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.10.0-3-cp310-cp310-manylinux_2_28_x86_64.whl", "torch-2.10.0-3-cp313-cp313t-manylinux_2_28_x86_64.whl",
        "torch-2.10.0-3-cp310-cp310-manylinux_2_28_aarch64.whl", "torch-2.10.0-3-cp310-cp310-win_amd64.whl")]
    assert compat_sources.pick_linux_wheel(files)["filename"] == "torch-2.10.0-3-cp310-cp310-manylinux_2_28_x86_64.whl"
    pure = [{"filename": "torchaudio-2.11.1-py3-none-manylinux_2_28_x86_64.whl"},
            {"filename": "torchaudio-2.11.1-py3-none-win_amd64.whl"}]
    assert compat_sources.pick_linux_wheel(pure)["filename"].endswith("manylinux_2_28_x86_64.whl")
    assert compat_sources.pick_linux_wheel([{"filename": "x-1-cp310-cp310-win_amd64.whl"}]) is None


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 - the http.server interface
        spec = self.headers.get("Range", "")
        start, _sep, end = spec[len("bytes="):].partition("-")
        size = len(self.body)
        if start.startswith("-") or (not start and end):
            first, last = size - int(end or start[1:]), size - 1
        else:
            first, last = int(start), min(int(end) if end else size - 1, size - 1)
        self.send_response(206)
        self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
        self.end_headers()
        self.wfile.write(self.body[first:last + 1])

    def log_message(self, *args):
        pass


@pytest.fixture
def served_wheel():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr("torch/__init__.py", "x = 1\n" * 20000)
        wheel.writestr("torch-9.9.9.dist-info/METADATA", "Name: torch\nRequires-Dist: nvidia-nccl-cu13==2.30.7\n")
        wheel.writestr("torch-9.9.9.dist-info/RECORD", "")
    handler = type("Handler", (_RangeHandler,), {"body": buf.getvalue()})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d/torch-9.9.9-cp310-cp310-manylinux_2_28_x86_64.whl" % server.server_port
    server.shutdown()
    server.server_close()
    thread.join()


def test_metadata_is_read_from_the_wheel_by_byte_ranges(served_wheel):
    text = compat_sources.wheel_metadata_by_range(served_wheel)
    assert compat_sources.requires_dist(text) == ["nvidia-nccl-cu13==2.30.7"]


def test_check_lists_what_the_sources_have_that_the_data_lacks(snaps):
    data = compat.shipped_data(REPO)
    fresh = copy.deepcopy(data)
    assert compat.missing_from(data, fresh) == []
    fresh["torch"]["2.16.0"] = dict(fresh["torch"]["2.15.0"], variants=["cu132", "cu134"])
    fresh["torch"]["2.15.0"] = dict(fresh["torch"]["2.15.0"], torchvision="0.30.0")
    fresh["nccl_wheels"]["cu13"] = fresh["nccl_wheels"]["cu13"] + ["2.33.1"]
    lacking = compat.missing_from(data, fresh)
    assert any(line.startswith("torch 2.16.0 (variants cu132, cu134") for line in lacking)
    assert "torch 2.15.0: torchvision is '0.30.0' in the sources, '' in the data" in lacking
    assert any("2.33.1" in line for line in lacking)


def test_check_exits_1_when_something_is_missing(monkeypatch, snaps, capsys):
    newer = copy.deepcopy(snaps)
    newer["pypi-torch"]["releases"]["2.16.0"] = dict(newer["pypi-torch"]["releases"]["2.15.0"])
    monkeypatch.setattr(compat, "read_sources", lambda test_infra, read_on: newer)
    assert compat.main(["refresh", "--check"]) == compat.EXIT_MISSING
    assert "torch 2.16.0" in capsys.readouterr().out
    monkeypatch.setattr(compat, "read_sources", lambda test_infra, read_on: snaps)
    assert compat.main(["refresh", "--check"]) == 0


def test_show_says_what_is_known_and_how_old_it_is(capsys):
    assert compat.main(["show", "--today", "2027-01-04"]) == 0
    out = capsys.readouterr().out
    assert "release data refreshed 2026-12-05, 30 days ago" in out
    assert "https://pypi.org/pypi/torch/json" in out and "pytorch/test-infra" in out
    assert "2.15.0" in out


def test_snapshots_are_stored_as_the_tool_writes_them():
    for name in compat_refresh.SNAPSHOTS:
        path = SNAPSHOTS / ("%s.json" % name)
        assert path.read_text() == compat_refresh.dump_snapshot(json.loads(path.read_text())), path.name


def test_the_gpufleet_command_runs_compat(capsys):
    from gpufleet import cli

    assert cli.main(["compat", "show"]) == 0
    assert "release data refreshed" in capsys.readouterr().out


def test_show_lists_the_sourced_table_and_flags_an_end_of_life_the_calendar_passed(capsys):
    assert compat.main(["show", "--today", "2027-05-01"]) == 0
    out = capsys.readouterr().out
    assert "sourced table (compat_facts.py):" in out and "read 2026-12-02 to 2026-12-06" in out
    assert "R595's end of life (2027-03) has passed since the table was reviewed (2026-12-06)" in out
