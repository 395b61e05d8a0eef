"""`gpufleet plan` (issue 34): the stack plan and the reason for each choice, from --os/--gpu with no node,
readable in 80 columns, --json for machines; a refused request exits 2 with its rule and what works."""

from __future__ import annotations

import json

import pytest

from gpufleet import cli

H100 = "NVIDIA H100 80GB HBM3"


def plan(capsys, *args):
    code = cli.main(["plan", "--os", "ubuntu24.04", "--gpu", H100, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_plan_names_each_choice_and_why_in_80_columns(capsys):
    code, out, err = plan(capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    text = " ".join(out.split())
    assert "CUDA 12.5 (installs 12.5.1) no CUDA of the mission range" in text
    assert "driver R595 " in text and "the newest supported long-term or production branch" in text
    assert "torch 2.14.0 (wheel cu126) not named; torch 2.14.0, the newest release with a wheel for CUDA 12" in text
    assert "variant cu126 the oldest wheel of CUDA 12 above the toolkit's 12.5" in text
    assert "Python 3.12 the python3 of ubuntu24.04 (https://packages.ubuntu.com/noble/python3)" in text
    assert "not taken torch 2.15.0: no wheel for CUDA 12 and these GPUs" in text
    assert "not taken driver branch R620: not seen in NVIDIA's ubuntu2404 repository" in text


def test_a_torch_without_a_wheel_for_the_os_python_exits_2_naming_it(capsys):
    code, out, err = plan(capsys, "--torch", "2.1.2")
    assert code == 2 and out == ""
    text = " ".join(err.split())
    assert "[TORCH_NO_WHEEL_FOR_PYTHON] torch 2.1.2 has no wheel for Python 3.12, the python3 of ubuntu24.04" in text
    assert "Requests that work: torch 2.14.0, 2.13.0, 2.12.1, 2.12.0, 2.11.0, 2.10.0 (releases that install there with CUDA 12.5); or torch: none." in text
    assert max(len(line) for line in err.splitlines()) <= 80


def test_torch_none_plans_no_pytorch_and_says_so(capsys):
    code, out, _err = plan(capsys, "--cuda", "13.0", "--torch", "none")
    assert code == 0
    text = " ".join(out.split())
    assert "torch none not requested (torch: none): no PyTorch is installed" in text
    assert "CUDA 13.0 (installs 13.0.2) named in the request" in text


def test_named_choices_are_said_to_be_named(capsys):
    code, out, _err = plan(capsys, "--cuda", "12.8", "--torch", "2.7.0", "--driver-branch", "580", "--gpu-count", "8",
                           "--nvswitch")
    assert code == 0
    text = " ".join(out.split())
    assert "8× NVIDIA H100 80GB HBM3 on ubuntu24.04" in text
    assert "driver R580 " in text and "torch 2.7.0 (wheel cu128) named in the request" in text


def test_json_is_the_plan_document(capsys):
    code, out, _err = plan(capsys, "--cuda", "13.0", "--json")
    assert code == 0
    groups = json.loads(out)["groups"]
    assert groups[0]["request"] == {"os": "ubuntu24.04", "arch": "x86_64", "gpus": [H100], "cuda": "13.0"}
    document = groups[0]["plan"]
    assert document["cuda_version"] == "13.0" and document["torch"]["variant"].startswith("cu13")
    assert document["python"]["python"] == "3.12" and document["reasons"]["torch"].startswith("not named")


def test_json_carries_a_refusal_and_exits_2(capsys):
    code, out, _err = plan(capsys, "--torch", "2.1.2", "--json")
    assert code == 2
    refused = json.loads(out)["groups"][0]["refused"]
    assert refused["rule"] == "TORCH_NO_WHEEL_FOR_PYTHON" and refused["alternatives"]


def test_the_command_is_listed_in_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "plan" in capsys.readouterr().out
