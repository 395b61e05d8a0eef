"""The fast tier's simulated-cluster tests: one shared fleet (tests/integration/fleet.py).

`fleet` (session): brought up and converged once, torn down at the end (and what it left is checked).
Tests run in phases, whatever their file names: first those that judge the converge itself (marked
`converge_judge`: skipped on a cached image, and the image is kept only when they all passed), then
those that read the converged nodes without changing them, then check mode on the fresh node, then the
fault tests (each injects, judges and clears).
Tests here are marked `sim`; they skip, saying why, when not root or when systemd-nspawn is missing.
"""

from __future__ import annotations

import pytest

import fleet as fleet_lib
from simharness import sim_skip_reason

# Phase of each module (default: faults, last). Lower runs first; pytest keeps file order within a phase.
PHASES = {"test_converge": 0, "test_idempotence": 1, "test_verify": 1, "test_cluster_sanity": 1,
          "test_check_mode": 2}
FAULT_PHASE = 3

_FLEET: dict = {}


def pytest_collection_modifyitems(config, items):
    reason = sim_skip_reason()
    for item in items:
        if not item.fspath.dirname.endswith("integration"):
            continue
        if reason and "sim" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))
    # The fleet's tests first, in phase order: under xdist they are one work unit (tests/conftest.py),
    # handed out first, so the fleet starts at once on one worker and the unit tests fill the rest.
    items.sort(key=lambda item: PHASES.get(item.module.__name__.rsplit(".", 1)[-1], FAULT_PHASE)
               if item.fspath.dirname.endswith("integration") else FAULT_PHASE + 1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    converge = _FLEET.get("fleet") and _FLEET["fleet"].converge
    if converge and "converge_judge" in item.keywords and report.when == "call":
        if report.failed:
            converge.judged_ok = False
        elif report.passed and converge.judged_ok is None:
            converge.judged_ok = True


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    reason = sim_skip_reason()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("fleet")
    try:
        _FLEET["fleet"] = fleet_lib.provide(workdir)
    except BaseException:
        fleet_lib.release(None)
        raise
    yield _FLEET["fleet"]
    print("\n[fleet] " + fleet_lib.promote_if_judged(_FLEET["fleet"].converge))
    left = fleet_lib.release(_FLEET["fleet"])
    assert left == [], f"the fleet left these behind: {left}"


@pytest.fixture
def converge(fleet):
    """The first converge, for the tests that judge it: skipped when the fleet came from a cached image."""
    c = fleet.converge
    if c.from_cache:
        pytest.skip(f"converged image cache hit (key {c.key[:12]}, converged and judged on "
                    f"{c.image_meta.get('converged_at')}): its inputs did not change")
    return c
