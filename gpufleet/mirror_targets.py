# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What `gpufleet mirror` must hold for each node, read from a plan file or from an inventory.

A *target* is a group of nodes that need the same files: the same plan (after the inventory's pins),
OS, architecture, kernel, Python, repositories and package state. `read_plan` is the one place that
reads the stack plan's keys (PLAN_CONTRACT.md); everything else works on what it returns.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from gpufleet import children

# The key NVIDIA signs its CUDA repositories with (the nvidia_driver role's default pin) and its file name.
NVIDIA_KEY_FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"
NVIDIA_APT_KEY_NAME = "3bf863cc.pub"
NVIDIA_RPM_KEY_NAME = "D42D0685.pub"
FACTS_PLAYBOOK = "gpufleet.cluster.mirror_facts"


class MirrorError(Exception):
    """Bad input or an unusable source: the message names the value and what would work."""


def module_utils(name: str):
    """A pure module of the collection's plugins/module_utils: the parsers the roles use, reused here."""
    from gpufleet import collection

    found = collection.locate()
    if found is None:
        raise MirrorError("the gpufleet.cluster collection is neither beside this package (a clone) nor installed "
                          "with it (site-packages/ansible_collections); reinstall gpufleet with pip")
    if str(found.collections_dir) not in sys.path:
        sys.path.insert(0, str(found.collections_dir))
    return importlib.import_module(f"ansible_collections.gpufleet.cluster.plugins.module_utils.{name}")


@dataclass(frozen=True)
class OsRelease:
    """What a plan's OS key means where no node can be asked (plan mode). Each row cites its source."""

    distribution: str
    major: str
    os_family: str
    codename: str
    python: str  # the OS's python3, which the pytorch role's venv is made from
    glibc: str
    archive: str  # the distribution's own package archive (x86_64)
    components: tuple[str, ...]
    keyring: str  # where Debian/Ubuntu hosts keep the archive's keyring
    source: str


# One per OS of the one supported-OS list (compat_packages SUPPORTED_OS; tests/unit/plugins/module_utils/
# test_supported_os.py keeps the ids, Python and family equal): what the mirror adds to it (codename, glibc, archive).
OS_RELEASES = {
    "debian12": OsRelease("Debian", "12", "Debian", "bookworm", "3.11", "2.36", "http://deb.debian.org/debian",
                          ("main",), "/usr/share/keyrings/debian-archive-keyring.gpg",
                          "packages.debian.org/bookworm: python3 3.11.2-1+b1, libc6 2.36-9"),
    "ubuntu20.04": OsRelease("Ubuntu", "20", "Debian", "focal", "3.8", "2.31", "http://archive.ubuntu.com/ubuntu",
                             ("main", "universe"), "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
                             "packages.ubuntu.com/focal: python3 3.8.2-0ubuntu2, libc6 2.31-0ubuntu9"),
    "ubuntu22.04": OsRelease("Ubuntu", "22", "Debian", "jammy", "3.10", "2.35", "http://archive.ubuntu.com/ubuntu",
                             ("main", "universe"), "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
                             "packages.ubuntu.com/jammy: python3 3.10.6-1~22.04, libc6 2.35-0ubuntu3"),
    "ubuntu24.04": OsRelease("Ubuntu", "24", "Debian", "noble", "3.12", "2.39", "http://archive.ubuntu.com/ubuntu",
                             ("main", "universe"), "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
                             "packages.ubuntu.com/noble: python3 3.12.3-0ubuntu1, libc6 2.39-0ubuntu8"),
    "rhel9": OsRelease("RedHat", "9", "RedHat", "", "3.9", "2.34", "", (), "",
                       "RHEL 9.0 release notes: python3 is Python 3.9, glibc 2.34"),
}


@dataclass(frozen=True)
class Pins:
    """The inventory's values that change what the stack roles install (playbooks/gpu_stack.yml's wiring)."""

    driver_version: str = ""
    driver_packages: tuple[str, ...] = ()
    nccl_version: str = ""
    nccl_names: tuple[str, ...] = ()  # the nccl role's names (libnccl2, and libnccl-dev unless nccl_install_dev is off)
    nvlsm_version: str = ""  # nvidia_driver_nvlsm_version: empty, the driver role installs the repository's newest
    dcgm_version: str = ""  # gpufleet_dcgm_version (playbooks/validate.yml): replaces the plan's dcgm_version
    pytorch_index_url: str = ""
    # The pytorch role's own pins for this plan (its __pytorch_requirements and extras: inventory mode), or
    # what it installs beside the plan's torch (numpy at its default, the extras: plan mode).
    wheel_requirements: tuple[str, ...] = ()
    extra_wheels: tuple[str, ...] = ()
    wheel_lock: str = ""  # pytorch_requirements_lock's text: pip installs exactly what it pins


@dataclass(frozen=True)
class StackPackages:
    """What one plan installs, with the pins applied."""

    os: str
    package_family: str
    arch: str
    repository: str  # NVIDIA's repository for the OS, <base>/<distro>/<arch>/
    driver_version: str  # upstream version every driver, fabric manager and IMEX package is installed at
    driver_names: tuple[str, ...]  # the driver's, fabric manager's, IMEX's and a flavour switch's names
    toolkit_names: tuple[str, ...]
    nccl_names: tuple[str, ...]
    nccl_version: str
    nvlsm_names: tuple[str, ...]  # NVLSM, versioned by its own release date: at nvlsm_version, or the newest if empty
    nvlsm_version: str
    dcgm_names: tuple[str, ...]  # DCGM 4, installed by the gpu_diagnostics role at exactly dcgm_version
    dcgm_version: str
    wheel_requirements: tuple[str, ...]
    wheel_index_url: str
    wheel_lock: str
    summary: tuple[tuple[str, str], ...]  # for the manifest: cuda, driver, nccl, dcgm, torch


def read_plan(plan: dict, pins: Pins = Pins()) -> StackPackages:
    """The one reader of the plan's keys: what the stack roles install from this plan and these pins."""
    if not isinstance(plan, dict) or "error" in plan or "packages" not in plan:
        reason = plan.get("error") if isinstance(plan, dict) else None
        raise MirrorError(f"not a stack plan{': the solver refused it: ' + str(reason) if reason else ''} "
                          "(give the plan.json preflight writes for a cluster that solved, or -i INVENTORY)")
    try:
        packages = plan["packages"]
        # The driver role asks the repository for NVIDIA's flavour-switch install steps too.
        switch = [name for step in plan.get("driver_flavour_switch") or [] if step.get("action") == "install"
                  for name in step.get("packages", [])]
        # IMEX goes in the driver's transaction at its version (roles/nvidia_driver); absent in older plans.
        driver = (list(pins.driver_packages or packages["driver"]) + list(packages["fabricmanager"])
                  + list(plan_names(packages, "imex")))
        dcgm_names = plan_names(packages, "dcgm")
        dcgm_version = pins.dcgm_version or (dcgm_plan_version(plan) if dcgm_names else "")
        nccl_names = pins.nccl_names or tuple(
            item.split("=", 1)[0] if "=" in item else item[:-len(plan["nccl_package_version"]) - 1]
            for item in packages["nccl"])
        torch = plan.get("torch") or {}
        wheels = list(pins.wheel_requirements) or (torch_requirements(torch) + list(pins.extra_wheels) if torch else [])
        return StackPackages(
            os=plan["os"], package_family=plan["package_family"], arch=plan.get("arch") or "x86_64",
            repository=plan["repository"], driver_version=pins.driver_version or plan["driver_recommended_version"],
            driver_names=tuple(dict.fromkeys(driver + switch)), toolkit_names=tuple(packages["toolkit"]),
            nccl_names=tuple(nccl_names), nccl_version=pins.nccl_version or plan["nccl_package_version"],
            nvlsm_names=plan_names(packages, "nvlsm"), nvlsm_version=pins.nvlsm_version,
            dcgm_names=dcgm_names, dcgm_version=dcgm_version,
            wheel_requirements=tuple(wheels), wheel_lock=pins.wheel_lock,
            wheel_index_url=pins.pytorch_index_url or torch.get("index_url") or "",
            summary=(("cuda", plan["cuda_version"]), ("driver", pins.driver_version or plan["driver_recommended_version"]),
                     ("nccl", pins.nccl_version or plan["nccl_package_version"]), ("dcgm", dcgm_version or "none"),
                     ("torch", wheels[0] if wheels else "none")))
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise MirrorError(f"the plan lacks {exc} (PLAN_CONTRACT.md lists the keys a plan has); "
                          "give the plan.json preflight writes, or -i INVENTORY") from None


def plan_names(packages: dict, key: str) -> tuple[str, ...]:
    """`packages.<key>`: package names without versions; absent (an older plan) or empty means none."""
    names = packages.get(key)
    if names is None:
        return ()
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise MirrorError(f"the plan's packages.{key} is {names!r}, not a list of package names "
                          "(PLAN_CONTRACT.md); give the plan.json preflight writes, or -i INVENTORY")
    return tuple(names)


def dcgm_plan_version(plan: dict) -> str:
    """`dcgm_version`, which a plan naming DCGM packages must have: gpu_diagnostics installs them at it."""
    version = plan.get("dcgm_version")
    if not isinstance(version, str) or not version:
        raise MirrorError(f"the plan names DCGM packages but its dcgm_version is {version!r}, not a version like "
                          "'1:4.6.0-1' (apt) or '4.6.0-1' (dnf) (PLAN_CONTRACT.md); give the plan.json preflight "
                          "writes, or -i INVENTORY")
    return version


def torch_requirements(torch: dict) -> list[str]:
    """The plan's torch pins as the pytorch role writes them (`torch==<version>+<variant>`, its companions)."""
    variant = str(torch.get("variant") or "")
    suffix = f"+{variant}" if variant else ""
    return [f"torch=={torch['version']}{suffix}"] + [
        f"{companion}=={torch[companion]}{suffix}" for companion in ("torchvision", "torchaudio") if torch.get(companion)]


@dataclass(frozen=True)
class Repository:
    """A source repository and the key that must sign it."""

    url: str  # apt: the flat repository (.../<distro>/<arch>/) or the archive root; dnf: the baseurl
    key_url: str = ""  # where the key is fetched (CUDA repositories)
    fingerprint: str = ""  # the pinned fingerprint the key must have
    keyring: str = ""  # a keyring file on this machine (OS archives)
    suite: str = ""  # apt archives: the suite (bookworm, jammy); empty for a flat repository
    components: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    nodes: tuple[str, ...]
    stack: StackPackages
    os_family: str  # Debian or RedHat
    codename: str
    major: str
    kernel: str
    python: str  # X.Y of the interpreter the venv is made from
    glibc: str
    machine: str
    cuda: Repository
    os_archive: Repository | None
    os_packages: tuple[str, ...]  # what the roles install from the OS archive (build tools, python3-venv, ...)
    base_status: bytes = field(default=b"", repr=False)  # dpkg status the resolution starts from
    node_wheel_dir: str = ""  # pytorch_wheel_dir: a directory on the nodes that pip installs from instead of an index

    @property
    def repo_subdir(self) -> str:
        """`<distro>/<arch>` of NVIDIA's repository URL: the mirror keeps the layout the role expects."""
        parts = [p for p in self.cuda.url.rstrip("/").split("/") if p]
        return "/".join(parts[-2:])

    def group_key(self) -> str:
        data = dict(self.__dict__, nodes=None, base_status=hashlib.sha256(self.base_status).hexdigest())
        return json.dumps(data, default=lambda o: o.__dict__, sort_keys=True)


def merge_targets(targets: list[Target]) -> list[Target]:
    """Nodes that need exactly the same are resolved once."""
    groups: dict[str, Target] = {}
    for target in targets:
        key = target.group_key()
        if key in groups:
            groups[key] = replace(groups[key], nodes=groups[key].nodes + target.nodes)
        else:
            groups[key] = target
    return list(groups.values())


# ---------------------------------------------------------------------------------------------- plan mode

@dataclass(frozen=True)
class PlanOptions:
    """What a plan does not say about the nodes, given on the command line."""

    kernel: str = ""
    python: str = ""
    glibc: str = ""
    dpkg_status: Path | None = None
    cuda_repo_url: str = ""  # base, like gpufleet_cuda_repo_url
    cuda_key_url: str = ""
    cuda_key_fingerprint: str = ""
    os_archive_url: str = ""
    os_keyring: str = ""
    os_components: tuple[str, ...] = ()


def load_plans(paths: list[Path]) -> list[tuple[str, dict]]:
    """(label, plan) from plan files: one plan (preflight's plan.json), a list, or {node: plan}."""
    out = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise MirrorError(f"--plan {path}: cannot be read ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise MirrorError(f"--plan {path}: not JSON ({exc}); give the plan.json preflight writes") from None
        if isinstance(data, dict) and "packages" not in data and "error" not in data and data and all(
                isinstance(v, dict) for v in data.values()):
            out += [(f"{path}:{node}", plan) for node, plan in data.items()]
        elif isinstance(data, list):
            out += [(f"{path}[{i}]", plan) for i, plan in enumerate(data)]
        else:
            out.append((str(path), data))
    return out


def targets_from_plans(paths: list[Path], options: PlanOptions, collection_root: Path) -> list[Target]:
    targets = []
    for label, plan in load_plans(paths):
        try:
            stack = read_plan(plan)
        except MirrorError as exc:
            raise MirrorError(f"--plan {label}: {exc}") from None
        release = OS_RELEASES.get(stack.os)
        if release is None:
            raise MirrorError(f"--plan {label}: OS {stack.os!r} is not one gpufleet mirror knows "
                              f"({', '.join(OS_RELEASES)}); use -i INVENTORY so the nodes say what they are")
        if stack.package_family == "apt" and not options.kernel:
            raise MirrorError(f"--plan {label}: the driver's module build installs linux-headers-<kernel> for the "
                              "nodes' running kernel, which a plan does not name; give --kernel (`uname -r` on the "
                              "nodes), or use -i INVENTORY")
        facts = {"kernel": options.kernel, "architecture": stack.arch, "distribution": release.distribution,
                 "distribution_major_version": release.major, "os_family": release.os_family}
        role_values = RoleValues.from_role_files(collection_root, facts)
        stack = read_plan(plan, Pins(nccl_names=role_values.nccl_names, extra_wheels=role_values.extra_wheels))
        targets.append(Target(
            nodes=(label,), stack=stack, os_family=release.os_family, codename=release.codename, major=release.major,
            kernel=options.kernel, python=options.python or release.python, glibc=options.glibc or release.glibc,
            machine=stack.arch, cuda=cuda_repository(stack, options.cuda_repo_url, options.cuda_key_url,
                                                     options.cuda_key_fingerprint),
            os_archive=os_archive(stack, release, options.os_archive_url, release.codename, options),
            os_packages=role_values.os_packages,
            base_status=options.dpkg_status.read_bytes() if options.dpkg_status else b""))
    return merge_targets(targets)


def cuda_repository(stack: StackPackages, base_url: str, key_url: str, fingerprint: str) -> Repository:
    """NVIDIA's repository for the plan's OS: the plan's URL, or the same <distro>/<arch> under base_url."""
    url = stack.repository.rstrip("/") + "/"
    if base_url:
        url = base_url.rstrip("/") + "/" + "/".join(url.rstrip("/").split("/")[-2:]) + "/"
    default_key = NVIDIA_APT_KEY_NAME if stack.package_family == "apt" else NVIDIA_RPM_KEY_NAME
    return Repository(url=url, key_url=key_url or url + default_key,
                      fingerprint=(fingerprint or NVIDIA_KEY_FINGERPRINT).replace(" ", "").upper())


def os_archive(stack: StackPackages, release: OsRelease, url: str, suite: str, options: PlanOptions) -> Repository:
    archive = url or release.archive
    if release.distribution == "Ubuntu" and not url and stack.arch != "x86_64":
        archive = "http://ports.ubuntu.com/ubuntu-ports"
    return Repository(url=archive.rstrip("/"), keyring=options.os_keyring or release.keyring, suite=suite,
                      components=options.os_components or release.components)


@dataclass(frozen=True)
class RoleValues:
    """Values the stack roles take from their own variables: the packages they install beside the plan's."""

    os_packages: tuple[str, ...]
    nccl_names: tuple[str, ...]
    extra_wheels: tuple[str, ...]

    @classmethod
    def from_role_files(cls, root: Path, facts: dict) -> "RoleValues":
        """Plan mode: the roles' vars files rendered for the plan's OS, as their set_vars.yml loads them."""
        def role_var(role: str, name: str, default=None):
            value = default
            for stem in ("main", facts["os_family"], facts["distribution"],
                         f"{facts['distribution']}_{facts['distribution_major_version']}"):
                path = root / "roles" / role / "vars" / f"{stem}.yml"
                if path.is_file():
                    value = (yaml.safe_load(path.read_text()) or {}).get(name, value)
            return value

        defaults = yaml.safe_load((root / "roles/pytorch/defaults/main.yml").read_text()) or {}
        build = [_render(item, facts) for item in role_var("nvidia_driver", "__nvidia_driver_build_packages", [])]
        system = role_var("pytorch", "__pytorch_system_packages", [])
        nccl = [role_var("nccl", "__nccl_runtime_package"), role_var("nccl", "__nccl_dev_package")]
        numpy = role_var("pytorch", "__pytorch_numpy_default")
        return cls(tuple(build + list(system)), tuple(n for n in nccl if n),
                   tuple(([f"numpy=={numpy}"] if numpy else []) + list(defaults.get("pytorch_extra_packages") or ())))


def _render(text: str, facts: dict) -> str:
    import jinja2

    return jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(str(text)).render(ansible_facts=facts)


# ----------------------------------------------------------------------------------------- inventory mode

def collect_inventory_facts(inventory: str, limit: str | None, extra_vars: list[str], env: dict,
                            collection_root: Path) -> dict:
    """Runs the read-only facts playbook (playbooks/mirror_facts.yml) and returns {node: record}."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-mirror-facts-") as tmp:
        out = Path(tmp) / "facts.json"
        argv = [str(Path(sys.executable).parent / "ansible-playbook"), FACTS_PLAYBOOK, "-i", inventory,
                "-e", json.dumps({"gpufleet_mirror_facts_file": str(out)})]
        argv += ["--limit", limit] if limit else []
        for item in extra_vars:
            argv += ["-e", item]
        proc = children.run(argv, capture_output=True, text=True, env=env, check=False, cwd=os.getcwd())
        records = json.loads(out.read_text()) if out.exists() else {}
    failed = _failed_hosts(proc.stdout)
    if proc.returncode != 0 or failed or not records:
        lines = [line for line in (proc.stdout + "\n" + proc.stderr).splitlines()
                 if line.startswith(("fatal:", "ERROR!", "[ERROR]")) or '"msg":' in line or "UNREACHABLE" in line]
        raise MirrorError(
            f"could not read what the nodes need from inventory {inventory} (ansible-playbook {FACTS_PLAYBOOK} "
            f"rc {proc.returncode}{'; failed or unreachable: ' + ', '.join(failed) if failed else ''}): "
            + (" | ".join(lines[-6:])[:2000] or proc.stderr.strip()[-1000:] or "no output")
            + ". Fix the nodes named, or leave them out with --limit.")
    return records


def _failed_hosts(stdout: str) -> list[str]:
    """Hosts whose recap line shows failures or unreachability."""
    out = []
    for line in stdout.splitlines():
        if ": ok=" in line and ("unreachable=" in line):
            host = line.split(":", 1)[0].strip()
            fields = dict(part.split("=", 1) for part in line.split(":", 1)[1].split() if "=" in part)
            if fields.get("unreachable", "0") != "0" or fields.get("failed", "0") != "0":
                out.append(host)
    return out


def targets_from_facts(records: dict, options: PlanOptions) -> list[Target]:
    """One target per node from the facts playbook's records, merged where nodes need the same."""
    targets = []
    for node, rec in sorted(records.items()):
        if rec.get("plan_error"):
            raise MirrorError(f"{node}: the stack plan failed: {rec['plan_error']}")
        pins = Pins(driver_version=rec["pins"].get("driver_version") or "",
                    driver_packages=tuple(rec["pins"].get("driver_packages") or ()),
                    nccl_version=rec["pins"].get("nccl_version") or "",
                    nccl_names=tuple(rec["roles"]["nccl_names"]),
                    nvlsm_version=rec["pins"].get("nvlsm_version") or "",
                    dcgm_version=rec["pins"].get("dcgm_version") or "",
                    pytorch_index_url=rec["pins"].get("pytorch_index_url") or "",
                    wheel_requirements=tuple(rec["roles"]["wheels"]), wheel_lock=rec["roles"].get("wheel_lock") or "")
        try:
            stack = read_plan(rec["plan"], pins)
        except MirrorError as exc:
            raise MirrorError(f"{node}: {exc}") from None
        facts = rec["facts"]
        release = OS_RELEASES.get(stack.os)
        # The driver role's own repository URL and key for this node (its defaults, the inventory's values).
        role_repo = rec["repository"]
        url = role_repo["url"].rstrip("/") + "/"
        if options.cuda_repo_url:
            url = options.cuda_repo_url.rstrip("/") + "/" + "/".join(url.rstrip("/").split("/")[-2:]) + "/"
        cuda = Repository(url=url, key_url=options.cuda_key_url or role_repo["key_url"],
                          fingerprint=(options.cuda_key_fingerprint or role_repo["fingerprint"]).replace(" ", "").upper())
        archive_url = options.os_archive_url or rec.get("debian_mirror_url") or ""
        archive = None
        if facts["os_family"] == "Debian":
            archive = os_archive(stack, release or OS_RELEASES["debian12"], archive_url, facts["codename"], options)
        python = rec["python"]
        targets.append(Target(
            nodes=(node,), stack=stack, os_family=facts["os_family"], codename=facts["codename"],
            major=str(facts["major"]), kernel=facts["kernel"], python=python["version"], glibc=python["glibc"],
            machine=python["machine"], cuda=cuda, os_archive=archive,
            os_packages=tuple(rec["roles"]["os_packages"]),
            base_status=base64.b64decode(rec.get("dpkg_status") or ""),
            node_wheel_dir=rec["pins"].get("pytorch_wheel_dir") or ""))
    return merge_targets(targets)
