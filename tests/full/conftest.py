"""The full tier (tools/test.sh --full): every molecule scenario, the OS matrix, driver upgrades and
flavour switches, hardware variants, and the simulator's own sanity, each on a cluster of its own.

`sim_cluster_factory`: named clusters with their own options (preinstall, profiles, faults, captures);
each gets a free subnet in 10.200.20-99 and is always torn down. Every test here is marked `full` and
`sim`; it skips, saying why, when not root or when systemd-nspawn is missing.
"""

from __future__ import annotations

import pytest

from simharness import SimCluster, bring_up, free_subnet, sim_skip_reason, tear_down


def pytest_collection_modifyitems(config, items):
    reason = sim_skip_reason()
    for item in items:
        if item.fspath.dirname.endswith("full"):
            item.add_marker(pytest.mark.full)
            item.add_marker(pytest.mark.sim)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def sim_cluster_factory():
    """Call factory(name, nodes=2, profile=[...], preinstall=[...], faults=[...], os="ubuntu22.04") -> SimCluster."""
    reason = sim_skip_reason()
    if reason:
        pytest.skip(reason)
    created: list[str] = []

    def factory(name: str, nodes: int = 2, **options) -> SimCluster:
        created.append(name)
        return bring_up(name, free_subnet(), nodes, **options)

    try:
        yield factory
    finally:
        for name in created:
            tear_down(name)
