# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Whether a wheel index (a PEP 503 simple index, a mirror, or a directory of wheels) holds the planned wheels.

Pure functions; the wheel_index_info module fetches the pages or lists the directory. Formats:

- a PEP 503 project page (``<index>/<normalized name>/``): one ``<a href="...#sha256=...">FILENAME</a>`` per
  file (real capture: tests/fixtures/wheels/pypi-simple-torchaudio.html);
- wheel file names (PEP 427): ``{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl``, each tag
  possibly a dotted set (``manylinux2014_x86_64.manylinux_2_17_x86_64``).

A wheel fits the node when one of its python tags is the node's CPython (``cp311``) or a generic ``py3``, its
ABI is the node's, ``abi3`` or ``none``, and one of its platforms is ``any`` or a Linux one for the node's
machine (``manylinux*_x86_64``, ``linux_x86_64``). The glibc floor of ``manylinux_2_X`` is not judged here: pip
judges it when it installs.
"""

from __future__ import annotations

import html
import re
from urllib.parse import unquote, urlsplit, urlunsplit

from ansible_collections.gpufleet.cluster.plugins.module_utils import versions

_ANCHOR = re.compile(r"<a\s[^>]*href=\"([^\"]*)\"[^>]*>([^<]*)</a>", re.I)


def normalize(name: str) -> str:
    """PEP 503 name normalisation: ``Torch_Vision`` -> ``torch-vision``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_simple_index(page: str) -> list:
    """File names on a PEP 503 project page (the anchor text, else the href's last path part)."""
    names = []
    for href, text in _ANCHOR.findall(page or ""):
        name = html.unescape(text).strip() or unquote(href.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1])
        if name:
            names.append(name)
    return names


def parse_wheel_name(filename: str) -> dict | None:
    """PEP 427 file name -> ``{name, version, python, abi, platform}`` (tag sets as lists), else None."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    name, version = parts[0], parts[1]
    python, abi, platform = parts[-3], parts[-2], parts[-1]
    return {"name": normalize(name), "version": version, "python": python.split("."), "abi": abi.split("."),
            "platform": platform.split(".")}


def fits(wheel: dict, python_tag: str, machine: str) -> bool:
    """The wheel installs on a node whose interpreter is ``python_tag`` (``cp311``) and machine ``machine``."""
    major = python_tag[2:3]
    pythons = {python_tag, "py" + major, "py" + python_tag[2:]}
    abi_ok = any(a in (python_tag, "abi3", "none") for a in wheel["abi"])
    platform_ok = any(p == "any" or (p.startswith(("manylinux", "linux_")) and p.endswith("_" + machine))
                      for p in wheel["platform"])
    return bool(pythons & set(wheel["python"])) and abi_ok and platform_ok


def check_wheels(requests, files: dict, python_tag: str, machine: str, where: str) -> dict:
    """Every planned wheel against what the index offers.

    ``requests``: ``[{name, version}]`` (``version`` with its local label: ``2.1.2+cu121``). ``files``: normalized
    name -> the file names the index lists for it (missing: the index has no page for it). ``where``: the index or
    directory, as the messages name it. Returns ``{ok, found: {name: filename}, missing: [...], message}``.
    """
    found, missing = {}, []
    for request in requests:
        name, version = normalize(request["name"]), request["version"]
        parsed = [(f, parse_wheel_name(f)) for f in files.get(name) or []]
        parsed = [(f, w) for f, w in parsed if w and w["name"] == name]
        wheels = [w for _f, w in parsed]
        fitting = [w for w in wheels if fits(w, python_tag, machine)]
        hit = next((f for f, w in parsed if w["version"] == version and fits(w, python_tag, machine)), None)
        if hit:
            found[request["name"]] = hit
            continue
        missing.append({"name": request["name"], "version": version,
                        "problem": _problem(request["name"], version, name in files, wheels, fitting,
                                            python_tag, machine, where)})
    return {"ok": not missing, "found": found, "missing": missing,
            "message": "; ".join(m["problem"] for m in missing)}


def _problem(name, version, listed, wheels, fitting, python_tag, machine, where) -> str:
    if not listed:
        return f"{where} has no {name} at all"
    elsewhere = sorted({t for w in wheels if w["version"] == version for t in w["python"]})
    if elsewhere:
        return (f"{where} has {name} {version} only for {', '.join(elsewhere)}, not for this node's {python_tag} "
                f"on {machine}")
    same_variant = "+" + version.partition("+")[2] if "+" in version else ""
    offered = sorted({w["version"] for w in fitting if not same_variant or w["version"].endswith(same_variant)},
                     key=versions.sort_key("pep440"), reverse=True)
    kind = f"{same_variant[1:]} " if same_variant else ""
    offers = (f"{kind}{', '.join(offered[:12])}" if offered
              else f"no {kind}{name} wheel that fits this node")
    return f"{where} has no {name} {version} for {python_tag} on {machine}; it offers {offers}"


def public_url(url: str) -> str:
    """The index URL without credentials, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query, parts.fragment))
