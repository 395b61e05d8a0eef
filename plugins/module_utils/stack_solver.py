# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The compat solver behind ``gpufleet.cluster.stack_plan``.

Pure: no Ansible imports. ``solve(request)`` returns one consistent plan or
raises ``StackError`` whose ``rule`` is a stable id from ``compat_data.RULES``
and whose message says which pair conflicts, why, and the nearest requests
that work.

``resolve_request`` turns the request into a ``Request`` (the context every rule reads); then, each
a small pure function (docs/compatibility.md has the decisions):
1. the CUDA toolkit: ``resolve_cuda`` or, when none is named, ``default_cuda`` (newest of the
   default range 11.7-12.2 the hardware and the OS repository run, else the oldest above it);
2. hardware and repository rules: ``check_hardware``, ``check_repository``, ``check_nccl``;
3. wheel: ``choose_variant`` / ``plan_torch``;
4. driver: ``driver_floor`` (Table 3 for the update the repository installs, raised to the wheel's
   and the GPUs' minimum), ``choose_branch`` (the named branch, or the newest supported long-term or
   production branch that runs the GPUs and the toolkit and that the OS repository carries),
   ``choose_kernel_modules``;
5. packages per OS: ``driver_packages``, ``plan_packages``.
The toolkit-specific part (``plan_toolkit``) is separate from the driver part so that several
toolkits can share one driver.
"""

from __future__ import annotations

import collections
import functools
import re

try:  # collection import path (Ansible, pytest with the collections/ path)
    from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as _data
    from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import (
        lookup_model, architecture_for_cc)
except ImportError:  # pragma: no cover - direct import from the source tree
    import compat_data as _data  # type: ignore
    from gpu_models import lookup_model, architecture_for_cc  # type: ignore

from collections.abc import Mapping


class StackError(ValueError):
    """A request that cannot work. ``rule`` is a stable id; ``alternatives`` a
    list of request fragments (dicts) that do work, nearest first."""

    def __init__(self, rule, message, alternatives=None):
        super().__init__(message)
        self.rule = rule
        self.alternatives = alternatives or []

    def __str__(self):
        return "[%s] %s" % (self.rule, self.args[0])


KNOWN_KEYS = {
    "gpus", "cuda", "torch", "torch_variant", "driver_branch", "driver_compat", "os", "arch",
    "nvswitch", "kernel_modules", "allow_cuda_major_mismatch", "repo_base_url",
}

# ---------------------------------------------------------------- versions


def vkey(version):
    """Sortable key for dotted numeric versions ("535.54.03" -> (535, 54, 3))."""
    return _vkey(str(version))


@functools.lru_cache(maxsize=4096)
def _vkey(text):
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _mm(version):
    k = vkey(version)
    return (k[0], k[1] if len(k) > 1 else 0)


def _variant_cuda(variant):
    """"cu121" -> (12, 1); "cu118" -> (11, 8)."""
    digits = variant[2:]
    return int(digits[:-1]), int(digits[-1])


def _fmt_mm(mm):
    return "%d.%d" % mm


_CUDA_KEYS = sorted(_data.CUDA_TOOLKITS, key=vkey)
_TORCH_KEYS = sorted(_data.TORCH_RELEASES, key=vkey)


def _as_version_text(value, what):
    example = "\"2.8.0\"" if "torch" in what else "\"12.2\""
    if isinstance(value, bool) or value is None:
        raise StackError("BAD_REQUEST", "%s must be a version string such as %s, not %r." % (what, example, value))
    if isinstance(value, float):
        value = repr(value)
    elif isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not re.match(r"^\s*\d+(\.\d+)*([+.]?[a-z]+\d*)?\s*$", value, re.I):
        raise StackError("BAD_REQUEST", "%s must be a version string such as %s, not %r." % (what, example, value))
    return value.strip()


def _bool(value, what):
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.strip().lower() in ("true", "yes", "on", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise StackError("BAD_REQUEST", "%s must be true or false, not %r." % (what, value))


def resolve_cuda(value):
    """Return (key "12.2", release "12.2" or "12.2.1")."""
    text = _as_version_text(value, "cuda")
    parts = vkey(text)
    key = "%d.%d" % (parts[0], parts[1] if len(parts) > 1 else 0)
    entry = _data.CUDA_TOOLKITS.get(key)
    if entry is None:
        raise StackError(
            "UNKNOWN_CUDA",
            "CUDA %s is not in the compatibility data; known toolkits: %s." % (text, ", ".join(_CUDA_KEYS)),
            [{"cuda": c} for c in _nearest(_CUDA_KEYS, key)])
    if len(parts) >= 3:
        release = "%d.%d.%d" % parts[:3]
        if release not in entry["updates"]:
            raise StackError(
                "UNKNOWN_CUDA",
                "CUDA %s is not a released %s toolkit; releases: %s." % (text, key, ", ".join(sorted(entry["updates"], key=vkey))),
                [{"cuda": r} for r in sorted(entry["updates"], key=vkey)])
        return key, release
    return key, key


def resolve_torch(value):
    """Return (release "2.1.2", pinned variant or None)."""
    if value is None:
        return None, None
    text = _as_version_text(value, "torch")
    variant = None
    m = re.match(r"^(\d+(?:\.\d+)*)\+(cu\d{3})$", text)
    if m:
        text, variant = m.group(1), m.group(2)
    parts = vkey(text)
    if len(parts) == 2:  # "2.1" -> newest patch of 2.1
        candidates = [t for t in _TORCH_KEYS if vkey(t)[:2] == parts]
        if candidates:
            return candidates[-1], variant
    key = ".".join(str(p) for p in parts[:3])
    if key not in _data.TORCH_RELEASES:
        raise StackError(
            "UNKNOWN_TORCH",
            "torch %s is not in the compatibility data; known releases: %s." % (text, ", ".join(_TORCH_KEYS)),
            [{"torch": t} for t in _nearest(_TORCH_KEYS, key)])
    return key, variant


def _nearest(keys, target, count=3):
    t = vkey(target)
    return sorted(keys, key=lambda k: (abs(_num(vkey(k)) - _num(t)), vkey(k)))[:count]


def _num(parts):
    out = 0.0
    scale = 1.0
    for p in parts[:3]:
        out += p * scale
        scale /= 1000.0
    return out


# ---------------------------------------------------------------- OS / repo


def resolve_os(value, arch):
    if value is None:
        value = "ubuntu22.04"
    if isinstance(value, Mapping):  # host_info "os" dict, or ansible facts
        os_id = value.get("id") or value.get("distribution") or ""
        ver = value.get("version_id") or value.get("distribution_version") or value.get("distribution_major_version") or ""
        value = "%s%s" % (os_id, ver)
    if not isinstance(value, str) or not value.strip():
        raise StackError("BAD_REQUEST", "os must be a string such as \"ubuntu22.04\", \"rhel9\" or \"debian12\", not %r." % (value,))
    text = value.strip().lower()
    m = re.match(r"^([a-z][a-z ]*?)[ _-]?(\d+)(?:\.(\d+))?", text)
    key = None
    if m:
        name, major, minor = m.group(1).strip(), m.group(2), m.group(3)
        name = _data.OS_ALIASES.get(name, name)
        if name == "ubuntu":
            if minor is None and len(major) == 4:  # "ubuntu2204"
                major, minor = major[:2], major[2:]
            key = "ubuntu%s.%s" % (major, minor or "04")
        elif name in ("rhel", "debian"):
            key = "%s%s" % (name, major)
    if key not in _data.SUPPORTED_OS:
        _refuse_os(value, key)
    if arch is None:
        arch = "x86_64"
    if not isinstance(arch, str) or arch.strip().lower() not in _data.REPO_ARCHES:
        raise StackError(
            "UNSUPPORTED_OS",
            "arch %r has no NVIDIA CUDA repository; supported: x86_64, aarch64 (served from sbsa)." % (arch,),
            [{"arch": "x86_64"}, {"arch": "aarch64"}])
    distro, family, graph = _data.REPO_DISTROS[key]
    return key, distro, family, graph, _data.REPO_ARCHES[arch.strip().lower()]


def _refuse_os(value, key):
    """An OS outside the one supported list (compat_packages SUPPORTED_OS) is refused at plan time, with
    the reason where the data gives one (RHEL 8's python 3.6) and the list."""
    supported = ", ".join("%s (%s)" % (k, row["name"]) for k, row in sorted(_data.SUPPORTED_OS.items()))
    refused = _data.REFUSED_OS.get(key)
    why = ("gpufleet does not support %s: %s" % (key, refused["reason"]) if refused
           else "it is not an OS NVIDIA's CUDA repositories and the stack roles both support")
    raise StackError(
        "UNSUPPORTED_OS",
        "OS %r: %s. Supported: %s; Rocky Linux counts as the RHEL major it rebuilds "
        "(docs/compatibility.md, Supported operating systems)." % (value, why, supported),
        [{"os": k} for k in sorted(_data.SUPPORTED_OS)])


def repository_cuda_releases(distro):
    """The CUDA X.Y toolkits of the data that NVIDIA's ``distro`` repository carries."""
    return list(_repository_cuda_releases(distro))


@functools.lru_cache(maxsize=None)
def _repository_cuda_releases(distro):
    rng = _data.REPO_CUDA_RANGE[distro]
    return tuple(c for c in _CUDA_KEYS
                 if (rng["first"] is None or vkey(c) >= vkey(rng["first"]))
                 and (rng["last"] is None or vkey(c) <= vkey(rng["last"])))


# ---------------------------------------------------------------- GPUs

_CC_RE = re.compile(r"^\s*(?:sm_?|compute_)?(\d{1,2})\.?(\d)[a-z]?\s*$", re.I)
_NAME_KEYS = ("name", "product_name", "model", "gpu_name")
_CC_KEYS = ("compute_capability", "compute_cap", "cc")
_PCI_KEYS = ("pci_device_id", "device_id", "pci_id")


def _cc_text(value):
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return "%.1f" % value
    if isinstance(value, int):
        return "%d.%d" % divmod(value, 10) if value >= 10 else "%d.0" % value
    m = _CC_RE.match(str(value))
    if not m:
        return None
    return "%d.%d" % (int(m.group(1)), int(m.group(2)))


class _GpuResolver(object):
    """Resolves GPU descriptions to {name, cc, arch}; caches per distinct input."""

    def __init__(self):
        self._cache = {}
        self.models = {}      # (name, cc) -> summary dict
        self.unknown = []     # descriptions that could not be resolved
        self.nvswitch = False

    def add(self, item):
        if isinstance(item, Mapping):
            if "gpus" in item and isinstance(item.get("gpus"), list):  # gpu_info result
                if item.get("nvswitch") is True:
                    self.nvswitch = True
                gpus = item["gpus"]
                if not gpus and isinstance(item.get("pci_devices"), list):
                    gpus = [d for d in item["pci_devices"] if isinstance(d, Mapping) and d.get("kind", "gpu") == "gpu"]
                for gpu in gpus:
                    self.add(gpu)
                return
            name = next((item[k] for k in _NAME_KEYS if item.get(k)), None)
            cc = next((item[k] for k in _CC_KEYS if item.get(k) not in (None, "", "[N/A]", "N/A")), None)
            pci = next((item[k] for k in _PCI_KEYS if item.get(k)), None)
            key = (str(name) if name is not None else None, str(cc) if cc is not None else None,
                   str(pci) if pci is not None else None)
        elif isinstance(item, (str, int, float)) and not isinstance(item, bool):
            key = ("s", str(item), type(item).__name__)
        else:
            raise StackError("BAD_REQUEST", "gpus entries must be GPU names, compute capabilities or gpu_info facts, not %r." % (item,))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._resolve(item, key)
            self._cache[key] = hit
        if hit is False:
            return
        mk = (hit["name"], hit["compute_capability"])
        summary = self.models.get(mk)
        if summary is None:
            summary = dict(hit, count=0)
            self.models[mk] = summary
        summary["count"] += 1

    def _resolve(self, item, key):
        if key[0] == "s":
            text = key[1]
            cc = _cc_text(item) if not isinstance(item, str) else (_cc_text(text) if _CC_RE.match(text) else None)
            if cc is not None:
                return self._from_cc(cc, None)
            model = lookup_model(text)
            if model is None:
                self.unknown.append(text)
                return False
            return self._from_model(model)
        name, cc, pci = key
        model = None
        if pci:
            model = lookup_model(pci)
        if model is None and name:
            model = lookup_model(name)
        ccn = _cc_text(cc) if cc is not None else None
        if ccn is not None:
            out = self._from_cc(ccn, name if model is None else model["name"])
            return out
        if model is not None:
            return self._from_model(model)
        self.unknown.append(name or pci or repr(item))
        return False

    @staticmethod
    def _from_model(model):
        return {"name": model["name"], "compute_capability": model["compute_capability"],
                "architecture": model["architecture"], "memory_gib": model.get("memory_gib")}

    @staticmethod
    def _from_cc(cc, name):
        return {"name": name or "compute capability %s" % cc, "compute_capability": cc,
                "architecture": architecture_for_cc(cc), "memory_gib": None}


def _known_gpu_names():
    try:
        from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import MODELS
    except ImportError:  # pragma: no cover
        from gpu_models import MODELS  # type: ignore
    return [m["name"] for m in MODELS]


def _gpu_label(g):
    arch = g.get("architecture")
    if g["name"].startswith("compute capability"):
        return "a GPU of compute capability %s%s" % (g["compute_capability"], ", %s" % arch if arch else "")
    return "%s (compute capability %s%s)" % (g["name"], g["compute_capability"], ", %s" % arch if arch else "")


# ---------------------------------------------------------------- the request, resolved


class Request(object):
    """What the rules read: the request resolved once (GPUs, OS, torch release, options), and the
    warnings gathered on the way. Passed whole instead of 8-12 positional arguments."""

    def __init__(self, raw, **fields):
        self.raw = raw
        self.models = fields["models"]            # [{name, compute_capability, architecture, memory_gib, count}]
        self.ccs = fields["ccs"]                  # sorted distinct compute capabilities
        self.nvswitch = fields["nvswitch"]
        self.os_key, self.distro = fields["os_key"], fields["distro"]
        self.family, self.graph, self.arch = fields["family"], fields["graph"], fields["arch"]
        self.torch, self.pinned = fields["torch"], fields["pinned"]   # "2.1.2" (or None), "cu118" (or None)
        self.torch_declined = fields.get("torch_declined", False)    # torch: none asked for no PyTorch
        self.python = os_python(self.os_key)                            # {"python", "source"} or None
        self.reasons = {}                                              # choice -> why (the plan's "reasons")
        self.refused = []                                              # "what: why not", for the plan's reader
        self.allow_mismatch = fields["allow_mismatch"]
        self.compat = fields["compat"]             # "full" or "minor"
        self.branch = fields["branch"]             # the named branch ("535") or None
        self.gpu_need = gpu_min_driver(self.models)[0]   # the minimum driver NVIDIA lists for these GPUs
        self.warnings = fields["warnings"]

    def fit(self, **changes):
        """The hashable ``Fit`` of this request (fields overridable) for ``quick_ok``."""
        out = Fit(tuple(self.ccs), self.branch, self.compat, self.allow_mismatch, self.distro, self.gpu_need)
        return out._replace(**changes)

    def but(self, **changes):
        """A copy with some fields changed (to try alternatives)."""
        out = Request.__new__(Request)
        out.__dict__.update(self.__dict__, warnings=[], reasons={}, refused=[])
        out.__dict__.update(changes)
        return out


def _check_request(request):
    if not isinstance(request, Mapping):
        raise StackError("BAD_REQUEST", "the stack request must be a mapping such as {cuda: \"12.2\", torch: \"2.1.2\", "
                                        "gpus: [...], os: \"ubuntu22.04\"}, not %r." % (request,))
    gpus = request.get("gpus")
    if gpus is not None and not isinstance(gpus, (list, tuple)):
        gpus = [gpus]
    return gpus or []


# What `torch:` says to plan no PyTorch at all (YAML's none, null, false or an empty string).
NO_TORCH = ("none", "no", "false", "")


def torch_declined(request):
    """True when the request names torch and asks for none: ``torch: none`` (or null, false, "")."""
    if "torch" not in request:
        return False
    value = request["torch"]
    return value is None or value is False or (isinstance(value, str) and value.strip().lower() in NO_TORCH)


def _resolve_torch_pin(request):
    if torch_declined(request):
        if request.get("torch_variant") not in (None, ""):
            raise StackError("BAD_REQUEST", "torch_variant %s was given with torch: none; drop torch_variant, or name "
                                            "a torch release." % (request["torch_variant"],))
        return None, None
    torch_key, pinned = resolve_torch(request.get("torch"))
    if request.get("torch_variant") not in (None, ""):
        tv = str(request["torch_variant"]).strip().lower()
        if not re.match(r"^cu\d{3}$", tv):
            raise StackError("BAD_REQUEST", "torch_variant must look like \"cu121\", not %r." % (request["torch_variant"],))
        if pinned and pinned != tv:
            raise StackError("BAD_REQUEST", "torch pins %s but torch_variant says %s; give one." % (pinned, tv))
        pinned = tv
    if pinned and torch_key is None:
        raise StackError("BAD_REQUEST", "torch_variant %s was given without torch." % pinned)
    return torch_key, pinned


def _resolve_branch(value):
    if value in (None, ""):
        return None
    branch = _normalise_branch(value)
    if branch not in _data.DRIVER_BRANCHES:
        raise StackError(
            "UNKNOWN_DRIVER_BRANCH",
            "driver branch %r is not in the compatibility data; known branches: %s." % (
                value, ", ".join(sorted(_data.DRIVER_BRANCHES, key=vkey))),
            [{"driver_branch": b} for b in supported_branches()[-3:]])
    return branch


def resolve_request(request):
    """The request as a ``Request``, or StackError (BAD_REQUEST, UNKNOWN_TORCH, UNSUPPORTED_OS,
    UNKNOWN_GPU, UNKNOWN_DRIVER_BRANCH)."""
    gpus_in = _check_request(request)
    warnings = []
    unknown_keys = sorted(set(request) - KNOWN_KEYS)
    if unknown_keys:
        warnings.append("ignored unknown request keys: %s (known: %s)" % (", ".join(unknown_keys), ", ".join(sorted(KNOWN_KEYS))))
    torch_key, pinned = _resolve_torch_pin(request)
    allow_mismatch = _bool(request.get("allow_cuda_major_mismatch"), "allow_cuda_major_mismatch")
    compat = request.get("driver_compat") or "full"
    if compat not in ("full", "minor"):
        raise StackError("BAD_REQUEST", "driver_compat must be \"full\" or \"minor\", not %r." % (compat,))
    os_key, distro, family, graph, repo_arch = resolve_os(request.get("os"), request.get("arch"))
    if request.get("os") is None:
        warnings.append("os not given; planned for ubuntu22.04")
    models, ccs, nvswitch, gpu_warnings = resolve_gpus(gpus_in, request)
    return Request(request, models=models, ccs=ccs, nvswitch=nvswitch, os_key=os_key, distro=distro, family=family,
                   graph=graph, arch=repo_arch, torch=torch_key, pinned=pinned, allow_mismatch=allow_mismatch,
                   torch_declined=torch_declined(request),
                   compat=compat, branch=_resolve_branch(request.get("driver_branch")),
                   warnings=warnings + gpu_warnings)


def resolve_gpus(gpus_in, request):
    """Return (models, ccs, nvswitch, warnings) or raise UNKNOWN_GPU / BAD_REQUEST."""
    warnings = []
    resolver = _GpuResolver()
    for item in gpus_in:
        resolver.add(item)
    if resolver.unknown:
        names = sorted(set(resolver.unknown))
        raise StackError(
            "UNKNOWN_GPU",
            "unknown GPU %s: give its compute capability instead (e.g. {name: %r, compute_capability: \"9.0\"}) "
            "or one of the known models: %s." % (", ".join(repr(n) for n in names[:5]), names[0], ", ".join(_known_gpu_names())))
    nvswitch = _bool(request.get("nvswitch"), "nvswitch") or resolver.nvswitch
    models = sorted(resolver.models.values(), key=lambda g: (vkey(g["compute_capability"]), g["name"]))
    if not models:
        warnings.append("no GPUs given; the plan is not checked against the hardware's compute capability")
    ccs = sorted({g["compute_capability"] for g in models}, key=vkey)
    for cc in ccs:
        if cc not in _data.CC_SUPPORT:
            warnings.append("no sourced CUDA support data for compute capability %s; not checked" % cc)
    if len(models) > 1:
        warnings.append("mixed GPU models in one request: %s" % ", ".join(g["name"] for g in models))
    return models, ccs, nvswitch, warnings


# ---------------------------------------------------------------- small rules


def cc_cuda_problem(cc, cuda_key):
    """None when ``cuda_key`` supports ``cc``; else (rule, first, last)."""
    sup = _data.CC_SUPPORT.get(cc)
    if sup is None:
        return None
    if vkey(cuda_key) < vkey(sup["first_cuda"]):
        return ("CC_NEEDS_NEWER_CUDA", sup["first_cuda"], sup["last_cuda"])
    if sup["last_cuda"] and vkey(cuda_key) > vkey(sup["last_cuda"]):
        return ("CC_DROPPED_BY_CUDA", sup["first_cuda"], sup["last_cuda"])
    return None


def hardware_supports(cuda_key, ccs):
    return not any(cc_cuda_problem(cc, cuda_key) for cc in ccs)


def wheel_driver_floor(variant):
    return _data.WHEEL_DRIVER_FLOOR[str(_variant_cuda(variant)[0])]


def branch_best_version(branch, minimum):
    """The version of ``branch`` to install for a driver >= ``minimum``: its
    recommended one when that is enough, else its newest that is; None if none."""
    b = _data.DRIVER_BRANCHES[branch]
    if vkey(b["recommended"]) >= vkey(minimum):
        return b["recommended"]
    ok = [v for v in b["versions"] if vkey(v) >= vkey(minimum)]
    return ok[-1] if ok else None


def branch_first_version(branch, minimum):
    ok = [v for v in _data.DRIVER_BRANCHES[branch]["versions"] if vkey(v) >= vkey(minimum)]
    return ok[0] if ok else None


def supported_branches():
    """Long-term and production branches not at end of life, oldest first."""
    return [b for b in sorted(_data.DRIVER_BRANCHES, key=int)
            if _data.DRIVER_BRANCHES[b]["type"] in ("LTSB", "PB") and not _data.DRIVER_BRANCHES[b]["eol"]]


def branch_drops(branch, models):
    """The GPUs (model summaries) that ``branch`` no longer supports, with the last branch that does."""
    out = []
    for g in models:
        last = _data.LAST_BRANCH_FOR_ARCH.get(g.get("architecture") or "")
        if last and int(branch) > int(last):
            out.append((g, last))
    return out


def _model_key(g):
    """The gpu_models key of a resolved GPU summary, or None (a GPU known only by its compute capability)."""
    model = None if g["name"].startswith("compute capability") else lookup_model(g["name"])
    return model["key"] if model else None


def gpu_min_driver(models):
    """(minimum driver NVIDIA lists for these GPUs, the GPU that sets it), or (None, None)."""
    best = (None, None)
    for g in models:
        need = _data.GPU_MIN_DRIVER.get(_model_key(g))
        if need and (best[0] is None or vkey(need) > vkey(best[0])):
            best = (need, g)
    return best


def os_python(os_key):
    """{"python": X.Y of the OS's python3, "source": citation} (compat_facts ``os_python``), or None."""
    return _data.OS_PYTHON.get(os_key)


@functools.lru_cache(maxsize=None)
def _distro_python(distro):
    return next((os_python(k)["python"] for k, v in _data.REPO_DISTROS.items() if v[0] == distro and os_python(k)),
                None)


def torch_pythons(torch_key):
    """The Pythons (X.Y) torch_key's Linux x86_64 wheels install on (PyPI's cp tags that Requires-Python
    admits), or None where the data has no such list."""
    python = _data.TORCH_RELEASES[torch_key].get("python")
    return python["versions"] if python else None


def torch_installs_on(torch_key, python):
    """False only when both are known and torch_key has no wheel for that Python."""
    versions = torch_pythons(torch_key)
    return python is None or versions is None or python in versions


def choose_variant(torch_key, cuda_key, pinned=None, allow_mismatch=False):
    """Return (variant, warnings) or raise StackError."""
    variants = _data.TORCH_RELEASES[torch_key]["variants"]
    tk = _mm(cuda_key)
    if pinned is not None:
        if pinned not in variants:
            raise StackError(
                "TORCH_NO_WHEEL_FOR_CUDA",
                "torch %s has no %s wheel; download.pytorch.org carries %s for it." % (torch_key, pinned, ", ".join(variants)),
                [{"torch": torch_key, "torch_variant": v} for v in variants])
        chosen = pinned
    else:
        same = [v for v in variants if _variant_cuda(v)[0] == tk[0]]
        below = [v for v in same if _variant_cuda(v) <= tk]
        if below:
            chosen = max(below, key=_variant_cuda)
        elif same:
            chosen = min(same, key=_variant_cuda)
        elif allow_mismatch:
            chosen = min(variants, key=lambda v: abs(_num(_variant_cuda(v)) - _num(tk)))
        else:
            raise StackError(
                "TORCH_CUDA_MAJOR_MISMATCH",
                "torch %s has no wheel for CUDA %d (it ships %s), and CUDA %s was requested: extensions built with the "
                "system nvcc %s fail to load against a CUDA %d torch. Set allow_cuda_major_mismatch: true to accept "
                "the %s wheel anyway." % (torch_key, tk[0], ", ".join(variants), cuda_key, cuda_key,
                                          _variant_cuda(variants[-1])[0], variants[-1]))
    return chosen, _variant_warnings(torch_key, chosen, cuda_key, allow_mismatch)


def _variant_warnings(torch_key, chosen, cuda_key, allow_mismatch):
    vc, tk = _variant_cuda(chosen), _mm(cuda_key)
    if vc[0] != tk[0]:
        if not allow_mismatch:
            raise StackError(
                "TORCH_CUDA_MAJOR_MISMATCH",
                "the torch %s %s wheel is built for CUDA %s but the toolkit is CUDA %s: extensions built with the system "
                "nvcc fail on a CUDA major mismatch. Set allow_cuda_major_mismatch: true to accept it." % (
                    torch_key, chosen, _fmt_mm(vc), cuda_key))
        return ["torch %s %s wheel (CUDA %s) differs in CUDA major from the toolkit (CUDA %s), as allowed by "
                "allow_cuda_major_mismatch; C++/CUDA extensions must not be built with the system nvcc."
                % (torch_key, chosen, _fmt_mm(vc), cuda_key)]
    if vc > tk:
        return ["torch %s has no wheel for CUDA %s or older in major %d; using %s (CUDA %s), which runs under "
                "minor-version compatibility; extensions built with the system nvcc %s still load."
                % (torch_key, cuda_key, tk[0], chosen, _fmt_mm(vc), cuda_key)]
    return []


# ---------------------------------------------------------------- 1. the CUDA toolkit


def default_cuda(ccs, distro, torch_key=None, allow_mismatch=False):
    """The toolkit for a request that names none: the newest of the default range that the
    hardware and the OS repository run (and the torch release, when one is asked for),
    else the oldest above the range. Returns (cuda_key, warning) or raises NO_CUDA_FOR_HARDWARE."""
    low, high = _data.MISSION_CUDA_RANGE
    carried = repository_cuda_releases(distro)
    in_range = [c for c in carried if vkey(low) <= vkey(c) <= vkey(high)]
    above = [c for c in carried if vkey(c) > vkey(high)]

    def fits(c, with_torch):
        if not hardware_supports(c, ccs) or not _data.CUDA_TOOLKITS[c]["nccl"]:
            return False
        return not with_torch or torch_key is None or quick_ok(
            c, torch_key, Fit(tuple(ccs), None, "full", allow_mismatch, distro, None))

    for with_torch in (True, False):
        ok = [c for c in in_range if fits(c, with_torch)]
        if ok:
            return ok[-1], "cuda not given; planned CUDA %s, the newest of the default range %s-%s that %s" % (
                ok[-1], low, high, "this hardware and the %s repository run" % distro)
        ok = [c for c in above if fits(c, with_torch)]
        if ok:
            return ok[0], ("cuda not given; no CUDA of the default range %s-%s runs %s, so planned CUDA %s, the "
                           "oldest newer toolkit that does" % (low, high, "this hardware on %s" % distro, ok[0]))
    raise StackError("NO_CUDA_FOR_HARDWARE",
                     "no CUDA toolkit in the compatibility data that NVIDIA's %s repository carries (%s) supports "
                     "compute capability %s." % (distro, ", ".join(carried), ", ".join(ccs)))


def choose_cuda(ctx):
    """(cuda X.Y, the release asked for) of the request, the default when it names none."""
    if ctx.raw.get("cuda") in (None, ""):
        cuda_key, note = default_cuda(ctx.ccs, ctx.distro, ctx.torch, ctx.allow_mismatch)
        ctx.warnings.append(note)
        ctx.reasons["cuda"] = note.split("; ", 1)[1]
        return cuda_key, cuda_key
    ctx.reasons["cuda"] = "named in the request"
    return resolve_cuda(ctx.raw.get("cuda"))


# ---------------------------------------------------------------- 2. hardware, repository, NCCL


def check_hardware(ctx, cuda_key):
    for g in ctx.models:
        problem = cc_cuda_problem(g["compute_capability"], cuda_key)
        if problem:
            rule, first, last = problem
            if rule == "CC_NEEDS_NEWER_CUDA":
                why = "%s needs CUDA %s or newer; CUDA %s was requested." % (_gpu_label(g), first, cuda_key)
            else:
                why = ("%s is supported up to CUDA %s; CUDA %s was requested, and CUDA %s dropped offline compilation "
                       "and library support for Maxwell, Pascal and Volta." % (
                           _gpu_label(g), last, cuda_key, _next_major(last)))
            _raise_with_alternatives(rule, why, ctx)


def _next_major(cuda_key):
    return "%d.0" % (vkey(cuda_key)[0] + 1)


def check_repository(ctx, cuda_key):
    carried = repository_cuda_releases(ctx.distro)
    rng = _data.REPO_CUDA_RANGE[ctx.distro]
    if cuda_key not in carried:
        alts = alternatives(ctx)
        # other OSes only where the rest of the request (GPUs, torch, branch) solves there too
        others = sorted(k for k, v in _data.SUPPORTED_OS.items()
                        if quick_ok(cuda_key, ctx.torch, ctx.fit(distro=v["repository"])))
        msg = "NVIDIA's %s repository does not carry CUDA %s (it carries %s; %s)." % (
            ctx.distro, cuda_key, ", ".join(carried), rng["source"])
        if alts:
            msg = msg[:-1] + ". Requests that work: %s" % "; ".join(format_alternative(a) for a in alts)
        if others:
            msg = msg.rstrip(".") + "; or an OS whose repository carries CUDA %s: %s." % (cuda_key, ", ".join(others))
        raise StackError("REPO_LACKS_CUDA", msg if msg.endswith(".") else msg + ".", alts + [{"os": o} for o in others[:2]])
    if rng["verified"] != ["first", "last"]:
        open_sides = [s for s in ("first", "last") if s not in rng["verified"]]
        ctx.warnings.append("which CUDA releases NVIDIA's %s repository carries is not sourced at the %s end; the "
                            "repository check before install decides" % (ctx.distro, " and ".join(
                                "oldest" if s == "first" else "newest" for s in open_sides)))


def check_nccl(ctx, cuda_key):
    """NCCL_MATCHES_CUDA: the plan installs the libnccl2 built for the toolkit; none sourced is a refusal."""
    if _data.CUDA_TOOLKITS[cuda_key]["nccl"]:
        return
    _raise_with_alternatives(
        "NCCL_MATCHES_CUDA",
        "no libnccl2 build for CUDA %s is in the compatibility data: no source read names the NCCL that NVIDIA's "
        "repository pairs with it (set gpufleet_nccl_version and name another toolkit, or wait for the data)." % cuda_key,
        ctx)


def plan_toolkit(ctx, cuda_key, cuda_release):
    """The toolkit-specific part of a plan (rules, NCCL, wheel, floors), checked; one per toolkit."""
    if ctx.torch is not None:  # a torch the OS's python3 cannot install is refused first: no toolkit changes that
        check_torch_python(ctx, cuda_key)
    check_hardware(ctx, cuda_key)
    check_repository(ctx, cuda_key)
    check_nccl(ctx, cuda_key)
    torch_plan = plan_wheel(ctx, cuda_key)
    floors = driver_floor(cuda_key, cuda_release, ctx.compat, torch_plan["driver_floor"] if torch_plan else None,
                          ctx.gpu_need)
    if floors["unbundled"]:
        ctx.warnings.append("Table 3 lists no toolkit driver for CUDA %s (NVIDIA no longer bundles a Linux driver "
                            "with it); its floor is the oldest release the data knows to run it with full features, "
                            "%s" % (floors["toolkit_full"], floors["toolkit_need"]))
    return {"cuda": cuda_key, "release": cuda_release, "torch": torch_plan, "floors": floors}


# ---------------------------------------------------------------- 3. wheel


def plan_wheel(ctx, cuda_key):
    if ctx.torch is None and ctx.torch_declined:
        ctx.reasons["torch"] = "not requested (torch: none): no PyTorch is installed"
        ctx.warnings.append("no torch requested (torch: none); the plan has no PyTorch wheel")
        return None
    if ctx.torch is None and not default_torch(ctx, cuda_key):
        return None
    try:
        variant, warnings = choose_variant(ctx.torch, cuda_key, ctx.pinned, ctx.allow_mismatch)
    except StackError as exc:
        _raise_with_alternatives(exc.rule, exc.args[0], ctx, cuda_key)
    ctx.warnings.extend(warnings)
    check_wheel_covers_gpus(ctx, variant, cuda_key)
    plan = plan_torch(ctx.torch, variant, cuda_key, ctx.allow_mismatch)
    plan["python"] = ctx.python["python"] if ctx.python else None
    plan["python_versions"] = torch_pythons(ctx.torch)
    ctx.reasons.setdefault("torch", "named in the request")
    ctx.reasons["variant"] = _variant_reason(variant, cuda_key, ctx.pinned)
    for companion in ("torchvision", "torchaudio"):
        if not plan[companion]:
            ctx.warnings.append("no %s release on PyPI goes with torch %s (none pins it); the plan installs none"
                                % (companion, ctx.torch))
    return plan


def _variant_reason(variant, cuda_key, pinned):
    if pinned:
        return "named in the request"
    vc = _fmt_mm(_variant_cuda(variant))
    if vc == cuda_key:
        return "built for the toolkit's CUDA %s" % cuda_key
    if _variant_cuda(variant) < _mm(cuda_key):
        return "the newest wheel of CUDA %s at or below the toolkit's %s" % (vc.split(".")[0], cuda_key)
    return "the oldest wheel of CUDA %s above the toolkit's %s (minor-version compatibility)" % (
        vc.split(".")[0], cuda_key)


def torch_fits(ctx, torch_key, cuda_key):
    """Whether torch_key installs with this toolkit, GPUs and OS Python without a refusal."""
    if not torch_installs_on(torch_key, ctx.python and ctx.python["python"]):
        return False
    try:
        variant = choose_variant(torch_key, cuda_key, None, ctx.allow_mismatch)[0]
    except StackError:
        return False
    vc = _fmt_mm(_variant_cuda(variant))
    return not any((cc_cuda_problem(cc, vc) or ("",))[0] == "CC_NEEDS_NEWER_CUDA" for cc in ctx.ccs)


def default_torch(ctx, cuda_key):
    """A request that names no torch gets the newest release with a wheel for the toolkit's CUDA major,
    the GPUs and the OS's Python; none fits: no PyTorch, and the plan says why. Sets ctx.torch."""
    fitting = [t for t in _TORCH_KEYS if torch_fits(ctx, t, cuda_key)]
    python = ctx.python["python"] if ctx.python else None
    newer = [t for t in _TORCH_KEYS if not fitting or vkey(t) > vkey(fitting[-1])]
    for t in newer[::-1][:3]:
        ctx.refused.append("torch %s: %s" % (t, "no wheel for Python %s (it has %s)" % (
            python, ", ".join(torch_pythons(t))) if not torch_installs_on(t, python)
            else "no wheel for CUDA %d and these GPUs" % _mm(cuda_key)[0]))
    if not fitting:
        ctx.reasons["torch"] = ("none planned: no torch release in the data has a wheel for CUDA %d%s and these GPUs"
                                % (_mm(cuda_key)[0], " and Python %s" % python if python else ""))
        ctx.warnings.append("torch not given, and " + ctx.reasons["torch"][len("none planned: "):] +
                            "; the plan has no PyTorch wheel (name torch: none to say so)")
        return False
    ctx.torch = fitting[-1]
    ctx.reasons["torch"] = ("not named; torch %s, the newest release with a wheel for CUDA %d%s" % (
        ctx.torch, _mm(cuda_key)[0], " and %s's Python %s" % (ctx.os_key, python) if python else ""))
    ctx.warnings.append("torch not given; planned " + ctx.reasons["torch"].split("; ", 1)[1] +
                        " (torch: none installs no PyTorch)")
    return True


def check_torch_python(ctx, cuda_key):
    """TORCH_NO_WHEEL_FOR_PYTHON: the torch release has a wheel for the OS's python3 (the venv's)."""
    if ctx.python is None:
        ctx.warnings.append("the Python of %s is not in the compatibility data; torch %s's wheels (Python %s) "
                            "were not checked against it" % (ctx.os_key, ctx.torch,
                                                             ", ".join(torch_pythons(ctx.torch) or ["unknown"])))
        return
    python = ctx.python["python"]
    if torch_installs_on(ctx.torch, python):
        return
    # torch releases that solve with this toolkit (and every other rule); else the nearest (cuda, torch) pairs
    works = [t for t in _TORCH_KEYS if quick_ok(cuda_key, t, ctx.fit())][::-1]
    if works:
        alts = [{"torch": t} for t in works[:3]]
        offer = "torch %s (releases that install there with CUDA %s)" % (", ".join(works[:6]), cuda_key)
    else:
        alts = alternatives(ctx)
        offer = "; ".join(format_alternative(a) for a in alts) or "none with this hardware in the data"
    raise StackError(
        "TORCH_NO_WHEEL_FOR_PYTHON",
        "torch %s has no wheel for Python %s, the python3 of %s (its wheels are for Python %s; PyPI's files and "
        "Requires-Python). Requests that work: %s; or torch: none." % (
            ctx.torch, python, ctx.os_key, ", ".join(torch_pythons(ctx.torch)), offer), alts)


def plan_torch(torch_key, variant, cuda_key, allow_mismatch):
    rel = _data.TORCH_RELEASES[torch_key]
    default_variant = rel.get("default_variant")
    return {
        "version": torch_key,
        "variant": variant,
        "variant_cuda": _fmt_mm(_variant_cuda(variant)),
        "index_url": _data.TORCH_INDEX_URL.format(variant=variant),
        "torchvision": rel["torchvision"],
        "torchaudio": rel["torchaudio"],
        "default_pypi_variant": default_variant,
        "bundled_nccl": rel.get("bundled_nccl") if default_variant and variant == default_variant else None,
        "cuda_major_mismatch_allowed": allow_mismatch,
        "cuda_major_mismatch": _variant_cuda(variant)[0] != _mm(cuda_key)[0],
        "driver_floor": wheel_driver_floor(variant),
    }


def check_wheel_covers_gpus(ctx, variant, cuda_key):
    vcuda = _fmt_mm(_variant_cuda(variant))
    for g in ctx.models:
        problem = cc_cuda_problem(g["compute_capability"], vcuda)
        if problem and problem[0] == "CC_NEEDS_NEWER_CUDA":
            _raise_with_alternatives(
                "TORCH_WHEEL_LACKS_CC",
                "the torch %s %s wheel is built with CUDA %s, but %s needs CUDA %s or newer." % (
                    ctx.torch, variant, vcuda, _gpu_label(g), problem[1]), ctx, cuda_key)


# ---------------------------------------------------------------- 4. driver


def _unbundled_floor(cuda_key):
    """The oldest release of a branch that runs ``cuda_key`` with full features (for toolkits that
    bundle no driver, so Table 3 names none); None when no branch of the data does."""
    firsts = [_data.DRIVER_BRANCHES[b]["versions"][0] for b in _data.DRIVER_BRANCHES
              if vkey(_data.DRIVER_BRANCHES[b]["max_cuda"]) >= vkey(cuda_key)]
    return min(firsts, key=vkey) if firsts else None


def driver_floor(cuda_key, cuda_release, compat, wheel_need=None, gpu_need=None):
    """The driver floors for what is really installed: cuda-toolkit-X-Y installs the newest
    update (``full_version``), so under full compatibility the floor is Table 3 for that
    update (12.2 -> 12.2.2 -> 535.104.05), raised to the wheel's and the GPUs' floors."""
    entry = _data.CUDA_TOOLKITS[cuda_key]
    toolkit_full = entry["full_version"]
    unbundled = entry["updates"][toolkit_full] is None
    fallback = _unbundled_floor(cuda_key) or entry["driver_min_minor_compat"]
    toolkit_need = entry["updates"][toolkit_full] or fallback
    asked_need = entry["updates"].get(cuda_release) or (entry["driver_min"] or fallback)
    cuda_need = toolkit_need if compat == "full" else entry["driver_min_minor_compat"]
    minimum = max([cuda_need] + [n for n in (wheel_need, gpu_need) if n], key=vkey)
    return {"minimum": minimum, "cuda_need": cuda_need, "toolkit_need": toolkit_need, "asked_need": asked_need,
            "ga_need": entry["driver_min"] or fallback, "toolkit_full": toolkit_full, "gpu_need": gpu_need,
            "unbundled": unbundled and compat == "full"}


def _normalise_branch(value):
    branch = str(value).strip()
    m = re.match(r"^[rR]?(\d{3})(?:\.\d+)*$", branch)
    return m.group(1) if m else branch


def _branch_label(branch):
    b = _data.DRIVER_BRANCHES[branch]
    until = ", until %s" % b["eol_date"] if b.get("eol_date") and not b["eol"] else ""
    return "R%s (%s%s)" % (branch, b.get("type") or "branch", until)


def default_branch(ctx, floors):
    """The newest supported (LTSB or PB, not end of life) branch that runs every GPU and reaches the
    floor, among those the OS repository is seen to carry; a supported branch not seen in it only when
    none is (with a warning). Raises NO_SUPPORTED_BRANCH when no supported branch fits."""
    fits = [b for b in supported_branches()
            if not branch_drops(b, ctx.models) and branch_best_version(b, floors["minimum"])]
    carried = _data.REPO_BRANCHES.get(ctx.distro) or []
    seen = [b for b in fits if b in carried]
    chosen = (seen or fits or [None])[-1]
    ctx.reasons["driver_branch"] = ("not named; %s, the newest supported long-term or production branch that runs "
                                    "these GPUs, reaches driver %s%s" % (
                                        _branch_label(chosen), floors["minimum"],
                                        " and is seen in NVIDIA's %s repository" % ctx.distro if seen else "")
                                    if chosen else "")
    ctx.refused.extend(_refused_branches(ctx, floors, chosen, carried))
    if seen:
        return seen[-1]
    if fits:
        ctx.warnings.append("no supported branch that runs this stack is seen in NVIDIA's %s repository (seen: %s); "
                            "planned %s, the newest that runs it; the repository check before install decides" % (
                                ctx.distro, ", ".join("R" + b for b in carried) or "none sourced",
                                _branch_label(fits[-1])))
        return fits[-1]
    _raise_no_supported_branch(ctx, floors)


def _refused_branches(ctx, floors, chosen, carried):
    """Why each supported branch newer than the chosen one was not taken (for the plan's reader)."""
    out = []
    for b in supported_branches():
        if chosen and int(b) <= int(chosen):
            continue
        if branch_drops(b, ctx.models):
            why = "does not run %s" % _gpu_label(branch_drops(b, ctx.models)[0][0])
        elif not branch_best_version(b, floors["minimum"]):
            why = "has no release >= %s" % floors["minimum"]
        else:
            why = "not seen in NVIDIA's %s repository" % ctx.distro if b not in carried else "not taken"
        out.append("driver branch R%s: %s" % (b, why))
    return out


def _raise_no_supported_branch(ctx, floors):
    ended = [b for b in sorted(_data.DRIVER_BRANCHES, key=int, reverse=True)
             if not branch_drops(b, ctx.models) and branch_best_version(b, floors["minimum"])]
    why = ["no supported long-term or production branch (%s) runs this stack" % ", ".join(
        _branch_label(b) for b in supported_branches())]
    for g, last in branch_drops(supported_branches()[-1], ctx.models):
        why.append("%s is supported up to R%s" % (_gpu_label(g), last))
    why.append("the driver must reach %s" % floors["minimum"])
    alts = [{"driver_branch": b} for b in ended[:2]]
    raise StackError("NO_SUPPORTED_BRANCH", "%s. Requests that work: %s (end of life: named on purpose, planned "
                     "with a warning)." % ("; ".join(why), "; ".join("driver branch %s" % a["driver_branch"] for a in alts)
                                           or "none in the data"), alts)


def choose_branch(ctx, floors, cuda_key, torch_plan):
    """The named branch if it runs the GPUs and reaches the floor (end of life: with a warning),
    else ``default_branch``."""
    branch = ctx.branch
    if branch is None:
        return default_branch(ctx, floors)
    ctx.reasons["driver_branch"] = "named in the request"
    dropped = branch_drops(branch, ctx.models)
    if dropped:
        g, last = dropped[0]
        raise StackError("BRANCH_DROPPED_GPU", "driver branch %s no longer supports %s; R%s is the last branch that "
                         "does (NVIDIA's CUDA Toolkit, Driver, and Architecture Matrix)." % (branch, _gpu_label(g), last),
                         [{"driver_branch": last}])
    if branch_best_version(branch, floors["minimum"]) is None:
        _raise_branch(ctx, branch, cuda_key, floors, torch_plan)
    return branch


def _branch_too_old_rule(ctx, branch, cuda_key, floors, torch_plan):
    """(rule, why) for a named branch whose newest release is below the floor."""
    b = _data.DRIVER_BRANCHES[branch]
    newest = b["versions"][-1]
    wheel_need = torch_plan["driver_floor"] if torch_plan else None
    gpu_need, gpu = gpu_min_driver(ctx.models)
    if gpu_need and vkey(newest) < vkey(gpu_need) and vkey(newest) >= vkey(floors["cuda_need"]):
        return "DRIVER_TOO_OLD_FOR_GPU", ("driver branch %s (newest %s) is older than the minimum driver NVIDIA lists "
                                          "for %s, %s." % (branch, newest, _gpu_label(gpu), gpu_need))
    if wheel_need and vkey(newest) < vkey(wheel_need) and vkey(newest) >= vkey(floors["cuda_need"]):
        return "DRIVER_TOO_OLD_FOR_WHEEL", ("driver branch %s (newest %s) is too old for the torch %s %s wheel, which "
                                            "needs a driver >= %s." % (branch, newest, ctx.torch, torch_plan["variant"],
                                                                       wheel_need))
    return "DRIVER_BRANCH_TOO_OLD_FOR_CUDA", (
        "driver branch %s runs CUDA up to %s with full features (its newest release, %s, is below %s, the CUDA %s "
        "minimum%s)." % (branch, b["max_cuda"], newest, floors["cuda_need"], cuda_key,
                         " under minor-version compatibility" if ctx.compat == "minor" else
                         " in Table 3 for the update the repository installs"))


def _raise_branch(ctx, branch, cuda_key, floors, torch_plan):
    rule, why = _branch_too_old_rule(ctx, branch, cuda_key, floors, torch_plan)
    b = _data.DRIVER_BRANCHES[branch]
    works = [x for x in reversed(supported_branches())
             if not branch_drops(x, ctx.models) and branch_best_version(x, floors["minimum"])]
    options = ["driver branch %s" % " or ".join(works[:2])] if works else []
    older = [c for c in _CUDA_KEYS
             if quick_ok(c, ctx.torch, ctx.fit(branch=branch))]
    if older:
        options.append("CUDA %s with branch %s" % (" or ".join(older[-2:]), branch))
    mv = _data.CUDA_TOOLKITS[cuda_key]["driver_min_minor_compat"]
    other_needs = [n for n in (torch_plan and torch_plan["driver_floor"], floors["gpu_need"]) if n]
    if ctx.compat == "full" and all(vkey(b["versions"][-1]) >= vkey(n) for n in [mv] + other_needs):
        options.append("driver_compat: minor (floor %s for CUDA %s)" % (mv, cuda_key))
    alts = [{"driver_branch": x} for x in works[:2]] + [{"cuda": c, "driver_branch": branch} for c in older[-2:]]
    raise StackError(rule, "%s Requests that work: %s." % (why, "; ".join(options) if options else "none in the data"), alts)


def branch_warnings(ctx, branch, recommended, floors, cuda_key):
    warnings = []
    binfo = _data.DRIVER_BRANCHES[branch]
    if ctx.compat == "minor" and vkey(recommended) < vkey(floors["toolkit_need"]):
        warnings.append("driver %s runs CUDA %s only under minor-version compatibility (Table 3 asks for %s for %s): "
                        "applications built with SASS for the GPU work, PTX JIT of newer features does not" % (
                            recommended, cuda_key, floors["toolkit_need"], floors["toolkit_full"]))
    live = [x for x in reversed(supported_branches())
            if not branch_drops(x, ctx.models) and branch_best_version(x, floors["minimum"])]
    if binfo["eol"]:
        when = " since %s" % binfo["eol_date"] if binfo.get("eol_date") else ""
        instead = ("; supported branch that runs this stack: %s" % ", ".join(_branch_label(x) for x in live)) if live else ""
        warnings.append("driver branch %s is end of life%s (NVIDIA's support matrix), planned because it was named%s"
                        % (branch, when, instead))
    elif binfo["type"] not in ("LTSB", "PB"):
        warnings.append("driver branch %s is a new feature branch (short-lived, no end-of-life date); planned because "
                        "it was named" % branch)
    carried = _data.REPO_BRANCHES.get(ctx.distro) or []
    if ctx.branch and carried and branch not in carried:
        warnings.append("R%s is not seen in NVIDIA's %s repository (seen: %s); the repository check before install "
                        "decides" % (branch, ctx.distro, ", ".join("R" + x for x in carried)))
    return warnings


def open_modules_required(models):
    """GPUs that run only the open kernel modules (Blackwell by compute capability, Grace Hopper by model)."""
    km = _data.KERNEL_MODULES
    out = []
    for g in models:
        model = lookup_model(g["name"]) if not g["name"].startswith("compute capability") else None
        if vkey(g["compute_capability"]) >= vkey(km["open_required_min_cc"]) or (
                model is not None and model.get("key") in km["open_required_models"]):
            out.append(g)
    return out


def choose_kernel_modules(request, models, ccs, branch):
    """Return (flavour, warnings) or raise BAD_REQUEST / OPEN_MODULES_NEED_TURING / OPEN_MODULES_REQUIRED."""
    km_data = _data.KERNEL_MODULES
    km = request.get("kernel_modules")
    warnings = []
    old = [g for g in models if vkey(g["compute_capability"]) < vkey(km_data["open_min_cc"])]
    need_open = open_modules_required(models)
    if km not in (None, "", "auto", "open", "proprietary"):
        raise StackError("BAD_REQUEST", "kernel_modules must be \"open\", \"proprietary\" or \"auto\", not %r." % (km,))
    if need_open and old:
        raise StackError(
            "OPEN_MODULES_REQUIRED",
            "%s runs only the open GPU kernel modules, and %s runs only the proprietary ones; they cannot share a "
            "node's driver. Split them into separate requests." % (_gpu_label(need_open[0]), _gpu_label(old[0])),
            [{"gpus": [need_open[0]["name"]]}, {"gpus": [old[0]["name"]]}])
    if km == "proprietary" and need_open:
        raise StackError(
            "OPEN_MODULES_REQUIRED",
            "%s runs only the open GPU kernel modules (NVIDIA: proprietary drivers are unsupported on Grace Hopper "
            "and Blackwell); use kernel_modules: open." % _gpu_label(need_open[0]),
            [{"kernel_modules": "open"}])
    _refuse_removed_proprietary(km, branch)
    if km == "open" and old:
        raise StackError(
            "OPEN_MODULES_NEED_TURING",
            "open GPU kernel modules support Turing (compute capability 7.5) and newer only, and %s is older; "
            "use kernel_modules: proprietary." % _gpu_label(old[0]),
            [{"kernel_modules": "proprietary"}])
    if km in (None, "", "auto"):
        turing_plus = bool(models) and not old
        open_ok_branch = vkey(branch) >= vkey(km_data["open_first_branch"])
        km = "open" if (turing_plus and open_ok_branch) or _open_only(branch) else "proprietary"
        if not models and km == "proprietary":
            warnings.append("kernel module flavour defaulted to proprietary because no GPUs were given")
    return km, warnings


def _open_only(branch):
    """From this branch NVIDIA ships only the open kernel modules (compat_drivers.KERNEL_MODULES)."""
    return vkey(branch) >= vkey(_data.KERNEL_MODULES["proprietary_removed_from_branch"])


def _refuse_removed_proprietary(km, branch):
    """Raise PROPRIETARY_MODULES_REMOVED for a proprietary request on a branch that no longer ships them."""
    if km != "proprietary" or not _open_only(branch):
        return
    first = _data.KERNEL_MODULES["proprietary_removed_from_branch"]
    older = [b for b in supported_branches() if vkey(b) < vkey(first)]
    raise StackError(
        "PROPRIETARY_MODULES_REMOVED",
        "R%s ships only the open GPU kernel modules (NVIDIA Driver Installation Guide %s: proprietary kernel modules "
        "removed), so kernel_modules: proprietary cannot be installed with it; use kernel_modules: open, or name a "
        "branch before R%s%s." % (branch, first, first, " (%s)" % ", ".join("R" + b for b in older[-2:]) if older else ""),
        [{"kernel_modules": "open"}] + [{"driver_branch": b, "kernel_modules": "proprietary"} for b in older[-2:][::-1]])


def plan_driver(ctx, toolkit):
    """The driver part of a plan for the (newest) toolkit: branch, release, kernel modules."""
    floors = toolkit["floors"]
    branch = choose_branch(ctx, floors, toolkit["cuda"], toolkit["torch"])
    recommended = branch_best_version(branch, floors["minimum"])
    ctx.warnings.extend(branch_warnings(ctx, branch, recommended, floors, toolkit["cuda"]))
    km, km_warnings = choose_kernel_modules(ctx.raw, ctx.models, ctx.ccs, branch)
    ctx.warnings.extend(km_warnings)
    return {"branch": branch, "recommended": recommended, "kernel_modules": km}


# ---------------------------------------------------------------- 5. packages per OS


def _rule_for_branch(rules, branch):
    ok = [r for r in rules if vkey(branch) >= vkey(r["from_branch"])]
    return ok[-1] if ok else rules[0]


def driver_packages(graph, branch, flavour):
    """Driver package names (no versions, NVIDIA's install order) of both flavours, the
    documented steps from the other flavour to ``flavour``, and the guide's commands."""
    rule = _rule_for_branch(_data.DRIVER_PACKAGE_GRAPHS[graph], branch)

    def fmt(names):
        return [n.format(B=branch) for n in names]

    steps = [{"action": s["action"], "packages": fmt(s["packages"]), "options": list(s["options"]),
              "source": rule["source"], "verified": rule["verified"]["switch"]}
             for s in rule[flavour]["switch_to"]]
    return {
        "packages": fmt(rule[flavour]["packages"]),
        "flavour_packages": {f: fmt(rule[f]["packages"]) for f in ("open", "proprietary")},
        "switch": steps,
        "commands": fmt(rule[flavour]["commands"]),
        "verified": dict(rule["verified"]),
        "source": rule["source"],
    }


def fabricmanager_packages(graph, branch):
    rule = _rule_for_branch(_data.FABRIC_MANAGER_PACKAGES[graph], branch)
    return [n.format(B=branch) for n in rule["packages"]]


def nvlink_packages(graph, branch, models, nvswitch):
    """The NVLink packages beside the fabric manager, ``{"imex": [...], "nvlsm": [...]}``: IMEX (at exactly the
    driver's version) for multi-node NVLink GPUs (GB200/GB300), NVLSM (its own version) on NVSwitch systems of
    NVLink 5 GPUs (HGX B200/B300). Which GPUs need which: compat_facts ``imex_domain``, ``nvlink_subnet_manager``."""
    keys = {_model_key(g) for g in models}
    imex = []
    if keys & set(_data.IMEX_PACKAGES["gpus"]):
        imex = [n.format(B=branch) for n in _rule_for_branch(_data.IMEX_PACKAGES[graph], branch)["packages"]]
    nvlsm = list(_data.NVLSM_PACKAGES["packages"]) if nvswitch and keys & set(_data.NVLSM_PACKAGES["gpus"]) else []
    return {"imex": imex, "nvlsm": nvlsm}


def dcgm_plan(family, cuda_key):
    """DCGM 4 for the toolkit's CUDA major: ``{"packages": [...], "version": str or None, "reason": str or None}``.
    A CUDA major NVIDIA ships no ``datacenter-gpu-manager-4-cuda<major>`` for gets no packages and the reason
    (compat_packages.DCGM_PACKAGES, rule DCGM_MATCHES_CUDA)."""
    rule = _data.DCGM_PACKAGES
    major = str(cuda_key).split(".", maxsplit=1)[0]
    if major not in rule["cuda_majors"]:
        return {"packages": [], "version": None,
                "reason": "DCGM 4 not planned: NVIDIA ships no datacenter-gpu-manager-4-cuda%s for CUDA %s (DCGM 4 has "
                          "diagnostics packages for CUDA %s only)" % (major, cuda_key, ", ".join(rule["cuda_majors"]))}
    return {"packages": [n.format(MAJOR=major) for n in rule["packages"]], "version": rule["version"][family],
            "reason": None}


def plan_packages(family, graph, branch, flavour, cuda_key, nvswitch, models=()):
    names = _data.OS_PACKAGE_NAMES[family]
    nccl = _data.CUDA_TOOLKITS[cuda_key]["nccl"]
    fmt = {"XY": cuda_key.replace(".", "-"), "NCCL": nccl}
    driver = driver_packages(graph, branch, flavour)
    packages = {
        "driver": driver["packages"],
        "toolkit": [p.format(**fmt) for p in names["toolkit"]],
        "nccl": [p.format(**fmt) for p in names["nccl"]],
        "fabricmanager": fabricmanager_packages(graph, branch) if nvswitch else [],
    }
    packages.update(nvlink_packages(graph, branch, models, nvswitch))
    packages["dcgm"] = dcgm_plan(family, cuda_key)["packages"]
    return packages, driver


def _package_warnings(ctx, graph, driver, packages, cuda_key):
    warnings = []
    if not all(graph["verified"].values()):
        warnings.append("the %s driver package names / flavour-switch steps for R%s follow NVIDIA's documented "
                        "pattern but were not read verbatim for this branch (docs/compatibility.md); the repository "
                        "check before install decides" % (ctx.graph, driver["branch"]))
    if ctx.distro in _data.REPO_PACKAGES_UNVERIFIED:
        warnings.append("the driver package names of NVIDIA's %s repository were not read; they follow the %s "
                        "repositories' names, and the repository check before install decides" % (ctx.distro, ctx.graph))
    if ctx.nvswitch:
        warnings.append("NVSwitch present: fabric manager must run at exactly the driver version (%s); hold both"
                        % driver["recommended"])
    if packages["nvlsm"]:
        warnings.append("NVLink 5 NVSwitch system: the fabric manager starts the NVLink Subnet Manager (%s, versioned "
                        "by its own release date, not the driver's; held at the version installed) and needs the "
                        "ib_umad kernel module" % ", ".join(packages["nvlsm"]))
    if packages["imex"]:
        imex = ", ".join(packages["imex"])
        warnings.append("multi-node NVLink GPUs: %s runs at exactly the driver version (%s) on every compute tray; "
                        "its nodes_config.cfg names the NVLink domain's trays" % (imex, driver["recommended"]))
    dcgm_reason = dcgm_plan(ctx.family, cuda_key)["reason"]
    if dcgm_reason:
        warnings.append(dcgm_reason)
    if ctx.os_key.startswith("debian"):
        warnings.append("packages come from NVIDIA's %s repository; never pin NVIDIA's libnccl2 version against "
                        "Debian's own archive (different version scheme)" % ctx.distro)
    return warnings


# ---------------------------------------------------------------- solve


RULES_CHECKED = ["UNKNOWN_TORCH", "UNSUPPORTED_OS", "UNKNOWN_GPU", "NO_CUDA_FOR_HARDWARE", "UNKNOWN_CUDA",
                 "CC_NEEDS_NEWER_CUDA", "CC_DROPPED_BY_CUDA", "REPO_LACKS_CUDA", "TORCH_NO_WHEEL_FOR_CUDA",
                 "TORCH_CUDA_MAJOR_MISMATCH", "TORCH_WHEEL_LACKS_CC", "NO_SUPPORTED_BRANCH", "BRANCH_DROPPED_GPU",
                 "DRIVER_BRANCH_TOO_OLD_FOR_CUDA", "DRIVER_TOO_OLD_FOR_WHEEL", "DRIVER_TOO_OLD_FOR_GPU",
                 "OPEN_MODULES_NEED_TURING", "OPEN_MODULES_REQUIRED", "PROPRIETARY_MODULES_REMOVED", "NCCL_MATCHES_CUDA",
                 "FABRIC_MANAGER_MATCHES_DRIVER", "NVLINK5_NEEDS_NVLSM", "MNNVL_NEEDS_IMEX", "DCGM_MATCHES_CUDA",
                 "TORCH_NO_WHEEL_FOR_PYTHON"]


def solve(request):
    if isinstance(request, Mapping) and isinstance(request.get("cuda"), (list, tuple)):
        return solve_side_by_side(request)
    ctx = resolve_request(request)
    cuda_key, cuda_release = choose_cuda(ctx)
    toolkit = plan_toolkit(ctx, cuda_key, cuda_release)
    driver = plan_driver(ctx, toolkit)
    packages, graph = plan_packages(ctx.family, ctx.graph, driver["branch"], driver["kernel_modules"], cuda_key,
                                    ctx.nvswitch, ctx.models)
    ctx.warnings.extend(_package_warnings(ctx, graph, driver, packages, cuda_key))
    return build_plan(ctx, toolkit, driver, packages, graph)


def _toolkit_entry(plan):
    """What one toolkit of a side-by-side plan installs: the toolkit and the NCCL build for its CUDA."""
    return {"cuda_version": plan["cuda_version"], "cuda_release": plan["cuda_release"],
            "toolkit_full_version": plan["toolkit_full_version"], "toolkit_package": plan["toolkit_package"],
            "nccl_version": plan["nccl_version"], "nccl_package_version": plan["nccl_package_version"],
            "packages": {"toolkit": plan["packages"]["toolkit"], "nccl": plan["packages"]["nccl"]}}


def solve_side_by_side(request):
    """``cuda`` as a list (``["11.8", "12.2"]``): the plan of the newest toolkit (its driver, NCCL, torch), with
    ``toolkits`` listing every toolkit and the NCCL build for its CUDA, oldest first. The older toolkits are planned
    on the newest one's driver branch and flavour (a driver runs every older CUDA) and without torch (the wheel goes
    with the newest toolkit, the default); a toolkit the OS repository or the GPUs cannot take refuses the request
    with its own rule."""
    asked = list(request["cuda"])
    if not asked:
        raise StackError("BAD_REQUEST", "cuda is an empty list; give one version (\"12.2\") or several ([\"11.8\", \"12.2\"]).")
    keys = sorted({resolve_cuda(c)[0]: c for c in asked}.items(), key=lambda kv: vkey(kv[0]))
    if len(keys) != len(asked):
        raise StackError("BAD_REQUEST", "cuda lists a toolkit twice: %s; each X.Y once." % (asked,))
    newest = solve(dict(request, cuda=keys[-1][1]))
    older = []
    for key, value in keys[:-1]:
        fixed = dict(request, cuda=value, driver_branch=newest["driver_branch"], kernel_modules=newest["kernel_modules"])
        fixed["torch"] = "none"
        fixed.pop("torch_variant", None)
        try:
            older.append(solve(fixed))
        except StackError as exc:
            raise StackError(exc.rule, "side-by-side toolkit CUDA %s (beside %s): %s" % (key, newest["cuda_version"], exc.args[0]),
                             exc.alternatives) from None
    plan = dict(newest)
    plan["toolkits"] = [_toolkit_entry(p) for p in older + [newest]]
    plan["packages"] = dict(newest["packages"], toolkit=[t["toolkit_package"] for t in plan["toolkits"]])
    plan["driver_min_version"] = max((p["driver_min_version"] for p in older + [newest]), key=vkey)
    # The older toolkits are planned without torch on purpose: their "no torch requested" is no news.
    plan["warnings"] = list(dict.fromkeys(newest["warnings"] + [w for p in older for w in p["warnings"]
                                                                if not w.startswith("no torch requested")]))
    return plan


def build_plan(ctx, toolkit, driver, packages, graph):
    """The plan document (PLAN_CONTRACT.md describes every key)."""
    cuda_key, floors = toolkit["cuda"], toolkit["floors"]
    branch, recommended = driver["branch"], driver["recommended"]
    binfo = _data.DRIVER_BRANCHES[branch]
    nccl = _data.CUDA_TOOLKITS[cuda_key]["nccl"]
    base = (ctx.raw.get("repo_base_url") or _data.CUDA_REPO_BASE).rstrip("/")
    plan = {
        "cuda_version": cuda_key, "cuda_release": toolkit["release"],
        "toolkit_full_version": floors["toolkit_full"], "toolkit_package": packages["toolkit"][0],
        "driver_branch": branch, "driver_branch_type": binfo.get("type", ""), "driver_branch_eol": bool(binfo.get("eol")),
        "driver_min_version": floors["minimum"], "driver_min_version_ga": floors["ga_need"],
        "driver_min_version_requested_release": floors["asked_need"],
        "driver_min_version_minor_compat": _data.CUDA_TOOLKITS[cuda_key]["driver_min_minor_compat"],
        "toolkit_driver_min_version": floors["toolkit_need"],
        "driver_branch_min_version": branch_first_version(branch, floors["minimum"]),
        "driver_recommended_version": recommended, "driver_compat": ctx.compat,
        "driver_branch_max_cuda": binfo["max_cuda"], "kernel_modules": driver["kernel_modules"],
        "driver_flavour_packages": graph["flavour_packages"], "driver_flavour_switch": graph["switch"],
        "driver_install_commands": graph["commands"], "driver_packages_verified": graph["verified"],
        "nccl_version": nccl.split("-")[0], "nccl_package_version": nccl,
        "packages": packages, "package_family": ctx.family, "os": ctx.os_key, "arch": ctx.arch,
        "repository": "%s/%s/%s/" % (base, ctx.distro, ctx.arch),
        "repository_cuda_releases": repository_cuda_releases(ctx.distro),
        "nvswitch": ctx.nvswitch, "fabricmanager_version": recommended if ctx.nvswitch else None,
        "imex_version": recommended if packages["imex"] else None,
        "dcgm_version": dcgm_plan(ctx.family, cuda_key)["version"],
        "torch": toolkit["torch"], "gpus": [dict(g) for g in ctx.models],
        "python": dict(ctx.python) if ctx.python else None,
        "reasons": dict(ctx.reasons), "refused": list(ctx.refused),
        "rules_checked": list(RULES_CHECKED), "warnings": ctx.warnings,
    }
    plan["toolkits"] = [_toolkit_entry(plan)]
    if ctx.family == "dnf":
        plan["driver_module_stream"] = "nvidia-driver:%s-%s" % (branch, "open" if plan["kernel_modules"] == "open" else "dkms")
        if ctx.nvswitch:
            plan["driver_module_profile"] = _data.FABRIC_MANAGER["dnf"]["module_profile"].format(B=branch)
    return plan


# ---------------------------------------------------------------- alternatives


# What a quick feasibility check reads besides (cuda, torch): hashable, so the check is cached.
Fit = collections.namedtuple("Fit", "ccs branch compat allow_mismatch distro gpu_need")


@functools.lru_cache(maxsize=65536)
def quick_ok(cuda_key, torch_key, fit):
    """True when (cuda, torch) passes every rule for ``fit`` (a ``Fit``: the compute capabilities,
    the branch if one is named, the compat mode, the OS repository and the GPUs' minimum driver)."""
    ccs, branch, compat, allow_mismatch, distro, gpu_need = fit
    if distro is not None and cuda_key not in repository_cuda_releases(distro):
        return False
    if not hardware_supports(cuda_key, ccs) or not _data.CUDA_TOOLKITS[cuda_key]["nccl"]:
        return False
    variant = None
    if torch_key is not None and distro is not None and not torch_installs_on(torch_key, _distro_python(distro)):
        return False
    if torch_key is not None:
        try:
            variant = choose_variant(torch_key, cuda_key, None, allow_mismatch)[0]
        except StackError:
            return False
        vc = _fmt_mm(_variant_cuda(variant))
        for cc in ccs:
            p = cc_cuda_problem(cc, vc)
            if p and p[0] == "CC_NEEDS_NEWER_CUDA":
                return False
    need = driver_floor(cuda_key, cuda_key, compat, wheel_driver_floor(variant) if variant else None, gpu_need)["minimum"]
    archs = [{"name": "compute capability " + cc, "architecture": architecture_for_cc(cc)} for cc in ccs]
    branches = [branch] if branch else supported_branches()
    return any(not branch_drops(b, archs) and branch_best_version(b, need) for b in branches)


def alternatives(ctx, count=3):
    """Nearest (cuda, torch) requests that work, as dicts with the chosen variant:
    the best one that changes only torch, the best that changes only cuda, then
    the nearest others."""
    try:
        want_cuda = _mm(resolve_cuda(ctx.raw.get("cuda"))[0])
    except StackError:
        want_cuda = _mm(_CUDA_KEYS[-1])
    t_idx = _TORCH_KEYS.index(ctx.torch) if ctx.torch in _TORCH_KEYS else len(_TORCH_KEYS) - 1
    c_want = min(range(len(_CUDA_KEYS)), key=lambda i: abs(_num(_mm(_CUDA_KEYS[i])) - _num(want_cuda)))
    found = []
    for ci, c in enumerate(_CUDA_KEYS):
        for ti, t in enumerate(_TORCH_KEYS if ctx.torch else [None]):
            if not quick_ok(c, t, ctx.fit()):
                continue
            dt = abs(ti - t_idx) if t else 0
            kind = ("torch" if ci == c_want else "cuda" if dt == 0 else "both")
            found.append(((ci != c_want) + (dt != 0), abs(ci - c_want), dt, -ti if t else 0, kind, c, t))
    if not found and ctx.torch:  # no torch release installs with this hardware and OS: without PyTorch, then
        return [dict(a, torch="none") for a in alternatives(ctx.but(torch=None, pinned=None), count)]
    found.sort()
    picked = [f for f in (next((f for f in found if f[4] == kind), None) for kind in ("torch", "cuda")) if f]
    picked += [f for f in found if f not in picked][:max(0, count - len(picked))]
    out = []
    for f in picked[:count]:
        alt = {"cuda": f[5]}
        if f[6]:
            alt["torch"] = f[6]
            alt["torch_variant"] = choose_variant(f[6], f[5], None, ctx.allow_mismatch)[0]
        out.append(alt)
    return out


def format_alternative(alt):
    if "cuda" not in alt:
        return ", ".join("%s: %s" % kv for kv in sorted(alt.items()))
    text = "cuda %s" % alt["cuda"]
    if alt.get("torch") == "none":
        text += " with torch: none (no torch release has a wheel for these GPUs and this OS's Python)"
    elif alt.get("torch"):
        text += " with torch %s (%s)" % (alt["torch"], alt["torch_variant"])
    if alt.get("driver_branch"):
        text += " on driver branch %s" % alt["driver_branch"]
    return text


def _raise_with_alternatives(rule, why, ctx, cuda_key=None):
    alts = alternatives(ctx)
    if alts:
        msg = "%s Requests that work: %s." % (why.rstrip(), "; ".join(format_alternative(a) for a in alts))
    else:
        msg = "%s No CUDA toolkit in the compatibility data (%s) supports this hardware%s." % (
            why.rstrip(), ", ".join(_CUDA_KEYS), " with this torch release" if ctx.torch else "")
    raise StackError(rule, msg, alts)
