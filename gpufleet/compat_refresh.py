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

import ast
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


# The torch majors this gpufleet's solver is written for; releases of a newer major are reported as seen
# and not supported (their names are stored, their metadata is not read: see docs/compatibility.md).
SUPPORTED_TORCH_MAJORS = (2,)


class SnapshotError(ValueError):
    """A source's answer or a snapshot does not have the form the build reads; the message names the
    source and what was wrong."""


def version_key(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text)))


def load_snapshots(directory):
    """{snapshot name: parsed JSON} for every snapshot the build reads; a missing one is an error."""
    out = {}
    for name in SNAPSHOTS:
        path = Path(directory) / ("%s.json" % name)
        if not path.is_file():
            raise FileNotFoundError("snapshot %s is missing from %s" % (path.name, directory))
        try:
            out[name] = json.loads(path.read_text())
        except ValueError as exc:
            raise SnapshotError("snapshot %s is not valid JSON (%s): restore it from git or refresh again"
                                % (path, exc)) from None
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
    """The release data from the snapshots; SnapshotError when a snapshot or the result is not what the
    solver can use (snapshot_problems and release_data_problems say what is checked)."""
    problems = snapshot_problems(snaps)
    if problems:
        raise SnapshotError("the sources' answers cannot be used:\n  " + "\n  ".join(problems))
    torch = _torch_releases(snaps)
    sources = _sources(snaps)
    data = {
        "refreshed": max(s["read"] for s in sources),
        "sources": sources,
        "torch": torch,
        "torch_not_supported": sorted(snaps["pypi-torch"].get("unsupported", []), key=version_key),
        "nccl_wheels": {n.rsplit("-", 1)[1]: snaps["pypi-%s" % n]["releases"] for n in PYPI_RELEASE_LISTS
                        if n.startswith("nvidia-nccl-")},
        "cuda_runtime_wheels": {n: snaps["pypi-%s" % n]["releases"] for n in PYPI_RELEASE_LISTS
                                if n.startswith("nvidia-cuda-runtime")},
    }
    problems = release_data_problems(data, snaps)
    if problems:
        raise SnapshotError("the release data read is incomplete, nothing was written:\n  " + "\n  ".join(problems))
    return data


# ---------------------------------------------------------------- variant channels


def variant_channels(matrix, release, default):
    """({channel: variants}, check) for a torch release: the CUDA variants each channel that was read
    names (the build matrix's release channel while it was stable, its test channel while it was the
    candidate, the default PyPI wheel's one variant), and "agree" when two matrix channels were read and
    agree with each other and the default wheel, "disagree" when any two differ, "one channel" when
    only one list was read (a single source is not taken as complete)."""
    channels = {}
    for channel, role in (("release", "stable"), ("test", "candidate")):
        hits = [c for c in matrix["commits"] if c.get(role) == release and c.get(channel)]
        if hits:
            channels["matrix-%s" % channel] = [variant_of(c) for c in hits[-1][channel]]
    if default:
        channels["pypi-default"] = [default]
    lists = [v for k, v in channels.items() if k.startswith("matrix-")]
    if any(v != lists[0] for v in lists) or (default and lists and any(default not in v for v in lists)):
        return channels, "disagree"
    return channels, "agree" if len(lists) > 1 else "one channel"


def channel_fields(version, release, snaps):
    """A built torch release's variants_channels and variants_check (variant_channels)."""
    channels, check = variant_channels(snaps[MATRIX_SNAPSHOT], version, release["default_variant"])
    return {"variants_channels": channels, "variants_check": check}


def _torch_releases(snaps):
    out = {}
    for version, entry in sorted(snaps["pypi-torch"]["releases"].items(), key=lambda kv: version_key(kv[0])):
        release = torch_release(version, entry, snaps)
        out[version] = dict(release, **channel_fields(version, release, snaps))
    return out


# ---------------------------------------------------------------- checks before anything is written


def _where(name, snap):
    """The address a snapshot was read from, for messages."""
    if isinstance(snap, dict) and isinstance(snap.get("source"), str):
        return snap["source"]
    if isinstance(snap, dict) and all(isinstance(snap.get(k), str) for k in ("repo", "head", "path")):
        return "https://github.com/%s/blob/%s/%s" % (snap["repo"], snap["head"], snap["path"])
    return "snapshot %s" % name


def _is_text(value, empty_ok=False):
    return isinstance(value, str) and (empty_ok or bool(value.strip()))


def _metadata_problems(snap):
    out = []
    if not isinstance(snap.get("releases"), dict) or not snap["releases"]:
        return ["no releases in the answer (expected final releases, each with its wheel's Requires-Dist); an "
                "empty answer never replaces the data"]
    for version, entry in snap["releases"].items():
        if not re.match(r"^\d+(\.\d+)*$", version) or not isinstance(entry, dict):
            out.append("release %r: %r is not a release entry" % (version, entry))
        elif not _is_text(entry.get("wheel")) or not _is_text(entry.get("uploaded"), True) or not (
                isinstance(entry.get("requires_dist"), list) and all(map(_is_text, entry["requires_dist"]))):
            out.append("release %s: expected wheel (a file name), uploaded (a date) and requires_dist (a list of "
                       "lines), got %r" % (version, entry))
    if not isinstance(snap.get("unsupported", []), list) or not all(map(_is_text, snap.get("unsupported", []))):
        out.append("unsupported is %r, not a list of versions" % (snap.get("unsupported"),))
    return out


def _matrix_problems(snap):
    out = ["%s is %r, not a string" % (k, snap.get(k)) for k in ("repo", "path", "head", "head_date")
           if not _is_text(snap.get(k))]
    commits = snap.get("commits")
    if not isinstance(commits, list) or not commits:
        return out + ["no commits of the build matrix script were read"]
    for commit in commits:
        if not isinstance(commit, dict) or not _is_text(commit.get("commit")) or not _is_text(commit.get("stable")) \
                or any(not (commit.get(k) is None or isinstance(commit.get(k), list)) for k in ("release", "test")):
            out.append("commit entry %r lacks commit/stable or has non-list channels" % (commit,))
    return out


def snapshot_problems(snaps):
    """Lines naming each snapshot (by its address) that lacks what the build reads, and what was wrong."""
    out = []
    for name in SNAPSHOTS:
        snap = snaps.get(name)
        if not isinstance(snap, dict):
            out.append("%s: missing or not a mapping (%s)" % (name, type(snap).__name__))
            continue
        problems = [] if _is_text(snap.get("read")) else ["read is %r, not a date" % (snap.get("read"),)]
        if name == MATRIX_SNAPSHOT:
            problems += _matrix_problems(snap)
        elif name[len("pypi-"):] in PYPI_METADATA:
            problems += _metadata_problems(snap)
        elif not isinstance(snap.get("releases"), list) or not snap["releases"] or not all(map(_is_text, snap["releases"])):
            problems.append("releases is %r, expected a non-empty list of versions" % (snap.get("releases"),))
        out += ["%s: %s" % (_where(name, snap), p) for p in problems]
    return out


# field -> (the snapshot it is read from, what a good value is)
_TEXT = "a non-empty string"
_TORCH_FIELDS = {
    "variants": (MATRIX_SNAPSHOT, "a non-empty list of CUDA variants like ['cu126', 'cu128']"),
    "variants_source": (MATRIX_SNAPSHOT, _TEXT),
    "default_variant": ("pypi-torch", "a CUDA variant like 'cu128' (from the default wheel's CUDA runtime pin)"),
    "default_cuda_runtime": ("pypi-torch", "a version (the default wheel's CUDA runtime pin in Requires-Dist)"),
    "bundled_nccl": ("pypi-torch", _TEXT + " (the default wheel's nvidia-nccl pin)"),
    "cudnn": ("pypi-torch", _TEXT + " (the default wheel's nvidia-cudnn pin)"),
    "triton": ("pypi-torch", _TEXT + " (the default wheel's triton pin)"),
    "torchvision": ("pypi-torchvision", "a version, or '' where PyPI has none for this torch"),
    "torchaudio": ("pypi-torchaudio", "a version, or '' where PyPI has none for this torch"),
    "wheel": ("pypi-torch", _TEXT + " (the wheel whose METADATA was read)"),
    "uploaded": ("pypi-torch", "a date like 2026-12-05"),
    "variants_channels": (MATRIX_SNAPSHOT, "a mapping of channel -> variants"),
    "variants_check": (MATRIX_SNAPSHOT, "'agree', 'disagree' or 'one channel'"),
}


def _field_ok(field, value):
    if field == "variants":
        return isinstance(value, list) and bool(value) and all(_is_text(v) and re.match(r"^cu\d+$", v) for v in value)
    if field == "variants_channels":
        return isinstance(value, dict) and bool(value) and all(isinstance(v, list) for v in value.values())
    if field == "variants_check":
        return value in ("agree", "disagree", "one channel")
    if field == "uploaded":
        return _is_text(value) and bool(re.match(r"^\d{4}-\d\d-\d\d$", value))
    return _is_text(value, empty_ok=field in ("torchvision", "torchaudio"))


def release_data_problems(data, snaps):
    """Lines naming each torch release and field whose value is missing, of the wrong type or empty,
    with the address it was read from and what a good value is; and an empty torch or wheel list."""
    out = []
    if not data.get("torch"):
        out.append("%s: no torch releases" % _where("pypi-torch", snaps.get("pypi-torch")))
    for version, entry in (data.get("torch") or {}).items():
        for field, (snapshot, wanted) in _TORCH_FIELDS.items():
            value = entry.get(field, _MISSING)
            if value is _MISSING or not _field_ok(field, value):
                out.append("torch %s: %s is %s (from %s): expected %s" % (
                    version, field, "missing" if value is _MISSING else repr(value),
                    _where(snapshot, snaps.get(snapshot)), wanted))
    for group in ("nccl_wheels", "cuda_runtime_wheels"):
        for name, versions in (data.get(group) or {}).items():
            if not versions:
                out.append("%s %s: no releases" % (group, name))
    return out


_MISSING = object()


def lost_releases(old, new):
    """Lines naming each release the old data has and the new one lacks (torch, NCCL and CUDA runtime
    wheels): a refresh that would lose them needs --allow-shrink."""
    out = ["torch %s is in the data but not in what the sources answered" % v
           for v in old.get("torch", {}) if v not in new["torch"]]
    for group in ("nccl_wheels", "cuda_runtime_wheels"):
        for name, versions in old.get(group, {}).items():
            gone = [v for v in versions if v not in new[group].get(name, [])]
            if gone:
                out.append("%s %s: %s in the data but not in what the sources answered"
                           % (group.replace("_", " "), name, ", ".join(gone)))
    return out


def not_supported_line(data):
    """The line a refresh, --check and show print for torch releases seen but not supported, or None."""
    seen = data.get("torch_not_supported") or []
    if not seen:
        return None
    return ("seen, not supported by this gpufleet: torch %s (this gpufleet plans torch %s only; their metadata "
            "was not read)" % (", ".join(seen), ", ".join("%d.x" % m for m in SUPPORTED_TORCH_MAJORS)))


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


def checked_module_text(data, path):
    """The module text for data, compiled and read back before anything is written: SnapshotError when
    it does not compile or does not give back exactly data."""
    text = render_module(data)
    try:
        tree = compile(text, str(path), "exec", ast.PyCF_ONLY_AST)
        compile(tree, str(path), "exec")
        assigned = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                        and any(getattr(t, "id", None) == "RELEASE_DATA" for t in n.targets))
        read_back = ast.literal_eval(assigned)
    except (SyntaxError, ValueError, StopIteration) as exc:
        raise SnapshotError("the rendered data module does not compile (%s: %s); %s was left as it was"
                            % (type(exc).__name__, exc, path)) from None
    if read_back != data:
        raise SnapshotError("the rendered data module does not read back as the data built; %s was left as it was"
                            % path)
    return text
