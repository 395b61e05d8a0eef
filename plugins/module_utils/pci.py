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

How the host sees the NVSwitches differs by generation (NVIDIA Fabric Manager User Guide, release 2.3,
https://docs.nvidia.com/datacenter/tesla/pdf/fabric-manager-user-guide.pdf, sections 1.3.1 and 1.3.2):

- HGX A100 / H100 / H200 (NVSwitch generations 2 and 3): each NVSwitch is a PCIe function of NVIDIA's,
  class "other bridge" (0x0680): 10de:1af1 (A100), 10de:22a3 (H100/H200).
- HGX B100 / B200 (fourth-generation NVSwitch, NVLink 5): the NVSwitches are not PCIe functions. The host
  reaches them through a ConnectX-7 "CX7 bridge" integrated into the GPU baseboard: two ports, each exposing
  a full-capability PF and a Limited PF (LPF); FM and NVLSM program the NVSwitches through the LPFs. An LPF
  is told apart from an ordinary ConnectX-7 NIC (same id, 15b3:1021) only by its PCI Vital Product Data,
  which carries the vendor-specific field ``SMDL=SW_MNG``; FM's own prelaunch script looks for that field.
  Public code doing the same: siderolabs/extensions nvidia-fabricmanager-wrapper/nvswitch.go (commit
  26822f5c), bottlerocket-core-kit's ghostdog (PR 499), and code index ids 59189699369 / 70721197790.
- HGX B300 is assumed to follow B200 (fourth-generation NVSwitch; the FM guide 2.3 names B100/B200 only),
  and a VM that is handed the GPUs without the LPFs shows no NVSwitch at all: there the GPUs' fabric state
  (nvidia-smi) is the only evidence.
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
MELLANOX_PCI_VENDOR_ID = 0x15B3
# The VPD field that marks a ConnectX-7 function as an NVSwitch management LPF on HGX B100/B200/B300
# (Fabric Manager User Guide 2.3, section 1.3.2).
NVSWITCH_BRIDGE_VPD_MARKER = b"SMDL=SW_MNG"
NVSWITCH_BRIDGE_MODEL = "NVSwitch management bridge (ConnectX-7 LPF, HGX B100/B200/B300)"


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


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except (IOError, OSError):
        return None


def is_nvswitch_bridge(vendor, vpd):
    """True for a ConnectX function whose VPD names it the NVSwitch management LPF (``SMDL=SW_MNG``).

    Reading ``vpd`` needs root; an unreadable VPD (None) is not evidence either way and gives False."""
    return vendor == MELLANOX_PCI_VENDOR_ID and vpd is not None and NVSWITCH_BRIDGE_VPD_MARKER in vpd


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
    """List NVIDIA GPUs, NVSwitches and NVSwitch management bridges under a sysfs PCI devices directory.

    Returns ``[{bus_id, sysfs_name, vendor_id, device_id, class, kind, model}]``
    sorted by bus id; ids are ``0x``-prefixed lower-case hex strings, ``class`` is
    the 6-digit class code (``0x030200``). ``kind`` is ``gpu``, ``nvswitch`` (an NVSwitch
    PCI function, A100/H100) or ``nvswitch_bridge`` (the ConnectX-7 LPF through which the
    host reaches the NVSwitches of an HGX B200, see the module docstring). A missing
    directory gives ``[]``.
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
        model = None
        # An SR-IOV VF (it has a physfn link) is no bridge function, whatever VPD the kernel shows for it.
        if (kind is None and vendor == MELLANOX_PCI_VENDOR_ID and pci_class is not None
                and not os.path.lexists(os.path.join(base, "physfn"))):
            if is_nvswitch_bridge(vendor, _read_bytes(os.path.join(base, "vpd"))):
                kind, model = "nvswitch_bridge", NVSWITCH_BRIDGE_MODEL
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
            "model": model or (model_name_for_pci_id(device_id) if device_id else None),
        })
    devices.sort(key=lambda d: d["bus_id"])
    return devices
