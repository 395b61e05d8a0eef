# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What each test tier depends on, as one content hash, and the record of the last full-tier pass.

One mechanism serves two uses:
- the fast tier's converged-image cache is keyed on the hash of everything that shapes a converged
  simulated node (a hit skips the first converge: its inputs did not change);
- `.ci/run` runs the full tier when the hash of what only the full tier covers differs from the one
  `tools/test.sh --full` recorded in FULL_TIER_RECORD when it last passed, so a change to a role is
  never landed untested.

The hash covers the files git would commit (tracked, plus untracked and not ignored) as they are in
the working tree: an uncommitted edit counts. Markdown files are left out: no run reads them. Outside a git checkout every file under the paths counts.

    python tests/tiers.py hash full          # the full tier's input hash
    python tests/tiers.py check-full         # exit 0 when the record matches, 1 (saying why) when not
    python tests/tiers.py record-full SECONDS   # after a passing full tier: write the record
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FULL_TIER_RECORD = REPO / "tests" / "full-tier-passed.json"

# What shapes a converged simulated node and the converge's own reports: the collection, the CLI
# that runs it, the simulator with its manifests, stand-ins and the captures they replay.
CONVERGE_INPUTS = ("roles", "plugins", "playbooks", "site.yml", "ansible.cfg", "meta", "galaxy.yml", "gpufleet",
                   "tests/sim", "tests/fixtures", "tests/integration/fleet.py")
# What the full tier runs that the fast tier does not: every molecule scenario, the OS matrix,
# driver upgrades and flavour switches, the simulator's own sanity. Its tests and everything they drive.
# (The CLI is left out: no full-tier test runs it; the fast tier converges through it on every run.)
FULL_INPUTS = ("roles", "plugins", "playbooks", "site.yml", "ansible.cfg", "meta", "galaxy.yml", "tests/sim",
               "tests/fixtures", "molecule", ".config/molecule", "tools/molecule.sh", "tests/full",
               "tests/simharness.py", "tests/molecule_scenarios.py")


def _files(paths: tuple[str, ...], root: Path) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths],
                             cwd=root, capture_output=True, check=True).stdout
        names = {n for n in out.decode().split("\0") if n}
    except (OSError, subprocess.CalledProcessError):
        names = {str(p.relative_to(root)) for path in paths for p in (root / path).rglob("*") if p.is_file()}
        names |= {path for path in paths if (root / path).is_file()}
    # A file git still lists but the working tree deleted is not an input any more. Markdown (a role's README,
    # a SOURCES.md beside the captures) is read by people, never by a run or a verdict: it is no input.
    return sorted(n for n in names if (root / n).is_file() and "__pycache__" not in n and not n.endswith(".md"))


def input_hash(paths: tuple[str, ...], extra: dict | None = None, root: Path = REPO) -> str:
    """sha256 over (path, content) of every input file, plus `extra` (versions, requests) as JSON."""
    digest = hashlib.sha256()
    for name in _files(paths, root):
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256((root / name).read_bytes()).digest())
    digest.update(json.dumps(extra or {}, sort_keys=True).encode())
    return digest.hexdigest()


def ansible_core_version() -> str:
    try:
        from ansible.release import __version__
    except ImportError:
        return "not installed"
    return __version__


def fleet_scope(nodeid: str) -> str:
    """xdist's work unit of a test: every test of the fast tier's fleet (tests/integration) is one unit,
    so one worker runs them all, in order, on the one fleet; every other test is a unit of its own."""
    return "fleet" if nodeid.startswith("tests/integration/") else nodeid


def run_rank(nodeid: str, markers) -> int:
    """Where a test goes in the run (a stable sort keeps file order within a rank): the fleet's tests first
    (one xdist unit, the longest chain), then those marked slow (20-85 s each), then torch (5-11 s), then the
    rest, so the last tests a worker takes are short ones. The full tier keeps its file order: its modules
    share clusters through module-scoped fixtures."""
    if fleet_scope(nodeid) == "fleet":
        return 0
    if nodeid.startswith("tests/full/"):
        return 3
    return 1 if "slow" in markers else 2 if "torch" in markers else 3


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:   # xdist is a test extra; without it a tier runs in one process
    fleet_scheduler = None
else:
    class fleet_scheduler(LoadScopeScheduling):  # noqa: N801 - called like the factory xdist asks for
        """xdist's scope scheduling with fleet_scope. (xdist's --dist loadgroup marks groups in node ids,
        which pytest 9 no longer lets a plugin change.)"""

        def _split_scope(self, nodeid: str) -> str:
            return fleet_scope(nodeid)


def full_tier_hash(root: Path = REPO) -> str:
    return input_hash(FULL_INPUTS, {"ansible-core": ansible_core_version()}, root)


def check_full(root: Path = REPO) -> tuple[bool, str]:
    """Whether the recorded full-tier pass covers the tree as it is, and why not."""
    record_file = root / FULL_TIER_RECORD.relative_to(REPO)
    try:
        record = json.loads(record_file.read_text())
    except FileNotFoundError:
        return False, f"{record_file.relative_to(root)} is missing: the full tier never passed on record"
    except json.JSONDecodeError as exc:
        return False, f"{record_file.relative_to(root)} is not JSON ({exc})"
    now = full_tier_hash(root)
    if record.get("inputs_sha256") != now:
        return False, (f"the full tier's inputs changed since it passed on {record.get('passed_at', '?')} "
                       f"(recorded {str(record.get('inputs_sha256'))[:12]}, now {now[:12]})")
    return True, f"the full tier passed on {record.get('passed_at', '?')} with these inputs ({now[:12]})"


def record_full(seconds: float, root: Path = REPO) -> dict:
    record = {"inputs_sha256": full_tier_hash(root), "passed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "seconds": round(seconds), "ansible_core": ansible_core_version(),
              "inputs": list(FULL_INPUTS)}
    (root / FULL_TIER_RECORD.relative_to(REPO)).write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str]) -> int:
    if argv[:2] == ["hash", "full"]:
        print(full_tier_hash())
        return 0
    if argv[:1] == ["check-full"]:
        ok, why = check_full()
        print(why)
        return 0 if ok else 1
    if argv[:1] == ["record-full"] and len(argv) == 2:
        print(json.dumps(record_full(float(argv[1]))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
