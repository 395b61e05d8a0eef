# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""tools/test.sh's EXIT trap, run the way the script runs it (set -euo pipefail, the static checks as a background
job that has finished by the end): the script's exit status must be the one it exits with. A trap command that
failed (pkill finding no process) once made every finished run exit 1 whatever pytest said, and .ci/run stop."""

import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "test.sh"


def _trap_line() -> str:
    (line,) = [line for line in SCRIPT.read_text().splitlines() if re.match(r"trap '.*' EXIT$", line)]
    return line


@pytest.mark.parametrize("status", [0, 1, 5])
def test_the_exit_trap_keeps_the_scripts_exit_status_and_removes_the_log(tmp_path, status):
    log = tmp_path / "static.log"
    log.write_text("checks\n")
    script = "\n".join(["set -euo pipefail", "(sleep 0.1) & static_pid=$!", f"static_log={log}", _trap_line(),
                        'wait "$static_pid"', f"exit {status}"])
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == status, proc.stderr
    assert not log.exists()
