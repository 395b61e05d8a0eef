import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_models
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import (
    architecture_for_cc,
    lookup_model,
    normalize_cc,
    normalize_pci_device_id,
)


@pytest.mark.parametrize(
    "query, key, arch, cc",
    [
        # names exactly as the captures print them
        ("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb", "Hopper", "9.0"),
        ("NVIDIA A10", "a10", "Ampere", "8.6"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb", "Ampere", "8.0"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb", "Ampere", "8.0"),
        ("Tesla V100S-PCIE-32GB", "v100s-pcie-32gb", "Volta", "7.0"),
        ("Tesla T4", "t4", "Turing", "7.5"),
        ("Tesla P100-PCIE-16GB", "p100-pcie-16gb", "Pascal", "6.0"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090", "Ada Lovelace", "8.9"),
        ("NVIDIA RTX 4000 SFF Ada Generation", "rtx-4000-sff-ada", "Ada Lovelace", "8.9"),
        ("NVIDIA L40S", "l40s", "Ada Lovelace", "8.9"),
        ("NVIDIA H200", "h200", "Hopper", "9.0"),
        # names from the wider family list
        ("Tesla P40", "p40", "Pascal", "6.1"),
        ("Quadro RTX 6000", "quadro-rtx-6000", "Turing", "7.5"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada", "Ada Lovelace", "8.9"),
        ("NVIDIA RTX A6000", "rtx-a6000", "Ampere", "8.6"),
        ("NVIDIA A10G", "a10g", "Ampere", "8.6"),
        ("NVIDIA H100 NVL", "h100-nvl", "Hopper", "9.0"),
        ("NVIDIA H100 PCIe", "h100-pcie", "Hopper", "9.0"),
        ("NVIDIA GH200 480GB", "gh200", "Hopper", "9.0"),
        ("NVIDIA B200", "b200", "Blackwell", "10.0"),
        ("NVIDIA GeForce RTX 5090", "rtx-5090", "Blackwell", "12.0"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell", "Blackwell", "12.0"),
        # aliases, keys and PCI ids in the forms nvidia-smi, lspci and sysfs print
        ("h100 80gb hbm3", "h100-sxm5-80gb", "Hopper", "9.0"),
        ("a100-sxm4-80gb", "a100-sxm4-80gb", "Ampere", "8.0"),
        ("0x233010DE", "h100-sxm5-80gb", "Hopper", "9.0"),
        ("10de:2330", "h100-sxm5-80gb", "Hopper", "9.0"),
        ("0x2335", "h200", "Hopper", "9.0"),
        ("20B210DE", "a100-sxm4-80gb", "Ampere", "8.0"),
        ("0x1DF610DE", "v100s-pcie-32gb", "Volta", "7.0"),
        ("0x223610DE", "a10", "Ampere", "8.6"),
        ("27B010DE", "rtx-4000-sff-ada", "Ada Lovelace", "8.9"),
    ],
)
def test_lookup_model(query, key, arch, cc):
    model = lookup_model(query)
    assert model is not None
    assert (model["key"], model["architecture"], model["compute_capability"]) == (key, arch, cc)
    assert architecture_for_cc(cc) == arch


@pytest.mark.parametrize("query", ["Graphics Device", "", None, "0xffff", "Radeon Instinct MI300X"])
def test_lookup_unknown(query):
    assert lookup_model(query) is None


def test_partial_name_prefers_longest_alias():
    assert lookup_model("NVIDIA H100 80GB HBM3 MIG 3g.40gb")["key"] == "h100-sxm5-80gb"
    assert lookup_model("NVIDIA A100 80GB PCIe")["key"] == "a100-pcie-80gb"


def test_memory_seen_in_captures():
    assert lookup_model("NVIDIA H100 80GB HBM3")["memory_mib"] == 81559
    assert lookup_model("NVIDIA H200")["memory_mib"] == 143771
    assert lookup_model("Tesla T4")["memory_mib"] == 15360
    assert lookup_model("NVIDIA GeForce RTX 4090")["datacenter"] is False
    assert lookup_model("NVIDIA A10")["ecc_capable"] is True


def test_lookup_returns_copy():
    lookup_model("Tesla T4")["architecture"] = "broken"
    assert lookup_model("Tesla T4")["architecture"] == "Turing"


@pytest.mark.parametrize(
    "cc, arch",
    [("6.0", "Pascal"), ("7.0", "Volta"), ("7.5", "Turing"), ("8.0", "Ampere"), ("8.6", "Ampere"),
     ("8.9", "Ada Lovelace"), ("9.0", "Hopper"), ("sm_90a", "Hopper"), ("90", "Hopper"), ((9, 0), "Hopper"),
     ("10.0", "Blackwell"), ("100", "Blackwell"), ("12.0", "Blackwell"), (7.5, "Turing"),
     ("5.2", None), ("garbage", None), (None, None)],
)
def test_architecture_for_cc(cc, arch):
    assert architecture_for_cc(cc) == arch


def test_normalizers():
    assert normalize_cc("sm_120") == "12.0"
    assert normalize_cc(9) == "9.0"
    assert normalize_pci_device_id("0x22A310DE") == "0x22a3"
    assert normalize_pci_device_id("NVIDIA") is None
    assert gpu_models.pci_device_kind("0x22a3") == "nvswitch"
    assert gpu_models.pci_device_kind("0x2330") == "gpu"
    assert gpu_models.pci_device_kind("0x1234") is None


def test_table_is_consistent():
    keys = [m["key"] for m in gpu_models.MODELS]
    assert len(keys) == len(set(keys))
    pci = [p for m in gpu_models.MODELS for p in m["pci_device_ids"]]
    assert len(pci) == len(set(pci))
    for m in gpu_models.MODELS:
        assert architecture_for_cc(m["compute_capability"]) == m["architecture"], m["key"]
