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
    assert "CUDA 12.5 (installs 12.5.1) no CUDA of the default range" in text
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


# ---------------------------------------------------------------- from an inventory and a facts cache


def write_inventory(tmp_path, host_requests, facts):
    """gpu_nodes with a group request ({torch: none}) and per-host requests; a jsonfile fact cache."""
    hosts = {h: ({"gpufleet_stack_request": r} if r else {}) for h, r in host_requests.items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"gpu_nodes": {
        "hosts": hosts, "vars": {"gpufleet_stack_request": {"cuda": "13.0", "torch": "none"}}}}}}))
    cache = tmp_path / "facts"
    cache.mkdir()
    for host, (distribution, version) in facts.items():
        (cache / host).write_text(json.dumps({
            "ansible_distribution": distribution, "ansible_distribution_version": version,
            "ansible_distribution_major_version": version.split(".")[0],
            "ansible_os_family": "Debian" if distribution in ("Ubuntu", "Debian") else "RedHat",
            "ansible_architecture": "x86_64"}))
    return inventory, cache


def test_the_plan_per_group_of_an_inventory_and_its_facts_cache(tmp_path, capsys):
    inventory, cache = write_inventory(
        tmp_path, {"gpu-a": None, "gpu-b": None, "gpu-c": {"cuda": "12.4", "torch": "2.6.0"}},
        {"gpu-a": ("Ubuntu", "24.04"), "gpu-b": ("Ubuntu", "24.04"), "gpu-c": ("Rocky", "9.4")})
    code = cli.main(["plan", "-i", str(inventory), "--facts-cache", str(cache), "--gpu", H100, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    groups = {g["name"]: g for g in json.loads(out)["groups"]}
    assert set(groups) == {"2 hosts: gpu-a, gpu-b", "1 host: gpu-c"}
    ab, c = groups["2 hosts: gpu-a, gpu-b"]["plan"], groups["1 host: gpu-c"]["plan"]
    assert (ab["os"], ab["cuda_version"], ab["torch"]) == ("ubuntu24.04", "13.0", None)
    assert (c["os"], c["cuda_version"], c["torch"]["version"], c["python"]["python"]) == ("rhel9", "12.4", "2.6.0", "3.9")


def test_an_inventory_host_whose_torch_misses_its_python_is_refused(tmp_path, capsys):
    inventory, cache = write_inventory(tmp_path, {"gpu-a": {"torch": "2.1.2"}}, {"gpu-a": ("Ubuntu", "24.04")})
    code = cli.main(["plan", "-i", str(inventory), "--facts-cache", str(cache), "--gpu", H100])
    _out, err = capsys.readouterr()
    assert code == 2
    assert "1 host: gpu-a: refused" in err and "no wheel for Python 3.12" in " ".join(err.split())


def test_a_host_missing_from_the_facts_cache_is_named(tmp_path, capsys):
    inventory, cache = write_inventory(tmp_path, {"gpu-a": None}, {})
    code = cli.main(["plan", "-i", str(inventory), "--facts-cache", str(cache), "--gpu", H100])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "no readable fact cache entry for gpu-a" in err and "or give --os" in err


def test_without_an_os_nor_an_inventory_the_command_says_what_is_needed(capsys):
    assert cli.main(["plan", "--gpu", H100]) == 2
    assert "--os is needed (or -i INVENTORY with --facts-cache DIR)" in capsys.readouterr().err


def test_a_preflight_runs_plan_is_shown_as_this_table_and_nothing_else_is(tmp_path, capsys):
    """What `gpufleet run preflight` prints after its summary (issue 34): the plan.json the run wrote, as the plan
    command shows it; a refused plan ({"error": ...}), another stage (no file) or a broken file shows nothing."""
    from gpufleet import plan as plan_mod
    assert cli.main(["plan", "--os", "ubuntu22.04", "--gpu", H100, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    written = document["groups"][0]["plan"]
    (tmp_path / "plan.json").write_text(json.dumps(written))
    text = plan_mod.plan_from_reports(tmp_path)
    assert text and "the plan (reports/plan.json)" in text and " CUDA " in " " + text
    assert max(len(line) for line in text.splitlines()) <= 80
    for content in ('{"error": "[UNKNOWN_CUDA] ..."}', "not json", "[]", '{"cuda_version": "12.2"}'):
        (tmp_path / "plan.json").write_text(content)
        assert plan_mod.plan_from_reports(tmp_path) is None, content
    assert plan_mod.plan_from_reports(tmp_path / "absent") is None


def test_a_misspelt_request_key_is_refused_with_the_nearest_not_planned_around(tmp_path, capsys):
    """`gpufleet plan -i` checks each host's request as `gpufleet run` does (issue 34): {torh: 2.3.0} once
    planned the default torch with a warning and exited 0."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text('all:\n  children:\n    gpu_nodes:\n      hosts:\n        n1:\n'
                         '          gpufleet_stack_request: {torh: "2.3.0"}\n')
    code = cli.main(["plan", "-i", str(inventory), "--os", "ubuntu22.04", "--gpu", H100])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "[UNKNOWN_REQUEST_KEY]" in err and "did you mean 'torch'?" in " ".join(err.split()), err


def test_a_host_outside_the_one_os_list_is_refused_at_plan_time_with_the_list(tmp_path, capsys):
    # issue 37: AlmaLinux and RHEL 8 are not planned as rhel (the stack roles would refuse them on the node).
    inventory, cache = write_inventory(tmp_path, {"gpu-a": None, "gpu-b": None},
                                       {"gpu-a": ("AlmaLinux", "9.4"), "gpu-b": ("RedHat", "8.10")})
    code = cli.main(["plan", "-i", str(inventory), "--facts-cache", str(cache), "--gpu", H100])
    _out, err = capsys.readouterr()
    assert code == 2
    text = " ".join(err.split())
    assert "[UNSUPPORTED_OS]" in text and "almalinux9" in text and "python3 is 3.6" in text
    assert "rhel9 (RHEL 9 / Rocky Linux 9)" in text
