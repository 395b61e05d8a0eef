# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""What a converged GPU stack looks like on a node, observed in one pass, and how it drifted.

The stack playbook records these observations after a run that left the node converged (nothing
pending, no reboot owed). The next run observes the same things again; only when every observation
is unchanged, and the plan and the roles are the ones recorded (the key), may the roles skip.
Every observation is a plain string, so a drift names what moved and both values.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat

# Files above this size are identified by size and mtime, not by content: toolkit binaries are
# hundreds of MB and only change through their (watched) package.
CONTENT_HASH_MAX_BYTES = 4 * 1024 * 1024
# Written by Python on import; not state anyone manages.
SKIPPED_DIR_NAMES = frozenset(["__pycache__"])

# The prefix of an observation that could not be taken (dpkg's own states include "unknown").
UNOBSERVED = "unobserved:"

WATCH_KINDS = ("files", "dirs", "packages", "services", "venvs", "commands")


class CommandTimedOut(Exception):
    """Raised by a run_command that killed its command at the deadline; the message names both."""


def _ask(run_command, argv):
    """run_command(argv) as ``(rc, stdout, stderr)``; rc is None when the command hit its deadline
    (stderr then says which command and which limit), so a hang is an observation not taken."""
    try:
        return run_command(argv)
    except CommandTimedOut as exc:
        return None, "", str(exc)


def file_signature(path: str) -> str:
    """Type, owner, mode and content (or size and mtime when large) of one path; links by target."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return "unobserved: unreadable (%s)" % exc.strerror
    owner = "%d:%d %04o" % (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode))
    if stat.S_ISLNK(info.st_mode):
        # Alternatives are chains of links: the whole chain, so a re-pointed middle link shows.
        return "link -> %s (resolves to %s)" % (os.readlink(path), os.path.realpath(path))
    if stat.S_ISDIR(info.st_mode):
        return "directory %s" % owner
    if not stat.S_ISREG(info.st_mode):
        return "special %s" % owner
    if info.st_size > CONTENT_HASH_MAX_BYTES:
        return "file %s size %d mtime %d" % (owner, info.st_size, info.st_mtime_ns)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        return "unobserved: unreadable (%s)" % exc.strerror
    return "file %s sha256 %s" % (owner, digest.hexdigest())


def dir_listing(path: str) -> str:
    """The files a directory holds and their content (reboot requests, for example)."""
    try:
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return "unobserved: unreadable (%s)" % exc.strerror
    return "; ".join("%s %s" % (name, file_signature(os.path.join(path, name))) for name in names) or "empty"


def tree_signature(root: str, run_command=None) -> str:
    """One digest over every file below root (path, size, mtime, mode, link target): a pip install, an
    edited or removed file in a virtual environment all change it. Bytecode caches are left out.
    GNU find lists a torch venv (about 15,000 files) five times faster than os.walk; without it, Python walks."""
    if not os.path.isdir(root):
        return file_signature(root)
    if run_command is not None and shutil.which("find"):
        rc, out, err = _ask(run_command, ["find", root, "-name", "__pycache__", "-prune", "-o", "!", "-type", "d",
                                          "-printf", "%P %s %T@ %m %l\\n"])
        if rc != 0:
            return "unobserved: find failed (rc %s: %s)" % (rc, err.strip()[:200])
        lines = sorted(out.splitlines())
        digest = hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape"))
        return "tree of %d files sha256 %s" % (len(lines), digest.hexdigest())
    digest = hashlib.sha256()
    count = 0
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(name for name in dirs if name not in SKIPPED_DIR_NAMES)
        for name in sorted(files):
            path = os.path.join(top, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
            line = "%s %d %d %o %s\n" % (os.path.relpath(path, root), info.st_size, info.st_mtime_ns, info.st_mode, target)
            digest.update(line.encode("utf-8", "surrogateescape"))
            count += 1
    return "tree of %d files sha256 %s" % (count, digest.hexdigest())


def parse_dpkg_query(names: list[str], stdout: str) -> dict[str, str]:
    """`dpkg-query -W -f '${Package}\\t${Version}\\t${Status}\\n' NAMES`: the selection (install/hold)
    and state per name; a name dpkg does not know is 'absent'."""
    found: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0]:
            found.setdefault(fields[0], []).append("%s %s" % (fields[2].strip(), fields[1].strip() or "(no version)"))
    return {name: " | ".join(sorted(found[name])) if name in found else "absent" for name in names}


def parse_rpm_query(names: list[str], stdout: str) -> dict[str, str]:
    """`rpm -q --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}.%{ARCH}\\n' NAMES` (dnf holds live in the
    versionlock list, which is a watched file)."""
    found: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) == 2 and fields[0]:
            found.setdefault(fields[0], []).append("installed " + fields[1].strip())
    return {name: " | ".join(sorted(found[name])) if name in found else "absent" for name in names}


def parse_systemctl_show(names: list[str], stdout: str) -> dict[str, str]:
    """`systemctl show -p LoadState,UnitFileState,ActiveState UNITS`: one blank-line separated block per
    unit, in the order asked."""
    blocks = stdout.strip().split("\n\n") if stdout.strip() else []
    out = {}
    for index, name in enumerate(names):
        props = {}
        if index < len(blocks):
            for line in blocks[index].splitlines():
                key, _sep, value = line.partition("=")
                props[key] = value
        out[name] = "load %s, unit file %s, %s" % (props.get("LoadState", "unknown"),
                                                   props.get("UnitFileState", "") or "none",
                                                   props.get("ActiveState", "unknown"))
    return out


def observe(watch: dict, run_command) -> dict[str, str]:
    """Observe everything watch names. run_command(argv) -> (rc, stdout, stderr), as AnsibleModule's; it
    raises CommandTimedOut for a command it killed at its deadline (recorded as not observed)."""
    watch = normalise_watch(watch)  # a record read back may have been edited by hand
    seen: dict[str, str] = {}
    seen["kernel"] = os.uname().release
    for path in watch["files"]:
        seen["file " + path] = file_signature(path)
    for path in watch["dirs"]:
        seen["directory " + path] = dir_listing(path)
    for path in watch["venvs"]:
        seen["venv " + path] = tree_signature(path, run_command)
    packages = watch["packages"]
    if packages:
        seen.update(("package " + name, value) for name, value in _packages(packages, run_command).items())
    services = watch["services"]
    if services and not shutil.which("systemctl"):
        seen.update(("service " + name, "unobserved: no systemctl") for name in services)
    elif services:
        rc, out, err = _ask(run_command, ["systemctl", "show", "-p", "LoadState,UnitFileState,ActiveState", "--"]
                            + [name + ".service" for name in services])
        if rc == 0:
            seen.update(("service " + name, value) for name, value in parse_systemctl_show(services, out).items())
        else:
            seen.update(("service " + name, "unobserved: systemctl failed: %s" % err.strip()) for name in services)
    for argv in watch["commands"]:
        seen["command " + " ".join(argv)] = _command(argv, run_command)
    return seen


def _packages(names: list[str], run_command) -> dict[str, str]:
    if shutil.which("dpkg-query"):
        rc, out, err = _ask(run_command, ["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Status}\n", "--"] + names)
        if rc in (0, 1):
            return parse_dpkg_query(names, out)
    elif shutil.which("rpm"):
        rc, out, err = _ask(run_command, ["rpm", "-q", "--qf", "%{NAME}\t%{EPOCH}:%{VERSION}-%{RELEASE}.%{ARCH}\n"] + names)
        if rc in (0, 1):
            return parse_rpm_query(names, out.replace("(none):", ""))
    else:
        rc, err = 127, "neither dpkg-query nor rpm found"
    # Never taken as unchanged (drift()), so a node whose package manager fails is not converged.
    return {name: "unobserved: the package query failed (rc %s: %s)" % (rc, err.strip()[:200]) for name in names}


def _command(argv: list[str], run_command) -> str:
    """A read-only command's exit code and output; a program that is not installed is recorded as such."""
    if not shutil.which(argv[0]):
        return "not installed"
    rc, out, err = _ask(run_command, argv)
    if rc is None:
        return "%s %s" % (UNOBSERVED, err)
    return "rc %d: %s" % (rc, (out + err).strip())


def drift(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """What moved since the record, one line per observation, naming both values."""
    lines = []
    for what in sorted(set(recorded) | set(now)):
        before, after = recorded.get(what, "not recorded"), now.get(what, "not observed")
        # What could not be observed is never taken as unchanged, even when it failed the same way before.
        if before != after or after.startswith(UNOBSERVED):
            lines.append("%s: recorded %s, now %s" % (what, _short(before), _short(after)))
    return lines


def _short(value: str, limit: int = 160) -> str:
    return value if len(value) <= limit else value[:limit] + "..."


def normalise_watch(watch: dict) -> dict:
    """The watch list in one canonical form (sorted, no duplicates, no empty entries)."""
    out = {}
    for kind in WATCH_KINDS:
        items = watch.get(kind) or []
        if kind == "commands":
            unique = {tuple(str(part) for part in argv) for argv in items if argv}
            out[kind] = [list(argv) for argv in sorted(unique)]
        else:
            out[kind] = sorted({str(item) for item in items if item})
    return out
