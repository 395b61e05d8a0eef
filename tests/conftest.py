"""Shared test setup: import paths for the collection and the markers' skip rules."""

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Ansible's and molecule's own state (tmp, ssh control sockets, molecule's copy of the collection) stays
# in the clone, never under the user's home, however pytest was started (tools/test.sh sets the same).
os.environ.setdefault("ANSIBLE_HOME", str(REPO / ".ansible"))

# `ansible_collections.gpufleet.cluster.*` resolves through the committed self-link.
# tests/ too: every test file imports `from fixtures_path import FIXTURES` without a path preamble of its own.
for path in (REPO / "collections", REPO, REPO / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# Ansible's own collection finder, installed first and pointed at the self-link: a test that loads
# Ansible's plugin machinery (Templar, the plugin loader) would otherwise install one without our
# path, and every later `ansible_collections.gpufleet.cluster` import would fail with
# "collection metadata was not loaded" depending on test order.
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder  # noqa: E402

_AnsibleCollectionFinder(paths=[str(REPO / "collections")], scan_sys_paths=False)._install()  # pylint: disable=protected-access


# Ansible refuses a non-blocking stdin ("requires blocking IO"); no test reads stdin, so every
# child gets /dev/null whatever the shell that started pytest handed over.
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)


from tiers import fleet_scheduler, run_rank  # noqa: E402  (tests/ is on sys.path from here on)

if fleet_scheduler is not None:
    def pytest_xdist_make_scheduler(config, log):
        """Under xdist every fleet test goes to one worker (tiers.fleet_scheduler)."""
        return fleet_scheduler(config, log)


@pytest.fixture(autouse=True)
def _fresh_blocking_stdin():
    """Each test starts with a /dev/null of its own on fd 0, blocking. A child that makes its inherited
    stdin non-blocking (ssh does) and is killed before it restores it (a timeout) would otherwise leave
    every later ansible-playbook of this process refusing to start ("requires blocking IO")."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.set_blocking(0, True)
    yield


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Skips, with the reason, what this machine cannot run (never silently), then orders the run: the longest
    tests first, so no worker is left with one at the end while the other idles. The fleet's tests (one xdist
    work unit) lead, in the phase order tests/integration/conftest.py gave them (this hook runs after it); then
    the tests marked slow (ansible-test sanity, a fresh venv, the tests/gpu CPU paths: 20-85 s each), those
    marked torch (the CPU smoke jobs, 5-11 s); then the rest, in file order (the full tier's tests keep theirs).
    In the CI run before this order, ansible-test sanity (84 s) and the two tests/gpu CPU paths (52 s) ran
    last, and one worker finished 49 s after the other."""
    sim_reason = None
    if os.geteuid() != 0:
        sim_reason = "the simulated cluster needs root (network namespaces, mounts, systemd-nspawn)"
    elif not shutil.which("systemd-nspawn") or not shutil.which("debootstrap"):
        sim_reason = "the simulated cluster needs systemd-nspawn and debootstrap (run tools/setup.sh as root)"
    try:
        import torch  # noqa: F401
        torch_reason = None
    except ImportError:
        torch_reason = "torch is not installed in this venv (tools/setup.sh installs the CPU build)"
    for item in items:
        if sim_reason and "sim" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=sim_reason))
        if torch_reason and "torch" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=torch_reason))
    items.sort(key=lambda item: run_rank(item.nodeid, item.keywords))
