"""wheel_index: PEP 503 pages and wheel names, and whether the planned wheels fit the node (tests/fixtures/wheels)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpufleet.cluster.plugins.module_utils import wheel_index as wi

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "wheels"
PYPI = "the wheel index https://pypi.org/simple"


def page() -> list:
    return wi.parse_simple_index((FIXTURES / "pypi-simple-torchaudio.html").read_text())


def test_simple_index_lists_every_file_of_the_page():
    files = page()
    assert len(files) == 792
    assert files[0] == "torchaudio-0.10.0-cp38-cp38-manylinux1_x86_64.whl"
    assert "torchaudio-2.11.1-py3-none-win_amd64.whl" in files


def test_wheel_names_and_tag_sets():
    wheel = wi.parse_wheel_name("markupsafe-3.0.4-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl")
    assert wheel == {"name": "markupsafe", "version": "3.0.4", "python": ["cp311"], "abi": ["cp311"],
                     "platform": ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"]}
    assert wi.parse_wheel_name("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")["version"] == "2.13.0+cpu"
    assert wi.parse_wheel_name("torchaudio-2.1.2.tar.gz") is None
    assert wi.fits(wi.parse_wheel_name("filelock-4.3.2-py3-none-any.whl"), "cp311", "x86_64")
    assert not wi.fits(wi.parse_wheel_name("torchaudio-2.1.2-cp311-cp311-win_amd64.whl"), "cp311", "x86_64")
    assert not wi.fits(wi.parse_wheel_name("torchaudio-2.1.2-cp310-cp310-manylinux1_x86_64.whl"), "cp311", "x86_64")


def test_planned_wheel_on_the_index_is_found():
    result = wi.check_wheels([{"name": "torchaudio", "version": "2.1.2"}], {"torchaudio": page()}, "cp311", "x86_64", PYPI)
    assert result["ok"] and result["found"] == {"torchaudio": "torchaudio-2.1.2-cp311-cp311-manylinux1_x86_64.whl"}


def test_missing_wheel_names_what_the_index_offers_instead():
    # torchaudio stopped at 2.11.1: there is none for torch 2.12.
    result = wi.check_wheels([{"name": "torchaudio", "version": "2.12.0"}], {"torchaudio": page()}, "cp311", "x86_64", PYPI)
    assert not result["ok"]
    assert result["message"].startswith(
        "the wheel index https://pypi.org/simple has no torchaudio 2.12.0 for cp311 on x86_64; it offers 2.11.1, 2.11.0, 2.10.0, ")
    # A version that exists, for other interpreters only.
    old = wi.check_wheels([{"name": "torchaudio", "version": "0.10.0"}], {"torchaudio": page()}, "cp311", "x86_64", PYPI)
    assert old["message"] == ("the wheel index https://pypi.org/simple has torchaudio 0.10.0 only for cp36, cp37, cp38, cp39, "
                              "not for this node's cp311 on x86_64")
    # A variant's local label must match: PyPI's page has no +cu121 builds.
    cuda = wi.check_wheels([{"name": "torchaudio", "version": "2.1.2+cu121"}], {"torchaudio": page()}, "cp311", "x86_64", PYPI)
    assert cuda["message"] == "the wheel index https://pypi.org/simple has no torchaudio 2.1.2+cu121 for cp311 on x86_64; " \
                              "it offers no cu121 torchaudio wheel that fits this node"
    nothing = wi.check_wheels([{"name": "torchvision", "version": "0.16.2"}], {}, "cp311", "x86_64", PYPI)
    assert nothing["message"] == "the wheel index https://pypi.org/simple has no torchvision at all"


def test_wheel_directory_of_the_simulated_cluster():
    files = (FIXTURES / "wheel-dir-sim.txt").read_text().split()
    by_name = {}
    for filename in files:
        by_name.setdefault(wi.parse_wheel_name(filename)["name"], []).append(filename)
    ok = wi.check_wheels([{"name": "torch", "version": "2.13.0+cpu"}], by_name, "cp311", "x86_64", "the wheel directory /w")
    assert ok["ok"]
    bad = wi.check_wheels([{"name": "torch", "version": "2.13.0+cu130"}], by_name, "cp311", "x86_64", "the wheel directory /w")
    assert bad["message"] == "the wheel directory /w has no torch 2.13.0+cu130 for cp311 on x86_64; it offers no cu130 torch wheel that fits this node"


def test_credentials_never_reach_a_message():
    assert wi.public_url("https://user:s3cret@mirror.example/simple") == "https://mirror.example/simple"
    assert wi.public_url("https://mirror.example/simple") == "https://mirror.example/simple"
