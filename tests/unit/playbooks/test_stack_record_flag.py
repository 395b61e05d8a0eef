"""The skip decision has one name (issue 26): the stack_record probe's `converged`, registered as
stack_record, read as `stack_record.converged` wherever the playbooks decide on it. The three names it had
(gpu_stack_converged_now, gpu_stack_converged, gpu_stack_skipped) and the reboot role's input for it are gone."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RETIRED = ("gpu_stack_converged", "gpu_stack_skipped", "gpu_stack_state", "reboot_requests_clear_dirs",
           "gpu_stack_key_gpufleet_vars", "gpu_stack_role_outputs", "role_digest")


def tree_text(*folders: str) -> dict[Path, str]:
    out = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".py", ".md", ".j2") and path != Path(__file__):
                out[path] = path.read_text(encoding="utf-8")
    return out


def test_the_retired_names_of_the_flag_are_nowhere():
    texts = tree_text("playbooks", "roles", "plugins", "docs", "tests/unit", "tests/integration", "tests/full",
                      "benchmarks")
    texts[REPO / "README.md"] = (REPO / "README.md").read_text(encoding="utf-8")
    found = [(str(path.relative_to(REPO)), name) for path, text in texts.items() for name in RETIRED
             if re.search(r"\b%s\b" % name, text)]
    assert found == []


def test_every_decision_on_the_record_in_the_playbooks_reads_one_name():
    uses = []
    for path, text in tree_text("playbooks").items():
        uses += [(path.name, line.strip()) for line in text.splitlines()
                 if re.search(r"\bconverged\b", line) and not line.strip().startswith("#") and "name:" not in line]
    assert uses, "the stack playbook decides on the record somewhere"
    for where, line in uses:
        assert re.search(r"\bstack_record\.converged\b", line), (where, line)
        assert not re.search(r"(?<!stack_record\.)\bconverged\b", line), (where, line)
