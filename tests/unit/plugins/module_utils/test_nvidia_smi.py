"""parse_nvidia_smi & co. on every real capture in ../shared/fixtures (see SOURCES.md there)."""

import pytest

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import (
    NvidiaSmiParseError,
    clean,
    parse_nvidia_smi,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_nvlink,
    parse_nvidia_smi_topo,
    to_float,
    to_int,
)

XML = FIXTURES / "nvidia-smi-xml"
TXT = FIXTURES / "nvidia-smi-q"
CSV = FIXTURES / "nvidia-smi-csv"
TOPO = FIXTURES / "topo"


def load(path):
    return parse_nvidia_smi(path.read_text())


# file, format, driver, cuda, number of <gpu>, first GPU: name, bus id, arch, cc, memory MiB, ecc mode
CAPTURES = [
    (XML / "a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml", "xml", "535.54.03", "12.2", 1,
     "NVIDIA A100-SXM4-80GB", "00000000:01:00.0", "Ampere", "8.0", 81920, "enabled"),
    (XML / "a100-sxm4-40gb-mig-drv510.47.03-cuda11.6.xml", "xml", "510.47.03", "11.6", 1,
     "NVIDIA A100-SXM4-40GB", "00000000:00:04.0", "Ampere", "8.0", 40960, "enabled"),
    (XML / "v100s-pcie-32gb-x8-drv460.73.01-cuda11.2.xml", "xml", "460.73.01", "11.2", 8,
     "Tesla V100S-PCIE-32GB", "00000000:00:0D.0", "Volta", "7.0", 32510, "enabled"),
    (XML / "tesla-t4-drv515.105.01-cuda11.7.xml", "xml", "515.105.01", "11.7", 1,
     "Tesla T4", "00000000:00:1E.0", "Turing", "7.5", 15360, "enabled"),
    (XML / "tesla-p100-pcie-16gb-drv510.47.03-cuda11.6-ecc-aggregate-sbe3.xml", "xml", "510.47.03", "11.6", 1,
     "Tesla P100-PCIE-16GB", "00000000:00:04.0", "Pascal", "6.0", 16384, "enabled"),
    (XML / "rtx4090-drv535.86.05-cuda12.2.xml", "xml", "535.86.05", "12.2", 1,
     "NVIDIA GeForce RTX 4090", "00000000:84:00.0", "Ada Lovelace", "8.9", 24564, "disabled"),
    (XML / "rtx4000-sff-ada-drv595.84-cuda13.2-schema-v13.xml", "xml", "595.84", "13.2", 1,
     "NVIDIA RTX 4000 SFF Ada Generation", "00000000:06:00.0", "Ada Lovelace", "8.9", 20475, "disabled"),
    (TXT / "h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt", "text", "535.183.01", "12.2", 8,
     "NVIDIA H100 80GB HBM3", "00000000:53:00.0", "Hopper", "9.0", 81559, "enabled"),
    (TXT / "h100-sxm-80gb-hbm3-della-drv560.35.03-cuda12.6-nvidia-smi-a.txt", "text", "560.35.03", "12.6", 1,
     "NVIDIA H100 80GB HBM3", "00000000:DB:00.0", "Hopper", "9.0", 81559, "enabled"),
    (TXT / "h100-sxm-80gb-hbm3-vm-drv590.48.01-cuda13.1-load.txt", "text", "590.48.01", "13.1", 1,
     "NVIDIA H100 80GB HBM3", "00000000:00:09.0", "Hopper", "9.0", 81559, "enabled"),
    (TXT / "h100-sxm-80gb-hbm3-mig-4-instances-drv590.48.01-idle.txt", "text", "590.48.01", "13.1", 1,
     "NVIDIA H100 80GB HBM3", "00000000:00:09.0", "Hopper", "9.0", 81559, "enabled"),
    (TXT / "h200-drv610.43.02-cuda13.3-kmd-version-idle.txt", "text", "610.43.02", "13.3", 1,
     "NVIDIA H200", "00000000:83:00.0", "Hopper", "9.0", 143771, "enabled"),
    (TXT / "rtx2080super-drv610.57.04-cuda13.3-kmd-version-load.txt", "text", "610.57.04", "13.3", 1,
     "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", "Turing", "7.5", 8192, None),
    (TXT / "rtx4080super-drv595.71.05-cuda13.2-idle.txt", "text", "595.71.05", "13.2", 1,
     "NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0", "Ada Lovelace", "8.9", 16376, None),
    (TXT / "a10-drv535.129.03-cuda12.2.txt", "text", "535.129.03", "12.2", 1,
     "NVIDIA A10", "00000000:07:00.0", "Ampere", "8.6", 23028, "enabled"),
    (TXT / "x8-page-retirement-clean-drv535.86.10.txt", "text", "535.86.10", "12.2", 8,
     None, "00000001:00:00.0", None, None, None, None),
    (TXT / "x8-page-retirement-sbe60-dbe5-drv535.86.10-EDITED.txt", "text", "535.86.10", "12.2", 8,
     None, "00000001:00:00.0", None, None, None, None),
]


def test_every_capture_is_covered():
    listed = {c[0].name for c in CAPTURES}
    on_disk = {p.name for d in (XML, TXT) for p in d.iterdir()}
    assert on_disk == listed


@pytest.mark.parametrize("path, fmt, driver, cuda, ngpu, name, bus, arch, cc, mem, ecc", CAPTURES,
                         ids=[c[0].name for c in CAPTURES])
def test_capture_identity(path, fmt, driver, cuda, ngpu, name, bus, arch, cc, mem, ecc):
    r = load(path)
    assert (r["format"], r["driver_version"], r["cuda_version"], len(r["gpus"])) == (fmt, driver, cuda, ngpu)
    g = r["gpus"][0]
    assert (g["index"], g["name"], g["pci_bus_id"], g["architecture"], g["compute_capability"]) == (0, name, bus, arch, cc)
    assert g["memory_total_mib"] == mem
    assert g["ecc_mode"] == {"current": ecc, "pending": ecc}
    assert [x["index"] for x in r["gpus"]] == list(range(ngpu))


def _no_na_strings(obj):
    if isinstance(obj, dict):
        return all(_no_na_strings(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_no_na_strings(v) for v in obj)
    if isinstance(obj, str):
        return obj.strip("[]").lower() not in ("n/a", "not supported", "requested functionality has been deprecated")
    return True


@pytest.mark.parametrize("path", [c[0] for c in CAPTURES], ids=[c[0].name for c in CAPTURES])
def test_no_placeholder_strings_survive(path):
    assert _no_na_strings(load(path))


def test_h100_hgx_8gpu_text():
    r = load(TXT / "h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt")
    assert r["attached_gpus"] == 8
    buses = [g["pci_bus_id"] for g in r["gpus"]]
    assert buses[:2] == ["00000000:53:00.0", "00000000:64:00.0"]
    assert len(set(g["uuid"] for g in r["gpus"])) == 8
    for g in r["gpus"]:
        assert g["pci_device_id"] == "0x2330"
        assert g["architecture_source"] == "nvidia-smi"
        assert g["compute_capability_source"] == "model_table"
        assert g["persistence_mode"] is True
        assert g["mig_mode"] == {"current": "disabled", "pending": "disabled"}
        assert g["ecc_errors"] == {"volatile": {"correctable": 0, "uncorrectable": 0},
                                   "aggregate": {"correctable": 0, "uncorrectable": 0}}
        assert g["retired_pages"] is None  # H100 remaps rows
        assert g["remapped_rows"]["histogram"]["max"] == 2560
        assert {k: g["remapped_rows"][k] for k in ("correctable", "uncorrectable", "pending", "failure")} == \
            {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
        assert g["pcie"]["gen_max"] == 5 and g["pcie"]["width_max"] == 16
        assert g["power_limit_w"] == 700.0
        assert g["fabric"]["state"] == "Completed" and g["fabric"]["status"] == "Success"
    g0 = r["gpus"][0]
    assert g0["uuid"] == "GPU-566e6f65-c38e-b12f-4824-6944218668b9"
    assert g0["vbios_version"] == "96.00.74.00.01"
    assert g0["temperature_c"] == 36
    assert g0["pcie"]["replay_counter"] == 120
    assert g0["clock_event_reasons_active"] == ["gpu_idle"]
    assert g0["clock_event_reasons"]["hw_thermal_slowdown"] is False  # nested under HW Slowdown in text
    assert g0["ecc_errors_detail"]["aggregate"]["sram_uncorrectable_secded"] == 0
    assert g0["ecc_errors_detail"]["sram_threshold_exceeded"] is False


def test_h100_under_load_newer_text_layout():
    g = load(TXT / "h100-sxm-80gb-hbm3-vm-drv590.48.01-cuda13.1-load.txt")["gpus"][0]
    assert g["clock_event_reasons_active"] == []  # busy: nothing throttles
    assert g["temperature_c"] == 59
    assert g["power_draw_w"] == 629.45  # "Average Power Draw"
    assert g["gpu_recovery_action"] == "None"
    assert g["ecc_errors_detail"]["unrepairable_memory"] is False
    assert g["ecc_errors_detail"]["channel_repair_pending"] is False
    assert g["vbios_version"] == "96.00.A5.00.01"
    assert g["fabric"]["clique_id"] == "0"


# ---------------------------------------------------------------- R595 - R610 (KMD / CUDA UMD version)

H200_610 = TXT / "h200-drv610.43.02-cuda13.3-kmd-version-idle.txt"


def test_r610_reads_the_kmd_version_never_the_deprecation_note():
    text = H200_610.read_text()
    assert "610.43.02 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]" in text
    r = parse_nvidia_smi(text)
    assert (r["driver_version"], r["cuda_version"]) == ("610.43.02", "13.3")
    g = r["gpus"][0]
    assert (g["model"], g["pci_device_id"], g["memory_total_mib"]) == ("h200", "0x2335", 143771)
    assert g["power_limit_w"] == 700.0            # R610 nests it under "GPU Ceiling Power Limit"
    assert g["power_draw_w"] == 83.32
    assert g["remapped_rows"]["histogram"]["max"] == 3072
    assert g["fabric"] == {"state": "Completed", "status": "Success", "clique_id": "0",
                           "cluster_uuid": "00000000-0000-0000-0000-000000000000"}
    assert g["ecc_errors_detail"]["aggregate_uncorrectable_sram_sources"]["sram_l2"] == 0
    assert g["clock_event_reasons_active"] == ["gpu_idle"]


def test_r610_deprecated_lines_alone_are_read_without_their_note():
    kept = [ln for ln in H200_610.read_text().splitlines(True) if not ln.startswith(("KMD Version", "CUDA UMD Version"))]
    r = parse_nvidia_smi("".join(kept))
    assert (r["driver_version"], r["cuda_version"]) == ("610.43.02", "13.3")


def _with_line(text, label, value):
    return "\n".join(ln[:55] + ": " + value if ln.startswith(label + " ") else ln for ln in text.splitlines()) + "\n"


@pytest.mark.parametrize("label, value, words", [
    ("Driver Version", 'Deprecated, see "KMD version" instead', "not a driver version"),
    ("KMD Version", "610.43.02-open", "not a driver version"),
    ("CUDA UMD Version", "13.3.0 (UMD)", "not a cuda version"),
    ("KMD Version", "615.71.09", "two driver versions"),
])
def test_an_unknown_version_format_is_an_error_never_a_wrong_version(label, value, words):
    text = H200_610.read_text()
    if label == "Driver Version":
        text = "".join(ln for ln in text.splitlines(True) if not ln.startswith("KMD Version"))
    with pytest.raises(NvidiaSmiParseError, match=words):
        parse_nvidia_smi(_with_line(text, label, value))


def test_kmd_version_in_xml_is_read_first():
    # A stand-in document (no R610 XML capture was found): the tags are the text labels in snake case.
    xml = ("<?xml version=\"1.0\" ?><nvidia_smi_log><driver_version>610.43.02 [Deprecated; will be removed in "
           "CUDA 14.0. Use KMD Version instead]</driver_version><kmd_version>610.43.02</kmd_version>"
           "<cuda_umd_version>13.3</cuda_umd_version><attached_gpus>0</attached_gpus></nvidia_smi_log>")
    r = parse_nvidia_smi(xml)
    assert (r["format"], r["driver_version"], r["cuda_version"]) == ("xml", "610.43.02", "13.3")


def test_r595_text_layout():
    r = load(TXT / "rtx4080super-drv595.71.05-cuda13.2-idle.txt")
    g = r["gpus"][0]
    assert (r["driver_version"], r["cuda_version"], g["pci_device_id"], g["power_limit_w"]) == (
        "595.71.05", "13.2", "0x2702", 320.0)


def test_h100_mig_text():
    g = load(TXT / "h100-sxm-80gb-hbm3-mig-4-instances-drv590.48.01-idle.txt")["gpus"][0]
    assert g["mig_mode"] == {"current": "enabled", "pending": "enabled"}
    assert [(d["gpu_instance_id"], d["memory_total_mib"]) for d in g["mig_devices"]] == \
        [(2, 40448), (3, 20096), (9, 9984), (10, 9984)]
    assert g["remapped_rows"] is None  # "Remapped Rows : N/A" while MIG is on
    # the MIG devices' own "ECC Errors" blocks do not leak into the GPU totals
    assert g["ecc_errors"]["aggregate"] == {"correctable": 0, "uncorrectable": 0}


def test_a10_pending_row_remap():
    g = load(TXT / "a10-drv535.129.03-cuda12.2.txt")["gpus"][0]
    assert g["remapped_rows"]["uncorrectable"] == 4
    assert g["remapped_rows"]["pending"] is True
    assert g["remapped_rows"]["failure"] is False
    assert g["remapped_rows"]["histogram"]["max"] == 192
    assert g["mig_mode"] == {"current": None, "pending": None}
    assert g["power_limit_w"] == 150.0
    assert g["compute_capability"] == "8.6"


def test_della_h100_nvidia_smi_a():
    g = load(TXT / "h100-sxm-80gb-hbm3-della-drv560.35.03-cuda12.6-nvidia-smi-a.txt")["gpus"][0]
    assert g["uuid"] == "GPU-f7b02328-d6fe-5b1f-9683-15041689bb03"
    assert g["temperature_c"] == 34
    assert g["pcie"]["gen_host_max"] == 5


@pytest.mark.parametrize("fname, expected", [
    ("x8-page-retirement-clean-drv535.86.10.txt", [(0, 0, False)] * 8),
    ("x8-page-retirement-sbe60-dbe5-drv535.86.10-EDITED.txt",
     [(60, 5, False), (2, 61, True), (0, 0, False), (6, 0, True), (0, 0, False), (20, 45, True), (0, 0, False),
      (8, 56, True)]),
])
def test_page_retirement(fname, expected):
    r = load(TXT / fname)
    assert [g["pci_bus_id"] for g in r["gpus"]] == ["%08X:00:00.0" % i for i in range(1, 9)]
    got = [(g["retired_pages"]["single_bit"], g["retired_pages"]["double_bit"], g["retired_pages"]["pending"])
           for g in r["gpus"]]
    assert got == expected
    assert all(g["remapped_rows"] is None for g in r["gpus"])


def test_p100_old_ecc_layout_sums_locations():
    g = load(XML / "tesla-p100-pcie-16gb-drv510.47.03-cuda11.6-ecc-aggregate-sbe3.xml")["gpus"][0]
    assert g["ecc_errors"] == {"volatile": {"correctable": 0, "uncorrectable": 0},
                               "aggregate": {"correctable": 3, "uncorrectable": 0}}
    assert g["ecc_errors_detail"]["aggregate"]["single_bit"]["device_memory"] == 3
    assert g["ecc_errors_detail"]["aggregate"]["single_bit"]["l1_cache"] is None
    assert g["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert g["remapped_rows"] is None  # Pascal has no row remapper
    assert g["clock_event_reasons_active"] == ["gpu_idle"]  # old clocks_throttle_reasons tags
    assert g["power_limit_w"] == 250.0  # old power_readings layout
    assert g["persistence_mode"] is False
    assert g["pcie"] == {"gen_current": 3, "gen_max": 3, "width_current": 16, "width_max": 16, "replay_counter": 0}


def test_v100s_8gpu_no_architecture_tag():
    r = load(XML / "v100s-pcie-32gb-x8-drv460.73.01-cuda11.2.xml")
    for g in r["gpus"]:
        assert g["name"] == "Tesla V100S-PCIE-32GB"
        assert (g["architecture"], g["architecture_source"]) == ("Volta", "model_table")
        assert g["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
        assert g["ecc_errors"]["aggregate"] == {"correctable": 0, "uncorrectable": 0}
        assert g["power_limit_w"] == 250.0
    assert len(set(g["uuid"] for g in r["gpus"])) == 8


def test_t4_degraded_width():
    g = load(XML / "tesla-t4-drv515.105.01-cuda11.7.xml")["gpus"][0]
    assert g["pcie"]["width_current"] == 8 and g["pcie"]["width_max"] == 16
    assert g["temperature_c"] == 40
    assert g["power_limit_w"] == 70.0


@pytest.mark.parametrize("fname, n_mig, volatile", [
    ("a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml", 4, {"correctable": 0, "uncorrectable": 0}),
    ("a100-sxm4-40gb-mig-drv510.47.03-cuda11.6.xml", 2, {"correctable": None, "uncorrectable": None}),
])
def test_a100_mig_xml(fname, n_mig, volatile):
    g = load(XML / fname)["gpus"][0]
    assert g["mig_mode"] == {"current": "enabled", "pending": "enabled"}
    assert len(g["mig_devices"]) == n_mig
    assert g["ecc_errors"]["volatile"] == volatile
    assert g["ecc_errors"]["aggregate"] == {"correctable": 0, "uncorrectable": 0}
    assert g["retired_pages"] is None and g["remapped_rows"] is None


def test_a100_80gb_attached_count_is_not_gpu_count():
    r = load(XML / "a100-sxm4-80gb-mig-4gi-drv535.54.03-cuda12.2.xml")
    assert r["attached_gpus"] == 4 and len(r["gpus"]) == 1
    assert r["gpus"][0]["power_limit_w"] == 500.0  # gpu_power_readings/current_power_limit (v12)


@pytest.mark.parametrize("fname, hist_max, gen", [
    ("rtx4090-drv535.86.05-cuda12.2.xml", 192, (1, 3, 4, 3)),
    ("rtx4000-sff-ada-drv595.84-cuda13.2-schema-v13.xml", 96, (1, 4, 4, 4)),
])
def test_consumer_ada_ecc_disabled(fname, hist_max, gen):
    g = load(XML / fname)["gpus"][0]
    assert g["ecc_errors"] == {"volatile": {"correctable": None, "uncorrectable": None},
                               "aggregate": {"correctable": None, "uncorrectable": None}}
    assert g["remapped_rows"]["histogram"]["max"] == hist_max
    assert g["remapped_rows"]["pending"] is False
    assert (g["pcie"]["gen_current"], g["pcie"]["gen_max"], g["pcie"]["gen_device_max"], g["pcie"]["gen_host_max"]) == gen
    assert g["clock_event_reasons_active"] == ["gpu_idle"]
    assert g["mig_mode"] == {"current": None, "pending": None}


def test_v13_schema_fields():
    g = load(XML / "rtx4000-sff-ada-drv595.84-cuda13.2-schema-v13.xml")["gpus"][0]
    assert g["power_limit_w"] == 70.0
    assert g["gpu_recovery_action"] == "None"
    assert g["remapped_rows"]["uncorrectable_inactive"] == 0
    assert g["ecc_errors_detail"]["tpc_repair_pending"] is False
    assert g["fabric"] is None
    assert g["pci_device_id"] == "0x27b0"


@pytest.mark.parametrize("text", ["", "   ", "Hello world", "<html></html>", "<nvidia_smi_log><gpu>"])
def test_rejects_other_text(text):
    with pytest.raises(NvidiaSmiParseError):
        parse_nvidia_smi(text)


def test_text_and_xml_give_same_keys():
    x = load(XML / "tesla-t4-drv515.105.01-cuda11.7.xml")["gpus"][0]
    t = load(TXT / "a10-drv535.129.03-cuda12.2.txt")["gpus"][0]
    assert set(x) == set(t)


@pytest.mark.parametrize("raw, i, f, c", [
    ("N/A", None, None, None), ("[N/A]", None, None, None), ("Not Supported", None, None, None),
    ("[Not Supported]", None, None, None),
    ("Requested functionality has been deprecated", None, None, None),
    ("81559 MiB", 81559, 81559.0, "81559 MiB"), ("16x", 16, 16.0, "16x"), ("700.00 W", 700, 700.0, "700.00 W"),
    ("-8 C", -8, -8.0, "-8 C"), ("Enabled", None, None, "Enabled"),
])
def test_value_helpers(raw, i, f, c):
    assert (to_int(raw), to_float(raw), clean(raw)) == (i, f, c)


# ---------------------------------------------------------------- topo

def test_topo_covers_every_capture():
    assert {p.name for p in TOPO.iterdir()} == {
        "hgx-h100-8gpu-nv18-8nic-pix-2numa-sglang-issue30401.txt", "della-a100-pcie-2gpu-2nic-sys-no-nvlink.txt",
        "traverse-power9-4x-v100-sxm2-nv3-4nic.txt", "h100-single-gpu-vm-drv590.48.01-ansi-header.txt"}


def test_topo_hgx_h100():
    t = parse_nvidia_smi_topo((TOPO / "hgx-h100-8gpu-nv18-8nic-pix-2numa-sglang-issue30401.txt").read_text())
    assert len(t["gpus"]) == 8 and len(t["nics"]) == 8
    assert t["link_types"] == ["NV18"] and t["nvlink"] is True
    assert t["nic_legend"]["NIC7"] == "mlx5_7"
    for g in t["gpus"]:
        assert g["nearest_nics"] == ["mlx5_%d" % g["index"]] and g["nearest_nic_link"] == "PIX"
        assert g["numa_affinity"] == (0 if g["index"] < 4 else 1)
        assert g["gpu_numa_id"] is None
    assert t["gpus"][4]["cpu_affinity"] == "48-95,144-191"
    assert t["gpus"][0]["nics"]["mlx5_4"] == "SYS"
    assert t["nics"][0]["links"]["GPU0"] == "PIX"


def test_topo_pcie_only_tabs():
    t = parse_nvidia_smi_topo((TOPO / "della-a100-pcie-2gpu-2nic-sys-no-nvlink.txt").read_text())
    assert t["nvlink"] is False and t["link_types"] == ["SYS"]
    assert [(g["cpu_affinity"], g["numa_affinity"], g["nearest_nics"], g["nearest_nic_link"]) for g in t["gpus"]] == [
        ("0-63", 0, ["mlx5_0"], "NODE"), ("64-127", 1, ["mlx5_1"], "NODE")]
    assert [n["name"] for n in t["nics"]] == ["mlx5_0", "mlx5_1"]
    assert t["legend"]["PIX"].startswith("Connection traversing at most a single PCIe bridge")


def test_topo_power9_nv3_pairs():
    t = parse_nvidia_smi_topo((TOPO / "traverse-power9-4x-v100-sxm2-nv3-4nic.txt").read_text())
    assert t["gpus"][0]["links"] == {"GPU1": "NV3", "GPU2": "SYS", "GPU3": "SYS"}
    assert t["gpus"][2]["links"]["GPU3"] == "NV3"
    assert [g["numa_affinity"] for g in t["gpus"]] == [0, 0, 8, 8]
    assert t["gpus"][3]["nearest_nics"] == ["mlx5_2", "mlx5_3"]


def test_topo_ansi_header_single_gpu():
    raw = (TOPO / "h100-single-gpu-vm-drv590.48.01-ansi-header.txt").read_text()
    assert "\x1b[4m" in raw
    t = parse_nvidia_smi_topo(raw)
    assert [g["name"] for g in t["gpus"]] == ["GPU0"]
    g = t["gpus"][0]
    assert (g["cpu_affinity"], g["numa_affinity"], g["gpu_numa_id"]) == ("0-19", 0, None)
    assert t["nics"] == [] and t["nvlink"] is False


def test_topo_rejects_garbage():
    with pytest.raises(NvidiaSmiParseError):
        parse_nvidia_smi_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


# ---------------------------------------------------------------- csv, nvlink

def test_csv_all_fields_h100_and_l40s():
    h = parse_nvidia_smi_csv((CSV / "h100-sxm-80gb-hbm3-drv590.48.01-query-gpu-all-fields-load.csv").read_text())
    l4 = parse_nvidia_smi_csv((CSV / "l40s-drv595.80-query-gpu-all-fields-idle.csv").read_text())
    assert len(h) == 1 and len(l4) == 1
    h, l4 = h[0], l4[0]
    assert (h["name"], h["compute_cap"], h["memory.total"], h["power.limit"]) == ("NVIDIA H100 80GB HBM3", "9.0", 81559, 700.0)
    assert (l4["name"], l4["compute_cap"], l4["memory.total"], l4["power.limit"]) == ("NVIDIA L40S", "8.9", 46068, 350.0)
    assert h["retired_pages.single_bit_ecc.count"] is None
    assert h["remapped_rows.histogram.max"] == "2560" and l4["remapped_rows.histogram.max"] == "192"
    assert "kmd_version" in l4 and "kmd_version" not in h
    assert all(v is None or "N/A" not in str(v) for v in list(h.values()) + list(l4.values()))


def test_csv_r595_and_r610_carry_driver_and_kmd_version():
    for name, version, gpu in (("rtx2080super-drv610.57.04-query-gpu-all-fields-idle.csv", "610.57.04",
                                "NVIDIA GeForce RTX 2080 SUPER"),
                               ("rtx4080super-drv595.71.05-query-gpu-all-fields-idle.csv", "595.71.05",
                                "NVIDIA GeForce RTX 4080 SUPER")):
        rows = parse_nvidia_smi_csv((CSV / name).read_text())
        assert len(rows) == 1
        assert (rows[0]["driver_version"], rows[0]["kmd_version"], rows[0]["name"]) == (version, version, gpu)
        assert all(v is None or "N/A" not in str(v) for v in rows[0].values())


def test_csv_compute_apps_retired_p100():
    apps = parse_nvidia_smi_csv((CSV / "h100-sxm-80gb-hbm3-drv590.48.01-query-compute-apps-load.csv").read_text())
    assert [(a["process_name"], a["used_gpu_memory"]) for a in apps] == [
        ("/root/tools/memhog", 2566), ("/root/tools/memhog", 1542), ("./gpu_burn", 15690)]
    ret = parse_nvidia_smi_csv((CSV / "h100-sxm-80gb-hbm3-drv590.48.01-query-retired-pages.csv").read_text())
    assert [r["retired_pages.address"] for r in ret] == [None, None]
    p100 = parse_nvidia_smi_csv((CSV / "tesla-p100-pcie-16gb-drv510-query-gpu.csv").read_text())[0]
    assert (p100["fan.speed"], p100["memory.free"], p100["power.draw"], p100["temperature.gpu"]) == (None, 16280, 28.16, "37")


def test_nvlink_status_a100():
    r = parse_nvidia_smi_nvlink((FIXTURES / "host" / "nvidia-smi-nvlink-s-a100-sxm4-80gb-x8-12links.txt").read_text())
    assert len(r["gpus"]) == 8 and r["error"] is None
    assert r["gpus"][0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    for g in r["gpus"]:
        assert g["name"] == "NVIDIA A100-SXM4-80GB"
        assert (g["active_links"], g["inactive_links"]) == (12, 0)
        assert {lk["speed_gbps"] for lk in g["links"]} == {25.0}
