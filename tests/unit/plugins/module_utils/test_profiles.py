"""Profile checks on facts built from the real captures in ../shared/fixtures."""
import copy
from pathlib import Path

import pytest
import yaml

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.filter.supported_os import supported_os
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import validate_finding
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import parse_lscpu
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import active_ports, parse_ibstat
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi
from ansible_collections.gpufleet.cluster.plugins.module_utils.profiles import (
    ProfileError,
    check_node,
    node_summary,
    os_key,
    resolve_profile,
)

_REPO = Path(__file__).resolve().parents[4]

DEFAULTS = _REPO / "roles" / "preflight" / "defaults" / "main.yml"
H100_X8 = "nvidia-smi-q/h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt"
RTX4090 = "nvidia-smi-xml/rtx4090-drv535.86.05-cuda12.2.xml"
A100 = "nvidia-smi-xml/a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml"
IBSTAT_IB = "ibstat/h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt"
LSCPU = "host/lscpu-della-h100-node-2x-xeon-8468.txt"


def builtin_profiles():
    return yaml.safe_load(DEFAULTS.read_text())["preflight_profiles"]


def gpu_facts(capture, nvswitches=0):
    parsed = parse_nvidia_smi((FIXTURES / capture).read_text())
    return {
        "status": "ok",
        "message": "",
        "driver_version": parsed["driver_version"],
        "cuda_version": parsed["cuda_version"],
        "gpus": parsed["gpus"],
        "driver_gpu_count": len(parsed["gpus"]),
        "pci_gpu_count": len(parsed["gpus"]),
        "pci_nvswitch_count": nvswitches,
        "nvswitch": nvswitches > 0,
        "pci_devices": [],
    }


def rdma_facts(capture=IBSTAT_IB):
    cas = parse_ibstat((FIXTURES / capture).read_text())
    return {"source": "ibstat", "cas": cas, "errors": [], "peermem_loaded": True,
            "active_ports": active_ports(cas)}


def host_facts(mem_gib=2048, nvme=True, nic_mbps=100000, secure_boot="disabled", os_id="ubuntu", ver="22.04"):
    cpu = parse_lscpu((FIXTURES / LSCPU).read_text())
    return {
        "cpu": {k: cpu[k] for k in ("model", "sockets", "cores", "threads", "numa_nodes")},
        "memory": {"total_mib": mem_gib * 1024 - 9000, "ecc_active": True, "edac_corrected": 0, "edac_uncorrected": 0},
        "block_devices": [{"name": "nvme0n1", "nvme": True, "size_bytes": 3840755982336, "rotational": False}] if nvme
        else [{"name": "sda", "nvme": False, "size_bytes": 480103981056, "rotational": False}],
        "nics": [{"name": "eth0", "speed_mbps": nic_mbps, "link": True, "mtu": 9000, "driver": "mlx5_core"},
                 {"name": "lo", "speed_mbps": None, "link": True, "mtu": 65536, "driver": None}],
        "kernel": "5.15.0-105-generic",
        "secure_boot": secure_boot,
        "virtualization": {"container": False, "vm": False, "type": None},
        "os": {"id": os_id, "version_id": ver, "family": "debian"},
    }


def h100_node(**host):
    return node_summary(gpu_facts(H100_X8, nvswitches=4), rdma_facts(), host_facts(**host))


@pytest.fixture(name="training")
def fixture_training():
    return resolve_profile("training", builtin_profiles())


# preflight_supported_os defaults to the one OS list (filter supported_os, tests/unit/roles/test_supported_os_roles.py).
SUPPORTED = supported_os("ids")


def codes(findings):
    return sorted(f["code"] for f in findings)


def test_h100_x8_summary_from_capture():
    s = h100_node()
    assert s["gpu_source"] == "nvidia-smi"
    assert s["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert s["gpu_count"] == 8
    assert s["vram_mib"] == 81559 and s["vram_gib"] == 80
    assert s["driver_version"] == "535.183.01" and s["cuda_version"] == "12.2"
    assert s["pcie_width"] == 16
    assert s["cpu_cores_per_gpu"] == 12.0
    # 8 CX-7 IB ports at 400 plus one Active CX-6 Dx Ethernet port at 100 (3 more are Down)
    assert s["rdma_active_ports"] == 9 and s["rdma_ports_total"] == 12
    assert s["hca_rate_gbps"] == "100, 400" and s["hca_count"] == 12
    assert s["os_key"] == "ubuntu22.04"


def test_h100_x8_passes_training(training):
    findings = check_node("gpu01", h100_node(), training, cluster_size=4, supported_os=SUPPORTED)
    assert findings == []


def test_rtx4090_fails_training_with_reasons(training):
    s = node_summary(gpu_facts(RTX4090), rdma_facts(), host_facts(mem_gib=64))
    findings = check_node("ws1", s, training, cluster_size=1, supported_os=SUPPORTED)
    by_code = {f["code"]: f for f in findings}
    assert "PROFILE_GPU_MODEL_NOT_ALLOWED" in by_code
    assert "PROFILE_ECC_UNSUPPORTED" in by_code
    assert "PROFILE_VRAM_LOW" in by_code  # 24 GB < 40 GB
    ecc = by_code["PROFILE_ECC_UNSUPPORTED"]
    assert ecc["severity"] == "fail" and ecc["node"] == "ws1"
    assert "RTX 4090" in ecc["message"] and "ecc" in ecc["message"]
    assert ecc["value"] == "unsupported" and ecc["threshold"] == "enabled"
    model = by_code["PROFILE_GPU_MODEL_NOT_ALLOWED"]
    assert "NVIDIA GeForce RTX 4090" in model["message"] and "h100" in model["message"]
    # ECC unsupported is not also reported as merely disabled
    assert "PROFILE_ECC_DISABLED" not in by_code
    for f in findings:
        assert validate_finding(f) == []


def test_rtx4090_passes_experiments():
    prof = resolve_profile("experiments", builtin_profiles())
    s = node_summary(gpu_facts(RTX4090), {}, host_facts(mem_gib=64, nvme=False, nic_mbps=1000))
    assert check_node("ws1", s, prof, supported_os=SUPPORTED) == []


@pytest.mark.parametrize("host, code, value", [
    ({"nvme": False}, "PROFILE_NO_NVME", 0),
    ({"nic_mbps": 10000}, "PROFILE_NIC_SLOW", 10.0),
    ({"mem_gib": 512}, "PROFILE_RAM_PER_VRAM", 0.79),
    ({"secure_boot": "enabled"}, "SECURE_BOOT_NO_SIGNING", "enabled"),
    ({"os_id": "ubuntu", "ver": "18.04"}, "OS_UNSUPPORTED", "ubuntu18.04"),
])
def test_host_thresholds(training, host, code, value):
    s = h100_node(**host)
    if code == "PROFILE_NIC_SLOW":
        s["rdma_active_ports"] = 0  # the HCAs would otherwise count as the fast NIC
        s["nic_max_gbps"], s["nic_max_name"] = 10.0, "eth0"
    findings = check_node("gpu02", s, training, cluster_size=1, supported_os=SUPPORTED)
    assert [f["code"] for f in findings] == [code]
    assert findings[0]["value"] == value
    assert findings[0]["node"] == "gpu02" and "gpu02" in findings[0]["message"]


def test_secure_boot_with_signing_key_is_a_plan(training):
    s = h100_node(secure_boot="enabled")
    assert check_node("n", s, training, module_signing={"key": "/k", "cert": "/c"}) == []


def test_rdma_required_only_multinode(training):
    s = node_summary(gpu_facts(H100_X8, 4), {"source": "none", "cas": [], "active_ports": []}, host_facts())
    assert check_node("n", s, training, cluster_size=1) == []
    found = check_node("n", s, training, cluster_size=2)
    assert codes(found) == ["PROFILE_RDMA_NOT_ACTIVE"]


def test_cpu_cores_per_gpu(training):
    s = h100_node()
    s["cpu_cores"], s["cpu_cores_per_gpu"] = 32, 4.0
    found = check_node("n", s, training)
    assert codes(found) == ["PROFILE_CPU_CORES_PER_GPU"] and found[0]["threshold"] == 6


def test_ecc_disabled_and_persistence_off_per_gpu(training):
    gpu = gpu_facts(H100_X8, 4)
    gpu["gpus"][3]["ecc_mode"] = {"current": "disabled", "pending": "enabled"}
    gpu["gpus"][5]["persistence_mode"] = False
    s = node_summary(gpu, rdma_facts(), host_facts())
    found = {f["code"]: f for f in check_node("n", s, training)}
    assert set(found) == {"PROFILE_ECC_DISABLED", "PROFILE_PERSISTENCE_OFF"}
    assert found["PROFILE_ECC_DISABLED"]["gpu_index"] == 3
    assert found["PROFILE_ECC_DISABLED"]["gpu_bus_id"] == gpu["gpus"][3]["pci_bus_id"]
    assert "reboot" in found["PROFILE_ECC_DISABLED"]["message"]
    assert found["PROFILE_PERSISTENCE_OFF"]["gpu_index"] == 5


def test_inference_prefers_ecc_as_warning():
    prof = resolve_profile("inference", builtin_profiles())
    gpu = gpu_facts("nvidia-smi-q/a10-drv535.129.03-cuda12.2.txt")
    gpu["gpus"][0]["ecc_mode"] = {"current": "disabled", "pending": "disabled"}
    s = node_summary(gpu, {}, host_facts(mem_gib=64, nvme=False))
    found = check_node("inf1", s, prof)
    assert [(f["code"], f["severity"]) for f in found] == [("PROFILE_ECC_DISABLED", "warn")]


def test_bare_node_uses_pci_and_model_table(training):
    """No driver yet: model from the PCI device id, VRAM from the model table."""
    gpu = {"status": "no_driver", "message": "nvidia-smi not found", "driver_version": None, "cuda_version": None,
           "gpus": [], "driver_gpu_count": None, "pci_gpu_count": 8, "pci_nvswitch_count": 4, "nvswitch": True,
           "pci_devices": [{"bus_id": "0000:%02x:00.0" % (0x18 + i), "device_id": "0x2330", "vendor_id": "0x10de",
                            "kind": "gpu", "model": "NVIDIA H100 80GB HBM3"} for i in range(8)]}
    s = node_summary(gpu, rdma_facts(), host_facts())
    assert s["gpu_source"] == "pci" and s["vram_source"] == "model table"
    assert s["gpu_model"] == "NVIDIA H100 80GB HBM3" and s["gpu_count"] == 8 and s["vram_gib"] == 80
    assert s["driver_version"] is None
    # ECC mode and persistence are unknown before the driver: no finding either way.
    assert check_node("bare1", s, training, supported_os=SUPPORTED) == []
    s4090 = node_summary(dict(gpu, pci_devices=[{"bus_id": "0000:01:00.0", "device_id": "0x2684", "kind": "gpu",
                                                 "model": None}], pci_gpu_count=1), {}, host_facts())
    found = {f["code"]: f for f in check_node("bare2", s4090, training)}
    assert "PROFILE_ECC_UNSUPPORTED" in found and "PCI" in found["PROFILE_GPU_MODEL_NOT_ALLOWED"]["message"]


def test_no_gpu_at_all(training):
    s = node_summary({"status": "no_gpu", "gpus": [], "pci_devices": [], "pci_gpu_count": 0}, {}, host_facts())
    assert codes(check_node("cpu1", s, training)) == ["PROFILE_GPU_COUNT"]


def test_gpu_missing_from_driver(training):
    gpu = gpu_facts(H100_X8, 4)
    gpu["pci_gpu_count"] = 8
    gpu["gpus"] = gpu["gpus"][:7]
    gpu["driver_gpu_count"] = 7
    s = node_summary(gpu, rdma_facts(), host_facts())
    assert s["gpu_count"] == 8
    assert codes(check_node("n", s, training)) == ["GPU_MISSING_FROM_DRIVER"]


def test_custom_profile_extends_and_overrides():
    custom = {"hgx": {"extends": "training", "min_gpus_per_node": 8, "require_nvme": False}}
    prof = resolve_profile("hgx", builtin_profiles(), custom)
    assert prof["min_gpus_per_node"] == 8 and prof["require_nvme"] is False
    assert prof["min_vram_gib"] == 40 and prof["extends"] == ["training"]
    s = h100_node(nvme=False)
    assert check_node("n", s, prof) == []
    gpu = gpu_facts(H100_X8, 4)
    gpu["gpus"] = gpu["gpus"][:4]
    gpu["pci_gpu_count"] = gpu["driver_gpu_count"] = 4
    found = check_node("n", node_summary(gpu, rdma_facts(), host_facts()), prof)
    assert codes(found) == ["PROFILE_GPU_COUNT"] and found[0]["value"] == 4


@pytest.mark.parametrize("name, custom, needle", [
    ("nope", {}, "gpufleet_profile: unknown profile 'nope'"),
    ("x", {"x": {"min_vram_gib": "lots"}}, "gpufleet_custom_profiles.x.min_vram_gib must be a non-negative number"),
    ("x", {"x": {"ecc": "maybe"}}, "gpufleet_custom_profiles.x.ecc must be one of required, preferred, ignore"),
    ("x", {"x": {"gpu_models": "h100"}}, "gpufleet_custom_profiles.x.gpu_models must be a list"),
    ("x", {"x": {"min_vram": 4}}, "gpufleet_custom_profiles.x.min_vram: unknown profile key"),
    ("x", {"x": {"extends": "y"}, "y": {"extends": "x"}}, "extends itself"),
    ("x", {"x": {"extends": "ghost"}}, "extends: unknown profile 'ghost'"),
])
def test_bad_profiles_name_the_variable(name, custom, needle):
    with pytest.raises(ProfileError) as err:
        resolve_profile(name, builtin_profiles(), custom)
    assert needle in str(err.value)


def test_builtin_profiles_are_valid_and_allow_list_resolves():
    profiles = builtin_profiles()
    for name in profiles:
        resolve_profile(name, profiles)
    training = resolve_profile("training", profiles)
    s = h100_node()
    a100 = node_summary(gpu_facts(A100), rdma_facts(), host_facts())
    assert not [f for f in check_node("a", a100, training) if f["code"] == "PROFILE_GPU_MODEL_NOT_ALLOWED"]
    assert s["gpus"][0]["model_key"] == "h100-sxm5-80gb"


@pytest.mark.parametrize("os_id, ver, key", [
    ("ubuntu", "22.04", "ubuntu22.04"), ("debian", "12", "debian12"), ("rocky", "9.3", "rhel9"),
    ("rhel", "8.9", "rhel8"), (None, None, None),
])
def test_os_key(os_id, ver, key):
    assert os_key(os_id, ver) == key


def test_summary_does_not_mutate_input():
    gpu = gpu_facts(H100_X8, 4)
    before = copy.deepcopy(gpu)
    node_summary(gpu, rdma_facts(), host_facts())
    assert gpu == before


# --- a ratio whose facts are unknown is "not checked", never silence (issue 25, F15) ---------


def _no_cores(host):
    host["cpu"]["cores"] = None


def _zero_cores(host):
    host["cpu"]["cores"] = 0


def _no_memory(host):
    host["memory"]["total_mib"] = None


def _nothing(host):
    host["cpu"]["cores"] = None
    host["memory"] = {}


# name -> (host_info edit, {code: text in its message}); the H100 node is otherwise clean.
UNKNOWN_HOST_CASES = {
    "cores_unknown": (_no_cores, {"PROFILE_CPU_CORES_UNKNOWN": "cpu_cores_per_gpu not checked: the host reported "
                                                               "no count of CPU cores (8 GPUs), expected >= 6 per GPU"}),
    "cores_zero": (_zero_cores, {"PROFILE_CPU_CORES_UNKNOWN": "the host reported 0 CPU cores"}),
    "memory_unknown": (_no_memory, {"PROFILE_RAM_PER_VRAM_UNKNOWN": "ram_per_vram not checked: the host reported no "
                                                                    "memory size (MemTotal in /proc/meminfo); expected >= 2"}),
    "both_unknown": (_nothing, {"PROFILE_CPU_CORES_UNKNOWN": "not checked",
                                "PROFILE_RAM_PER_VRAM_UNKNOWN": "not checked"}),
    "all_known": (lambda host: None, {}),
}


@pytest.mark.parametrize("name", sorted(UNKNOWN_HOST_CASES))
def test_unknown_cores_or_memory_is_reported_not_checked(training, name):
    edit, expect = UNKNOWN_HOST_CASES[name]
    host = host_facts()
    edit(host)
    found = check_node("n", node_summary(gpu_facts(H100_X8, 4), rdma_facts(), host), training)
    assert {f["code"]: f["severity"] for f in found} == {code: "warn" for code in expect}
    for f in found:
        assert expect[f["code"]] in f["message"], f["message"]
        assert f["value"] is None and f["threshold"] in (6, 2.0)
        assert validate_finding(f) == []


def test_unknown_vram_names_the_gpu_the_model_table_lacks(training):
    """No driver yet and a PCI device id the model table does not know: no VRAM, so no ratio."""
    gpu = {"status": "no_driver", "message": "nvidia-smi not found", "gpus": [], "driver_gpu_count": None,
           "pci_gpu_count": 2, "pci_devices": [{"bus_id": "0000:%02x:00.0" % (0x18 + i), "device_id": "0xffff",
                                                "vendor_id": "0x10de", "kind": "gpu", "model": None} for i in range(2)]}
    found = {f["code"]: f for f in check_node("n", node_summary(gpu, rdma_facts(), host_facts()), training)}
    unknown = found["PROFILE_RAM_PER_VRAM_UNKNOWN"]
    assert unknown["severity"] == "warn"
    assert "the total VRAM is unknown (no driver to read it, and 0xffff not in the model table)" in unknown["message"]


def test_a_profile_without_the_ratio_asks_nothing():
    experiments = resolve_profile("experiments", builtin_profiles())  # min_cpu_cores_per_gpu: null
    host = host_facts()
    _no_cores(host)
    found = check_node("n", node_summary(gpu_facts(H100_X8, 4), rdma_facts(), host), experiments)
    assert "PROFILE_CPU_CORES_UNKNOWN" not in {f["code"] for f in found}


def test_not_checked_is_not_a_pass_in_the_summary(training):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight_report import build_report, summary_table
    host = host_facts()
    _no_memory(host)
    summaries = {"n1": h100_node(), "n2": node_summary(gpu_facts(H100_X8, 4), rdma_facts(), host)}
    findings = [f for n, s in summaries.items() for f in check_node(n, s, training)]
    report = build_report("c", training, "strict", summaries, findings, {})
    assert report["warned_nodes"] == ["n2"] and report["failed_nodes"] == []
    rows = {line.split("|")[1].strip(): line for line in summary_table(report).splitlines()[2:]}
    assert rows["n1"].rstrip(" |").endswith("pass") and "warn (1)" in rows["n2"]
