"""The simulator's torch wheel: the CPU build, from a local wheel directory or else PyTorch's CPU index.

PyPI's torch 2.13.0 is the CUDA build, so a fresh machine with internet must not take it from there.
download.pytorch.org is not reachable here: the decision and the pip command lines are checked, not run,
and so is the error when neither place has the wheel.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SIM_DIR = Path(__file__).resolve().parents[2] / "sim"
sys.path.insert(0, str(SIM_DIR))

from gfsim import image  # noqa: E402

CPU_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_WHEEL = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def wheel_dir(path: Path, *names: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_bytes(b"")
    return path


def pins(argv: list) -> list:
    return [word for word in argv if "==" in word]


def test_a_local_wheel_directory_with_the_cpu_build_is_used_and_named(tmp_path):
    opt = wheel_dir(tmp_path / "opt-wheels", CPU_WHEEL)
    source, commands, env = image.torch_wheel_plan(tmp_path / "staging", {}, opt_wheels=opt)
    assert source == f"the local wheel directory {opt}"
    assert len(commands) == 1 and pins(commands[0]) == ["torch==2.13.0+cpu", f"numpy=={image.NUMPY_VERSION}"]
    assert env["PIP_FIND_LINKS"] == str(opt)
    assert not any(image.TORCH_CPU_INDEX in word for word in commands[0])


def test_a_wheel_directory_named_in_pip_find_links_counts_and_keeps_the_others(tmp_path):
    mine = wheel_dir(tmp_path / "mine", CPU_WHEEL)
    env = {"PIP_FIND_LINKS": f"https://wheels.example.invalid/ file://{mine}"}
    source, commands, env = image.torch_wheel_plan(tmp_path / "staging", env, opt_wheels=tmp_path / "absent")
    assert source == f"the local wheel directory {mine}" and len(commands) == 1
    assert env["PIP_FIND_LINKS"].split() == ["https://wheels.example.invalid/", f"file://{mine}", str(mine)]


@pytest.mark.parametrize("local", [(), (CUDA_WHEEL,), ("numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl",)])
def test_without_the_cpu_build_locally_torch_alone_comes_from_pytorchs_cpu_index(tmp_path, local):
    opt = wheel_dir(tmp_path / "opt-wheels", *local)
    staging = tmp_path / "staging"
    source, commands, _env = image.torch_wheel_plan(staging, {}, opt_wheels=opt)
    assert source == "PyTorch's CPU wheel index https://download.pytorch.org/whl/cpu"
    from_index, rest = commands
    assert from_index[from_index.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert "--no-deps" in from_index and pins(from_index) == ["torch==2.13.0+cpu"]
    # The dependencies from the configured index, torch from what the first command downloaded.
    assert "--index-url" not in rest and rest[rest.index("--find-links") + 1] == str(staging)
    assert pins(rest) == ["torch==2.13.0+cpu", f"numpy=={image.NUMPY_VERSION}"]
    for argv in commands:
        assert argv[1:4] == ["-m", "pip", "download"] and argv[argv.index("-d") + 1] == str(staging)
        assert argv[argv.index("--python-version") + 1] == "3.11" and "--only-binary=:all:" in argv


@pytest.mark.parametrize("local", [(CPU_WHEEL,), ()])
def test_no_command_could_take_a_cuda_build(tmp_path, local):
    """Every torch pin names the +cpu build: pip cannot take PyPI's 2.13.0 (the CUDA build) for it."""
    from packaging.requirements import Requirement
    _source, commands, _env = image.torch_wheel_plan(tmp_path / "s", {}, opt_wheels=wheel_dir(tmp_path / "o", *local))
    torch_pins = [Requirement(pin) for argv in commands for pin in pins(argv) if pin.startswith("torch")]
    assert torch_pins and all(not r.specifier.contains("2.13.0") and r.specifier.contains("2.13.0+cpu") for r in torch_pins)


@pytest.fixture
def fresh_machine(tmp_path, monkeypatch):
    """No local wheel directory, an empty cache: what a fresh Debian 12 machine with internet starts from."""
    monkeypatch.setattr(image, "LOCAL_WHEELS", tmp_path / "no-opt-wheels")
    monkeypatch.setattr(image, "CACHE_ROOT", tmp_path / "cache")
    monkeypatch.setattr(image, "WHEELS", tmp_path / "cache" / "wheels")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    (tmp_path / "cache").mkdir()
    return tmp_path


def test_build_wheels_says_where_torch_came_from(fresh_machine, monkeypatch, capsys):
    ran = []

    def fake_pip(argv, env=None, **_kw):
        ran.append(argv)
        if "--index-url" in argv:  # what PyTorch's CPU index would hand over
            wheel_dir(Path(argv[argv.index("-d") + 1]), CPU_WHEEL)

    monkeypatch.setattr(image, "run", fake_pip)
    wheels = image.build_wheels()
    assert (wheels / CPU_WHEEL).exists() and len(ran) == 2
    assert "collecting the torch CPU wheel from PyTorch's CPU wheel index https://download.pytorch.org/whl/cpu" in capsys.readouterr().err
    assert (wheels / ".gpufleet-complete").read_text() == "torch from PyTorch's CPU wheel index https://download.pytorch.org/whl/cpu\n"


def test_build_wheels_fails_naming_both_places_when_neither_has_it(fresh_machine, monkeypatch):
    def unreachable(argv, env=None, **_kw):
        raise RuntimeError(f"command failed (rc=1): {' '.join(argv)}\nstderr: ERROR: Could not find a version that "
                           "satisfies the requirement torch==2.13.0+cpu")

    monkeypatch.setattr(image, "run", unreachable)
    with pytest.raises(RuntimeError) as err:
        image.build_wheels()
    message = str(err.value)
    assert f"local wheel directories [none ({fresh_machine / 'no-opt-wheels'} is absent" in message
    assert "asked PyTorch's CPU wheel index https://download.pytorch.org/whl/cpu" in message
    assert "Could not find a version that satisfies the requirement torch==2.13.0+cpu" in message
    assert not image.WHEELS.exists()


def test_the_error_names_both_places_it_looked(tmp_path):
    opt = wheel_dir(tmp_path / "opt-wheels", CUDA_WHEEL)
    source, _commands, env = image.torch_wheel_plan(tmp_path / "staging", {}, opt_wheels=opt)
    error = str(image.not_collected(tmp_path / "staging", env, source, "pip failed: no route to host", opt_wheels=opt))
    assert f"Looked in the local wheel directories [{opt}] for torch-2.13.0+cpu-cp311-*.whl" in error
    assert "then asked PyTorch's CPU wheel index https://download.pytorch.org/whl/cpu" in error
    assert "pip failed: no route to host" in error

    nothing = str(image.not_collected(tmp_path / "staging", {}, source, "x", opt_wheels=tmp_path / "absent"))
    assert f"none ({tmp_path / 'absent'} is absent, PIP_FIND_LINKS names no local directory)" in nothing
