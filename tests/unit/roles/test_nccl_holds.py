"""The nccl role asks before it moves a hold an operator set on NCCL (issue 25, F17).

The role runs for real here (connection local, --check) with a stand-in dpkg-query first on PATH that
answers from a table, in dpkg-query's own formats: an operator held libnccl2 at another build. The first
run must stop before any package task, naming the package, the held version and nccl_allow_replace; a
hold gpufleet recorded moves with the plan; nccl_allow_replace lets the run go on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
PLANNED = "2.18.3-1+cuda12.2"
HELD = "2.18.1-1+cuda12.1"
DPKG_QUERY = f"""#!{sys.executable}
# dpkg-query -W -f=FORMAT [--] NAME...: answers from the table in $GPUFLEET_TEST_DPKG (name, version, status).
import json, os, sys
table = json.load(open(os.environ["GPUFLEET_TEST_DPKG"]))
fmt = next(a[3:] for a in sys.argv if a.startswith("-f="))
names = [a for a in sys.argv[1:] if not a.startswith("-")]
missing = 0
for name in names:
    if name not in table:
        print("dpkg-query: no packages found matching " + name, file=sys.stderr)
        missing = 1
        continue
    version, status = table[name]
    out = fmt.replace("${{Package}}", name).replace("${{Version}}", version).replace("${{db:Status-Abbrev}}", status)
    sys.stdout.write(out.replace("\\\\t", "\\t").replace("\\\\n", "\\n"))
sys.exit(missing)
"""
STOP = "TASK [gpufleet.cluster.nccl : Stop before moving a hold that gpufleet did not set]"


def run_role(tmp_path: Path, table: dict, **role_vars) -> subprocess.CompletedProcess:
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "dpkg-query").write_text(DPKG_QUERY)
    (tools / "dpkg-query").chmod(0o755)
    (tmp_path / "dpkg.json").write_text(json.dumps(table))
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: gpufleet.cluster.nccl\n")
    extra = {"nccl_version_string": PLANNED, "__nccl_hold_record": str(tmp_path / "nccl-holds.json"),
             "ansible_python_interpreter": sys.executable, **role_vars}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), PATH=f"{tools}:{BIN}:{os.environ['PATH']}",
               GPUFLEET_TEST_DPKG=str(tmp_path / "dpkg.json"))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check", str(play),
                           "-e", json.dumps(extra)], capture_output=True, text=True, cwd=REPO, env=env,
                          check=False, timeout=600)
    proc.out = proc.stdout + proc.stderr
    return proc


def test_an_operator_hold_on_another_build_stops_the_first_run_naming_package_version_and_knob(tmp_path):
    result = run_role(tmp_path, {"libnccl2": [HELD, "hi "], "libnccl-dev": [HELD, "ii "]})
    assert result.returncode != 0
    said = " ".join(result.out.split())
    assert (f"NCCL is kept off the plan's {PLANNED} by a hold gpufleet did not set: "
            f"libnccl2 dpkg hold at {HELD} (dpkg selection). Nothing was changed. "
            "Set nccl_allow_replace: true") in said, result.out[-3000:]
    assert "TASK [gpufleet.cluster.nccl : Install NCCL at the planned version]" not in result.out


def test_a_hold_gpufleet_recorded_moves_with_the_plan(tmp_path):
    (tmp_path / "nccl-holds.json").write_text(json.dumps({"libnccl2": HELD, "libnccl-dev": HELD}))
    result = run_role(tmp_path, {"libnccl2": [HELD, "hi "], "libnccl-dev": [HELD, "hi "]})
    assert result.returncode == 0, result.out[-3000:]
    assert result.out.split(STOP)[1].split("TASK [")[0].strip(" *\n").startswith("skipping: [localhost]")


def test_nccl_allow_replace_lets_the_run_move_the_operator_hold(tmp_path):
    result = run_role(tmp_path, {"libnccl2": [HELD, "hi "], "libnccl-dev": [HELD, "ii "]}, nccl_allow_replace=True)
    assert result.returncode == 0, result.out[-3000:]
    assert result.out.split(STOP)[1].split("TASK [")[0].strip(" *\n").startswith("skipping: [localhost]")
