"""The pytorch role's inputs never reach a shell, and its wheels can be pinned by hash.

The role runs for real here (connection local, --check) with a package name that carries a shell
command: it must be refused before anything runs, and the command must not run. The pip command
line is rendered from the role's own variables, the way Ansible loads them, to show what reaches pip
for a lock file, a wheel directory and an index with a token in its URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "pytorch"
BIN = Path(sys.executable).parent
FACTS = {"distribution": "Debian", "distribution_version": "12.5", "distribution_major_version": "12",
         "os_family": "Debian"}

init_plugin_loader()
LOADER = DataLoader()


def run_role(tmp_path: Path, **role_vars) -> subprocess.CompletedProcess:
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: gpufleet.cluster.pytorch\n")
    extra = {"pytorch_version": "2.13.0", "pytorch_variant": "cpu", "pytorch_wheel_dir": str(tmp_path / "wheels"),
             "pytorch_venv": str(tmp_path / "venv"), "pytorch_verify_gpu": False,
             "ansible_python_interpreter": sys.executable, **role_vars}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check", str(play),
                           "-e", json.dumps(extra)], capture_output=True, text=True, cwd=REPO, env=env,
                          check=False, timeout=600)
    proc.out = proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("package", ["numpy;touch${IFS}%s", "numpy $(touch %s)", "numpy==1.0|touch %s"])
def test_a_package_name_that_carries_a_command_is_refused_before_anything_runs(tmp_path, package):
    pwned = tmp_path / "pwned"
    result = run_role(tmp_path, pytorch_extra_packages=[package % pwned])
    assert not pwned.exists(), "a role variable reached a shell"
    assert result.returncode != 0
    said = " ".join(result.out.split())
    assert f"pytorch_extra_packages holds {json.dumps(package % pwned)}" in said, result.out[-3000:]
    assert "which is not a PEP 508 requirement without markers or URLs" in said
    assert "TASK [gpufleet.cluster.pytorch : Read which torch packages the environment holds]" not in result.out


def role_vars(**extra) -> dict:
    """defaults < vars/main < os_family < distribution_major, as tasks/set_vars.yml loads them."""
    out = dict(LOADER.load_from_file(str(ROLE / "defaults/main.yml"), trusted_as_template=True))
    for name in ("main", FACTS["os_family"], f"{FACTS['distribution']}_{FACTS['distribution_major_version']}"):
        path = ROLE / "vars" / f"{name}.yml"
        if path.is_file():
            out.update(LOADER.load_from_file(str(path), trusted_as_template=True))
    out.update({"ansible_facts": FACTS, "inventory_hostname": "gpu-a01", "pytorch_version": "2.1.2",
                "pytorch_variant": "cu121", "pytorch_torchvision_version": "0.16.2", **extra})
    return out


def render(name: str, **extra):
    variables = role_vars(**extra)
    return Templar(loader=LOADER, variables=variables).template(variables[name])


LOCK = """# pip-compile --generate-hashes
numpy==1.26.4 \\
    --hash=sha256:2a02aba9ed12e4ac4eb3ea9421c420301a0c6460d9830d74a9df87efa4912010
torch==2.1.2+cu121 \\
    --hash=sha256:b2184b7729ef3b9b10065c074a37c1e603fd99f91e38376e25cb7ed6e1d54696
torchvision==0.16.2+cu121 \\
    --hash=sha256:baa7970c6b5437312e5dd0bd0f2571a20b786c3e285bafc0d7b9d1ac1e4a1ef2
"""


def test_with_a_lock_file_pip_installs_only_what_it_pins_and_checks_every_hash(tmp_path):
    lock = tmp_path / "plan.lock"
    lock.write_text(LOCK)
    assert render("__pytorch_lock_missing", pytorch_requirements_lock=str(lock)) == []
    argv = render("__pytorch_pip_argv", pytorch_requirements_lock=str(lock))
    assert argv == ["/opt/gpufleet/venv/bin/pip", "install", "--disable-pip-version-check", "--no-input",
                    "--require-hashes", "-r", "/opt/gpufleet/venv/gpufleet-requirements.lock"]


def test_a_lock_file_that_does_not_pin_the_plan_is_named(tmp_path):
    lock = tmp_path / "plan.lock"
    lock.write_text(LOCK.replace("torch==2.1.2+cu121", "torch==2.2.0+cu121"))
    assert render("__pytorch_lock_missing", pytorch_requirements_lock=str(lock)) == ["torch==2.1.2+cu121"]


def test_without_a_lock_numpy_is_pinned_and_the_index_url_stays_off_the_command_line():
    token_url = "https://ghp_s3cr3tT0ken@pypi.example.com/simple/"
    argv = render("__pytorch_pip_argv", pytorch_index_url=token_url)
    assert argv[4:] == ["torch==2.1.2+cu121", "torchvision==0.16.2+cu121", "numpy==1.26.4"]
    assert not [word for word in argv if "s3cr3t" in word]
    assert render("__pytorch_pip_env", pytorch_index_url=token_url) == {"PIP_INDEX_URL": token_url}


def test_an_http_index_the_operator_named_is_trusted_by_its_host_and_https_is_not_touched():
    """pip ignores a plain-http index ("not a trusted or secure host") unless told: a mirror on the
    cluster's own network (gpufleet mirror serves http) must work, and only its host is trusted."""
    mirror = "http://10.200.20.1:8765/wheels/simple/"
    assert render("__pytorch_pip_env", pytorch_index_url=mirror) == {"PIP_INDEX_URL": mirror,
                                                                     "PIP_TRUSTED_HOST": "10.200.20.1"}
    assert "PIP_TRUSTED_HOST" not in render("__pytorch_pip_env", pytorch_index_url="https://pypi.example.com/simple/")
    assert render("__pytorch_pip_env", pytorch_index_url=mirror, pytorch_wheel_dir="/srv/wheels") == {}


def test_a_wheel_directory_is_one_argv_word_even_with_a_space():
    argv = render("__pytorch_pip_argv", pytorch_wheel_dir="/srv/wheel dir", pytorch_numpy_version="2.4.6",
                  pytorch_extra_packages=["pyyaml>=6,<7"])
    assert argv[4:] == ["--no-index", "--find-links", "/srv/wheel dir", "torch==2.1.2+cu121",
                        "torchvision==0.16.2+cu121", "numpy==2.4.6", "pyyaml>=6,<7"]


def pip_runs(held: dict, **extra) -> bool:
    """The pip task's own `when`, templated with its own vars over a probe that found `held` ({name: version})."""
    tasks = LOADER.load_from_file(str(ROLE / "tasks/main.yml"), trusted_as_template=True)
    task = next(t for t in tasks if t.get("name") == "Install torch at the planned versions")
    variables = {**role_vars(**extra), **task["vars"],
                 "__pytorch_held": {"rc": 0, "stdout_lines": [json.dumps({"packages": held})]},
                 "__pytorch_lock_copy": {"changed": False, "skipped": True},
                 "__pytorch_mirror_lock_fetch": {"changed": False, "skipped": True}, **extra}
    return Templar(loader=LOADER, variables=variables).template(trust_as_template("{{ (%s) | bool }}" % task["when"]))


CONVERGED = {"torch": "2.1.2+cu121", "torchvision": "0.16.2+cu121", "torchaudio": None, "numpy": "1.26.4"}


@pytest.mark.parametrize("held, extra, runs", [
    (CONVERGED, {}, False),
    ({**CONVERGED, "torch": "2.1.2+cu118"}, {}, True),
    ({**CONVERGED, "numpy": None}, {}, True),
    # Pins are PEP 440 versions, as pip reads them: a converged node does not run pip again.
    (CONVERGED, {"pytorch_numpy_version": "1.26.04"}, False),
    ({**CONVERGED, "requests": "2.32.3"}, {"pytorch_extra_packages": ["requests[socks]==2.32.3"]}, False),
    ({**CONVERGED, "PyYAML": "6.0.1"}, {"pytorch_extra_packages": ["PyYAML==6.0.1"]}, False),
    ({**CONVERGED, "requests": "2.31.0"}, {"pytorch_extra_packages": ["requests[socks]==2.32.3"]}, True),
    ({**CONVERGED, "pyyaml": None}, {"pytorch_extra_packages": ["pyyaml>=6,<7"]}, True),
])
def test_pip_runs_only_when_a_pin_is_not_met(held, extra, runs):
    assert pip_runs(held, **extra) is runs


def test_a_plan_without_torch_runs_nothing_of_the_role(tmp_path):
    """torch: none (issue 34): the role gets no version and installs nothing; it says so and ends before its
    request check (which would refuse an empty version) and before any probe or pip."""
    result = run_role(tmp_path, pytorch_version="", pytorch_variant="", pytorch_wheel_dir="")
    assert result.returncode == 0, result.out[-3000:]
    assert "PyTorch not requested (no torch in the plan); nothing installed" in result.out
    assert "Check the PyTorch request" not in result.out
    assert "Read which torch packages the environment holds" not in result.out
    assert not (tmp_path / "venv").exists()
