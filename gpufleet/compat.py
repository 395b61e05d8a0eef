# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""`gpufleet compat refresh [--check|--offline]` and `gpufleet compat show`.

refresh   reads PyPI and PyTorch's build matrix, records trimmed snapshots of what it read, and
          regenerates plugins/module_utils/compat_release_data.py from them;
          --offline regenerates it from the recorded snapshots only (no network);
          --check reads the sources and lists what they have that the shipped data lacks (exit 1),
          changing nothing.
show      prints what the data knows, where each part came from and how old it is.

Nothing is written unless every source answered in the expected form and every torch release has
every field (typed, non-empty); a refresh that would lose releases the data has needs --allow-shrink.
The snapshots and the data module are written atomically (gpufleet.safe_files), the module only after
it compiled and read back as the data built.

Exit codes: 0 done (or, with --check, nothing is missing), 1 --check found something missing,
2 a source could not be read or answered something unusable (the message names its address), the
refresh would lose releases, a file could not be written, or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from gpufleet import children, collection, compat_refresh, compat_sources, console, safe_files

DATA_MODULE = Path("plugins/module_utils/compat_release_data.py")
FACTS_MODULE = Path("plugins/module_utils/compat_facts.py")
SNAPSHOT_DIR = Path("tests/fixtures/compat-sources")
TEST_INFRA_URL = "https://github.com/pytorch/test-infra"
EXIT_MISSING = 1
EXIT_BROKEN = 2


def _root():
    found = collection.locate()
    if found is None:
        raise SystemExit("gpufleet compat: the gpufleet.cluster collection was not found next to this package")
    return found.root


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped_data(root=None):
    return _load_module((root or _root()) / DATA_MODULE, "gpufleet_compat_release_data").RELEASE_DATA


# ---------------------------------------------------------------- reading the sources


def _is_torch2(version):
    return compat_refresh.version_key(version)[0] in compat_refresh.SUPPORTED_TORCH_MAJORS


def _is_newer_than_supported(version):
    """A torch release of a major newer than the solver supports: reported as seen, not dropped silently."""
    return compat_refresh.version_key(version)[0] > max(compat_refresh.SUPPORTED_TORCH_MAJORS)


def _is_torchvision_for_torch2(version):
    return compat_refresh.version_key(version)[:2] >= (0, 15)


def _clone_test_infra(workdir):
    target = Path(workdir) / "test-infra"
    done = children.run(["git", "clone", "--quiet", "--filter=blob:none", "--no-checkout", TEST_INFRA_URL,
                         str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise compat_sources.SourceError("cannot clone %s: %s" % (TEST_INFRA_URL, done.stderr.strip()))
    return target


def read_sources(test_infra, read_on):
    """{snapshot name: trimmed snapshot} read from the network (and a pytorch/test-infra clone)."""
    keep = {"torch": _is_torch2, "torchvision": _is_torchvision_for_torch2, "torchaudio": _is_torch2}
    snaps = {}
    for name in compat_refresh.PYPI_METADATA:
        print("reading PyPI %s (release list and wheel METADATA)..." % name, file=sys.stderr, flush=True)
        snaps["pypi-%s" % name] = compat_sources.snapshot_metadata(
            name, keep[name], read_on, note_version=_is_newer_than_supported if name == "torch" else None)
    for name in compat_refresh.PYPI_RELEASE_LISTS:
        snaps["pypi-%s" % name] = compat_sources.snapshot_release_list(name, read_on)
    with tempfile.TemporaryDirectory(prefix="gpufleet-test-infra-") as tmp:
        repo = test_infra or _clone_test_infra(tmp)
        print("reading the build matrix history in %s..." % repo, file=sys.stderr, flush=True)
        snaps[compat_refresh.MATRIX_SNAPSHOT] = compat_sources.snapshot_build_matrix(repo, read_on)
    return snaps


# ---------------------------------------------------------------- what the data lacks


def missing_from(data, fresh):
    """Lines naming what the freshly read data has that the shipped data lacks or states otherwise."""
    out = []
    for version, entry in fresh["torch"].items():
        have = data["torch"].get(version)
        if have is None:
            out.append("torch %s (variants %s, default %s) is not in the data" % (
                version, ", ".join(entry["variants"]), entry["default_variant"]))
            continue
        for key in ("variants", "default_variant", "bundled_nccl", "torchvision", "torchaudio"):
            if have.get(key) != entry.get(key):
                out.append("torch %s: %s is %r in the sources, %r in the data" % (version, key, entry[key], have.get(key)))
    for group in ("nccl_wheels", "cuda_runtime_wheels"):
        for name, versions in fresh[group].items():
            new = [v for v in versions if v not in data[group].get(name, [])]
            if new:
                out.append("%s %s: %s not in the data" % (group.replace("_", " "), name, ", ".join(new)))
    if set(fresh.get("torch_not_supported", [])) - set(data.get("torch_not_supported", [])):
        out.append(compat_refresh.not_supported_line(fresh))
    old = {s["name"]: s for s in data["sources"]}
    for source in fresh["sources"]:
        if source["name"].startswith("github:") and source["how"] != old.get(source["name"], {}).get("how"):
            out.append("%s moved on: %s" % (source["name"], source["how"]))
    return out


# ---------------------------------------------------------------- commands


def cmd_refresh(args):
    root = None if args.output and args.snapshots else _root()
    snapshots = args.snapshots or root / SNAPSHOT_DIR
    output = args.output or root / DATA_MODULE
    if args.offline:
        snaps = compat_refresh.load_snapshots(snapshots)
    else:
        snaps = read_sources(args.test_infra, args.date)
    data = compat_refresh.build_release_data(snaps)
    seen = compat_refresh.not_supported_line(data)
    if args.check:
        lacking = missing_from(shipped_data(root), data)
        for line in lacking:
            print(line)
        print("the release data is current" if not lacking else "%d difference(s): run `gpufleet compat refresh` "
              "and review the diff" % len(lacking))
        return EXIT_MISSING if lacking else 0
    if seen:
        print(seen)
    lost = compat_refresh.lost_releases(_previous_data(output), data)
    if lost and not args.allow_shrink:
        print("gpufleet compat: refusing to write %s with fewer releases than it has:\n  %s\nif the sources really "
              "dropped them, run again with --allow-shrink" % (output, "\n  ".join(lost)), file=sys.stderr)
        return EXIT_BROKEN
    text = compat_refresh.checked_module_text(data, output)
    if not args.offline:
        Path(snapshots).mkdir(parents=True, exist_ok=True)
        for name, snap in snaps.items():
            safe_files.write_atomically(Path(snapshots) / ("%s.json" % name), compat_refresh.dump_snapshot(snap))
    safe_files.write_atomically(Path(output), text)
    print("wrote %s (%d torch releases, refreshed %s)" % (output, len(data["torch"]), data["refreshed"]))
    return 0


def _previous_data(output):
    """The data the module being replaced holds ({} when there is none or it does not load: then there
    is nothing to compare, and the shrink check says nothing)."""
    if not Path(output).is_file():
        return {}
    try:
        return _load_module(Path(output), "gpufleet_previous_release_data").RELEASE_DATA
    except Exception as exc:  # noqa: BLE001 - a broken old module is replaced, not a reason to stop
        print("gpufleet compat: the current %s does not load (%s); it will be replaced" % (output, exc),
              file=sys.stderr)
        return {}


def _age(date_text, today):
    days = (today - datetime.date.fromisoformat(date_text)).days
    return "%s, %d day%s ago" % (date_text, days, "" if days == 1 else "s")


def show_lines(data, facts, today):
    """What `compat show` prints: the release data with its sources' ages, then the sourced table's."""
    lines = ["release data refreshed %s" % _age(data["refreshed"], today)]
    lines += ["  %-32s read %s  %s" % (s["name"], s["read"], s["url"]) for s in data["sources"]]
    seen = compat_refresh.not_supported_line(data)
    lines += [seen] if seen else []
    lines.append("torch releases (variants; default PyPI wheel; bundled NCCL; torchvision; torchaudio):")
    for version, e in data["torch"].items():
        lines.append("  %-7s %-28s default %-6s nccl %-7s vision %-7s audio %s%s" % (
            version, ",".join(e["variants"]), e["default_variant"], e["bundled_nccl"] or "-",
            e["torchvision"] or "-", e["torchaudio"] or "-", _channel_note(e)))
    if facts is None:
        return lines
    reads = sorted({facts.SOURCES[row[3]]["read"] for row in facts.FACTS})
    lines.append("sourced table (compat_facts.py): %d rows from %d sources, read %s to %s (oldest %s)" % (
        len(facts.FACTS), len(facts.SOURCES), reads[0], reads[-1], _age(reads[0], today)))
    for kind in sorted({row[0] for row in facts.FACTS}):
        keys = [row[1] for row in facts.FACTS if row[0] == kind]
        lines.append("  %-18s %s" % (kind, ", ".join(keys)))
    for branch, value in facts.rows("branch").items():
        # End of life is judged against the table's review date; say when the calendar has moved past one.
        if isinstance(value["eol"], str) and facts.AS_OF[:7] < value["eol"] < today.isoformat()[:7]:
            lines.append("  R%s's end of life (%s) has passed since the table was reviewed (%s): review "
                         "compat_facts.py" % (branch, value["eol"], facts.AS_OF))
    return lines


def _channel_note(entry):
    """'' when the variant channels read agree; else what was read (compat_refresh.variant_channels)."""
    check = entry.get("variants_check")
    if check in (None, "agree"):
        return ""
    channels = entry.get("variants_channels", {})
    return "  [variants: %s: %s]" % (check, "; ".join("%s %s" % (k, ",".join(v)) for k, v in channels.items()))


def cmd_show(args):
    root = _root()
    facts = _load_module(root / FACTS_MODULE, "gpufleet_compat_facts") if (root / FACTS_MODULE).is_file() else None
    for line in show_lines(shipped_data(root), facts, args.today):
        print(line)
    return 0


def _date(text):
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a date like 2026-12-05" % text) from None


def parser():
    top = argparse.ArgumentParser(prog="gpufleet compat", description=__doc__.split("\n\n", maxsplit=1)[0],
                                  formatter_class=console.HelpFormatter)
    sub = top.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="regenerate the release data from its sources")
    mode = refresh.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list what the sources have that the data lacks")
    mode.add_argument("--offline", action="store_true", help="rebuild from the recorded snapshots only")
    refresh.add_argument("--snapshots", type=Path, help="snapshot directory (default tests/fixtures/compat-sources)")
    refresh.add_argument("--output", type=Path, help="data module to write (default %s)" % DATA_MODULE)
    refresh.add_argument("--test-infra", type=Path, help="a pytorch/test-infra clone (default: clone it)")
    refresh.add_argument("--allow-shrink", action="store_true",
                         help="write the data even when it has fewer releases than the current one")
    refresh.add_argument("--date", default=datetime.date.today().isoformat(), help="date recorded as read")
    show = sub.add_parser("show", help="print the data, its sources and their age")
    show.add_argument("--today", type=_date, default=datetime.date.today(), help=argparse.SUPPRESS)
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return cmd_refresh(args) if args.command == "refresh" else cmd_show(args)
    except (compat_sources.SourceError, compat_refresh.SnapshotError, OSError) as exc:
        print("gpufleet compat: %s" % exc, file=sys.stderr)
        return EXIT_BROKEN
