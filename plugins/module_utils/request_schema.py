# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What a user writes, checked before any node is touched: the stack request, the hardware profiles
and the names of gpufleet's own variables. Pure: plain data in, messages out.

Every message is one line that starts with a configuration-error code in brackets
(``[UNKNOWN_REQUEST_KEY] gpufleet_stack_request.torh: unknown request key (did you mean 'torch'?) ...``),
names the variable and the value, and says what would work. The gpufleet CLI recognises the code
(``CONFIG_ERROR``) in a failed task and exits 2 -- the run's input was wrong, not the nodes -- with
the whole message; the solver's refusals (``[UNKNOWN_CUDA] ...``) carry codes of the same shape.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils import stack_solver as _solver
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import MODELS, lookup_model
except ImportError:  # pragma: no cover - direct import from the source tree
    import stack_solver as _solver  # type: ignore
    from gpu_models import MODELS, lookup_model  # type: ignore

# A configuration-error code in brackets: upper-case words joined by underscores ([UNKNOWN_CUDA]).
# The CLI (gpufleet/runner.py) matches failed tasks' messages with this same pattern.
CONFIG_ERROR = re.compile(r"\[(?P<code>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\] ")

# How many near names a message offers: enough to spot the right one, few enough to read.
NEAREST = 3

# A variable name this close to one of gpufleet's (difflib's ratio) is taken for a misspelling of it.
NEAR_MISS_CUTOFF = 0.85

# What each request key holds: a word for the message and a test.
_REQUEST_KINDS = {
    "gpus": ("a list of GPU names", lambda v: isinstance(v, (list, tuple, str, Mapping))),
    "cuda": ("a version such as \"12.4\" (or a list of them)", lambda v: isinstance(v, (str, int, float, list, tuple))),
    "torch": ("a version such as \"2.4.1\", or none for no PyTorch",
              lambda v: v is None or v is False or isinstance(v, (str, int, float))),
    "torch_variant": ("a wheel variant such as \"cu121\"", lambda v: v is None or isinstance(v, str)),
    "driver_branch": ("a branch such as \"550\"", lambda v: v is None or isinstance(v, (str, int))),
    "driver_compat": ("\"full\" or \"minor\"", lambda v: v in (None, "full", "minor")),
    "os": ("an OS such as \"ubuntu22.04\"", lambda v: v is None or isinstance(v, (str, Mapping))),
    "arch": ("x86_64 or aarch64", lambda v: v is None or isinstance(v, str)),
    "nvswitch": ("true or false", lambda v: v is None or isinstance(v, bool)),
    "kernel_modules": ("\"open\" or \"proprietary\"", lambda v: v is None or isinstance(v, str)),
    "allow_cuda_major_mismatch": ("true or false", lambda v: v is None or isinstance(v, bool)),
    "repo_base_url": ("a URL", lambda v: v is None or isinstance(v, str)),
}


def problem(code, message):
    """One configuration-error line: ``[CODE] message``."""
    return "[%s] %s" % (code, " ".join(str(message).split()))


def nearest(word, known, count=NEAREST, cutoff=0.6):
    """The known names closest to ``word`` (difflib), best first; case is ignored."""
    by_lower = {}
    for name in known:
        by_lower.setdefault(str(name).lower(), str(name))
    lower = str(word).lower()
    found = difflib.get_close_matches(lower, list(by_lower), n=count, cutoff=cutoff)
    if not found:  # a known name the word starts with ("cuda_version" -> "cuda") is the next best guess
        found = [name for name in sorted(by_lower, key=len, reverse=True) if len(name) >= 3 and lower.startswith(name)]
    return [by_lower[name] for name in found[:count]]


def _did_you_mean(word, known):
    close = nearest(word, known)
    return "did you mean %s?" % " or ".join(repr(c) for c in close) if close else "no known key is close"


def unknown_key_problems(mapping, known, where, code, noun):
    """One problem per key of ``mapping`` not in ``known``, each with the nearest known keys."""
    return [problem(code, "%s.%s: unknown %s key (%s); known keys: %s."
                    % (where, key, noun, _did_you_mean(key, known), ", ".join(sorted(known))))
            for key in sorted((k for k in mapping if k not in known), key=str)]


# ------------------------------------------------------------------ the stack request


def _gpu_names(gpus):
    """The GPU names a request lists (entries given as dicts or compute capabilities are the solver's)."""
    items = gpus if isinstance(gpus, (list, tuple)) else [gpus]
    return [item for item in items if isinstance(item, str) and not re.match(r"^\d+(\.\d+)?$", item.strip())]


def _gpu_problems(gpus, where):
    known = [model["name"] for model in MODELS]
    out = []
    for name in _gpu_names(gpus):
        if lookup_model(name) is None:
            close = nearest(name, known, cutoff=0.4)
            hint = ("nearest known models: %s" % "; ".join(close) if close
                    else "no known model is close (gpufleet compat show lists them)")
            out.append(problem("UNKNOWN_GPU", "%s.gpus: unknown GPU %r; %s (or give "
                                              "{name: %r, compute_capability: \"9.0\"})."
                               % (where, name, hint, name)))
    return out


def _version_problems(request, where):
    """The request's versions against the compatibility data, without hardware: the CUDA toolkits,
    torch, the driver branch, the OS, and whether torch has a wheel for the CUDA asked for."""
    try:
        cudas = request.get("cuda")
        cuda_keys = [_solver.resolve_cuda(c)[0] for c in (cudas if isinstance(cudas, (list, tuple)) else [cudas])
                     if c not in (None, "")]
        # torch: none (or null, false, "") asks for no PyTorch: nothing of torch to check.
        declined = _solver.torch_declined(request)
        torch_key, pinned = (None, None) if declined else _solver.resolve_torch(request.get("torch"))
        pinned = str(request.get("torch_variant") or pinned or "").strip().lower() or None
        if request.get("driver_branch") not in (None, ""):
            _solver.resolve_request({"driver_branch": request["driver_branch"]})
        if request.get("os") is not None or request.get("arch") is not None:
            _solver.resolve_os(request.get("os"), request.get("arch"))
        if torch_key and cuda_keys:
            _solver.choose_variant(torch_key, max(cuda_keys, key=_solver.vkey), pinned,
                                   bool(request.get("allow_cuda_major_mismatch")))
    except _solver.StackError as exc:
        return [problem(exc.rule, "%s: %s" % (where, exc.args[0]))]
    return []


def request_problems(request, where="gpufleet_stack_request"):
    """Everything wrong with a stack request that can be told without the nodes: its shape, unknown
    keys (with the nearest known one), values of the wrong kind, unknown GPU names (with the nearest
    few models), versions the compatibility data does not know, and torch without a wheel for the
    CUDA asked for. The nodes' hardware and OS are checked later, by the solver."""
    if request is None:
        return []
    if not isinstance(request, Mapping):
        return [problem("BAD_REQUEST", "%s must be a mapping such as {torch: \"2.4.1\", cuda: \"12.4\"}, not %r."
                        % (where, request))]
    out = unknown_key_problems(request, _solver.KNOWN_KEYS, where, "UNKNOWN_REQUEST_KEY", "request")
    for key, (kind, fits) in _REQUEST_KINDS.items():
        if key in request and not fits(request[key]):
            out.append(problem("BAD_REQUEST", "%s.%s must be %s, not %r." % (where, key, kind, request[key])))
    if out:
        return out
    if request.get("gpus") not in (None, [], ""):
        out.extend(_gpu_problems(request["gpus"], where))
    return out or _version_problems(request, where)


# ------------------------------------------------------------------ profiles


def profile_problems(profiles, known_keys, where):
    """Unknown keys of every profile in ``profiles`` ({name: {key: value}}), with the nearest key."""
    if not isinstance(profiles, Mapping):
        return []
    out = []
    for name, settings in profiles.items():
        if isinstance(settings, Mapping):
            out.extend(unknown_key_problems(settings, known_keys, "%s.%s" % (where, name), "UNKNOWN_PROFILE_KEY",
                                            "profile"))
    return out


# ------------------------------------------------------------------ variable names


def variable_problems(names, known):
    """Names set in inventory or -e that are not gpufleet's but nearly are (``smoke_test_launchr``):
    a misspelt variable is silently ignored by Ansible, and the role runs on its default."""
    known = set(known)
    out = []
    for name in sorted(str(n) for n in names):
        if name in known or name.startswith(("ansible_", "__")):
            continue
        close = nearest(name, known, cutoff=NEAR_MISS_CUTOFF)
        if close:
            out.append(problem("UNKNOWN_VARIABLE", "variable %r is not one of gpufleet's and would be ignored; "
                                                   "did you mean %s?" % (name, " or ".join(repr(c) for c in close))))
    return out


def config_error(text):
    """The configuration error in a failure message -- from its code to the end, Ansible's wrappers
    ("Finalization of task args ... failed: ...") cut off -- or None when it carries no code."""
    found = CONFIG_ERROR.search(str(text))
    if found is None:
        return None
    return " ".join(str(text)[found.start():].split())
