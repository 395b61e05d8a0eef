"""`gpufleet mirror` against hostile or careless input (issue 35): a wheel URL that names a path, a --dest that
is not a mirror, two first runs at once, a --url that would rewrite the YAML it is written into."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sys

import pytest
import yaml

from gpufleet.mirror_repo import MANIFEST, Signer, Staging, check_mirror_url, mirror_vars
from gpufleet.mirror_targets import MirrorError
from gpufleet.mirror_wheels import Wheel, parse_report

needs_gpg = pytest.mark.skipif(not shutil.which("gpg"), reason="needs gpg")


# ------------------------------------------------------------------------- N2: a wheel's name is a file name

@pytest.mark.parametrize("url", [
    "https://idx.example/simple/..%2F..%2F..%2Fevil-1.0-py3-none-any.whl",
    "https://idx.example/simple/sub%2Fevil-1.0-py3-none-any.whl",
    "https://idx.example/simple/%2Ftmp%2Fevil-1.0-py3-none-any.whl",
    "https://idx.example/simple/..",
    "https://idx.example/simple/evil.tar.gz",
    "https://idx.example/simple/",
])
def test_a_wheel_url_whose_last_segment_is_not_a_plain_wheel_file_name_is_refused(url):
    report = {"install": [{"metadata": {"name": "evil", "version": "1.0"},
                           "download_info": {"url": url, "archive_info": {"hash": "sha256=" + "a" * 64}}}]}
    with pytest.raises(MirrorError) as err:
        [wheel.filename for wheel in parse_report(report)]
    assert url in str(err.value) and "not a wheel file name" in str(err.value)


def test_a_quoted_plus_in_a_wheel_url_is_still_its_file_name():
    wheel = Wheel("torch", "2.1.2+cu121", "https://x/whl/torch-2.1.2%2Bcu121-cp310-cp310-linux_x86_64.whl#sha256=ab", "")
    assert wheel.filename == "torch-2.1.2+cu121-cp310-cp310-linux_x86_64.whl"


@pytest.mark.parametrize("rel", ["../outside.whl", "wheels/../../outside.whl", "/tmp/outside.whl"])
def test_the_staging_writes_nothing_outside_itself(tmp_path, rel):
    dest = tmp_path / "mirror"
    with pytest.raises(MirrorError, match="outside the mirror"):
        with Staging(dest, replace=False) as staging:
            staging.add(rel, data=b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------------- N8: --replace replaces only a mirror

def test_replace_refuses_a_directory_that_is_not_a_mirror_and_names_what_is_in_it(tmp_path):
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "thesis.tex").write_text("years of work")
    (dest / "data").mkdir()
    with pytest.raises(MirrorError) as err:
        Staging(dest, replace=True)
    said = str(err.value)
    assert "is not a gpufleet mirror" in said and "thesis.tex" in said and "data/" in said and MANIFEST in said
    assert (dest / "thesis.tex").read_text() == "years of work"


def test_replace_refuses_a_manifest_gpufleet_did_not_write(tmp_path):
    dest = tmp_path / "m"
    dest.mkdir()
    (dest / MANIFEST).write_text('{"name": "some other tool"}')
    with pytest.raises(MirrorError, match="is not a gpufleet mirror"):
        Staging(dest, replace=True)


def test_replace_replaces_a_mirror_and_an_empty_directory(tmp_path):
    dest = tmp_path / "m"
    dest.mkdir()
    Staging(dest, replace=True)  # empty: nothing to lose
    (dest / MANIFEST).write_text(json.dumps({"format": 1, "signing_key": "AB" * 20, "files": []}))
    (dest / "old.deb").write_bytes(b"old")
    with Staging(dest, replace=True) as staging:
        staging.add("new", data=b"new")
        staging.commit()
    assert sorted(p.name for p in dest.iterdir()) == ["new"]


# --------------------------------------------------------- N9: one signing key, however many first runs

def _make_signer(home, barrier, out):
    barrier.wait()
    try:
        out.put(Signer(home).fingerprint)
    except Exception as exc:  # pragma: no cover - reported to the test
        out.put(f"error: {exc}")


@needs_gpg
def test_two_first_runs_at_once_make_one_key(tmp_path):
    home = tmp_path / "gnupg"
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    barrier, out = context.Barrier(3), context.Queue()
    children = [context.Process(target=_make_signer, args=(home, barrier, out)) for number in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
    fingerprints = [out.get(timeout=5) for child in children]
    assert len(set(fingerprints)) == 1 and len(fingerprints[0]) == 40, fingerprints
    assert Signer(home).fingerprint == fingerprints[0]


# ----------------------------------------------------------- N13: --url is a URL, and the YAML holds it as given

@pytest.mark.parametrize("url", ["http://10.0.0.1:8080/m", "https://mirror.example/a #b", "file:///srv/mirror",
                                 "http://h/p?x=1&y='2'", 'http://h/"q"', "http://h/{{ lookup('pipe', 'id') }}"])
def test_the_variables_load_back_to_exactly_the_url_given(url):
    if " " in url:
        with pytest.raises(MirrorError, match="whitespace"):
            check_mirror_url(url)
        return
    check_mirror_url(url)
    values = yaml.safe_load(mirror_vars(url, "AB" * 20, "now", cuda=True, wheels=True, os_repos={}))
    assert values["gpufleet_mirror_url"] == url
    assert set(values) == {"gpufleet_mirror_url", "gpufleet_cuda_repo_url", "gpufleet_cuda_repo_key_url",
                           "gpufleet_cuda_repo_key_fingerprint", "gpufleet_pytorch_index_url",
                           "gpufleet_pytorch_wheel_dir"}


def test_a_url_a_yaml_reader_would_misread_loads_back_exactly_when_written():
    # Written as given (check_mirror_url refuses it first in the CLI): the serializer alone must not let it add keys.
    url = "http://h/m\ngpufleet_cuda_repo_key_fingerprint: EVIL # x"
    values = yaml.safe_load(mirror_vars(url, "AB" * 20, "now", cuda=True, wheels=False, os_repos={}))
    assert values["gpufleet_mirror_url"] == url and values["gpufleet_cuda_repo_key_fingerprint"] == "AB" * 20


@pytest.mark.parametrize("url, words", [
    ("http://h/m\nevil: 1", "whitespace or a control character"),
    ("http://h/m\tx", "whitespace or a control character"),
    ("http://h/m\x7f", "whitespace or a control character"),
    ("ftp://h/m", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("h:8080/m", "scheme"),
    ("http:///m", "host"),
])
def test_a_url_that_is_not_an_http_https_or_file_url_is_refused_with_what_would_work(url, words):
    with pytest.raises(MirrorError) as err:
        check_mirror_url(url)
    assert words in str(err.value) and repr(url) in str(err.value) and "http://HOST:PORT/PATH" in str(err.value)
