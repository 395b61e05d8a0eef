"""`gpufleet mirror`: the wheels (pip's argv, its isolation from this machine's configuration, the
download and its checks, the PEP 503 index). Only loopback traffic."""

from __future__ import annotations

import os
import urllib.parse

import pytest

from gpufleet.mirror_targets import MirrorError
from gpufleet.mirror_wheels import (WheelSpec, download_argv, fetch_wheels, hash_lock, normalize, parse_report, pip_env,
                                    platform_tags, report_argv, requirement_args, simple_index, source_args)
from mirror_helpers import make_wheel, served


def test_platform_tags_cover_every_older_manylinux_and_the_plain_linux_tag():
    tags = platform_tags("x86_64", "2.28")
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "linux_x86_64"
    for tag in ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
                "manylinux_2_5_x86_64"):
        assert tag in tags
    assert "manylinux_2_29_x86_64" not in tags
    arm = platform_tags("aarch64", "2.35")
    assert "manylinux2014_aarch64" in arm and "manylinux_2_16_aarch64" not in arm and "manylinux1_aarch64" not in arm
    with pytest.raises(MirrorError, match="not X.Y"):
        platform_tags("x86_64", "unknown")


def test_pip_ignores_this_machines_configuration(monkeypatch):
    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/caps.txt")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    env = pip_env()
    assert env["PIP_CONFIG_FILE"] == os.devnull
    assert not [k for k in env if k.startswith("PIP_") and k != "PIP_CONFIG_FILE"]


def test_the_pip_argv_resolves_for_the_nodes_python_and_platform(tmp_path):
    spec = WheelSpec(("torch==2.1.2+cu121", "numpy"), "3.10", "2.35", "x86_64", "https://download.pytorch.org/whl/cu121")
    argv = report_argv(spec, tmp_path / "r.json", tmp_path / "t", tmp_path / "c", requirement_args(spec, tmp_path))
    assert argv[argv.index("--python-version") + 1] == "3.10"
    assert "--isolated" in argv and "--only-binary=:all:" in argv and "--dry-run" in argv
    assert argv[argv.index("--index-url") + 1] == "https://download.pytorch.org/whl/cu121"
    assert {argv[i + 1] for i, a in enumerate(argv) if a == "--platform"} == set(platform_tags("x86_64", "2.35"))
    assert argv[-2:] == ["torch==2.1.2+cu121", "numpy"]
    locked = WheelSpec(("torch==2.1.2+cu121",), "3.10", "2.35", "x86_64", "https://x/", lock="torch==2.1.2 --hash=sha256:ab\n")
    assert requirement_args(locked, tmp_path) == ["--require-hashes", "-r", str(tmp_path / "requirements.lock")]
    assert (tmp_path / "requirements.lock").read_text() == locked.lock
    local = WheelSpec(("a",), "3.11", "2.36", "x86_64", str(tmp_path))
    assert source_args(local.source) == ["--no-index", "--find-links", str(tmp_path)]
    with pytest.raises(MirrorError, match="neither an http"):
        source_args(str(tmp_path / "missing"))


def test_the_download_names_each_resolved_file_with_its_hash(tmp_path):
    report = {"install": [{"metadata": {"name": "torch", "version": "2.1.2+cu121"},
                           "download_info": {"url": "https://x/torch-2.1.2%2Bcu121-cp310-cp310-linux_x86_64.whl",
                                             "archive_info": {"hash": "sha256=" + "a" * 64}}}]}
    wheels = parse_report(report)
    assert wheels[0].sha256 == "a" * 64 and wheels[0].filename == "torch-2.1.2+cu121-cp310-cp310-linux_x86_64.whl"
    spec = WheelSpec(("torch",), "3.10", "2.35", "x86_64", "https://x/")
    argv = download_argv(spec, wheels, tmp_path, tmp_path / "c")
    assert "--no-deps" in argv
    assert argv[-1] == f"torch @ https://x/torch-2.1.2%2Bcu121-cp310-cp310-linux_x86_64.whl#sha256={'a' * 64}"


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("wheels")
    make_wheel(directory, "torch", "2.13.0+cpu", "cp311-cp311-manylinux_2_28_x86_64", requires=["filelock"])
    make_wheel(directory, "torch", "2.13.0+cpu", "cp312-cp312-manylinux_2_28_x86_64", requires=["filelock"])
    make_wheel(directory, "filelock", "3.13.1")
    make_wheel(directory, "numpy", "1.26.4", "cp311-cp311-manylinux_2_17_x86_64")
    return directory


def test_wheels_are_resolved_with_their_dependencies_for_that_python(wheel_dir, tmp_path, monkeypatch):
    # The machine's own pip configuration (a file that caps torch, as this machine's does) must not count.
    (tmp_path / "caps.txt").write_text("torch<2\n")
    (tmp_path / "pip.conf").write_text(f"[global]\nconstraint = {tmp_path / 'caps.txt'}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    spec = WheelSpec(("torch==2.13.0+cpu", "numpy"), "3.11", "2.36", "x86_64", str(wheel_dir))
    fetched = fetch_wheels(spec, tmp_path / "work")
    names = sorted(path.name for _wheel, path in fetched)
    assert names == ["filelock-3.13.1-py3-none-any.whl", "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl",
                     "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert all(wheel.url.startswith("file://") and len(wheel.sha256) == 64 for wheel, _path in fetched)
    assert not (tmp_path / "work" / "target").exists()


def test_a_lock_file_is_resolved_as_the_pytorch_role_installs_it(wheel_dir, tmp_path):
    """With pytorch_requirements_lock pip takes exactly what the lock pins, each file checked against its hash."""
    import hashlib

    def pin(name, version, filename):
        return f"{name}=={version} --hash=sha256:{hashlib.sha256((wheel_dir / filename).read_bytes()).hexdigest()}"
    lock = "\n".join([pin("torch", "2.13.0+cpu", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"),
                      pin("filelock", "3.13.1", "filelock-3.13.1-py3-none-any.whl")]) + "\n"
    spec = WheelSpec(("torch==2.13.0+cpu",), "3.11", "2.36", "x86_64", str(wheel_dir), lock=lock)
    assert sorted(path.name for _w, path in fetch_wheels(spec, tmp_path / "work")) == [
        "filelock-3.13.1-py3-none-any.whl", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    wrong = WheelSpec(spec.requirements, "3.11", "2.36", "x86_64", str(wheel_dir), lock=lock.replace("sha256:", "sha256:0", 1))
    with pytest.raises(MirrorError, match="checksum mismatch"):
        fetch_wheels(wrong, tmp_path / "again")


def test_a_requirement_the_source_lacks_is_named(wheel_dir, tmp_path):
    spec = WheelSpec(("torch==2.1.2+cu121",), "3.11", "2.36", "x86_64", str(wheel_dir))
    with pytest.raises(MirrorError) as err:
        fetch_wheels(spec, tmp_path / "work")
    assert "torch==2.1.2+cu121" in str(err.value) and "from versions: 2.13.0+cpu" in str(err.value)


def test_a_file_that_does_not_match_the_indexs_hash_is_refused(wheel_dir, tmp_path):
    index = tmp_path / "index"
    (index / "simple" / "filelock").mkdir(parents=True)
    wheel = make_wheel(index, "filelock", "3.13.1")
    (index / "simple" / "filelock" / "index.html").write_text(
        f'<a href="../../{wheel.name}#sha256={"0" * 64}">{wheel.name}</a>')
    with served(index) as server:
        spec = WheelSpec(("filelock",), "3.11", "2.36", "x86_64", f"{server.url}/simple/")
        with pytest.raises(MirrorError, match="checksum mismatch") as err:
            fetch_wheels(spec, tmp_path / "work")
    assert "0" * 64 in str(err.value)


def test_the_simple_index_links_every_file_with_its_hash():
    pages = simple_index({"torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": ("torch", "b" * 64),
                          "typing_extensions-4.9.0-py3-none-any.whl": ("typing_extensions", "c" * 64)})
    assert set(pages) == {"simple/index.html", "simple/torch/index.html", "simple/typing-extensions/index.html"}
    assert 'href="torch/"' in pages["simple/index.html"]
    quoted = urllib.parse.quote("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert f'href="../../{quoted}#sha256={"b" * 64}"' in pages["simple/torch/index.html"]
    assert normalize("Typing.Extensions_x") == "typing-extensions-x"


def test_the_hash_lock_pins_each_project_once_with_the_hash_of_every_file():
    """pip's --require-hashes requirements form, as pip-compile --generate-hashes writes it (one name==version
    per project, every file's hash under it), names PEP 503-normalised as the pytorch role reads them."""
    text = hash_lock({"numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl": ("numpy", "1.26.4", "b" * 64),
                      "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl": ("numpy", "1.26.4", "a" * 64),
                      "typing_extensions-4.9.0-py3-none-any.whl": ("Typing_Extensions", "4.9.0", "c" * 64)})
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["numpy==1.26.4 \\", f"    --hash=sha256:{'a' * 64} \\", f"    --hash=sha256:{'b' * 64}",
                    "typing-extensions==4.9.0 \\", f"    --hash=sha256:{'c' * 64}"]


def test_a_project_at_two_versions_gets_no_lock_and_is_named():
    """One lock cannot pin numpy at two versions (nodes of two OS releases): none is written, and the mirror says why."""
    with pytest.raises(MirrorError, match=r"numpy at 1.24.4 and 1.26.4"):
        hash_lock({"numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl": ("numpy", "1.26.4", "a" * 64),
                   "numpy-1.24.4-cp38-cp38-manylinux_2_17_x86_64.whl": ("numpy", "1.24.4", "b" * 64)})
