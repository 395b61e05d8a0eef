# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""PCI helpers: bus-id normalization and NVIDIA device discovery from sysfs.

PRIVATE to the gpufleet.cluster collection. Pure functions over a directory tree
(``/sys/bus/pci/devices`` by default) so tests can point them at a fake tree.

Bus ids everywhere in gpufleet use nvidia-smi's form: an 8-hex-digit domain and
upper-case hex digits, ``00000000:18:00.0``. sysfs and lspci print a 4-digit
lower-case domain (``0000:18:00.0``); ``normalize_pci_bus_id`` maps both (and the
domain-less lspci ``18:00.0``) to the nvidia-smi form so they compare equal.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import (
    NVIDIA_PCI_VENDOR_ID,
    model_name_for_pci_id,
    pci_device_kind,
)

_BUS_ID_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)

# PCI class codes (base class << 8 | sub class) of NVIDIA functions we count.
GPU_CLASSES = {
    0x0300: "vga",  # VGA-compatible display controller (GeForce, some workstation cards)
    0x0302: "3d",  # 3D controller (data-centre GPUs)
    0x0380: "display",  # other display controller
}
BRIDGE_OTHER_CLASS = 0x0680  # "Bridge: Nvidia Corporation Device 22a3" = NVSwitch


def normalize_pci_bus_id(bus_id):
    """Return ``DDDDDDDD:BB:DD.F`` (upper-case hex) for any PCI bus id form, or None."""
    if bus_id is None:
        return None
    m = _BUS_ID_RE.match(str(bus_id).strip())
    if not m:
        return None
    domain = int(m.group("domain") or "0", 16)
    return "%08X:%02X:%02X.%s" % (domain, int(m.group("bus"), 16), int(m.group("dev"), 16), m.group("fn"))


def _read(path):
    try:
        with open(path, "r") as f:
            return f.read().strip()
    except (IOError, OSError):
        return None


def _hex(value):
    if value is None:
        return None
    try:
        return int(value, 16)
    except ValueError:
        return None


def classify_nvidia_function(vendor, device, pci_class):
    """'gpu', 'nvswitch' or None for a PCI function given its vendor/device/class ints."""
    if vendor != int(NVIDIA_PCI_VENDOR_ID, 16) or pci_class is None:
        return None
    base_sub = pci_class >> 8
    if base_sub in GPU_CLASSES:
        return "gpu"
    if base_sub == BRIDGE_OTHER_CLASS:
        # NVSwitch shows as a bridge; known ids are listed, any other NVIDIA
        # "other bridge" on a GPU board is an NVSwitch as well.
        return "nvswitch"
    # Audio (0x0403), USB-C (0x0c03) and serial functions of consumer cards are not GPUs.
    if device is not None and pci_device_kind("%04x" % device) == "nvswitch":
        return "nvswitch"
    return None


def scan_nvidia_pci(sysfs_path="/sys/bus/pci/devices"):
    """List NVIDIA GPUs and NVSwitch bridges under a sysfs PCI devices directory.

    Returns ``[{bus_id, sysfs_name, vendor_id, device_id, class, kind, model}]``
    sorted by bus id; ids are ``0x``-prefixed lower-case hex strings, ``class`` is
    the 6-digit class code (``0x030200``). A missing directory gives ``[]``.
    """
    devices = []
    try:
        names = sorted(os.listdir(sysfs_path))
    except (IOError, OSError):
        return devices
    for name in names:
        base = os.path.join(sysfs_path, name)
        vendor = _hex(_read(os.path.join(base, "vendor")))
        device = _hex(_read(os.path.join(base, "device")))
        pci_class = _hex(_read(os.path.join(base, "class")))
        kind = classify_nvidia_function(vendor, device, pci_class)
        if kind is None:
            continue
        device_id = "0x%04x" % device if device is not None else None
        devices.append({
            "bus_id": normalize_pci_bus_id(name) or name,
            "sysfs_name": name,
            "vendor_id": "0x%04x" % vendor,
            "device_id": device_id,
            "class": "0x%06x" % pci_class,
            "kind": kind,
            "model": model_name_for_pci_id(device_id) if device_id else None,
        })
    devices.sort(key=lambda d: d["bus_id"])
    return devices
