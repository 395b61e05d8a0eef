# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Host facts: pure parsers (text in, data out) and small sysfs/procfs readers.

PRIVATE to the gpufleet.cluster collection. The parsers (``parse_*``) never touch the file
system. The readers (``read_*``) take the root they read from as an argument, so tests and the
simulated cluster can point them at a tree of their own. Nothing here imports AnsibleModule.
"""

from __future__ import annotations

import os
import re

# ---------------------------------------------------------------------------------------------
# Pure parsers


def _to_int(text):
    if text is None:
        return None
    match = re.match(r"^\s*(-?\d+)\s*$", str(text))
    return int(match.group(1)) if match else None


def parse_lscpu(text):
    """Parse ``lscpu`` (LANG=C) into ``{model, sockets, cores, threads, numa_nodes, ...}``.

    Copes with the old flat layout and the indented one of util-linux >= 2.37, with
    "Socket(s): -" (ARM, where Cluster(s) carries the count) and with several "Model name"
    sections (hybrid CPUs), whose cores are summed. ``fields`` keeps every raw key/value.
    """
    topology_keys = ("Thread(s) per core", "Core(s) per socket", "Core(s) per cluster",
                     "Socket(s)", "Cluster(s)")
    fields = {}
    # Old lscpu prints the topology before "Model name", new lscpu after it; hybrid CPUs repeat
    # "Model name" with a topology block each. A section gets the first model name it meets.
    sections = [{"model": None}]
    numa_cpus = {}
    for raw in (text or "").splitlines():
        if ":" not in raw:
            continue
        key, _sep, value = raw.strip().partition(":")
        key = key.strip()
        value = value.strip()
        if not key:
            continue
        fields.setdefault(key, value)
        match = re.match(r"^NUMA node(\d+) CPU\(s\)$", key)
        if match:
            numa_cpus[int(match.group(1))] = value
        elif key == "Model name":
            if sections[-1]["model"] is not None:
                sections.append({"model": None})
            sections[-1]["model"] = value
        elif key in topology_keys:
            if key in sections[-1]:
                sections.append({"model": None})
            sections[-1][key] = value

    threads = _to_int(fields.get("CPU(s)"))
    sockets_total = 0
    cores_total = 0
    threads_per_core = None
    for section in sections:
        tpc = _to_int(section.get("Thread(s) per core"))
        threads_per_core = threads_per_core or tpc
        sockets = _to_int(section.get("Socket(s)"))
        per = _to_int(section.get("Core(s) per socket"))
        if sockets is None or per is None:
            # ARM: "Socket(s): -" with Core(s) per cluster and Cluster(s).
            clusters = _to_int(section.get("Cluster(s)"))
            per_cluster = _to_int(section.get("Core(s) per cluster"))
            if per is None:
                per = per_cluster
            if sockets is None:
                sockets = clusters if clusters is not None else (1 if per is not None else None)
        if sockets is not None:
            sockets_total = max(sockets_total, sockets)
        if per is not None and sockets is not None:
            cores_total += per * sockets
    cores = cores_total or None
    if cores is None and threads and threads_per_core:
        cores = threads // threads_per_core
    numa_nodes = _to_int(fields.get("NUMA node(s)"))
    if numa_nodes is None and numa_cpus:
        numa_nodes = len(numa_cpus)
    models = [s["model"] for s in sections if s.get("model")]
    return {
        "model": models[0] if models else None,
        "models": models,
        "architecture": fields.get("Architecture"),
        "vendor": fields.get("Vendor ID"),
        "sockets": sockets_total or None,
        "cores": cores,
        "threads": threads,
        "threads_per_core": threads_per_core,
        "numa_nodes": numa_nodes,
        "numa_cpus": numa_cpus,
        "hypervisor_vendor": fields.get("Hypervisor vendor"),
        "virtualization_type": fields.get("Virtualization type"),
        "flags": fields.get("Flags", "").split(),
        "fields": fields,
    }


def parse_cpuinfo(text):
    """Parse ``/proc/cpuinfo``: ``{model, sockets, cores, threads, hypervisor}``.

    Cores are distinct (physical id, core id) pairs; without those (ARM, some VMs) every
    processor counts as a core on one socket.
    """
    processors = []
    current = {}
    for raw in (text or "").splitlines() + [""]:
        if not raw.strip():
            if current:
                processors.append(current)
                current = {}
            continue
        key, _sep, value = raw.partition(":")
        current[key.strip().lower()] = value.strip()
    threads = sum(1 for p in processors if "processor" in p) or len(processors) or None
    model = None
    for proc in processors:
        model = proc.get("model name") or proc.get("cpu model") or proc.get("cpu")
        if model:
            break
    sockets = {p["physical id"] for p in processors if "physical id" in p}
    cores = {(p.get("physical id"), p["core id"]) for p in processors if "core id" in p}
    flags = set()
    for proc in processors:
        flags.update((proc.get("flags") or proc.get("features") or "").split())
    return {
        "model": model,
        "sockets": len(sockets) or (1 if threads else None),
        "cores": len(cores) or threads,
        "threads": threads,
        "hypervisor": "hypervisor" in flags,
    }


def parse_meminfo(text):
    """``/proc/meminfo`` -> ``{total_mib, ...}`` (values of the kB lines, in MiB)."""
    values = {}
    for raw in (text or "").splitlines():
        match = re.match(r"^\s*([\w()]+)\s*:\s*(\d+)\s*kB\s*$", raw)
        if match:
            values[match.group(1)] = int(match.group(2))
    total = values.get("MemTotal")
    return {
        "total_mib": total // 1024 if total is not None else None,
        "available_mib": values["MemAvailable"] // 1024 if "MemAvailable" in values else None,
    }


_REDHAT_IDS = {"rhel", "centos", "rocky", "almalinux", "fedora", "ol", "amzn", "scientific"}
_DEBIAN_IDS = {"debian", "ubuntu", "linuxmint", "pop", "raspbian"}
_SUSE_IDS = {"sles", "opensuse", "opensuse-leap", "opensuse-tumbleweed", "sled"}


def parse_os_release(text):
    """``/etc/os-release`` -> ``{id, version_id, family, pretty_name, id_like}``.

    ``family`` follows Ansible's os_family spelling in lower case: debian, redhat, suse, or the
    id itself when nothing matches.
    """
    values = {}
    for raw in (text or "").splitlines():
        match = re.match(r"^\s*([A-Z0-9_]+)\s*=\s*(.*?)\s*$", raw)
        if not match:
            continue
        value = match.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[match.group(1)] = value
    os_id = values.get("ID", "").lower() or None
    id_like = values.get("ID_LIKE", "").lower().split()
    family = os_id
    names = {os_id} | set(id_like)
    if names & _DEBIAN_IDS:
        family = "debian"
    elif names & _REDHAT_IDS:
        family = "redhat"
    elif names & _SUSE_IDS or "suse" in names:
        family = "suse"
    return {
        "id": os_id,
        "version_id": values.get("VERSION_ID"),
        "family": family,
        "pretty_name": values.get("PRETTY_NAME"),
        "id_like": id_like,
    }


def parse_mokutil_sb_state(text):
    """``mokutil --sb-state`` -> enabled|disabled|unknown.

    "SecureBoot enabled" / "SecureBoot disabled"; anything else (e.g. "EFI variables are not
    supported on this system") is unknown.
    """
    text = (text or "").lower()
    if re.search(r"secureboot\s+enabled", text):
        return "enabled"
    if re.search(r"secureboot\s+disabled", text):
        return "disabled"
    return "unknown"


def parse_efivar_secureboot(data):
    """Content of efivars ``SecureBoot-8be4df61-...``: 4 attribute bytes, then 1 value byte."""
    if not data or len(data) < 5:
        return "unknown"
    value = data[4] if isinstance(data[4], int) else ord(data[4])
    return "enabled" if value == 1 else "disabled" if value == 0 else "unknown"


def parse_environ_container(data):
    """``/proc/1/environ`` (NUL separated) -> value of ``container=`` or None."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    for item in (data or "").split("\0"):
        if item.startswith("container="):
            return item.split("=", 1)[1] or None
    return None


_VM_PRODUCTS = (
    ("kvm", "kvm"),
    ("qemu", "qemu"),
    ("vmware", "vmware"),
    ("virtualbox", "oracle"),
    ("virtual machine", "microsoft"),  # Hyper-V / Azure
    ("hvm domu", "xen"),
    ("google compute engine", "google"),
    ("openstack", "kvm"),
    ("bochs", "bochs"),
)


def vm_type_from_dmi(product_name, sys_vendor=None):
    """VM type from DMI product_name/sys_vendor, or None on bare metal (or when unknown)."""
    text = " ".join(x for x in (product_name, sys_vendor) if x).lower()
    for needle, kind in _VM_PRODUCTS:
        if needle in text:
            return kind
    if product_name and re.search(r"\.metal", product_name):
        return None
    if sys_vendor and sys_vendor.strip().lower() == "amazon ec2":
        return "amazon"
    return None


# ---------------------------------------------------------------------------------------------
# Readers (take the root they read from)


def read_text(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (OSError, ValueError):
        return None


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_numa_nodes(sysfs_root="/sys"):
    """Number of ``node<N>`` directories under ``<sysfs>/devices/system/node``, or None."""
    nodes = [n for n in _listdir(os.path.join(sysfs_root, "devices", "system", "node"))
             if re.fullmatch(r"node\d+", n)]
    return len(nodes) or None


def read_edac(sysfs_root="/sys"):
    """Host memory ECC from EDAC: ``{ecc_active, edac_corrected, edac_uncorrected, ...}``.

    ``ecc_active`` is True when a memory controller reports a DIMM/csrow EDAC mode other than
    "Unknown"/"None", False when every mode it reports is one of those, and None when EDAC is
    absent or says nothing about the mode: unknown, never a guessed "off".
    """
    base = os.path.join(sysfs_root, "devices", "system", "edac", "mc")
    controllers = [m for m in _listdir(base) if re.fullmatch(r"mc\d+", m)]
    result = {
        "ecc_active": None,
        "edac_corrected": None,
        "edac_uncorrected": None,
        "edac_controllers": len(controllers),
        "edac_modes": [],
    }
    if not controllers:
        return result
    corrected = uncorrected = 0
    seen_counts = False
    modes = []
    for mc in controllers:
        mdir = os.path.join(base, mc)
        ce = _to_int(read_text(os.path.join(mdir, "ce_count")))
        ue = _to_int(read_text(os.path.join(mdir, "ue_count")))
        if ce is not None or ue is not None:
            seen_counts = True
        corrected += ce or 0
        uncorrected += ue or 0
        for entry in _listdir(mdir):
            if re.fullmatch(r"(dimm|rank)\d+", entry):
                mode = read_text(os.path.join(mdir, entry, "dimm_edac_mode"))
            elif re.fullmatch(r"csrow\d+", entry):
                mode = read_text(os.path.join(mdir, entry, "edac_mode"))
            else:
                continue
            if mode:
                modes.append(mode)
    if seen_counts:
        result["edac_corrected"] = corrected
        result["edac_uncorrected"] = uncorrected
    result["edac_modes"] = sorted(set(modes))
    if modes:
        result["ecc_active"] = any(m.strip().lower() not in ("unknown", "none") for m in modes)
    return result


_SKIP_BLOCK = re.compile(r"^(loop|ram|zram)\d*")


def read_block_devices(sysfs_root="/sys"):
    """``[{name, nvme, size_bytes, rotational, model, removable}]`` from ``<sysfs>/block``.

    loop, ram and zram devices are skipped, and so are hidden NVMe multipath paths.
    """
    base = os.path.join(sysfs_root, "block")
    devices = []
    for name in _listdir(base):
        if _SKIP_BLOCK.match(name):
            continue
        ddir = os.path.join(base, name)
        if read_text(os.path.join(ddir, "hidden")) == "1":
            continue
        sectors = _to_int(read_text(os.path.join(ddir, "size")))
        rotational = read_text(os.path.join(ddir, "queue", "rotational"))
        model = read_text(os.path.join(ddir, "device", "model"))
        removable = read_text(os.path.join(ddir, "removable"))
        devices.append(
            {
                "name": name,
                "nvme": name.startswith("nvme"),
                # sysfs "size" is always in 512-byte sectors, whatever the logical block size.
                "size_bytes": sectors * 512 if sectors is not None else None,
                "rotational": rotational == "1" if rotational in ("0", "1") else None,
                "model": model or None,
                "removable": removable == "1" if removable in ("0", "1") else None,
            }
        )
    return devices


def read_nics(sysfs_root="/sys"):
    """``[{name, speed_mbps, link, mtu, driver, address, operstate, virtual}]`` from
    ``<sysfs>/class/net`` (``lo`` skipped). Speed is None when the kernel does not know it
    (-1, or the read fails as it does on a link that is down)."""
    base = os.path.join(sysfs_root, "class", "net")
    nics = []
    for name in _listdir(base):
        if name == "lo":
            continue
        ndir = os.path.join(base, name)
        if not os.path.isdir(ndir):
            continue
        speed = _to_int(read_text(os.path.join(ndir, "speed")))
        carrier = read_text(os.path.join(ndir, "carrier"))
        operstate = read_text(os.path.join(ndir, "operstate"))
        driver_link = os.path.join(ndir, "device", "driver")
        driver = os.path.basename(os.path.realpath(driver_link)) if os.path.lexists(driver_link) else None
        nics.append(
            {
                "name": name,
                "speed_mbps": speed if speed is not None and speed > 0 else None,
                "link": carrier == "1" if carrier is not None else operstate == "up",
                "mtu": _to_int(read_text(os.path.join(ndir, "mtu"))),
                "driver": driver,
                "address": read_text(os.path.join(ndir, "address")),
                "operstate": operstate,
                "virtual": not os.path.lexists(os.path.join(ndir, "device")),
            }
        )
    return nics


EFIVAR_SECUREBOOT = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def read_secure_boot_efivar(sysfs_root="/sys"):
    """enabled|disabled from the efivars file, unknown when it cannot be read."""
    for sub in ("efivars", "vars"):
        path = os.path.join(sysfs_root, "firmware", "efi", sub, EFIVAR_SECUREBOOT)
        if sub == "vars":
            path = os.path.join(path, "data")
            data = read_bytes(path)
            if data:
                return parse_efivar_secureboot(b"\0\0\0\0" + data[:1])
            continue
        data = read_bytes(path)
        if data:
            return parse_efivar_secureboot(data)
    return "unknown"


def detect_virtualization(root="/", sysfs_root="/sys", procfs_root="/proc"):
    """Container/VM detection from files alone (used when systemd-detect-virt is absent).

    Returns ``{container, vm, container_type, vm_type}``.
    """
    container_type = None
    env = read_bytes(os.path.join(procfs_root, "1", "environ"))
    if env:
        container_type = parse_environ_container(env)
    if container_type is None and os.path.exists(os.path.join(root, ".dockerenv")):
        container_type = "docker"
    if container_type is None and os.path.exists(os.path.join(root, "run", ".containerenv")):
        container_type = "podman"
    if container_type is None:
        cgroup = read_text(os.path.join(procfs_root, "1", "cgroup")) or ""
        for needle, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("lxc", "lxc"),
                             ("libpod", "podman")):
            if needle in cgroup:
                container_type = kind
                break
    vm_type = vm_type_from_dmi(
        read_text(os.path.join(sysfs_root, "class", "dmi", "id", "product_name")),
        read_text(os.path.join(sysfs_root, "class", "dmi", "id", "sys_vendor")),
    )
    if vm_type is None:
        cpuinfo = parse_cpuinfo(read_text(os.path.join(procfs_root, "cpuinfo")))
        if cpuinfo["hypervisor"]:
            vm_type = "unknown"
    return {
        "container": container_type is not None,
        "vm": vm_type is not None,
        "container_type": container_type,
        "vm_type": vm_type,
    }
