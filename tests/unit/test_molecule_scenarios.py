"""The molecule scenarios' static contract, checked without a simulated cluster.

Each scenario brings up its own simulated cluster; two with the same name or subnet would tear
each other down, and one outside 10.200.10-19 could collide with the pytest factory's clusters.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from molecule_scenarios import scenario_dirs, sim_request

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = scenario_dirs()
BASE = yaml.safe_load((REPO / ".config" / "molecule" / "config.yml").read_text())


def test_the_issue_s_scenarios_exist():
    assert {"default", "stack", "fabric", "health", "smoke"} <= {s.name for s in SCENARIOS}


def test_every_scenario_runs_the_full_sequence():
    sequence = BASE["scenario"]["test_sequence"]
    assert sequence[0] == "destroy" and sequence[-1] == "destroy"
    order = [step for step in sequence if step in ("syntax", "create", "converge", "idempotence", "check", "verify")]
    assert order == ["syntax", "create", "converge", "idempotence", "check", "verify"]
    for scenario in SCENARIOS:
        assert "scenario" not in yaml.safe_load((scenario / "molecule.yml").read_text()), scenario.name


def test_clusters_have_their_own_names_and_subnets_in_10_200_10_to_19():
    requests = [sim_request(s) for s in SCENARIOS]
    assert len({r["name"] for r in requests}) == len(requests)
    assert len({r["subnet"] for r in requests}) == len(requests)
    for request in requests:
        subnet = ipaddress.ip_network(request["subnet"])
        assert subnet.prefixlen == 24 and 10 <= subnet.network_address.packed[2] <= 19, request
        assert request["name"].startswith("mol-"), request


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_converge_leaves_the_fresh_node_to_the_check_step(scenario):
    config = yaml.safe_load((scenario / "molecule.yml").read_text())
    converge = scenario / config.get("ansible", {}).get("playbooks", {}).get("converge", "converge.yml")
    text = converge.read_text()
    assert "'molecule_fresh' if ansible_check_mode else 'gpu_nodes:!molecule_fresh'" in text
    assert sim_request(scenario)["nodes"] >= 2
