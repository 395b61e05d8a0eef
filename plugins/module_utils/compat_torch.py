# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""PyTorch wheel facts for the solver, from the release data `gpufleet compat refresh` reads from
PyPI and PyTorch's build matrix (compat_release_data.py): the CUDA variants per release, the
torchvision/torchaudio that go with it, and the CUDA runtime, NCCL and cuDNN the default PyPI
wheel pins."""

from __future__ import annotations

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_release_data import RELEASE_DATA
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_release_data import RELEASE_DATA  # type: ignore
try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_facts import cite, rows, source_of
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_facts import cite, rows, source_of  # type: ignore

_PYPI_READ = next(s["read"] for s in RELEASE_DATA["sources"] if s["name"] == "pypi:torch")


def _release(version, entry):
    out = dict(entry)
    out["source"] = ("variants: %s; default wheel, bundled NCCL and cuDNN: Requires-Dist of %s on PyPI (read %s); "
                     "torchvision/torchaudio: their PyPI METADATA's torch pin" % (
                         entry["variants_source"], entry["wheel"], _PYPI_READ))
    return out


TORCH_RELEASES = {version: _release(version, entry) for version, entry in RELEASE_DATA["torch"].items()}

TORCH_INDEX_URL = "https://download.pytorch.org/whl/{variant}"


def _os_python():
    """OS id -> {"python": X.Y of its python3 package, "source": the row's citation}; an OS without a row
    has no entry, and the solver says its Python was not checked."""
    return {os_id: {"python": python, "source": cite("os_python", os_id), "url": source_of("os_python", os_id)["url"]}
            for os_id, python in sorted(rows("os_python").items())}


OS_PYTHON = _os_python()
