# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The fast tier's one simulated cluster: brought up once per test run, converged once through
`gpufleet run site`, then judged, checked and faulted by the tests beside this file.

Four Ubuntu 22.04 HGX H100 nodes: node1-3 are converged (inventory group `converged`), node4 stays
bare for check mode (group `molecule_fresh`, the name molecule default's verify playbook uses).

The converged nodes are cached as an image: their overlay upper layers and the converge's artifacts,
keyed on a hash of everything that shapes them (tests/tiers.py CONVERGE_INPUTS, ansible-core's version,
the request and the repository key). A hit brings the nodes up from that image and skips the first
converge and the tests that judge it (their inputs did not change); a miss converges, and the image is
kept only when every test that judges the converge passed (promote_if_judged, at the session's end).
GPUFLEET_FLEET_CACHE: `on` (the default) uses and keeps images, `read` uses an image but keeps none (the
default when CI is set: a CI machine starts empty and is thrown away, so saving one only costs time),
`off` neither uses nor keeps one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from simharness import VENV_BIN, SimCluster, bring_up, simlib, simutil, tear_down
from tiers import CONVERGE_INPUTS, ansible_core_version, input_hash

NAME = "fleet"
# Outside molecule's 10.200.10-19 and the factory's 10.200.20-99; the demo uses 10.200.1.
SUBNET = "10.200.2.0/24"
OS = "ubuntu22.04"
PROFILE = "hgx-h100"
CONVERGED = ("node1", "node2", "node3")
FRESH = "node4"
NODES = (*CONVERGED, FRESH)
# Not about bandwidth: the converge skips the bandwidth stage (its own test injects a fault far
# larger than the noise of shared CPUs). Reboots are allowed, as in molecule default. The passing
# smoke job stores the cluster's baseline, which the regression test then beats.
CONVERGE_ARGS = ("site", "--limit", "converged", "--skip-tags", "bandwidth",
                 "-e", json.dumps({"gpufleet_reboot_ok": True, "smoke_test_store_baseline": True}))
SMOKE_BASELINE = "smoke-fleet--cpu-x1-n3-gloo.json"
CACHE = simutil.CACHE_ROOT / "converged"
KEEP_IMAGES = 2


@dataclass
class Converge:
    """The first converge's outcome: run here, or restored from the cached image."""

    key: str
    artifacts: Path
    baselines: Path
    summary: dict
    returncode: int
    output: str
    seconds: float
    from_cache: bool
    image_meta: dict = field(default_factory=dict)
    judged_ok: bool | None = None   # None: no judging test ran; False: one failed


@dataclass
class Fleet:
    sim: SimCluster
    inventory: Path          # the directory: the simulator's inventory plus the groups above
    converge: Converge
    workdir: Path

    @property
    def nodes(self) -> list[str]:
        return list(NODES)

    def env(self, **extra: str) -> dict:
        return {**self.sim.env(), **extra}

    def gpufleet(self, artifacts: Path, *args: str, timeout: int = 1500) -> tuple[subprocess.CompletedProcess, dict]:
        """`gpufleet run ARGS -i <fleet inventory> --artifacts ARTIFACTS`, and the summary it wrote."""
        artifacts.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([str(VENV_BIN / "gpufleet"), "run", *args, "-i", str(self.inventory),
                               "--artifacts", str(artifacts)], cwd=artifacts.parent, env=self.env(),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False)
        summary_file = artifacts / "summary.json"
        summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
        return proc, summary

    def playbook(self, path, *args: str, timeout: int = 1500, env: dict | None = None) -> subprocess.CompletedProcess:
        """ansible-playbook against the fleet's inventory directory (both groups defined)."""
        return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(path), *args],
                              cwd=simlib.util.REPO_ROOT, env={**self.env(), **(env or {})}, stdin=subprocess.DEVNULL,
                              capture_output=True,
                              text=True, timeout=timeout, check=False)


def request() -> dict:
    return {"name": NAME, "subnet": SUBNET, "os": OS, "profile": PROFILE, "nodes": list(NODES),
            "converged": list(CONVERGED), "converge": list(CONVERGE_ARGS)}


def image_key(fingerprint: str) -> str:
    return input_hash(CONVERGE_INPUTS, {"ansible-core": ansible_core_version(), "request": request(),
                                        "repository_key": fingerprint})


def _cache_mode() -> str:
    default = "read" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "on"
    mode = os.environ.get("GPUFLEET_FLEET_CACHE", default)
    if mode not in ("on", "read", "off"):
        raise ValueError(f"GPUFLEET_FLEET_CACHE={mode!r}: use on (the default), read or off")
    return mode


def _write_groups(inventory: Path) -> None:
    groups = {"all": {"children": {"converged": {"hosts": {n: {} for n in CONVERGED}},
                                   "molecule_fresh": {"hosts": {FRESH: {}}}}}}
    (inventory / "groups.yml").write_text(yaml.safe_dump(groups, sort_keys=False))


def provide(workdir: Path) -> Fleet:
    """Bring the fleet up and converge it, or start it from the cached image of an identical converge."""
    inventory = workdir / "inventory"
    inventory.mkdir(parents=True, exist_ok=True)
    _write_groups(inventory)
    # The repository key is part of the key: a node's apt trusts the key it was converged with.
    fingerprint = simlib.repo.ensure_key()
    key = image_key(fingerprint)
    image = CACHE / key
    hit = _cache_mode() in ("on", "read") and (image / "meta.json").exists()
    sim = bring_up(NAME, SUBNET, len(NODES), profile=[PROFILE], os=OS, inventory=inventory / "simcluster.yml",
                   seed=image / "nodes" if hit else None)
    fleet = Fleet(sim=sim, inventory=inventory, workdir=workdir, converge=None)  # type: ignore[arg-type]
    fleet.converge = _restore(image, key, workdir) if hit else _converge(fleet, key)
    return fleet


def _converge(fleet: Fleet, key: str) -> Converge:
    artifacts, baselines = fleet.workdir / "converge", fleet.workdir / "baselines"
    started = time.monotonic()
    proc = subprocess.run([str(VENV_BIN / "gpufleet"), "run", *CONVERGE_ARGS, "-i", str(fleet.inventory),
                           "--artifacts", str(artifacts), "--baseline-dir", str(baselines)],
                          cwd=fleet.workdir, env=fleet.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=2400,
                          check=False)
    seconds = time.monotonic() - started
    summary_file = artifacts / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    converge = Converge(key=key, artifacts=artifacts, baselines=baselines, summary=summary,
                        returncode=proc.returncode, output=proc.stdout + proc.stderr, seconds=seconds,
                        from_cache=False)
    if _cache_mode() == "on" and proc.returncode == 0:
        _stage_image(fleet, converge)
    return converge


def _staging(key: str) -> Path:
    return CACHE / f"{key}.staging-{os.getpid()}"


def _stage_image(fleet: Fleet, converge: Converge) -> None:
    """Save the converged nodes now, before any test faults them; promoted only once judged."""
    staging = _staging(converge.key)
    shutil.rmtree(staging, ignore_errors=True)
    simlib.save_nodes(NAME, list(CONVERGED), staging / "nodes")
    shutil.copytree(converge.artifacts, staging / "artifacts", symlinks=True)
    if converge.baselines.exists():
        shutil.copytree(converge.baselines, staging / "baselines", symlinks=True)
    meta = {"key": converge.key, "converged_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seconds": round(converge.seconds, 1), "ansible_core": ansible_core_version(), "request": request()}
    (staging / "meta.json.pending").write_text(json.dumps(meta, indent=2) + "\n")


def promote_if_judged(converge: Converge) -> str:
    """At the session's end: keep the staged image only if the tests that judge the converge ran and passed."""
    if converge.from_cache:
        return "the fleet started from a cached image"
    staging = _staging(converge.key)
    if not staging.exists():
        return "no image was staged (the converge failed, or the cache is off)"
    if converge.judged_ok is not True:
        shutil.rmtree(staging, ignore_errors=True)
        return ("the converge's image was not kept: "
                + ("a test that judges it failed" if converge.judged_ok is False else "no test judged it"))
    final = CACHE / converge.key
    shutil.rmtree(final, ignore_errors=True)
    (staging / "meta.json.pending").rename(staging / "meta.json")
    staging.rename(final)
    _prune()
    return f"kept the converged image {final}"


def _prune() -> None:
    images = sorted((p for p in CACHE.iterdir() if (p / "meta.json").exists()), key=lambda p: p.stat().st_mtime,
                    reverse=True)
    for old in images[KEEP_IMAGES:]:
        shutil.rmtree(old, ignore_errors=True)


def _restore(image: Path, key: str, workdir: Path) -> Converge:
    artifacts, baselines = workdir / "converge", workdir / "baselines"
    shutil.copytree(image / "artifacts", artifacts, symlinks=True)
    if (image / "baselines").exists():
        shutil.copytree(image / "baselines", baselines, symlinks=True)
    meta = json.loads((image / "meta.json").read_text())
    os.utime(image)   # most recently used: pruned last
    summary = json.loads((artifacts / "summary.json").read_text())
    return Converge(key=key, artifacts=artifacts, baselines=baselines, summary=summary, returncode=0,
                    output="", seconds=0.0, from_cache=True, image_meta=meta)


def release(fleet: Fleet | None) -> list[str]:
    """Tear the fleet down; what the host still holds of it afterwards (empty when clean)."""
    tear_down(NAME)
    return simlib.leftovers(NAME)


def assert_smoke_reports(reports: Path, doc: dict, n: int) -> None:
    """A CPU smoke job's reports on n nodes: gloo, the sweep's figures, training, JUnit, chart and summary."""
    assert doc["backend"] == "gloo" and doc["device"] == "cpu" and doc["nccl"] is None
    assert doc["world_size"] == n and doc["nnodes"] == n
    rows = doc["sweep"]["rows"]
    assert rows[0]["size_bytes"] == 8 and rows[-1]["size_bytes"] == 64 * 1024 * 1024
    for row in rows:
        assert row["wrong"] == 0
        assert row["busbw_gbps"] == row["algbw_gbps"] * (2 * (n - 1) / n)
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-12)
    t = doc["training"]
    assert t["loss_last"] < t["loss_first"] and t["params_in_sync"] and t["nonfinite_values"] == 0
    junit = ET.parse(reports / "smoke.junit.xml").getroot()
    assert {c.get("name") for c in junit.iter("testcase")} >= {"nodes_joined", "loss_decreased", "params_in_sync"}
    svg = ET.parse(reports / "smoke_busbw.svg").getroot()
    assert svg.find("{http://www.w3.org/2000/svg}polyline") is not None
    assert "**gloo**" in (reports / "smoke.md").read_text()
