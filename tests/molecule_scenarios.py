"""The molecule scenarios' simulated-cluster requests, read one way for the unit and integration tests."""

from __future__ import annotations

from pathlib import Path

import yaml

MOLECULE = Path(__file__).resolve().parents[1] / "molecule"


def scenario_dirs() -> list[Path]:
    return sorted(p.parent for p in MOLECULE.glob("*/molecule.yml"))


def sim_request(scenario: str | Path) -> dict:
    """What the scenario asks the simulated cluster for (molecule_sim: name, subnet, nodes, profile ...)."""
    path = scenario if isinstance(scenario, Path) else MOLECULE / scenario
    config = yaml.safe_load((path / "molecule.yml").read_text())
    return config["provisioner"]["inventory"]["group_vars"]["all"]["molecule_sim"]
