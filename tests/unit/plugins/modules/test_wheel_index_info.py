"""wheel_index_info: the index read from PIP_INDEX_URL (credentials never returned), or a wheel directory."""

from __future__ import annotations

import io
import json
import urllib.error
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cluster.plugins.modules import wheel_index_info

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "wheels"


def run(monkeypatch, capsys, args, pages=None, env=None):
    fetched = []

    def fake_open_url(url, headers=None, timeout=None, follow_redirects=None):
        fetched.append(url)
        if url not in (pages or {}):
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return io.BytesIO(pages[url].encode())

    monkeypatch.setattr(wheel_index_info, "open_url", fake_open_url)
    monkeypatch.setattr(wheel_index_info, "run_tool",
                        lambda module, argv, timeout, environ_update=None: (0, "cp311 x86_64\n", "", False))
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            wheel_index_info.main()
    return json.loads(capsys.readouterr().out), fetched


def test_index_from_pip_index_url_with_credentials_kept_out_of_the_result(monkeypatch, capsys):
    page = (FIXTURES / "pypi-simple-torchaudio.html").read_text()
    packages = [{"name": "torchaudio", "version": "2.12.0"}, {"name": "torchvision", "version": "0.27.0"}]
    result, fetched = run(monkeypatch, capsys, {"packages": packages},
                          pages={"https://u:tok3n@mirror.example/simple/torchaudio/": page},
                          env={"PIP_INDEX_URL": "https://u:tok3n@mirror.example/simple/"})
    assert fetched == ["https://u:tok3n@mirror.example/simple/torchaudio/", "https://u:tok3n@mirror.example/simple/torchvision/"]
    assert result["ok"] is False and result["changed"] is False
    assert result["index"] == "https://mirror.example/simple/"
    assert "tok3n" not in json.dumps(result)
    assert result["message"].startswith("the wheel index https://mirror.example/simple/ has no torchaudio 2.12.0 for cp311 on "
                                        "x86_64; it offers 2.11.1, ")
    assert result["message"].endswith("; the wheel index https://mirror.example/simple/ has no torchvision at all")


def test_wheel_directory_is_listed_not_fetched(monkeypatch, capsys, tmp_path):
    for filename in (FIXTURES / "wheel-dir-sim.txt").read_text().split():
        (tmp_path / filename).write_text("")
    result, fetched = run(monkeypatch, capsys, {"packages": [{"name": "torch", "version": "2.13.0+cpu"}],
                                                "wheel_dir": str(tmp_path)})
    assert fetched == [] and result["ok"] is True
    assert result["found"] == {"torch": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"}
