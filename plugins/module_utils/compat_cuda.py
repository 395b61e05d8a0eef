# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""CUDA toolkit facts for the solver, read from the sourced table (compat_facts.FACTS): Table-3
driver floors per release, minor-version floors, the NCCL NVIDIA pairs with each toolkit, and the
compute capabilities each toolkit builds for. docs/compatibility.md renders the table."""

from __future__ import annotations

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_facts import cite, rows
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_facts import cite, rows  # type: ignore


def _vkey(text):
    return tuple(int(p) for p in str(text).split("."))


def _toolkits():
    """CUDA X.Y -> its releases and floors.

    full_version: the newest update release in the table (what cuda-toolkit-X-Y installs);
    updates: {release: Table 3 Linux driver, or None where the toolkit bundles no driver};
    driver_min: the GA release's driver; driver_min_minor_compat: the floor of its major;
    nccl: libnccl2 version NVIDIA pairs with it, None where no source names one."""
    releases = rows("cuda_release")
    floors = rows("cuda_minor_floor")
    nccl = rows("cuda_nccl")
    out = {}
    for release in sorted(releases, key=_vkey):
        key = "%d.%d" % _vkey(release)[:2]
        entry = out.setdefault(key, {"updates": {}, "sources": []})
        entry["updates"][release] = releases[release]
        entry["sources"].append(cite("cuda_release", release))
    for key, entry in out.items():
        ordered = sorted(entry["updates"], key=_vkey)
        entry["full_version"] = ordered[-1]
        entry["driver_min"] = entry["updates"][ordered[0]]
        entry["driver_min_minor_compat"] = floors[key.split(".")[0]]
        entry["nccl"] = nccl.get(key)
        sources = sorted(set(entry.pop("sources")))
        sources.append("minor-version floor: " + cite("cuda_minor_floor", key.split(".")[0]))
        sources.append("nccl: " + (cite("cuda_nccl", key) if key in nccl else "no source names the libnccl2 "
                                   "NVIDIA pairs with CUDA %s" % key))
        entry["source"] = "; ".join(sources)
    return out


CUDA_TOOLKITS = _toolkits()


def _cc_support():
    first, last = rows("cc_first_cuda"), rows("cc_last_cuda")
    return {cc: {"first_cuda": first[cc], "last_cuda": last.get(cc),
                 "source": cite("cc_first_cuda", cc) + ("; last: " + cite("cc_last_cuda", cc) if cc in last else "")}
            for cc in sorted(first, key=_vkey)}


# Compute capability -> first CUDA toolkit that compiles for it natively, and the last one (None:
# still supported by the newest toolkit in CUDA_TOOLKITS).
CC_SUPPORT = _cc_support()

# The request that names no CUDA gets the newest toolkit of this range the hardware
# runs (the default range), else the oldest one above it that it does.
MISSION_CUDA_RANGE = ("11.7", "12.2")

# Minimum driver a wheel's bundled CUDA runtime needs: the minor-version floor of its major.
WHEEL_DRIVER_FLOOR = dict(rows("cuda_minor_floor"), source=cite("cuda_minor_floor", "12"))
