# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Reading the machine-readable release sources into trimmed snapshots (network and git).

Each reader returns a JSON-ready dict that holds only what ``compat_refresh.build_release_data``
reads, with the address it came from and the date it was read, so a refresh can run again later
without the network from the recorded snapshots (tests/fixtures/compat-sources/).

* PyPI is read with urllib, never through pip (a pip configuration file can cap versions): the
  project JSON API for the release list, and per release the Linux x86_64 wheel's METADATA, from
  its PEP 658 ``.metadata`` file when the index advertises one, else from the wheel's zip
  directory with HTTP range requests (what pip's lazy-wheel reader does) so no wheel is downloaded.
* PyTorch's build matrix is the history of pytorch/test-infra
  ``tools/scripts/generate_binary_build_matrix.py``: at every commit, the stable and candidate
  releases and the CUDA versions of the release and test channels.
"""

from __future__ import annotations

import ast
import json
import re
import struct
import subprocess
import urllib.parse
import urllib.request
import zlib

PYPI = "https://pypi.org"
USER_AGENT = "gpufleet-compat-refresh (+https://github.com/gpufleet)"
TIMEOUT_S = 120
# Requires-Dist lines the build reads: the CUDA runtime, NCCL and cuDNN wheels, triton, and torch pins.
KEPT_REQUIREMENT = re.compile(r"^(nvidia-cuda-runtime|nvidia-nccl|nvidia-cudnn|cuda-toolkit|triton|torch)\b", re.I)
MATRIX_REPO = "pytorch/test-infra"
MATRIX_PATH = "tools/scripts/generate_binary_build_matrix.py"


class SourceError(RuntimeError):
    """A source could not be read or did not have the expected form."""


# ---------------------------------------------------------------- HTTP


def _open(url, headers=None):
    request = urllib.request.Request(url, headers=dict({"User-Agent": USER_AGENT}, **(headers or {})))
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # noqa: S310 - https URLs built here
    except OSError as exc:
        raise SourceError("cannot read %s: %s" % (url, exc)) from exc


def get_json(url):
    with _open(url, {"Accept": "application/json"}) as response:
        body = response.read()
    try:
        return json.loads(body)
    except ValueError:
        # An error page or a captive portal answers HTML with status 200.
        raise SourceError("%s answered something that is not JSON (it starts %r); expected PyPI's JSON API answer"
                          % (url, body[:60])) from None


def _get_range(url, start, end=None):
    """Bytes start..end (inclusive) of url, or the last -start bytes when start < 0; and the size."""
    spec = "bytes=%d" % start if start < 0 else "bytes=%d-%s" % (start, "" if end is None else end)
    with _open(url, {"Range": spec}) as response:
        if response.status != 206:
            raise SourceError("%s does not serve byte ranges (HTTP %s)" % (url, response.status))
        total = int(response.headers["Content-Range"].rsplit("/", 1)[1])
        return response.read(), total


# ---------------------------------------------------------------- wheel METADATA


def _end_of_directory(tail):
    """(entries offset, entries size) of a zip's central directory, from the file's last bytes."""
    at = tail.rfind(b"PK\x05\x06")
    if at < 0:
        raise SourceError("no zip end-of-directory record in the wheel's last bytes")
    _sig, _d, _ds, _n1, _n, size, offset, _c = struct.unpack("<IHHHHIIH", tail[at:at + 22])
    if offset == 0xFFFFFFFF or size == 0xFFFFFFFF:
        at64 = tail.rfind(b"PK\x06\x06")
        if at64 < 0:
            raise SourceError("zip64 wheel without a zip64 end-of-directory record")
        fields = struct.unpack("<IQHHIIQQQQ", tail[at64:at64 + 56])
        size, offset = fields[8], fields[9]
    return offset, size


def _zip64_extra(extra, sizes):
    """Replace the 0xFFFFFFFF fields of (usize, csize, offset) from a zip64 extra field, in order."""
    sizes = list(sizes)
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack("<HH", extra[pos:pos + 4])
        if tag == 1:
            values = iter(struct.unpack("<%dQ" % (length // 8), extra[pos + 4:pos + 4 + length - length % 8]))
            sizes = [next(values) if s == 0xFFFFFFFF else s for s in sizes]
        pos += 4 + length
    return sizes


def _metadata_entry(directory):
    """(method, compressed size, local header offset) of the *.dist-info/METADATA entry."""
    pos = 0
    while pos + 46 <= len(directory):
        fields = struct.unpack("<IHHHHHHIIIHHHHHII", directory[pos:pos + 46])
        method, csize, usize, nlen, elen, clen, offset = (fields[4], fields[8], fields[9], fields[10],
                                                          fields[11], fields[12], fields[16])
        name = directory[pos + 46:pos + 46 + nlen].decode("utf-8", "replace")
        if re.match(r"^[^/]+\.dist-info/METADATA$", name):
            extra = directory[pos + 46 + nlen:pos + 46 + nlen + elen]
            _usize, csize, offset = _zip64_extra(extra, (usize, csize, offset))
            return method, csize, offset
        pos += 46 + nlen + elen + clen
    raise SourceError("the wheel has no .dist-info/METADATA")


def wheel_metadata_by_range(url):
    """A wheel's METADATA text, read with HTTP range requests (directory, then the one member)."""
    tail, total = _get_range(url, -65536)
    base = total - len(tail)
    offset, size = _end_of_directory(tail)
    directory = tail[offset - base:offset - base + size] if offset >= base else _get_range(url, offset, offset + size - 1)[0]
    method, csize, local = _metadata_entry(directory)
    head, _total = _get_range(url, local, local + 30 + 1024 + csize)
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    raw = head[30 + name_len + extra_len:30 + name_len + extra_len + csize]
    if method == 8:
        raw = zlib.decompress(raw, -15)
    elif method != 0:
        raise SourceError("METADATA compressed with zip method %d" % method)
    return raw.decode("utf-8")


def wheel_metadata(file_entry, base_url):
    """METADATA of one PyPI file entry: PEP 658 ``.metadata`` when advertised, else by range."""
    url = urllib.parse.urljoin(base_url, file_entry["url"])
    advertised = file_entry.get("core-metadata") or file_entry.get("data-dist-info-metadata")
    if advertised:
        with _open(url + ".metadata") as response:
            return checked_metadata(response.read().decode("utf-8", "replace"), url + ".metadata")
    return checked_metadata(wheel_metadata_by_range(url), url)


def checked_metadata(text, url):
    """The text when it is a wheel's METADATA (core metadata starts with Metadata-Version); an HTML page
    or an empty answer is a SourceError naming the address."""
    if not text.lstrip().startswith("Metadata-Version:"):
        raise SourceError("%s is not a wheel's METADATA (it starts %r); expected 'Metadata-Version: ...'"
                          % (url, text[:60]))
    return text


def requires_dist(metadata_text):
    return [line.split(":", 1)[1].strip() for line in metadata_text.splitlines()
            if line.startswith("Requires-Dist:")]


# ---------------------------------------------------------------- PyPI snapshots


def _version_key(text):
    return tuple(int(p) for p in re.findall(r"\d+", text))


_FINAL = re.compile(r"^\d+(\.\d+)*$")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<ver>[^-]+)(-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


def pick_linux_wheel(files):
    """The Linux x86_64 wheel whose metadata stands for the release: the highest build tag (the one
    pip installs), then the lowest CPython ABI that is not free-threaded, then a py3-none/abi3 wheel;
    None when there is none."""
    candidates = []
    for entry in files:
        match = _WHEEL.match(entry["filename"])
        if not match or entry.get("yanked") or "x86_64" not in match["plat"] or "linux" not in match["plat"]:
            continue
        abi = match["abi"]
        if re.match(r"^cp\d+m?$", abi):
            rank = (0, _version_key(abi))
        elif abi in ("abi3", "none"):
            rank = (1, ())
        else:
            continue
        build = int(re.match(r"\d+", match["build"]).group()) if match["build"] else 0
        candidates.append((-build, rank, entry["filename"], entry))
    return min(candidates, key=lambda c: c[:3])[3] if candidates else None


def pypi_release_files(name):
    """{version: [file entries]} of a PyPI project (final releases only), and the URL read."""
    url = "%s/pypi/%s/json" % (PYPI, name)
    return {v: files for v, files in release_files_of(get_json(url), url).items() if _FINAL.match(v)}, url


def release_files_of(answer, url):
    """The ``releases`` mapping of a PyPI JSON API answer, checked: version -> list of file entries,
    each with a filename; anything else is a SourceError naming the address and what was wrong."""
    releases = answer.get("releases") if isinstance(answer, dict) else None
    if not isinstance(releases, dict):
        raise SourceError("%s: the answer has no 'releases' mapping of version -> files (got %s)"
                          % (url, type(releases).__name__ if releases is not None else "no 'releases' key"))
    for version, files in releases.items():
        if not isinstance(files, list):
            raise SourceError("%s: release %s lists %r, not a list of files" % (url, version, files))
        for entry in files:
            if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
                raise SourceError("%s: a file of release %s has no 'filename' (%r)" % (url, version, entry))
    return releases


def snapshot_metadata(name, keep_version, read_on, note_version=None):
    """Trimmed Requires-Dist of every kept final release's Linux x86_64 wheel; with note_version, the
    releases it names (newer than this gpufleet supports) are listed under ``unsupported``, unread."""
    releases, url = pypi_release_files(name)
    out = {}
    unsupported = [v for v in sorted(releases, key=_version_key) if note_version and note_version(v)]
    for version in sorted(releases, key=_version_key):
        if not keep_version(version):
            continue
        wheel = pick_linux_wheel(releases[version])
        if wheel is None:
            continue
        kept = [r for r in requires_dist(wheel_metadata(wheel, url)) if KEPT_REQUIREMENT.match(r)]
        out[version] = {"wheel": wheel["filename"], "uploaded": (wheel.get("upload_time") or "")[:10],
                        "requires_dist": kept}
    snapshot = {"source": url, "read": read_on, "releases": out}
    if note_version:
        snapshot["unsupported"] = unsupported
    return snapshot


def snapshot_release_list(name, read_on):
    """The final releases of a PyPI project that have a file that is not yanked."""
    releases, url = pypi_release_files(name)
    live = [v for v, files in releases.items() if any(not f.get("yanked") for f in files)]
    return {"source": url, "read": read_on, "releases": sorted(live, key=_version_key)}


# ---------------------------------------------------------------- PyTorch's build matrix (git)


def _git(repo, *args):
    done = subprocess.run(["git", "-C", str(repo), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=False)
    if done.returncode != 0:
        raise SourceError("git %s in %s failed: %s" % (" ".join(args), repo, done.stderr.strip()))
    return done.stdout


def _assigned(tree, name):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def matrix_fields(source_text):
    """stable, candidate and the release/test CUDA lists of one version of the matrix script; None
    for a version that does not parse (a few commits in its history were broken)."""
    try:
        tree = ast.parse(source_text)
    except SyntaxError:
        return None
    arches = _assigned(tree, "CUDA_ARCHES_DICT") or {}
    return {"stable": _assigned(tree, "CURRENT_STABLE_VERSION"),
            "candidate": _assigned(tree, "CURRENT_CANDIDATE_VERSION"),
            "release": arches.get("release"), "test": arches.get("test")}


def snapshot_build_matrix(repo, read_on):
    """Every commit of the matrix script that changed what it says, oldest first."""
    head = _git(repo, "rev-parse", "HEAD").strip()
    log = _git(repo, "log", "--reverse", "--format=%H %cs", "HEAD", "--", MATRIX_PATH).split("\n")
    commits, last = [], None
    for line in filter(None, log):
        sha, date = line.split()
        fields = matrix_fields(_git(repo, "show", "%s:%s" % (sha, MATRIX_PATH)))
        if fields is None:
            continue
        if fields != last and fields["stable"]:
            commits.append(dict(commit=sha, date=date, **fields))
        last = fields
    return {"repo": MATRIX_REPO, "path": MATRIX_PATH, "head": head,
            "head_date": _git(repo, "log", "-1", "--format=%cs", head).strip(), "read": read_on, "commits": commits}
