# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sourced PyTorch wheel facts: CUDA variants per release, torchvision/torchaudio
pairs, the NCCL the default PyPI wheel bundles (where PyPI metadata was read)."""

from __future__ import annotations

# PyTorch releases: CUDA wheel variants on download.pytorch.org/whl/<variant>,
# the matching torchvision/torchaudio, and the NCCL the default PyPI wheel bundles.
_PREV = "pytorch.org/get-started/previous-versions (pytorch/pytorch.github.io _get_started/previous-versions.md)"
_PYPI = "PyPI wheel metadata (torch pins nvidia-nccl-cu1x)"
_PREV_PAGE = ("pytorch.org/get-started/previous-versions, Linux and Windows wheel commands "
              "(page text as fetched 2026-03-31)")
TORCH_RELEASES = {
    "2.0.0": {"variants": ["cu117", "cu118"], "default_variant": "cu117",
              "torchvision": "0.15.1", "torchaudio": "2.0.1", "source": _PREV},
    "2.0.1": {"variants": ["cu117", "cu118"], "default_variant": "cu117",
              "torchvision": "0.15.2", "torchaudio": "2.0.2", "bundled_nccl": "2.14.3",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.1.0": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.16.0", "torchaudio": "2.1.0", "source": _PREV},
    "2.1.1": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.16.1", "torchaudio": "2.1.1", "source": _PREV},
    "2.1.2": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.16.2", "torchaudio": "2.1.2", "bundled_nccl": "2.18.1",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.2.0": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.17.0", "torchaudio": "2.2.0", "source": _PREV},
    "2.2.1": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.17.1", "torchaudio": "2.2.1", "source": _PREV},
    "2.2.2": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.17.2", "torchaudio": "2.2.2", "bundled_nccl": "2.19.3",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.3.0": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.18.0", "torchaudio": "2.3.0", "source": _PREV},
    "2.3.1": {"variants": ["cu118", "cu121"], "default_variant": "cu121",
              "torchvision": "0.18.1", "torchaudio": "2.3.1", "bundled_nccl": "2.20.5",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.4.0": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu121",
              "torchvision": "0.19.0", "torchaudio": "2.4.0",
              "source": _PREV + " (commit 6286469 'Release 2.4.1 update previous versions')"},
    "2.4.1": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu121",
              "torchvision": "0.19.1", "torchaudio": "2.4.1", "bundled_nccl": "2.20.5",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    "2.5.0": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu124",
              "torchvision": "0.20.0", "torchaudio": "2.5.0",
              "source": _PREV + " (commit 3a3efc5 'Add 2.5.0 to previous-versions.md')"},
    "2.5.1": {"variants": ["cu118", "cu121", "cu124"], "default_variant": "cu124",
              "torchvision": "0.20.1", "torchaudio": "2.5.1", "bundled_nccl": "2.21.5",
              "source": _PREV + "; bundled_nccl: " + _PYPI},
    # 2.6 onwards: the Linux wheel commands on pytorch.org/get-started/previous-versions
    # (page as fetched 2026-03-31; the "# CUDA X.Y ... --index-url .../cuXYZ" lines). The default
    # PyPI variant and the bundled NCCL of these releases were not read from PyPI metadata, so they
    # are left out (default_variant None): the plan then reports no bundled NCCL for them.
    "2.6.0": {"variants": ["cu118", "cu124", "cu126"], "default_variant": None,
              "torchvision": "0.21.0", "torchaudio": "2.6.0", "source": _PREV_PAGE},
    "2.7.0": {"variants": ["cu118", "cu126", "cu128"], "default_variant": None,
              "torchvision": "0.22.0", "torchaudio": "2.7.0", "source": _PREV_PAGE},
    "2.7.1": {"variants": ["cu118", "cu126", "cu128"], "default_variant": None,
              "torchvision": "0.22.1", "torchaudio": "2.7.1", "source": _PREV_PAGE},
    "2.8.0": {"variants": ["cu126", "cu128", "cu129"], "default_variant": None,
              "torchvision": "0.23.0", "torchaudio": "2.8.0", "source": _PREV_PAGE},
    "2.9.0": {"variants": ["cu126", "cu128", "cu130"], "default_variant": None,
              "torchvision": "0.24.0", "torchaudio": "2.9.0", "source": _PREV_PAGE},
    "2.9.1": {"variants": ["cu126", "cu128", "cu130"], "default_variant": None,
              "torchvision": "0.24.1", "torchaudio": "2.9.1", "source": _PREV_PAGE},
}

TORCH_INDEX_URL = "https://download.pytorch.org/whl/{variant}"
