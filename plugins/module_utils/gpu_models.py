# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""NVIDIA GPU model table: nvidia-smi names and PCI device ids -> architecture,
compute capability and memory.

PRIVATE to the gpufleet.cluster collection, but ``lookup_model`` and
``architecture_for_cc`` are a stable interface (the compat solver imports them).

Sources: the compute capability of each model is a row of the sourced table
(compat_facts.FACTS, kind ``gpu_cc``: NVIDIA's CUDA GPUs list and MIG user guide);
``memory_mib`` is the FB total nvidia-smi printed in a real capture
(../shared/fixtures or compat-facts.md), ``None`` where no capture was seen.
PCI device ids come from the captures (``pci_device_id`` / ``Device Id``) and the
public PCI id database; a device id that several products share (A2/A16) is
listed on none of them.
"""

from __future__ import annotations

import copy
import re

try:  # collection import path
    from ansible_collections.gpufleet.cluster.plugins.module_utils.compat_facts import rows as _fact_rows
except ImportError:  # pragma: no cover - direct import from the source tree
    from compat_facts import rows as _fact_rows  # type: ignore

NVIDIA_PCI_VENDOR_ID = "10de"

# Architecture names as nvidia-smi prints them in <product_architecture>.
PASCAL = "Pascal"
VOLTA = "Volta"
TURING = "Turing"
AMPERE = "Ampere"
ADA = "Ada Lovelace"
HOPPER = "Hopper"
BLACKWELL = "Blackwell"

# (major, minor) -> architecture. Minor versions not listed fall back to the major.
_CC_ARCH = {
    (6, 0): PASCAL, (6, 1): PASCAL, (6, 2): PASCAL,
    (7, 0): VOLTA, (7, 2): VOLTA,
    (7, 5): TURING,
    (8, 0): AMPERE, (8, 6): AMPERE, (8, 7): AMPERE,
    (8, 9): ADA,
    (9, 0): HOPPER,
    (10, 0): BLACKWELL, (10, 1): BLACKWELL, (10, 3): BLACKWELL,
    (11, 0): BLACKWELL,
    (12, 0): BLACKWELL, (12, 1): BLACKWELL,
}
_MAJOR_ARCH = {6: PASCAL, 9: HOPPER, 10: BLACKWELL, 11: BLACKWELL, 12: BLACKWELL}


_CC = _fact_rows("gpu_cc")


def _m(key, names, arch, gib, mib=None, dc=True, pci=(), mem_type=None, form=None):
    return {
        "key": key,
        "name": names[0],
        "aliases": list(names),
        "architecture": arch,
        "compute_capability": _CC[key],
        "memory_gib": gib,
        "memory_mib": mib,
        "memory_type": mem_type,
        "datacenter": dc,
        "ecc_capable": dc,
        "form_factor": form,
        "pci_device_ids": ["0x%s" % p.lower() for p in pci],
    }


# First name is the one current drivers print; the rest are older names and aliases.
# ``datacenter`` = data-centre / professional part with ECC memory that can be enabled.
MODELS = [
    # Pascal
    _m("p100-pcie-16gb", ["Tesla P100-PCIE-16GB", "P100-PCIE-16GB"], PASCAL, 16, 16384, pci=["15f8"], mem_type="HBM2", form="PCIe"),
    _m("p100-pcie-12gb", ["Tesla P100-PCIE-12GB", "P100-PCIE-12GB"], PASCAL, 12, pci=["15f7"], mem_type="HBM2", form="PCIe"),
    _m("p100-sxm2-16gb", ["Tesla P100-SXM2-16GB", "P100-SXM2-16GB", "Tesla P100"], PASCAL, 16, pci=["15f9"], mem_type="HBM2", form="SXM2"),
    _m("p40", ["Tesla P40", "P40"], PASCAL, 24, pci=["1b38"], mem_type="GDDR5", form="PCIe"),
    _m("p4", ["Tesla P4", "P4"], PASCAL, 8, pci=["1bb3"], mem_type="GDDR5", form="PCIe"),
    # Volta
    _m("v100-sxm2-16gb", ["Tesla V100-SXM2-16GB", "V100-SXM2-16GB"], VOLTA, 16, pci=["1db1"], mem_type="HBM2", form="SXM2"),
    _m("v100-pcie-16gb", ["Tesla V100-PCIE-16GB", "V100-PCIE-16GB"], VOLTA, 16, pci=["1db4"], mem_type="HBM2", form="PCIe"),
    _m("v100-sxm2-32gb", ["Tesla V100-SXM2-32GB", "V100-SXM2-32GB", "Tesla V100"], VOLTA, 32, pci=["1db5"], mem_type="HBM2", form="SXM2"),
    _m("v100-pcie-32gb", ["Tesla V100-PCIE-32GB", "V100-PCIE-32GB"], VOLTA, 32, 32510, pci=["1db6"], mem_type="HBM2", form="PCIe"),
    _m("v100-sxm3-32gb", ["Tesla V100-SXM3-32GB", "V100-SXM3-32GB"], VOLTA, 32, pci=["1db8"], mem_type="HBM2", form="SXM3"),
    _m("v100s-pcie-32gb", ["Tesla V100S-PCIE-32GB", "V100S-PCIE-32GB", "V100S"], VOLTA, 32, 32510, pci=["1df6"], mem_type="HBM2", form="PCIe"),
    _m("titan-v", ["NVIDIA TITAN V", "TITAN V"], VOLTA, 12, dc=False, pci=["1d81"], mem_type="HBM2"),
    # Turing
    _m("t4", ["Tesla T4", "NVIDIA T4", "T4"], TURING, 16, 15360, pci=["1eb8"], mem_type="GDDR6", form="PCIe"),
    _m("quadro-rtx-8000", ["Quadro RTX 8000"], TURING, 48, pci=["1e30"], mem_type="GDDR6"),
    _m("quadro-rtx-6000", ["Quadro RTX 6000"], TURING, 24, mem_type="GDDR6"),
    _m("quadro-rtx-5000", ["Quadro RTX 5000"], TURING, 16, mem_type="GDDR6"),
    _m("quadro-rtx-4000", ["Quadro RTX 4000"], TURING, 8, dc=False, mem_type="GDDR6"),
    _m("rtx-2080-ti", ["NVIDIA GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti", "RTX 2080 Ti"], TURING, 11, dc=False, mem_type="GDDR6"),
    _m("rtx-2080-super", ["NVIDIA GeForce RTX 2080 SUPER", "RTX 2080 SUPER"], TURING, 8, dc=False, mem_type="GDDR6"),
    _m("rtx-2080", ["NVIDIA GeForce RTX 2080", "GeForce RTX 2080", "RTX 2080"], TURING, 8, dc=False, mem_type="GDDR6"),
    _m("rtx-2070", ["NVIDIA GeForce RTX 2070", "GeForce RTX 2070", "RTX 2070"], TURING, 8, dc=False, mem_type="GDDR6"),
    _m("titan-rtx", ["NVIDIA TITAN RTX", "TITAN RTX"], TURING, 24, dc=False, mem_type="GDDR6"),
    # Ampere, sm_80
    _m("a100-sxm4-40gb", ["NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"], AMPERE, 40, 40960, pci=["20b0"], mem_type="HBM2", form="SXM4"),
    _m("a100-pcie-40gb", ["NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB", "NVIDIA A100 40GB PCIe"],
       AMPERE, 40, 40960, pci=["20f1"], mem_type="HBM2", form="PCIe"),
    _m("a100-sxm4-80gb", ["NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", "NVIDIA A100 80GB SXM"],
       AMPERE, 80, 81920, pci=["20b2"], mem_type="HBM2e", form="SXM4"),
    _m("a100-pcie-80gb", ["NVIDIA A100 80GB PCIe", "A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"],
       AMPERE, 80, 81920, pci=["20b5"], mem_type="HBM2e", form="PCIe"),
    _m("a100", ["NVIDIA A100", "A100"], AMPERE, None, mem_type="HBM2"),
    _m("a800-sxm4-80gb", ["NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB"], AMPERE, 80, mem_type="HBM2e", form="SXM4"),
    _m("a800-pcie-80gb", ["NVIDIA A800 80GB PCIe", "A800 80GB PCIe"], AMPERE, 80, mem_type="HBM2e", form="PCIe"),
    _m("a30", ["NVIDIA A30", "A30"], AMPERE, 24, pci=["20b7"], mem_type="HBM2", form="PCIe"),
    # Ampere, sm_86
    _m("a40", ["NVIDIA A40", "A40"], AMPERE, 48, 46068, pci=["2235"], mem_type="GDDR6", form="PCIe"),
    _m("a10", ["NVIDIA A10", "A10"], AMPERE, 24, 23028, pci=["2236"], mem_type="GDDR6", form="PCIe"),
    _m("a10g", ["NVIDIA A10G", "A10G"], AMPERE, 24, 23028, pci=["2237"], mem_type="GDDR6", form="PCIe"),
    _m("a16", ["NVIDIA A16", "A16"], AMPERE, 16, mem_type="GDDR6", form="PCIe"),
    _m("a2", ["NVIDIA A2", "A2"], AMPERE, 16, mem_type="GDDR6", form="PCIe"),
    _m("rtx-a6000", ["NVIDIA RTX A6000", "RTX A6000"], AMPERE, 48, pci=["2230"], mem_type="GDDR6"),
    _m("rtx-a5000", ["NVIDIA RTX A5000", "RTX A5000"], AMPERE, 24, pci=["2231"], mem_type="GDDR6"),
    _m("rtx-a4500", ["NVIDIA RTX A4500", "RTX A4500"], AMPERE, 20, mem_type="GDDR6"),
    _m("rtx-a4000", ["NVIDIA RTX A4000", "RTX A4000"], AMPERE, 16, pci=["24b0"], mem_type="GDDR6"),
    _m("rtx-3090-ti", ["NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti"], AMPERE, 24, dc=False, mem_type="GDDR6X"),
    _m("rtx-3090", ["NVIDIA GeForce RTX 3090", "GeForce RTX 3090", "RTX 3090"], AMPERE, 24, 24576, dc=False, pci=["2204"], mem_type="GDDR6X"),
    _m("rtx-3080-ti", ["NVIDIA GeForce RTX 3080 Ti", "RTX 3080 Ti"], AMPERE, 12, dc=False, mem_type="GDDR6X"),
    _m("rtx-3080", ["NVIDIA GeForce RTX 3080", "GeForce RTX 3080", "RTX 3080"], AMPERE, 10, dc=False, pci=["2206"], mem_type="GDDR6X"),
    _m("rtx-3070", ["NVIDIA GeForce RTX 3070", "GeForce RTX 3070", "RTX 3070"], AMPERE, 8, dc=False, mem_type="GDDR6"),
    _m("rtx-3060", ["NVIDIA GeForce RTX 3060", "GeForce RTX 3060", "RTX 3060"], AMPERE, 12, dc=False, mem_type="GDDR6"),
    # Ada Lovelace
    _m("l4", ["NVIDIA L4", "L4"], ADA, 24, 23034, pci=["27b8"], mem_type="GDDR6", form="PCIe"),
    _m("l40", ["NVIDIA L40", "L40"], ADA, 48, 46068, pci=["26b5"], mem_type="GDDR6", form="PCIe"),
    _m("l40s", ["NVIDIA L40S", "L40S"], ADA, 48, 46068, pci=["26b9"], mem_type="GDDR6", form="PCIe"),
    _m("l20", ["NVIDIA L20", "L20"], ADA, 48, mem_type="GDDR6", form="PCIe"),
    _m("rtx-6000-ada", ["NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"], ADA, 48, pci=["26b1"], mem_type="GDDR6"),
    _m("rtx-5000-ada", ["NVIDIA RTX 5000 Ada Generation", "RTX 5000 Ada"], ADA, 32, mem_type="GDDR6"),
    _m("rtx-4500-ada", ["NVIDIA RTX 4500 Ada Generation", "RTX 4500 Ada"], ADA, 24, mem_type="GDDR6"),
    _m("rtx-4000-ada", ["NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada"], ADA, 20, pci=["27b2"], mem_type="GDDR6"),
    _m("rtx-4000-sff-ada", ["NVIDIA RTX 4000 SFF Ada Generation", "RTX 4000 SFF Ada"], ADA, 20, 20475, pci=["27b0"], mem_type="GDDR6"),
    _m("rtx-4090", ["NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "RTX 4090"], ADA, 24, 24564, dc=False, pci=["2684"], mem_type="GDDR6X"),
    _m("rtx-4080-super", ["NVIDIA GeForce RTX 4080 SUPER", "RTX 4080 SUPER"], ADA, 16, dc=False, mem_type="GDDR6X"),
    _m("rtx-4080", ["NVIDIA GeForce RTX 4080", "GeForce RTX 4080", "RTX 4080"], ADA, 16, dc=False, pci=["2704"], mem_type="GDDR6X"),
    _m("rtx-4070-ti", ["NVIDIA GeForce RTX 4070 Ti", "RTX 4070 Ti"], ADA, 12, dc=False, mem_type="GDDR6X"),
    _m("rtx-4070", ["NVIDIA GeForce RTX 4070", "RTX 4070"], ADA, 12, dc=False, mem_type="GDDR6X"),
    # Hopper
    _m("h100-sxm5-80gb", ["NVIDIA H100 80GB HBM3", "H100 80GB HBM3", "NVIDIA H100 SXM5 80GB", "H100 SXM"],
       HOPPER, 80, 81559, pci=["2330"], mem_type="HBM3", form="SXM5"),
    _m("h100-pcie", ["NVIDIA H100 PCIe", "H100 PCIe", "NVIDIA H100 80GB PCIe"], HOPPER, 80, pci=["2331"], mem_type="HBM2e", form="PCIe"),
    _m("h100-nvl", ["NVIDIA H100 NVL", "H100 NVL"], HOPPER, 94, pci=["2321"], mem_type="HBM3", form="PCIe"),
    _m("h100", ["NVIDIA H100", "H100"], HOPPER, 80, mem_type="HBM3"),
    _m("h800", ["NVIDIA H800", "H800", "NVIDIA H800 80GB HBM3"], HOPPER, 80, pci=["2324"], mem_type="HBM3", form="SXM5"),
    _m("h800-pcie", ["NVIDIA H800 PCIe", "H800 PCIe"], HOPPER, 80, pci=["2322"], mem_type="HBM2e", form="PCIe"),
    _m("h20", ["NVIDIA H20", "H20"], HOPPER, 96, mem_type="HBM3", form="SXM5"),
    _m("h200", ["NVIDIA H200", "H200", "NVIDIA H200 141GB HBM3e"], HOPPER, 141, 143771, pci=["2335"], mem_type="HBM3e", form="SXM5"),
    _m("h200-nvl", ["NVIDIA H200 NVL", "H200 NVL"], HOPPER, 141, mem_type="HBM3e", form="PCIe"),
    _m("gh200", ["NVIDIA GH200 480GB", "NVIDIA GH200", "GH200"], HOPPER, 96, pci=["2342"], mem_type="HBM3", form="Superchip"),
    # The HBM3e variant: 144 GB (cuDeviceTotalMem 153008209920 bytes = 145920 MiB), PCI id 2348 (public code,
    # code index ids 71213094565 and 56908000193; compat_facts SOURCES["b300-cluster-table"] lists it as 144 GB).
    _m("gh200-144g", ["NVIDIA GH200 144G HBM3e", "GH200 144G HBM3e"], HOPPER, 144, 145920, pci=["2348"],
       mem_type="HBM3e", form="Superchip"),
    # Blackwell
    _m("b200", ["NVIDIA B200", "B200"], BLACKWELL, 180, pci=["2901"], mem_type="HBM3e", form="SXM6"),
    _m("b100", ["NVIDIA B100", "B100"], BLACKWELL, 180, mem_type="HBM3e", form="SXM6"),
    _m("gb200", ["NVIDIA GB200", "GB200"], BLACKWELL, 186, pci=["2941"], mem_type="HBM3e", form="Superchip"),
    _m("b300", ["NVIDIA B300 SXM6 AC", "NVIDIA B300", "B300"], BLACKWELL, 288, mem_type="HBM3e", form="SXM6"),
    _m("gb300", ["NVIDIA GB300", "GB300"], BLACKWELL, 288, mem_type="HBM3e", form="Superchip"),
    _m("rtx-pro-6000-blackwell", ["NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                  "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell", "RTX PRO 6000"],
       BLACKWELL, 96, mem_type="GDDR7"),
    _m("rtx-5090", ["NVIDIA GeForce RTX 5090", "GeForce RTX 5090", "RTX 5090"], BLACKWELL, 32, dc=False, pci=["2b85"], mem_type="GDDR7"),
    _m("rtx-5080", ["NVIDIA GeForce RTX 5080", "GeForce RTX 5080", "RTX 5080"], BLACKWELL, 16, dc=False, mem_type="GDDR7"),
    _m("rtx-5070-ti", ["NVIDIA GeForce RTX 5070 Ti", "RTX 5070 Ti"], BLACKWELL, 16, dc=False, mem_type="GDDR7"),
    _m("rtx-5070", ["NVIDIA GeForce RTX 5070", "RTX 5070"], BLACKWELL, 12, dc=False, mem_type="GDDR7"),
]

# NVSwitch PCI bridges (class 0x0680) that sit beside the GPUs on HGX/DGX boards.
NVSWITCH_PCI_IDS = {
    "0x1af1": "NVSwitch (Ampere, HGX/DGX A100)",
    "0x22a3": "NVSwitch (Hopper, HGX/DGX H100/H200)",
}

_NOISE_TOKENS = {"nvidia", "tesla", "geforce"}


def _tokens(name):
    text = str(name).lower()
    text = re.sub(r"[-_/,()]+", " ", text)
    return tuple(t for t in text.split() if t not in _NOISE_TOKENS)


_BY_ALIAS = {}
_BY_PCI = {}
for _model in MODELS:
    for _alias in _model["aliases"]:
        _BY_ALIAS.setdefault(_tokens(_alias), _model)
    for _pci in _model["pci_device_ids"]:
        _BY_PCI[_pci] = _model

_PCI_RE = re.compile(r"^(?:0x)?(?:10de:)?([0-9a-f]{4})(?:10de)?$")


def normalize_pci_device_id(value):
    """Return ``0xdddd`` (lowercase) for "0x2330", "2330", "10de:2330" or
    nvidia-smi's "0x233010DE" (device id then vendor id); ``None`` if it is not one."""
    if value is None:
        return None
    if isinstance(value, int):
        value = "%04x" % value
    m = _PCI_RE.match(str(value).strip().lower())
    return "0x%s" % m.group(1) if m else None


def _result(model, matched_by):
    out = copy.deepcopy(model)
    out.pop("aliases", None)
    out["matched_by"] = matched_by
    return out


def lookup_model(name_or_pci_id):
    """Find a GPU model by nvidia-smi product name, alias or PCI device id.

    Accepts "NVIDIA H100 80GB HBM3", "Tesla T4", "a100-sxm4-80gb", "H200",
    "0x2330", "10de:2330" or "0x233010DE". Returns a new dict with ``key``,
    ``name``, ``architecture``, ``compute_capability`` (str "9.0"),
    ``memory_gib``, ``memory_mib`` (as nvidia-smi reports it, or None),
    ``memory_type``, ``datacenter``, ``ecc_capable``, ``form_factor``,
    ``pci_device_ids`` and ``matched_by`` (``pci_id|name|key|partial``);
    ``None`` when the model is unknown.
    """
    if name_or_pci_id is None:
        return None
    text = str(name_or_pci_id).strip()
    if not text:
        return None
    pci = normalize_pci_device_id(text)
    if pci is not None and pci in _BY_PCI:
        return _result(_BY_PCI[pci], "pci_id")
    for model in MODELS:
        if model["key"] == text.lower():
            return _result(model, "key")
    toks = _tokens(text)
    if toks in _BY_ALIAS:
        return _result(_BY_ALIAS[toks], "name")
    # Partial: the longest alias whose tokens all appear, in order, in the name
    # ("NVIDIA H100 80GB HBM3 (MIG)" -> H100 80GB HBM3).
    best = None
    best_len = 0
    for alias_toks, model in _BY_ALIAS.items():
        if len(alias_toks) <= best_len or not alias_toks:
            continue
        it = iter(toks)
        if all(t in it for t in alias_toks):
            best, best_len = model, len(alias_toks)
    if best is not None:
        return _result(best, "partial")
    return None


def _parse_cc(cc):
    if cc is None:
        return None
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    text = str(cc).strip().lower()
    text = re.sub(r"^(sm_|compute_|sm)", "", text)
    m = re.match(r"^(\d+)\.(\d+)[a-z]?$", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^(\d+)(\d)[a-z]?$", text)  # "90", "100a", "120"
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^(\d+)$", text)
    if m:
        return int(m.group(1)), 0
    return None


def normalize_cc(cc):
    """"9.0" for 9.0, "9", "90", "sm_90", "9.0a", (9, 0); None if unparseable."""
    parsed = _parse_cc(cc)
    return None if parsed is None else "%d.%d" % parsed


def architecture_for_cc(cc):
    """Architecture name (as nvidia-smi prints it) for a compute capability, or None."""
    parsed = _parse_cc(cc)
    if parsed is None:
        return None
    if parsed in _CC_ARCH:
        return _CC_ARCH[parsed]
    return _MAJOR_ARCH.get(parsed[0])


def pci_device_kind(device_id):
    """'nvswitch' for a known NVSwitch device id, 'gpu' for a known GPU, else None."""
    pci = normalize_pci_device_id(device_id)
    if pci in NVSWITCH_PCI_IDS:
        return "nvswitch"
    if pci in _BY_PCI:
        return "gpu"
    return None


def model_name_for_pci_id(device_id):
    """Canonical model name for a PCI device id (GPU or NVSwitch), or None."""
    pci = normalize_pci_device_id(device_id)
    if pci in NVSWITCH_PCI_IDS:
        return NVSWITCH_PCI_IDS[pci]
    model = _BY_PCI.get(pci)
    return model["name"] if model else None


# NVLink per model key: every model above has a row (tests/unit walks MODELS), so a GPU the solver knows is never
# left unchecked for want of a row. Three kinds of row:
#   links/gbps: what ``nvidia-smi nvlink -s`` prints on a healthy part (gbps None: the link count is checked,
#               the per-link rate is not, for want of a capture);
#   links 0:    the part has no NVLink;
#   links None: the count depends on the system (an optional bridge, a platform choice): not checked, ``reason`` says why.
# Per-link rates are per direction as nvidia-smi prints them: NVLink2 25.781, NVLink3 25.0, NVLink4 26.562 and
# NVLink5 53.125 GB/s (the signalling rate; NVIDIA's "50 GB/s" x 1.0625, as 26.562 is 25 x 1.0625).
_NVL2_V100 = "nvidia-smi nvlink -s on Tesla V100-SXM2-32GB: Link 0..5 at 25.781 GB/s (Azure/azhpc-diagnostics issue #73)"
_NVL3_A100 = "leptonai/gpud pkg/nvidia-query/testdata/nvidia-smi.nvlink.status.a100 (12 x 25 GB/s)"
_NVL4_H100 = "stas00/ml-engineering compute/accelerator/nvidia/debug.md (H100 80GB HBM3, links 0..17 at 26.562 GB/s)"
_NVL5 = ("nvidia-smi nvlink -s on a GB200 (NVIDIA/k8s-test-infra issue #371, 18 x 53.125 GB/s); B100/B200/B300/GB300"
         " have the same NVLink 5 (1.8 TB/s = 18 links, NVIDIA datasheets)")
_NO_NVLINK = "NVIDIA datasheet: no NVLink on this part (PCIe only)"
_BRIDGE = "NVLink through an optional bridge: the link count depends on the bridges fitted, so it is not checked"


def _nvl(links, gbps, source):
    return {"links": links, "gbps": gbps, "source": source, "reason": None}


def _no_nvlink(source=_NO_NVLINK):
    return {"links": 0, "gbps": None, "source": source, "reason": None}


def _unknown(reason):
    return {"links": None, "gbps": None, "source": None, "reason": reason}


NVLINK_BY_KEY = {
    "p100-pcie-16gb": _no_nvlink(), "p100-pcie-12gb": _no_nvlink(),
    "p100-sxm2-16gb": _nvl(4, None, "NVIDIA Tesla P100 datasheet: 4 NVLink 1 links (no nvlink -s capture for the rate)"),
    "p40": _no_nvlink(), "p4": _no_nvlink(),
    "v100-sxm2-16gb": _nvl(6, 25.781, _NVL2_V100), "v100-sxm2-32gb": _nvl(6, 25.781, _NVL2_V100),
    "v100-sxm3-32gb": _nvl(6, 25.781, _NVL2_V100 + "; SXM3 (DGX-2) has the same 6 NVLink 2 links"),
    "v100-pcie-16gb": _no_nvlink(), "v100-pcie-32gb": _no_nvlink(), "v100s-pcie-32gb": _no_nvlink(),
    "titan-v": _no_nvlink(),
    "t4": _no_nvlink(), "quadro-rtx-8000": _unknown(_BRIDGE), "quadro-rtx-6000": _unknown(_BRIDGE),
    "quadro-rtx-5000": _unknown(_BRIDGE), "quadro-rtx-4000": _no_nvlink(),
    "rtx-2080-ti": _unknown(_BRIDGE), "rtx-2080-super": _unknown(_BRIDGE), "rtx-2080": _unknown(_BRIDGE),
    "rtx-2070": _no_nvlink(), "titan-rtx": _unknown(_BRIDGE),
    "a100-sxm4-40gb": _nvl(12, 25.0, _NVL3_A100), "a100-sxm4-80gb": _nvl(12, 25.0, _NVL3_A100),
    "a100-pcie-40gb": _unknown(_BRIDGE), "a100-pcie-80gb": _unknown(_BRIDGE),
    "a100": _unknown("'A100' names no form factor: SXM4 has 12 links, PCIe none or a 3-link bridge"),
    "a800-sxm4-80gb": _nvl(8, 25.0, "NVIDIA A800 datasheet: NVLink 400 GB/s = 8 of the A100's 25 GB/s links"),
    "a800-pcie-80gb": _unknown(_BRIDGE), "a30": _unknown(_BRIDGE), "a40": _unknown(_BRIDGE),
    "a10": _no_nvlink(), "a10g": _no_nvlink(), "a16": _no_nvlink(), "a2": _no_nvlink(),
    "rtx-a6000": _unknown(_BRIDGE), "rtx-a5000": _unknown(_BRIDGE), "rtx-a4500": _unknown(_BRIDGE),
    "rtx-a4000": _no_nvlink(), "rtx-3090-ti": _unknown(_BRIDGE), "rtx-3090": _unknown(_BRIDGE),
    "rtx-3080-ti": _no_nvlink(), "rtx-3080": _no_nvlink(), "rtx-3070": _no_nvlink(), "rtx-3060": _no_nvlink(),
    "h100-sxm5-80gb": _nvl(18, 26.562, _NVL4_H100),
    "h100-pcie": _unknown(_BRIDGE), "h100-nvl": _unknown(_BRIDGE),
    "h100": _unknown("'H100' names no form factor: SXM5 has 18 links, PCIe/NVL parts a bridge or none"),
    "h800": _nvl(8, 26.562, "NVIDIA H800 datasheet: NVLink 400 GB/s = 8 NVLink 4 links; rate as " + _NVL4_H100),
    "h800-pcie": _unknown(_BRIDGE),
    "h20": _nvl(18, 26.562, "NVIDIA H20: NVLink 900 GB/s = 18 NVLink 4 links; rate as " + _NVL4_H100),
    "h200": _nvl(18, 26.562, "H200 SXM: NVLink 4, 900 GB/s = 18 links; rate as " + _NVL4_H100),
    "h200-nvl": _unknown(_BRIDGE),
    "gh200": _unknown("GH200's GPU NVLinks are wired by the platform (NVL2/NVL32 or none); NVLink-C2C to Grace is not listed"),
    "gh200-144g": _unknown("GH200's GPU NVLinks are wired by the platform (NVL2/NVL32 or none); NVLink-C2C to Grace is not listed"),
    "b200": _nvl(18, 53.125, _NVL5), "b100": _nvl(18, 53.125, _NVL5), "gb200": _nvl(18, 53.125, _NVL5),
    "b300": _nvl(18, 53.125, _NVL5), "gb300": _nvl(18, 53.125, _NVL5),
    "rtx-pro-6000-blackwell": _no_nvlink(), "rtx-5090": _no_nvlink(), "rtx-5080": _no_nvlink(),
    "rtx-5070-ti": _no_nvlink(), "rtx-5070": _no_nvlink(),
}
# Ada Lovelace has no NVLink on any part.
for _model in MODELS:
    if _model["architecture"] == ADA:
        NVLINK_BY_KEY.setdefault(_model["key"], _no_nvlink("NVIDIA: no Ada Lovelace part has NVLink"))


def nvlink_for_model(name_or_pci_id):
    """``{links, gbps, source, reason, model}`` for a GPU name or PCI id (``links`` 0: no NVLink; None: not checked,
    ``reason`` says why). An unknown GPU gives links None with that reason."""
    model = lookup_model(name_or_pci_id)
    if model is None:
        return dict(_unknown("GPU %r is not in the model table (gpu_models.MODELS)" % (name_or_pci_id,)), model=None)
    row = NVLINK_BY_KEY.get(model["key"]) or _unknown("no NVLink row for model %s" % model["key"])
    return dict(row, model=model["key"])
