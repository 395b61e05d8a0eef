# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Data-parallel hyper-parameter scaling (pure; used by the scale_hparams filter,
the smoke job and the plan report).

global batch = per-GPU batch x GPU count; learning rate = base_lr x
sqrt(GPU count / base_gpus) (square-root scaling, which keeps the gradient-noise
scale constant as the batch grows); a warning when the global batch exceeds the
configured ceiling (``max_global_batch``).
"""

from __future__ import annotations

import math

from collections.abc import Mapping


class HparamsError(ValueError):
    """A bad scale_hparams input; the message names the bad value."""


KNOWN_KEYS = ("per_gpu_batch", "base_lr", "base_gpus", "max_global_batch", "lr_scaling")


def _positive_int(value, what):
    if isinstance(value, bool):
        raise HparamsError("%s must be a positive integer, not %r." % (what, value))
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 1:
        raise HparamsError("%s must be a positive integer, not %r." % (what, value))
    return value


def _positive_float(value, what):
    if isinstance(value, bool):
        raise HparamsError("%s must be a positive number, not %r." % (what, value))
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise HparamsError("%s must be a positive number, not %r." % (what, value))
    if not math.isfinite(out) or out <= 0:
        raise HparamsError("%s must be a positive number, not %r." % (what, value))
    return out


def scale_hparams(config, gpu_count):
    """Return {global_batch, lr, gpus, per_gpu_batch, base_lr, base_gpus,
    lr_scale, max_global_batch, warnings}."""
    if not isinstance(config, Mapping):
        raise HparamsError("scale_hparams takes a mapping such as {per_gpu_batch: 32, base_lr: 0.1, base_gpus: 1}, "
                           "not %r." % (config,))
    if "per_gpu_batch" not in config or "base_lr" not in config:
        raise HparamsError("scale_hparams needs per_gpu_batch and base_lr (got keys: %s)."
                           % (", ".join(sorted(map(str, config))) or "none"))
    gpus = _positive_int(gpu_count, "the GPU count")
    per_gpu = _positive_int(config["per_gpu_batch"], "per_gpu_batch")
    base_lr = _positive_float(config["base_lr"], "base_lr")
    base_gpus = _positive_int(config.get("base_gpus", 1), "base_gpus")
    mode = config.get("lr_scaling", "sqrt")
    if mode not in ("sqrt", "linear", "none"):
        raise HparamsError("lr_scaling must be \"sqrt\", \"linear\" or \"none\", not %r." % (mode,))
    ceiling = config.get("max_global_batch")
    if ceiling is not None:
        ceiling = _positive_int(ceiling, "max_global_batch")

    ratio = float(gpus) / base_gpus
    scale = {"sqrt": math.sqrt(ratio), "linear": ratio, "none": 1.0}[mode]
    global_batch = per_gpu * gpus
    warnings = []
    unknown = sorted(set(map(str, config)) - set(KNOWN_KEYS))
    if unknown:
        warnings.append("ignored unknown keys: %s (known: %s)" % (", ".join(unknown), ", ".join(KNOWN_KEYS)))
    if ceiling is not None and global_batch > ceiling:
        warnings.append(
            "global batch %d (%d per GPU x %d GPUs) exceeds the configured ceiling max_global_batch=%d; "
            "large batches can stall convergence: lower per_gpu_batch to %d or fewer, or raise the ceiling"
            % (global_batch, per_gpu, gpus, ceiling, max(1, ceiling // gpus)))
    return {
        "global_batch": global_batch,
        "lr": round(base_lr * scale, 12),
        "gpus": gpus,
        "per_gpu_batch": per_gpu,
        "base_lr": base_lr,
        "base_gpus": base_gpus,
        "lr_scaling": mode,
        "lr_scale": round(scale, 12),
        "max_global_batch": ceiling,
        "warnings": warnings,
    }
