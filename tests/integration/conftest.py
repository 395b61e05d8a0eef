"""Simulated-cluster fixtures for the integration tests.

`sim_cluster` (session): 3 nodes, hgx-h100, no driver installed, name `itest`,
subnet 10.200.0.0/24: brought up once, always torn down. Treat it as shared:
do not change what other tests rely on (install packages in a cluster of your own).
`sim_cluster_factory`: more named clusters with their own options (preinstall,
profiles, faults); each gets a free subnet and is always torn down.
Tests that use them are marked `@pytest.mark.sim`; they skip, saying why, when
not root or when systemd-nspawn is missing.
"""

from __future__ import annotations

import pytest

from simharness import SimCluster, bring_up, cluster, free_subnet, sim_skip_reason, tear_down


def pytest_collection_modifyitems(config, items):
    reason = sim_skip_reason()
    if reason is None:
        return
    for item in items:
        if "sim" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def sim_cluster():
    with cluster("itest", 3, subnet="10.200.0.0/24", profile=["hgx-h100"]) as running:
        yield running


@pytest.fixture
def sim_cluster_factory():
    """Call factory(name, nodes=2, profile=[...], preinstall=[...], faults=[...], os="ubuntu22.04") -> SimCluster."""
    reason = sim_skip_reason()
    if reason:
        pytest.skip(reason)
    created: list[str] = []

    def factory(name: str, nodes: int = 2, **options) -> SimCluster:
        subnet = options.pop("subnet", None) or free_subnet()
        created.append(name)
        return bring_up(name, subnet, nodes, **options)

    try:
        yield factory
    finally:
        for name in created:
            tear_down(name)
