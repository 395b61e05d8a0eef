# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""From recorded source snapshots to the shipped release data, and what the sources have that the
data lacks. Pure functions: compat_sources reads the network, this module only transforms.

The output is plugins/module_utils/compat_release_data.py, a Python literal (so module_utils can
import it on a node as on the controller), written so that the same snapshots always give the same
bytes: tests/unit/gpufleet/test_compat_refresh.py rebuilds it from tests/fixtures/compat-sources/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# snapshot file -> what it holds (tests/fixtures/compat-sources/SOURCES.md explains each)
PYPI_METADATA = ("torch", "torchvision", "torchaudio")
# NVIDIA's CUDA 13 runtime wheel is nvidia-cuda-runtime; nvidia-cuda-runtime-cu13 holds placeholders only.
PYPI_RELEASE_LISTS = ("nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cuda-runtime-cu12",
                      "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime")
MATRIX_SNAPSHOT = "github-pytorch-test-infra-build-matrix"
SNAPSHOTS = tuple("pypi-%s" % n for n in PYPI_METADATA + PYPI_RELEASE_LISTS) + (MATRIX_SNAPSHOT,)

HEADER = '''# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Release data read from its sources by `gpufleet compat refresh` (GENERATED: do not edit).

PyPI (torch, torchvision, torchaudio and their default Linux x86_64 wheels' Requires-Dist; NVIDIA's
NCCL and CUDA runtime wheels) and PyTorch's build matrix (pytorch/test-infra history). Each source
below names the address it was read from and the date; the snapshots are in
tests/fixtures/compat-sources/. Facts with no machine-readable source are in compat_facts.py.
"""

'''


def version_key(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text)))


def load_snapshots(directory):
    """{snapshot name: parsed JSON} for every snapshot the build reads; a missing one is an error."""
    out = {}
    for name in SNAPSHOTS:
        path = Path(directory) / ("%s.json" % name)
        if not path.is_file():
            raise FileNotFoundError("snapshot %s is missing from %s" % (path.name, directory))
        out[name] = json.loads(path.read_text())
    return out


def dump_snapshot(data):
    """The text a snapshot file holds (stable key order, one trailing newline)."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


# ---------------------------------------------------------------- Requires-Dist


_REQ = re.compile(r"^\s*(?P<name>[A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*\(?\s*(?P<spec>[^;)]*)\)?\s*(;.*)?$")


def parse_requirement(text):
    """(normalised name, [(operator, version)]) of one Requires-Dist line."""
    match = _REQ.match(text)
    if not match:
        return None, []
    specs = [(m.group(1), m.group(2)) for m in re.finditer(r"(==|>=|<=|~=|!=|<|>)\s*([0-9][0-9A-Za-z.*+]*)",
                                                           match["spec"])]
    return match["name"].lower().replace("_", "-"), specs


def exact_pins(requires):
    """{name: version} of the ``==`` pins (and ``~=`` for triton) among Requires-Dist lines."""
    pins = {}
    for line in requires:
        name, specs = parse_requirement(line)
        for op, version in specs:
            if op in ("==", "~="):
                pins[name] = version
    return pins


def wheel_cuda(pins):
    """(CUDA X.Y, runtime version) the default wheel is built for, from its CUDA runtime pin."""
    for name in ("nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "cuda-toolkit"):
        if name in pins:
            major_minor = ".".join(pins[name].split(".")[:2])
            return major_minor, pins[name]
    return None, None


def variant_of(cuda):
    """"12.1" -> "cu121"."""
    major, minor = cuda.split(".")[:2]
    return "cu%s%s" % (major, minor)


def _first_pin(pins, prefix):
    return next((v for k, v in sorted(pins.items()) if k.startswith(prefix)), None)


# ---------------------------------------------------------------- the build matrix


def matrix_variants(matrix, release):
    """(variants, where) for a torch release from the build matrix history: the release channel's
    CUDA list at the last commit where it was the stable release, else the test channel's at the last
    commit where it was the candidate (release candidates); ([], None) when it is in neither."""
    for channel, role in (("release", "stable"), ("test", "candidate")):
        hits = [c for c in matrix["commits"] if c.get(role) == release and c.get(channel)]
        if hits:
            last = hits[-1]
            where = "%s@%s %s channel, %s %s (%s)" % (matrix["repo"], last["commit"][:12], channel, role,
                                                      release, last["date"])
            return [variant_of(c) for c in last[channel]], where
    return [], None


# ---------------------------------------------------------------- torchvision / torchaudio


def _admits(specs, torch_version):
    """Whether a companion's torch requirement admits this torch: ``==`` exactly, ``>=`` only within
    the same minor release (a later minor brings a companion of its own, or none)."""
    ok = bool(specs)
    for op, version in specs:
        if op == "==":
            ok = ok and version_key(torch_version) == version_key(version)
        elif op == ">=":
            ok = ok and version_key(torch_version) >= version_key(version)
            ok = ok and version_key(torch_version)[:2] == version_key(version)[:2]
        else:
            ok = False
    return ok


def companion_for(snapshot, torch_version):
    """The torchvision/torchaudio release for a torch release: the newest whose torch requirement
    admits it (an exact pin first), else the one with no torch requirement and the same version
    number; '' when PyPI has none."""
    exact, admitted = [], []
    for version, entry in snapshot["releases"].items():
        specs = next((s for name, s in map(parse_requirement, entry["requires_dist"]) if name == "torch"), [])
        if specs and _admits(specs, torch_version):
            (exact if any(op == "==" for op, _v in specs) else admitted).append(version)
        elif not specs and version_key(version) == version_key(torch_version):
            admitted.append(version)
    for found in (exact, admitted):
        if found:
            return max(found, key=version_key)
    return ""


# ---------------------------------------------------------------- the Pythons a release installs on


def _admits_python(clause, python):
    """Whether one Requires-Python clause (">=3.9.0", "!=3.3.*", "<3.13") admits Python X.Y (any of its
    patch releases: "!=3.6.0" leaves 3.6 in)."""
    match = re.match(r"^\s*(===|==|!=|>=|<=|~=|>|<)\s*([0-9][0-9.]*)(\.\*)?\s*$", clause)
    if not match:
        return True
    op, version, wildcard = match.groups()
    want, have = version_key(version), version_key(python)[:2]
    if op in ("==", "==="):
        return have == want[:2]
    if op == "!=":
        return have != want[:2] if (wildcard or len(want) <= 2) else True
    if op == ">=" or op == "~=":
        return have >= want[:2]
    if op == ">":
        return have > want[:2] or (have == want[:2] and len(want) > 2)
    if op == "<=":
        return have <= want[:2]
    return have < want[:2] or (have == want[:2] and len(want) > 2 and want[2] > 0)


def python_range(entry):
    """The Pythons (X.Y) a release installs on: its Linux x86_64 wheels' CPython tags that its
    Requires-Python admits (PyPI publishes both; torch 2.5.0 says >=3.8.0 but has no cp38 wheel),
    with what they were read from and when; None for a snapshot without them."""
    if "python_tags" not in entry:
        return None
    # Files of one release that publish different Requires-Python: a Python any of them admits.
    alternatives = [[c for c in text.split(",") if c.strip()] for text in entry["requires_python"].split("|")]
    versions = [p for p in entry["python_tags"]
                if any(all(_admits_python(c, p) for c in clauses) for clauses in alternatives)]
    return {"versions": versions, "requires_python": entry["requires_python"], "wheel_tags": entry["python_tags"],
            "read": entry["python_read"]}


# ---------------------------------------------------------------- assembling the data


def torch_release(version, entry, snaps):
    pins = exact_pins(entry["requires_dist"])
    cuda, runtime = wheel_cuda(pins)
    default = variant_of(cuda) if cuda else None
    variants, where = matrix_variants(snaps[MATRIX_SNAPSHOT], version)
    if not variants and default:
        variants, where = [default], "not in the build matrix read; the default PyPI wheel's variant only"
    return {
        "variants": variants,
        "variants_source": where,
        "default_variant": default,
        "default_cuda_runtime": runtime,
        "bundled_nccl": _first_pin(pins, "nvidia-nccl-"),
        "cudnn": _first_pin(pins, "nvidia-cudnn-"),
        "triton": pins.get("triton"),
        "torchvision": companion_for(snaps["pypi-torchvision"], version),
        "torchaudio": companion_for(snaps["pypi-torchaudio"], version),
        "wheel": entry["wheel"],
        "uploaded": entry["uploaded"],
        "python": python_range(entry),
    }


def _sources(snaps):
    out = []
    for name in PYPI_METADATA + PYPI_RELEASE_LISTS:
        snap = snaps["pypi-%s" % name]
        how = "JSON API; METADATA of each release's Linux x86_64 wheel" if name in PYPI_METADATA else "JSON API"
        out.append({"name": "pypi:%s" % name, "url": snap["source"], "read": snap["read"], "how": how})
    matrix = snaps[MATRIX_SNAPSHOT]
    out.append({"name": "github:%s" % matrix["repo"], "url": "https://github.com/%s/blob/%s/%s" % (
        matrix["repo"], matrix["head"], matrix["path"]), "read": matrix["read"],
        "how": "git history of %s up to commit %s (%s)" % (matrix["path"], matrix["head"], matrix["head_date"])})
    return out


def build_release_data(snaps):
    torch = {v: torch_release(v, e, snaps)
             for v, e in sorted(snaps["pypi-torch"]["releases"].items(), key=lambda kv: version_key(kv[0]))}
    sources = _sources(snaps)
    return {
        "refreshed": max(s["read"] for s in sources),
        "sources": sources,
        "torch": torch,
        "nccl_wheels": {n.rsplit("-", 1)[1]: snaps["pypi-%s" % n]["releases"] for n in PYPI_RELEASE_LISTS
                        if n.startswith("nvidia-nccl-")},
        "cuda_runtime_wheels": {n: snaps["pypi-%s" % n]["releases"] for n in PYPI_RELEASE_LISTS
                                if n.startswith("nvidia-cuda-runtime")},
    }


# ---------------------------------------------------------------- the Python literal


def _literal(value, indent):
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ["%s    %r: %s," % (pad, k, _literal(v, indent + 4)) for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        flat = "[%s]" % ", ".join(_literal(v, indent) for v in value)
        if len(flat) + indent < 100:
            return flat
        return "[\n" + "\n".join("%s    %s," % (pad, _literal(v, indent + 4)) for v in value) + "\n" + pad + "]"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    raise TypeError("cannot write %r into the release data" % (value,))


def render_module(data):
    return HEADER + "RELEASE_DATA = " + _literal(data, 0) + "\n"
