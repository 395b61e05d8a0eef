# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""`gpufleet mirror`: an offline mirror of exactly what the stack plan installs.

From a plan (`--plan`, the plan.json preflight writes) or an inventory (`-i`, the plans computed as
playbooks/gpu_stack.yml computes them, with the nodes' own kernel, Python and package state), it
downloads the NVIDIA packages with every dependency (apt: the host's apt-get over a private state;
dnf: `dnf download --resolve`), the wheels for the nodes' Python and platform, and the repositories'
signing keys (checked against the pinned fingerprints), and lays them out as repositories the stack
roles use unchanged. docs/mirror.md describes the layout and the variables it prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet import __version__, collection, settings
from gpufleet.mirror_apt import (DEB_ARCH, AptSandbox, AptSource, FetchedDeb, check_requests, driver_preferences,
                                 sha256_of)
from gpufleet.mirror_dnf import fetch_rpms, index_rpm_repo
from gpufleet.mirror_repo import (CUDA_DIR, KEY_ASC, KEY_GPG, LOCK_FILE, OS_DIR, VARS_FILE, WHEEL_DIR, Signer,
                                  Staging, check_mirror_url, checked_key, mirror_vars, write_archive_repo,
                                  write_flat_repo, write_manifest)
from gpufleet.mirror_targets import (MirrorError, PlanOptions, Target, collect_inventory_facts, targets_from_facts,
                                     module_utils, targets_from_plans)
from gpufleet.mirror_wheels import WheelSpec, check_pip, fetch_wheels, hash_lock, simple_index

EXIT_OK, EXIT_ERROR = 0, 2
DESCRIPTION = (__doc__ or "").strip()
EPILOG = ("Exit codes: 0 the mirror is complete at --dest (its variables on stdout and in mirror-vars.yml); "
          "2 nothing was written (the error names the value and what would work).")
KEY_NAME = "the CUDA repository key (gpufleet_cuda_repo_key_url and gpufleet_cuda_repo_key_fingerprint, or " \
           "--cuda-repo-key-url and --cuda-repo-key-fingerprint)"


def default_key_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "gpufleet" / "mirror-key"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", action="append", type=Path, metavar="PLAN.json",
                        help="a stack plan: preflight's plan.json, a list of plans or {node: plan}; repeatable")
    source.add_argument("-i", "--inventory", help="compute each node's plan from this inventory (reads the nodes)")
    parser.add_argument("--dest", required=True, type=Path, help="the mirror directory to build (new or empty)")
    parser.add_argument("--url", default="", help="where the nodes will reach --dest (http://HOST:PORT/PATH); "
                        "the printed variables use it")
    parser.add_argument("--replace", action="store_true", help="replace an existing --dest once the new mirror is complete")
    parser.add_argument("--key-dir", type=Path, default=None,
                        help=f"GNUPGHOME with the mirror's signing key, made on first use (default {default_key_dir()})")
    inventory = parser.add_argument_group("with -i")
    inventory.add_argument("-l", "--limit", default=None, help="only these hosts/groups (a host pattern)")
    inventory.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                           help="passed to ansible-playbook, as for gpufleet run")
    plan = parser.add_argument_group("with --plan: what a plan does not say about the nodes")
    plan.add_argument("--kernel", default="", help="the nodes' kernel (`uname -r`), for its headers package")
    plan.add_argument("--python-version", default="", metavar="X.Y", help="the nodes' python3 (default: the OS's)")
    plan.add_argument("--glibc", default="", metavar="X.Y", help="the nodes' glibc (default: the OS's)")
    plan.add_argument("--dpkg-status", type=Path, default=None, metavar="FILE",
                      help="resolve against this /var/lib/dpkg/status (default: an empty system, every dependency)")
    sources = parser.add_argument_group("sources (default: the inventory's, else the plan's)")
    sources.add_argument("--cuda-repo-url", default="", help="base of NVIDIA's repositories, like gpufleet_cuda_repo_url")
    sources.add_argument("--cuda-repo-key-url", default="", metavar="URL", help="the CUDA repository's signing key")
    sources.add_argument("--cuda-repo-key-fingerprint", default="", metavar="FPR", help="the fingerprint (FPR) that key must have")
    sources.add_argument("--os-mirror-url", default="", help="the OS archive (default gpufleet_debian_mirror_url, "
                         "else the distribution's)")
    sources.add_argument("--os-keyring", default="", help="keyring file the OS archive is signed with")
    sources.add_argument("--os-components", default="", help="comma-separated archive components (default per OS)")
    sources.add_argument("--wheel-source", default="",
                         help="wheel index URL or directory of wheels (default: gpufleet_pytorch_index_url, else the plan's)")


def main(args: argparse.Namespace, _argv: list[str]) -> int:
    try:
        built = build(args, sys.stderr)
    except MirrorError as exc:
        print(f"gpufleet mirror: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (KeyboardInterrupt, Exception) as exc:  # Cancelled (SIGTERM) too: staging is gone, say so, exit 2
        if os.environ.get("GPUFLEET_DEBUG"):
            raise
        print(f"gpufleet mirror: stopped ({type(exc).__name__}: {exc}); nothing was written to {args.dest} "
              "(set GPUFLEET_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(built.vars_text)
    print(f"gpufleet mirror: {built.summary}", file=sys.stderr)
    return EXIT_OK


@dataclass
class Collected:
    """What the targets need, per mirror path, before it is written."""

    cuda: dict[str, list[FetchedDeb]] = field(default_factory=dict)  # compute/cuda/repos/<distro>/<arch>
    archives: dict[str, list[FetchedDeb]] = field(default_factory=dict)  # os/<os>
    suites: dict[str, str] = field(default_factory=dict)  # os/<os> -> suite
    rpms: dict[str, list[tuple[Path, str]]] = field(default_factory=dict)
    keys: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)  # rel -> (data, url, fingerprint)
    arch: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def add_debs(into: list[FetchedDeb], debs: list[FetchedDeb]) -> None:
        """Packages several targets share are kept once; the same name with other bytes is an error."""
        have = {d.filename: d for d in into}
        for deb in debs:
            if deb.filename in have and have[deb.filename].sha256 != deb.sha256:
                raise MirrorError(f"checksum mismatch: {deb.filename} from {deb.uri} and from {have[deb.filename].uri} "
                                  "differ; one repository serves a different file under the same name")
            if deb.filename not in have:
                into.append(deb)
                have[deb.filename] = deb


@dataclass
class Built:
    vars_text: str
    summary: str


def build(args: argparse.Namespace, log) -> Built:
    found = collection.locate()
    if found is None:
        raise MirrorError("the gpufleet.cluster collection is neither beside this package (a clone) nor installed "
                          "with it (site-packages/ansible_collections); reinstall gpufleet with pip")
    options = PlanOptions(
        kernel=args.kernel, python=args.python_version, glibc=args.glibc, dpkg_status=args.dpkg_status,
        cuda_repo_url=args.cuda_repo_url, cuda_key_url=args.cuda_repo_key_url,
        cuda_key_fingerprint=args.cuda_repo_key_fingerprint, os_archive_url=args.os_mirror_url,
        os_keyring=args.os_keyring, os_components=tuple(c for c in args.os_components.split(",") if c))
    if args.url:
        check_mirror_url(args.url)
    staging = Staging(args.dest, args.replace)  # refuses a bad --dest before anything is downloaded
    targets = read_targets(args, options, found, log)
    wheel_specs = wheel_specs_of(targets, args.wheel_source)
    if wheel_specs:
        check_pip()
    signer = Signer(args.key_dir or default_key_dir())
    with staging, tempfile.TemporaryDirectory(prefix="gpufleet-mirror-") as tmp:
        work = Path(tmp)
        collected = Collected()
        for number, target in enumerate(targets):
            collect_packages(target, work / f"target-{number}", found.root, collected, log)
        wheel_count, lock_sha256 = write_wheels(staging, wheel_specs, work, log)
        write_repositories(staging, collected, signer)
        os_repos = {rel.split("/", 1)[1]: rel for rel in collected.archives}
        vars_text = mirror_vars(args.url, signer.fingerprint, _today(), cuda=bool(collected.cuda or collected.rpms),
                                wheels=bool(wheel_count), os_repos=os_repos, wheel_lock_sha256=lock_sha256)
        staging.add(VARS_FILE, data=vars_text.encode())
        document = write_manifest(staging, manifest_meta(args, targets, wheel_specs), signer)
        staging.commit()
    packages = sum(1 for f in document["files"] if f.get("kind") in ("deb", "rpm"))
    size = sum(f["size"] for f in document["files"]) / 1e6
    return Built(vars_text, f"{staging.dest}: {packages} packages, {wheel_count} wheels, {size:.1f} MB; "
                            f"manifest.json signed by {signer.fingerprint}; variables in {staging.dest / VARS_FILE}")


def _today() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_targets(args, options: PlanOptions, found: collection.Collection, log) -> list[Target]:
    if args.plan:
        return targets_from_plans(args.plan, options, found.root)
    inventory = args.inventory
    if Path(inventory).exists():
        inventory = str(Path(inventory).resolve())
    elif "," not in inventory:
        raise MirrorError(f"inventory {inventory} does not exist (give a file, a directory or a host list 'a,b,')")
    print(f"gpufleet mirror: reading the nodes of {inventory}" + (f" (limit {args.limit})" if args.limit else ""),
          file=log, flush=True)
    records = collect_inventory_facts(inventory, args.limit, args.extra_vars, ansible_environment(found), found.root)
    return targets_from_facts(records, options)


def ansible_environment(found: collection.Collection) -> dict:
    """ansible-playbook's environment: the collection first on the collection path, its needed settings merged
    into the user's (as for gpufleet run)."""
    merged, _effective = settings.merge(found.root / "ansible.cfg", None)
    return {**os.environ, **collection.ansible_env(found), **merged, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
            "ANSIBLE_NOCOLOR": "True", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def collect_packages(target: Target, work: Path, root: Path, collected: Collected, log) -> None:
    """Every package the target installs, with its dependencies, from its repositories."""
    nodes = ", ".join(target.nodes)
    print(f"gpufleet mirror: {nodes} ({target.stack.os} {target.machine}): resolving against {target.cuda.url}"
          + (f" and {target.os_archive.url} {target.os_archive.suite}" if target.os_archive else ""),
          file=log, flush=True)
    work.mkdir(parents=True)
    key_data, keyring = checked_key(target.cuda.key_url, target.cuda.fingerprint, KEY_NAME)
    key_rel = f"keys/upstream/{target.repo_subdir.replace('/', '-')}-{target.cuda.key_url.rsplit('/', 1)[-1]}"
    collected.keys[key_rel] = (key_data, target.cuda.key_url, target.cuda.fingerprint)
    (work / "cuda-keyring.gpg").write_bytes(keyring)
    cuda_rel = f"{CUDA_DIR}/{target.repo_subdir}"
    if target.stack.package_family == "dnf":
        collected.rpms.setdefault(cuda_rel, []).extend(fetch_rpms(target, work, work / "cuda-keyring.gpg"))
        return
    sources = [AptSource(target.cuda.url, "", (), work / "cuda-keyring.gpg")]
    if target.os_archive:
        keyring_file = Path(target.os_archive.keyring)
        if not keyring_file.is_file():
            raise MirrorError(f"{nodes}: the keyring {target.os_archive.keyring or '(none)'} for the OS archive "
                              f"{target.os_archive.url} is not a file on this machine; give --os-keyring FILE "
                              "(the keyring that archive is signed with)")
        sources.append(AptSource(target.os_archive.url, target.os_archive.suite, target.os_archive.components,
                                 keyring_file))
    template = root / "roles/nvidia_driver/templates/etc/apt/preferences.d/gpufleet-nvidia-driver.j2"
    sandbox = AptSandbox(work / "apt", target.machine, sources, driver_preferences(template, target.stack.driver_version),
                         target.base_status)
    sandbox.update()
    debs = sandbox.fetch(apt_install_args(target, sandbox))
    collected.arch[cuda_rel] = DEB_ARCH.get(target.machine, target.machine)
    collected.add_debs(collected.cuda.setdefault(cuda_rel, []), [d for d in debs if sources[0].holds(d.uri)])
    if target.os_archive:
        os_rel = f"{OS_DIR}/{target.stack.os}"
        collected.arch[os_rel] = collected.arch[cuda_rel]
        collected.suites[os_rel] = target.os_archive.suite
        collected.add_debs(collected.archives.setdefault(os_rel, []), [d for d in debs if not sources[0].holds(d.uri)])


def apt_install_args(target: Target, sandbox: AptSandbox) -> list[str]:
    """`apt-get install` arguments for everything the stack roles install on the node: the driver, fabric
    manager and IMEX at the repository's build of the planned release, NVLSM at its own, the toolkit, NCCL and
    DCGM at their exact versions, and the OS packages the roles install beside them (kernel headers, DKMS ...)."""
    stack = target.stack
    # The driver role's own requests: a branch pinning package (nvidia-driver-pinning-595) at its branch, NVLSM at
    # its pinned release or the newest, the others at the planned driver release.
    driver_requests = module_utils("driver_decision").repository_requests({
        "packages": list(stack.driver_names), "version": stack.driver_version,
        "nvlsm_packages": list(stack.nvlsm_names), "nvlsm_version": stack.nvlsm_version})
    requests = (driver_requests + [{"name": n, "version": "", "match": "any"} for n in stack.toolkit_names]
                + [{"name": n, "version": stack.nccl_version, "match": "exact"} for n in stack.nccl_names]
                + [{"name": n, "version": stack.dcgm_version, "match": "exact"} for n in stack.dcgm_names])
    resolved = check_requests(sandbox, requests)
    return ([f"{n}={resolved[n]}" for n in stack.driver_names + stack.nvlsm_names] + list(stack.toolkit_names)
            + [f"{n}={resolved[n]}" for n in stack.nccl_names + stack.dcgm_names] + list(target.os_packages))


def wheel_specs_of(targets: list[Target], wheel_source: str) -> dict[WheelSpec, list[str]]:
    specs: dict[WheelSpec, list[str]] = {}
    for target in targets:
        if not target.stack.wheel_requirements:
            continue
        source = wheel_source or ("" if target.node_wheel_dir else target.stack.wheel_index_url)
        if not source:
            raise MirrorError(
                f"{', '.join(target.nodes)}: "
                + (f"pip installs torch from pytorch_wheel_dir={target.node_wheel_dir}, a directory on the nodes; "
                   "give --wheel-source with where those wheels are on this machine (a directory or index URL)"
                   if target.node_wheel_dir else "the plan names no wheel index; give --wheel-source"))
        spec = WheelSpec(target.stack.wheel_requirements, target.python, target.glibc, target.machine, source,
                         lock=target.stack.wheel_lock)
        specs.setdefault(spec, []).extend(target.nodes)
    return specs


def write_wheels(staging: Staging, specs: dict[WheelSpec, list[str]], work: Path, log) -> tuple[int, str]:
    """The wheels, their PEP 503 index and their hash lock: (how many wheels, the lock's SHA256 or "" for none)."""
    files: dict[str, tuple[str, str]] = {}
    versions: dict[str, str] = {}
    for number, (spec, nodes) in enumerate(specs.items()):
        print(f"gpufleet mirror: {', '.join(nodes)}: wheels {' '.join(spec.requirements)}"
              f"{' (as the lock file pins them)' if spec.lock else ''} for Python {spec.python} from {spec.source}",
              file=log, flush=True)
        for wheel, path in fetch_wheels(spec, work / f"pip-{number}"):
            if wheel.filename not in files:
                staging.add(f"{WHEEL_DIR}/{wheel.filename}", src=path, source=wheel.url, kind="wheel",
                            package=wheel.name, version=wheel.version, index_sha256=wheel.sha256 or None)
                files[wheel.filename] = (wheel.name, sha256_of(staging.path / WHEEL_DIR / wheel.filename))
                versions[wheel.filename] = wheel.version
    for rel, page in simple_index(files).items():
        staging.add(f"{WHEEL_DIR}/{rel}", data=page.encode())
    if not files:
        return 0, ""
    try:
        lock = hash_lock({name: (project, versions[name], digest) for name, (project, digest) in files.items()})
    except MirrorError as exc:
        print(f"gpufleet mirror: WARNING: no {WHEEL_DIR}/{LOCK_FILE}: {exc}. The pytorch role refuses these wheels "
              "unless gpufleet_pytorch_allow_unhashed is true; build one mirror per node group (--limit) to get a "
              "lock for each", file=log, flush=True)
        return len(files), ""
    staging.add(f"{WHEEL_DIR}/{LOCK_FILE}", data=lock.encode(), kind="hash lock",
                source="generated by gpufleet mirror from the wheels' SHA256")
    return len(files), sha256_of(staging.path / WHEEL_DIR / LOCK_FILE)


def write_repositories(staging: Staging, collected: Collected, signer: Signer) -> None:
    for rel, debs in collected.cuda.items():
        write_flat_repo(staging, rel, debs, signer, collected.arch[rel])
    for rel, debs in collected.archives.items():
        write_archive_repo(staging, rel, collected.suites[rel], debs, signer, collected.arch[rel])
    for rel, rpms in collected.rpms.items():
        for path, digest in rpms:
            staging.add(f"{rel}/{path.name}", src=path, kind="rpm", sha256_at_download=digest,
                        source=f"dnf download from {rel}")
        index_rpm_repo(staging.path / rel)
    for rel, (data, url, fingerprint) in collected.keys.items():
        staging.add(rel, data=data, source=url, kind="key", fingerprint=fingerprint)
    staging.add(KEY_ASC, data=signer.export(armor=True), kind="key", fingerprint=signer.fingerprint,
                source="the mirror's signing key")
    staging.add(KEY_GPG, data=signer.export(armor=False), kind="keyring", fingerprint=signer.fingerprint,
                source="the mirror's signing key")


def manifest_meta(args, targets: list[Target], wheel_specs: dict[WheelSpec, list[str]]) -> dict:
    sources = {node: spec.source for spec, nodes in wheel_specs.items() for node in nodes}
    return {"gpufleet": __version__, "source": "plan files " + ", ".join(map(str, args.plan)) if args.plan
            else f"inventory {args.inventory}" + (f" --limit {args.limit}" if args.limit else ""),
            "targets": [{"nodes": list(t.nodes), "os": t.stack.os, "machine": t.machine, "kernel": t.kernel,
                         "python": t.python, "glibc": t.glibc, "plan": dict(t.stack.summary),
                         "cuda_repository": t.cuda.url, "cuda_key_fingerprint": t.cuda.fingerprint,
                         "os_archive": f"{t.os_archive.url} {t.os_archive.suite}" if t.os_archive else None,
                         "resolved_against": "the node's dpkg status" if t.base_status else "an empty system",
                         "wheel_source": sources.get(t.nodes[0])} for t in targets]}
