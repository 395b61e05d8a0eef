"""health: findings from facts built out of the real nvidia-smi / ibstat captures.

Faults are injected into a copy of the parsed capture (one node at a time), never typed by hand.
"""

import copy
import json

import pytest

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.module_utils import health
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import (
    FIELDS,
    format_finding,
    make_finding,
    validate_finding,
    worst_status,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import parse_ibstat
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import (
    parse_nvidia_smi,
)
# Imported at collection time: a later import would go through the collection finder that other
# tests install, which needs installed-collection metadata this source tree does not carry.
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.cluster.plugins.modules import gpu_health_check

H100X8 = "nvidia-smi-q/h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt"
A10_REMAP = "nvidia-smi-q/a10-drv535.129.03-cuda12.2.txt"
RETIRE_BAD = "nvidia-smi-q/x8-page-retirement-sbe60-dbe5-drv535.86.10-EDITED.txt"
A100_MIG = "nvidia-smi-xml/a100-sxm4-40gb-mig-drv510.47.03-cuda11.6.xml"
P100_SBE = "nvidia-smi-xml/tesla-p100-pcie-16gb-drv510.47.03-cuda11.6-ecc-aggregate-sbe3.xml"
IB8 = "ibstat/h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt"
H100_VM = "nvidia-smi-q/h100-sxm-80gb-hbm3-vm-drv590.48.01-cuda13.1-load.txt"
V100S_X8 = "nvidia-smi-xml/v100s-pcie-32gb-x8-drv460.73.01-cuda11.2.xml"
RTX4090 = "nvidia-smi-xml/rtx4090-drv535.86.05-cuda12.2.xml"
NODES = ("node1", "node2", "node3")


def read(rel):
    return (FIXTURES / rel).read_text()


def gpu_info_from(rel):
    parsed = parse_nvidia_smi(read(rel))
    gpus = parsed["gpus"]
    return {
        "status": "ok",
        "driver_version": parsed["driver_version"],
        "gpus": gpus,
        "driver_gpu_count": len(gpus),
        "pci_gpu_count": len(gpus),
        "pci_devices": [{"bus_id": g["pci_bus_id"], "kind": "gpu"} for g in gpus],
        "missing_from_driver": [],
    }


def edited(rel, old, new, gpu=0):
    """A real capture with the first ``old`` inside GPU ``gpu``'s block replaced by ``new``: the
    fault these tests are about, typed over a real layout (never a whole output typed by hand)."""
    text = read(rel)
    marker = "<gpu id=" if text.lstrip().startswith("<") else "\nGPU 0"
    start = -1
    for _gpu in range(gpu + 1):
        start = text.index(marker, start + 1)
    at = text.index(old, start)
    return text[:at] + new + text[at + len(old):]


def gpu_info_from_text(text):
    parsed = parse_nvidia_smi(text)
    gpus = parsed["gpus"]
    return {"status": "ok", "driver_version": parsed["driver_version"], "gpus": gpus,
            "driver_gpu_count": len(gpus), "pci_gpu_count": len(gpus),
            "pci_devices": [{"bus_id": g["pci_bus_id"], "kind": "gpu"} for g in gpus], "missing_from_driver": []}


def rdma_from(rel):
    return {"source": "ibstat", "cas": parse_ibstat(read(rel)), "errors": [], "peermem_loaded": True}


HOST_OK = {"memory": {"ecc_active": True, "edac_corrected": 0, "edac_uncorrected": 0}}


def cluster():
    return {n: {"gpu_info": gpu_info_from(H100X8), "rdma_info": rdma_from(IB8),
                "host_info": copy.deepcopy(HOST_OK), "kernel_log": ""} for n in NODES}


def evaluate(facts, options=None):
    return {n: health.evaluate_node(n, options=options, **f) for n, f in facts.items()}


def fails(findings):
    return [f for f in findings if f["severity"] == "fail"]


# --- faults, one node at a time ------------------------------------------------------------


def fault_ecc_uncorrectable(f):
    f["gpu_info"]["gpus"][3]["ecc_errors"]["volatile"]["uncorrectable"] = 2
    f["gpu_info"]["gpus"][3]["ecc_errors"]["aggregate"]["uncorrectable"] = 2
    return 3, {"ECC_UNCORRECTABLE_VOLATILE", "ECC_UNCORRECTABLE_AGGREGATE"}


def fault_remap_pending(f):
    f["gpu_info"]["gpus"][5]["remapped_rows"].update(uncorrectable=1, pending=True)
    return 5, {"ROW_REMAP_PENDING"}


def fault_remap_failure(f):
    f["gpu_info"]["gpus"][1]["remapped_rows"].update(failure=True)
    return 1, {"ROW_REMAP_FAILURE"}


def fault_gpu_missing(f):
    gone = f["gpu_info"]["gpus"].pop(6)
    f["gpu_info"]["driver_gpu_count"] = 7
    f["gpu_info"]["missing_from_driver"] = [gone["pci_bus_id"]]
    return None, {"GPU_MISSING_FROM_DRIVER"}


def fault_ib_port_down(f):
    port = f["rdma_info"]["cas"][2]["ports"][0]
    port.update(state="Down", physical_state="Disabled", rate_gbps=40)
    return None, {"IB_PORT_DOWN"}


def fault_ecc_disabled(f):
    f["gpu_info"]["gpus"][0]["ecc_mode"] = {"current": "disabled", "pending": "disabled"}
    return 0, {"ECC_MODE_DISABLED"}


FAULTS = [fault_ecc_uncorrectable, fault_remap_pending, fault_remap_failure, fault_gpu_missing,
          fault_ib_port_down, fault_ecc_disabled]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", NODES)
def test_fault_is_found_on_the_right_node_with_the_right_code(fault, bad):
    facts = cluster()
    gpu, codes = fault(facts[bad])
    results = evaluate(facts)
    for node, findings in results.items():
        if node != bad:
            assert fails(findings) == [], (node, [format_finding(f) for f in findings])
            continue
        found = {f["code"] for f in fails(findings)}
        assert codes <= found, [format_finding(f) for f in findings]
        assert all(f["node"] == bad for f in findings)
        if gpu is not None:
            bus = facts[bad]["gpu_info"]["gpus"][gpu]["pci_bus_id"]
            hit = [f for f in findings if f["code"] in codes]
            assert all(f["gpu_index"] == gpu and f["gpu_bus_id"] == bus for f in hit)
            assert all(bus in format_finding(f) for f in hit)


def test_healthy_real_capture_has_no_fail_and_h100_power_brake_only_warns():
    findings = evaluate(cluster())["node1"]
    assert fails(findings) == []
    # the real capture shows GPU2 under SW thermal + HW power brake with clean counters
    throttle = [f for f in findings if f["code"] == "CLOCK_THROTTLE_ACTIVE"]
    assert {f["gpu_index"] for f in throttle} == {2}
    assert {f["severity"] for f in throttle} == {"warn"}


def test_hw_slowdown_fails():
    facts = cluster()
    facts["node2"]["gpu_info"]["gpus"][4]["clock_event_reasons_active"] = ["hw_slowdown"]
    f = [x for x in fails(evaluate(facts)["node2"]) if x["code"] == "CLOCK_THROTTLE_ACTIVE"]
    assert f and f[0]["gpu_index"] == 4 and f[0]["value"] == ["hw_slowdown"]


def test_ecc_values_and_counter_named():
    facts = cluster()
    fault_ecc_uncorrectable(facts["node2"])
    f = [x for x in evaluate(facts)["node2"] if x["code"] == "ECC_UNCORRECTABLE_VOLATILE"][0]
    assert f["value"] == 2 and f["threshold"] == 0
    assert f["counter"] == "ecc.errors.uncorrected.volatile.total"
    assert "uncorrectable" in f["message"] and "2" in f["message"]


def test_ecc_enable_lifecycle_disabled_pending_current():
    gpu_info = gpu_info_from(H100X8)
    gpu_info["gpus"][0]["ecc_mode"] = {"current": "disabled", "pending": "disabled"}
    assert health.ecc_enable_candidates(gpu_info["gpus"]) == [0]
    codes = {f["code"]: f["severity"] for f in health.check_gpus("n", gpu_info)}
    assert codes.get("ECC_MODE_DISABLED") == "fail"
    # after nvidia-smi -e 1: pending until reboot, nothing more to enable
    gpu_info["gpus"][0]["ecc_mode"]["pending"] = "enabled"
    assert health.ecc_enable_candidates(gpu_info["gpus"]) == []
    codes = {f["code"]: f["severity"] for f in health.check_gpus("n", gpu_info)}
    assert codes.get("ECC_ENABLE_PENDING_REBOOT") == "warn"
    assert "ECC_MODE_DISABLED" not in codes
    # after the reboot: current enabled, clean
    gpu_info["gpus"][0]["ecc_mode"]["current"] = "enabled"
    assert not [f for f in health.check_gpus("n", gpu_info) if f["code"].startswith("ECC")]


def test_ecc_unsupported_consumer_gpu_only_warns():
    """The real RTX 4090 capture (GeForce, no ECC) with its ECC mode edited to N/A."""
    gpu_info = gpu_info_from_text(edited(RTX4090, "<current_ecc>Disabled</current_ecc>", "<current_ecc>N/A</current_ecc>"))
    assert gpu_info["gpus"][0]["ecc_mode"]["current"] is None
    assert health.ecc_enable_candidates(gpu_info["gpus"]) == []
    codes = {f["code"]: f["severity"] for f in health.check_gpus("n", gpu_info) if f["gpu_index"] == 0}
    assert codes.get("ECC_UNSUPPORTED") == "warn" and "ECC_MODE_UNREADABLE" not in codes
    relaxed = {"ecc_required": False, "throttle_warn_reasons": [], "pcie_check": False}
    assert not [f for f in health.check_gpus("n", gpu_info, relaxed) if f["code"].startswith("ECC")]


# --- every real capture with a memory problem fails, naming bus id, counter and value ---------

CAPTURES = sorted(p for d in ("nvidia-smi-q", "nvidia-smi-xml") for p in (FIXTURES / d).iterdir())


def _memory_problems(gpu):
    problems = {}
    for scope in ("volatile", "aggregate"):
        v = ((gpu.get("ecc_errors") or {}).get(scope) or {}).get("uncorrectable")
        if v:
            problems["ECC_UNCORRECTABLE_" + scope.upper()] = v
    rows = gpu.get("remapped_rows") or {}
    if rows.get("pending"):
        problems["ROW_REMAP_PENDING"] = True
    if rows.get("failure"):
        problems["ROW_REMAP_FAILURE"] = True
    pages = gpu.get("retired_pages") or {}
    if pages.get("pending"):
        problems["RETIRED_PAGES_PENDING"] = True
    return problems


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_any_capture_with_an_ecc_or_remap_problem_fails_with_bus_id_counter_and_value(path):
    parsed = parse_nvidia_smi(path.read_text())
    gpu_info = {"status": "ok", "gpus": parsed["gpus"], "driver_gpu_count": len(parsed["gpus"]),
                "pci_gpu_count": len(parsed["gpus"])}
    facts = {"good": {"gpu_info": gpu_info_from(H100X8)}, "bad": {"gpu_info": gpu_info}}
    results = evaluate(facts)
    assert fails(results["good"]) == []
    expected = {(g["index"], code): value for g in parsed["gpus"]
                for code, value in _memory_problems(g).items()}
    got = {(f["gpu_index"], f["code"]): f for f in fails(results["bad"])}
    for (index, code), value in expected.items():
        finding = got.get((index, code))
        assert finding, (path.name, index, code, [format_finding(f) for f in results["bad"]])
        assert finding["node"] == "bad"
        assert finding["gpu_bus_id"] == parsed["gpus"][index]["pci_bus_id"]
        assert finding["value"] == value and finding.get("counter")
        line = format_finding(finding)
        assert finding["gpu_bus_id"] in line and code in line and "value=" in line


def test_the_known_bad_captures_do_carry_problems():
    # guards the parametrized test above against passing vacuously
    a10 = parse_nvidia_smi(read(A10_REMAP))["gpus"]
    assert _memory_problems(a10[0]) == {"ROW_REMAP_PENDING": True}
    bad = parse_nvidia_smi(read(RETIRE_BAD))["gpus"]
    assert sum(1 for g in bad if _memory_problems(g)) == 4
    codes = {f["code"] for f in health.check_gpus("n", {"gpus": bad})}
    assert {"RETIRED_PAGES_PENDING", "RETIRED_PAGES_HIGH"} <= codes


def test_p100_aggregate_sbe3_is_below_the_correctable_threshold():
    gpu_info = gpu_info_from(P100_SBE)
    assert gpu_info["gpus"][0]["ecc_errors"]["aggregate"]["correctable"] == 3
    codes = {f["code"] for f in health.check_gpus("n", gpu_info)}
    assert not codes & {"ECC_CORRECTABLE_HIGH", "ECC_UNCORRECTABLE_AGGREGATE"}
    gpu_info["gpus"][0]["ecc_errors"]["volatile"]["correctable"] = 10001
    codes = {f["code"]: f["severity"] for f in health.check_gpus("n", gpu_info)}
    assert codes["ECC_CORRECTABLE_HIGH"] == "warn"


# --- IB ports ------------------------------------------------------------------------------


def test_ib_rate_low_against_siblings_and_explicit_expectations():
    info = rdma_from(IB8)
    info["cas"][4]["ports"][0]["rate_gbps"] = 200
    f = [x for x in health.check_ib_ports("n", info) if x["code"] == "IB_PORT_RATE_LOW"]
    assert len(f) == 1 and f[0]["value"] == 200 and f[0]["threshold"] == 400
    assert f[0]["ca"] == info["cas"][4]["ca"]
    f = health.check_ib_ports("n", rdma_from(IB8), {"ib_expected_ports": ["mlx5_0:1", "mlx5_99"],
                                                    "ib_expected_link_layer": "InfiniBand"})
    assert [x["code"] for x in f] == ["IB_PORT_MISSING"]
    assert "mlx5_99" in f[0]["message"]


def test_ib_ethernet_ports_down_on_ib_node_are_not_fabric_failures():
    info = rdma_from("ibstat/h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt")
    assert fails(health.check_ib_ports("n", info)) == []


def test_roce_ports_down_fail_and_ibpanic_warns():
    info = rdma_from("ibstat/h100-cx7-400-roce-2-ports-down-disabled.txt")
    down = [f for f in health.check_ib_ports("n", info) if f["code"] == "IB_PORT_DOWN"]
    assert sorted(f["ca"] for f in down) == ["mlx5_11", "mlx5_5"]
    cas = parse_ibstat(read("ibstat/a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt"))
    from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import ibstat_errors
    info = {"cas": cas, "errors": ibstat_errors(read(
        "ibstat/a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt"))}
    found = health.check_ib_ports("n", info)
    assert [f["code"] for f in found] == ["RDMA_TOOL_ERROR"]
    assert "mlx5_8" in found[0]["message"]


def test_state_down_physical_linkup_is_a_port_down():
    info = rdma_from("ibstat/cx6-vf-state-down-physical-linkup-network-operator-issue249.txt")
    f = health.check_ib_ports("n", info)
    assert [x["code"] for x in f] == ["IB_PORT_DOWN"] and f[0]["value"] == "Down/LinkUp"


# --- host, Xid, driver ---------------------------------------------------------------------


def test_host_memory_checks():
    assert health.check_host("n", HOST_OK) == []
    codes = {f["code"]: f["severity"] for f in health.check_host(
        "n", {"memory": {"ecc_active": None, "edac_corrected": 12, "edac_uncorrected": 1}})}
    assert codes == {"HOST_ECC_UNKNOWN": "warn", "HOST_EDAC_CORRECTED_HIGH": "warn",
                     "HOST_EDAC_UNCORRECTED": "fail"}


def test_xid_lines_map_to_gpus_and_classes():
    gpu_info = gpu_info_from(H100X8)
    bus2 = gpu_info["gpus"][2]["pci_bus_id"]  # 00000000:75:00.0 in the capture
    short = "0000:%s" % bus2.split(":", 1)[1].rsplit(".", 1)[0]
    log = "\n".join([
        "[  812.1] NVRM: Xid (PCI:%s): 79, pid=1234, name=python, GPU has fallen off the bus." % short,
        "[  813.5] NVRM: Xid (PCI:%s): 79, pid=1234, name=python, GPU has fallen off the bus." % short,
        "[  900.0] NVRM: Xid (PCI:%s): 13, pid=77, Graphics Exception" % gpu_info["gpus"][0]["pci_bus_id"],
        "[  950.0] NVRM: Xid (PCI:0000:ee:00): 48, pid=77, DBE (double bit error)",
        "[  901.0] something else entirely",
    ])
    found = health.check_xids("n", log, gpu_info["gpus"])
    by_xid = {f["xid"]: f for f in found}
    assert by_xid[79]["severity"] == "fail" and by_xid[79]["value"] == 2
    assert by_xid[79]["gpu_index"] == 2 and by_xid[79]["gpu_bus_id"] == bus2
    assert by_xid[13]["severity"] == "warn" and by_xid[13]["gpu_index"] == 0
    # a bus id the driver does not list still names the bus
    assert by_xid[48]["severity"] == "fail" and by_xid[48]["gpu_index"] is None
    assert by_xid[48]["gpu_bus_id"] == "0000:ee:00.0"
    assert health.check_xids("n", None, gpu_info["gpus"]) == []


@pytest.mark.parametrize("status", ["no_driver", "driver_error"])
def test_driver_not_loaded(status):
    f = health.check_gpus("n", {"status": status, "gpus": [], "pci_gpu_count": 8, "message": "rc 9"})
    assert [x["code"] for x in f] == ["DRIVER_NOT_LOADED"]


def test_pcie_gen_only_judged_when_busy_width_always():
    gpu_info = gpu_info_from(H100X8)
    g = gpu_info["gpus"][1]
    g["pcie"].update(gen_current=1, gen_max=5)
    g["clock_event_reasons_active"] = ["gpu_idle"]
    assert not [f for f in health.check_gpus("n", gpu_info) if f["code"] == "PCIE_LINK_DEGRADED"]
    g["clock_event_reasons_active"] = []
    g["pcie"].update(width_current=8, width_max=16)
    f = [x for x in health.check_gpus("n", gpu_info) if x["code"] == "PCIE_LINK_DEGRADED"]
    assert {x["counter"] for x in f} == {"pcie.link.gen.current", "pcie.link.width.current"}
    assert {x["severity"] for x in f} == {"warn"}


# --- shape ---------------------------------------------------------------------------------


def test_findings_shape_json_and_line_are_the_same_data():
    facts = cluster()
    fault_remap_pending(facts["node3"])
    result = health.node_result("node3", health.evaluate_node("node3", **facts["node3"]))
    assert result["status"] == "fail" and result["counts"]["fail"] >= 1
    data = json.loads(json.dumps(result))
    for finding, line in zip(data["findings"], data["lines"]):
        assert validate_finding(finding) == []
        assert set(FIELDS) <= set(finding)
        assert line == format_finding(finding)
        assert finding["code"] in line and finding["severity"].upper() in line
    silenced = health.node_result("node3", result["findings"], {"silenced_codes": ["ROW_REMAP_PENDING",
                                                                                   "CLOCK_THROTTLE_ACTIVE"]})
    assert silenced["status"] == "pass" and len(silenced["silenced"]) == len(result["findings"])


def test_make_finding_rejects_bad_input():
    with pytest.raises(ValueError):
        make_finding("ECC_X", "info", "n", "m", "r")
    with pytest.raises(ValueError):
        make_finding("lower_case", "fail", "n", "m", "r")
    assert worst_status([]) == "pass"


def test_unreadable_kernel_log_warns_instead_of_passing_silently():
    f = health.evaluate_node("n", kernel_log=None, kernel_log_error="dmesg: Operation not permitted")
    assert [(x["code"], x["severity"]) for x in f] == [("KERNEL_LOG_UNREADABLE", "warn")]
    assert health.evaluate_node("n", kernel_log=None) == []


# --- the module wrapper --------------------------------------------------------------------


def _run_module(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_health_check.main()
    return json.loads(capsys.readouterr().out)


def test_module_returns_findings_and_remediation_candidates(capsys):
    facts = cluster()["node1"]
    facts["gpu_info"]["gpus"][1]["ecc_mode"] = {"current": "disabled", "pending": "disabled"}
    facts["gpu_info"]["gpus"][2]["persistence_mode"] = False
    out = _run_module(capsys, dict(node="node1", thresholds={"throttle_warn_reasons": []}, **facts))
    assert out["changed"] is False and out["status"] == "fail"
    assert out["ecc_enable_gpus"] == [1] and out["persistence_enable_gpus"] == [2]
    assert [f["code"] for f in out["findings"]] == ["ECC_MODE_DISABLED", "PERSISTENCE_MODE_OFF"]
    assert out["lines"] == [format_finding(f) for f in out["findings"]]


def test_module_rejects_unknown_threshold_keys(capsys):
    out = _run_module(capsys, {"node": "n", "thresholds": {"ecc_corectable_max": 1}})
    assert out["failed"] and "ecc_corectable_max" in out["msg"]


# --- unreadable fields and the driver's own verdicts (issue 13) ------------------------------

ECC_CURRENT = "ECC Mode\n        Current                           : Enabled"


def _codes(gpu_info, index, options=None):
    return {f["code"]: f["severity"] for f in health.check_gpus("n", gpu_info, options) if f["gpu_index"] == index}


@pytest.mark.parametrize("unreadable", ["[GPU requires reset]", "Unknown Error", "N/A"])
def test_unreadable_ecc_mode_on_a_data_centre_gpu_fails(unreadable):
    text = edited(H100X8, ECC_CURRENT, ECC_CURRENT.replace("Enabled", unreadable), gpu=3)
    gpu_info = gpu_info_from_text(text)
    codes = _codes(gpu_info, 3)
    assert codes.get("ECC_MODE_UNREADABLE") == "fail" and "ECC_UNSUPPORTED" not in codes
    finding = next(f for f in health.check_gpus("n", gpu_info) if f["code"] == "ECC_MODE_UNREADABLE")
    assert finding["gpu_bus_id"] == gpu_info["gpus"][3]["pci_bus_id"] and "H100" in finding["message"]
    # not silenced by ecc_required: false, which is about GPUs without ECC
    assert _codes(gpu_info, 3, {"ecc_required": False}).get("ECC_MODE_UNREADABLE") == "fail"


def test_one_unreadable_ecc_counter_fails_although_its_siblings_read_zero():
    text = edited(H100X8, "DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : Unknown Error", gpu=2)
    gpu_info = gpu_info_from_text(text)
    finding = next(f for f in health.check_gpus("n", gpu_info) if f["code"] == "ECC_COUNTERS_UNREADABLE")
    assert finding["severity"] == "fail" and finding["gpu_index"] == 2
    assert "volatile.dram_uncorrectable" in finding["value"]


def test_unreadable_remapped_rows_fail():
    pending = edited(H100X8, "Pending                           : No", "Pending                           : Unknown Error", gpu=4)
    assert _codes(gpu_info_from_text(pending), 4).get("ROW_REMAP_UNREADABLE") == "fail"
    # Every remap field N/A: the parser returns no section at all, and an H100 must have one.
    text = read(H100X8)
    start = text.index("Remapped Rows", text.index("\nGPU 00000000:75"))
    end = text.index("Bank Remap", start)
    blank = text[start:end]
    for label in ("Correctable Error", "Uncorrectable Error", "Pending", "Remapping Failure Occurred"):
        line = next(ln for ln in blank.splitlines() if ln.strip().startswith(label))
        blank = blank.replace(line, line.split(":")[0] + ": N/A")
    gpu_info = gpu_info_from_text(text[:start] + blank + text[end:])
    assert gpu_info["gpus"][2]["remapped_rows"] is None
    assert _codes(gpu_info, 2).get("ROW_REMAP_UNREADABLE") == "fail"
    # A100 under MIG reads remapped rows N/A by design (real capture): not a finding.
    mig = gpu_info_from(A100_MIG)
    assert not [f for f in health.check_gpus("n", mig) if f["code"].endswith("UNREADABLE")]


@pytest.mark.parametrize("label,code", [("Reset Required", "GPU_RESET_REQUIRED"),
                                        ("Drain and Reset Recommended", "GPU_DRAIN_AND_RESET_RECOMMENDED")])
def test_reset_status_yes_fails(label, code):
    old = label + " " * (34 - len(label)) + ": No"
    text = edited(H100X8, old, old.replace(": No", ": Yes"), gpu=1)
    assert _codes(gpu_info_from_text(text), 1).get(code) == "fail"


def test_recovery_action_and_unrepairable_memory_fail():
    action = edited(H100_VM, "GPU Recovery Action                                : None",
                    "GPU Recovery Action                                : Node Reboot")
    found = [f for f in health.check_gpus("n", gpu_info_from_text(action)) if f["code"] == "GPU_RECOVERY_ACTION"]
    assert found and found[0]["severity"] == "fail" and found[0]["value"] == "Node Reboot"
    memory = edited(H100_VM, "Unrepairable Memory                            : No",
                    "Unrepairable Memory                            : Yes")
    assert _codes(gpu_info_from_text(memory), 0).get("UNREPAIRABLE_MEMORY") == "fail"
    assert "GPU_RECOVERY_ACTION" not in _codes(gpu_info_from(H100_VM), 0)


FABRIC_OK = "    Fabric\n        State                             : Completed\n        Status                            : Success"


@pytest.mark.parametrize("old,new", [("Completed", "In Progress"), ("Success", "Failure")])
def test_fabric_not_completed_or_failed_fails(old, new):
    text = edited(H100X8, FABRIC_OK, FABRIC_OK.replace(old, new), gpu=5)
    found = [f for f in health.check_gpus("n", gpu_info_from_text(text)) if f["code"] == "FABRIC_STATE_FAILURE"]
    assert [f["gpu_index"] for f in found] == [5] and found[0]["severity"] == "fail"


def test_sxid_lines_fail_when_fatal_and_warn_otherwise():
    """Lines rendered from the driver's own format (open-gpu-kernel-modules common_nvswitch.h
    NVSWITCH_PRINT_SXID: "nvidia-%s: SXid (PCI:%04x:%02x:%02x.%x): %05d, " + text); no public kernel
    log capture with SXids is among the fixtures."""
    fmt = "[ 1203.5] nvidia-%s: SXid (PCI:%04x:%02x:%02x.%x): %05d, %s"
    log = "\n".join([fmt % ("nvswitch2", 0, 0x07, 0, 0, 12028, "Non-fatal, Link 32 egress non-posted PRIV error (First)"),
                     fmt % ("nvswitch0", 0, 0x05, 0, 0, 23001, "Fatal, Link 12 Always Fatal")])
    found = {f["sxid"]: f for f in health.evaluate_node("n", kernel_log=log) if f["code"] == "SXID_ERRORS"}
    assert found[23001]["severity"] == "fail" and found[12028]["severity"] == "warn"
    assert found[23001]["nvswitch_bus_id"] == "0000:05:00.0"
    assert health.check_sxids("n", log, {"sxid_check": False}) == []


def test_node_without_hcas_fails_against_the_cluster_majority_and_the_profile():
    facts = cluster()
    facts["node2"]["rdma_info"] = {"source": "none", "cas": [], "errors": []}
    counts = [len(f["rdma_info"]["cas"]) for f in facts.values()]
    results = evaluate(facts, {"ib_cluster_hca_counts": counts})
    low = [f for f in results["node2"] if f["code"] == "IB_HCA_COUNT_LOW"]
    assert low and low[0]["severity"] == "fail" and low[0]["value"] == 0 and low[0]["threshold"] == counts[0]
    assert not [f for n in ("node1", "node3") for f in results[n] if f["code"] == "IB_HCA_COUNT_LOW"]
    # The profile's count wins over the majority; a lone node without one is not compared.
    lone = health.check_ib_ports("solo", facts["node2"]["rdma_info"], {"ib_expected_hca_count": 9})
    assert [f["code"] for f in lone] == ["IB_HCA_COUNT_LOW"]
    assert health.check_ib_ports("solo", facts["node2"]["rdma_info"], {"ib_cluster_hca_counts": [0]}) == []
    assert health.expected_hca_count({"ib_cluster_hca_counts": [9, 0]}) == 9  # a tie takes the larger


def test_module_types_string_thresholds_from_extra_vars(capsys):
    """-e values arrive as strings: '50000' must be a number and 'false' a boolean, not a crash."""
    facts = cluster()["node1"]
    facts["gpu_info"]["gpus"][4]["ecc_errors"]["volatile"]["correctable"] = 20000
    strings = {"ecc_correctable_volatile_max": "50000", "ecc_required": "false", "xid_warn": ["13", "94"],
               "ib_expected_hca_count": "9", "throttle_warn_reasons": []}
    out = _run_module(capsys, dict(node="node1", thresholds=strings, **facts))
    assert "failed" not in out, out.get("msg")
    assert "ECC_CORRECTABLE_HIGH" not in {f["code"] for f in out["findings"]}  # 20000 <= 50000
    low = _run_module(capsys, dict(node="node1", thresholds=dict(strings, ecc_correctable_volatile_max="10000"),
                                   **facts))
    assert "ECC_CORRECTABLE_HIGH" in {f["code"] for f in low["findings"]}
    bad = _run_module(capsys, {"node": "n", "thresholds": {"ecc_correctable_volatile_max": "lots"}})
    assert bad["failed"] and "ecc_correctable_volatile_max" in bad["msg"]


def test_unreadable_retired_page_count_on_a_page_retiring_gpu_fails():
    """The real 8x V100S capture with GPU1's single-bit retired count edited to Unknown Error."""
    text = edited(V100S_X8, "<retired_count>0</retired_count>", "<retired_count>Unknown Error</retired_count>", gpu=1)
    gpu_info = gpu_info_from_text(text)
    assert _codes(gpu_info, 1).get("RETIRED_PAGES_UNREADABLE") == "fail"
    assert not [f for f in health.check_gpus("n", gpu_info) if f["code"] == "RETIRED_PAGES_UNREADABLE"
                and f["gpu_index"] != 1]


# --- a GPU lost from the bus too, or hidden by a duplicated entry (issue 25, F14) ------------


def _lose_gpu(gpu_info, index, from_pci, duplicate_of=None):
    """The real 8x H100 facts with GPU ``index`` gone from nvidia-smi (and from the PCI bus when
    ``from_pci``: dead at boot); ``duplicate_of`` puts that GPU's entry in its place twice."""
    gone = gpu_info["gpus"][index]["pci_bus_id"]
    if duplicate_of is None:
        gpu_info["gpus"].pop(index)
    else:
        gpu_info["gpus"][index] = copy.deepcopy(gpu_info["gpus"][duplicate_of])
    gpu_info["driver_gpu_count"] = len(gpu_info["gpus"])  # gpu_info counts entries, as the module does
    if from_pci:
        gpu_info["pci_devices"] = [d for d in gpu_info["pci_devices"] if d["bus_id"] != gone]
        gpu_info["pci_gpu_count"] = len(gpu_info["pci_devices"])
    else:
        gpu_info["missing_from_driver"] = [gone]
    return gone


def _role_counts(facts):
    """What the role passes: every node's [PCI count, driver count] as gpu_info reported them."""
    return [[f["gpu_info"]["pci_gpu_count"], f["gpu_info"]["driver_gpu_count"]] for f in facts.values()]


# name -> (how node2 loses GPU 6, extra options, {code: (value, threshold, text in the message)} on node2)
LOST_GPU_CASES = {
    "gone_from_driver_and_pci": (dict(from_pci=True), {},
                                 {"GPU_COUNT_LOW": (7, 8, "most nodes of the cluster have 8")}),
    "gone_from_both_with_profile": (dict(from_pci=True), {"expected_gpu_count": 8},
                                    {"GPU_COUNT_LOW": (7, 8, "the profile expects 8")}),
    "duplicate_hides_a_gpu_the_driver_lost": (
        dict(from_pci=False, duplicate_of=5), {},
        {"GPU_MISSING_FROM_DRIVER": (7, 8, "the PCI bus has 8: missing 00000000:B9:00.0 (nvidia-smi lists 8 entries")}),
    "duplicate_and_gone_from_pci": (
        dict(from_pci=True, duplicate_of=5), {},
        {"GPU_COUNT_LOW": (7, 8, "PCI bus 7, driver 7 (nvidia-smi lists 8 entries")}),
}


@pytest.mark.parametrize("name", sorted(LOST_GPU_CASES))
def test_a_node_that_lost_a_gpu_fails_and_the_others_pass(name):
    how, options, expect = LOST_GPU_CASES[name]
    facts = cluster()
    gone = _lose_gpu(facts["node2"]["gpu_info"], 6, **how)
    results = evaluate(facts, dict(options, cluster_gpu_counts=_role_counts(facts)))
    for node in ("node1", "node3"):
        assert fails(results[node]) == [], [format_finding(f) for f in results[node]]
    found = {f["code"]: f for f in fails(results["node2"])}
    assert set(found) == set(expect), [format_finding(f) for f in results["node2"]]
    for code, (value, threshold, text) in expect.items():
        assert (found[code]["value"], found[code]["threshold"]) == (value, threshold)
        assert text in found[code]["message"], found[code]["message"]
    if "GPU_MISSING_FROM_DRIVER" in found:
        assert found["GPU_MISSING_FROM_DRIVER"]["missing_bus_ids"] == [gone]
    if how.get("duplicate_of") is not None:
        twice = facts["node2"]["gpu_info"]["gpus"][how["duplicate_of"]]["pci_bus_id"]
        assert "%s more than once" % twice in found[next(iter(expect))]["message"]


def test_gpu_counts_count_distinct_bus_ids():
    info = gpu_info_from(H100X8)
    _lose_gpu(info, 6, from_pci=False, duplicate_of=5)
    counts = health.gpu_counts(info)
    assert counts == {"pci": 8, "driver": 7, "listed": 8, "duplicated": [info["gpus"][5]["pci_bus_id"]]}
    # Bus ids in other spellings are the same GPU.
    info["gpus"][6]["pci_bus_id"] = info["gpus"][5]["pci_bus_id"].lower().replace("00000000:", "0000:")
    assert health.gpu_counts(info)["driver"] == 7


# name -> (cluster_gpu_counts, expected count)
MAJORITY_CASES = {
    "majority": ([[8, 8], [7, 7], [8, 8]], 8),
    "tie_takes_the_larger": ([[8, 8], [7, 7]], 8),
    "pci_unknown_uses_the_driver": ([[None, 8], [None, 8], [None, 7]], 8),
    "plain_counts": ([8, 8, 7], 8),
    "lone_node_is_not_compared": ([[7, 7]], None),
    "nothing_known": ([[None, None], [None, None]], None),
    "no_gpus_anywhere": ([[0, 0], [0, 0]], None),
}


@pytest.mark.parametrize("name", sorted(MAJORITY_CASES))
def test_expected_gpu_count_from_the_cluster(name):
    counts, want = MAJORITY_CASES[name]
    assert health.expected_gpu_count({"cluster_gpu_counts": counts})[0] == want
    # The profile's count always wins.
    assert health.expected_gpu_count({"cluster_gpu_counts": counts, "expected_gpu_count": 4}) == (
        4, "the profile expects")


def test_broken_driver_is_not_also_a_low_gpu_count():
    facts = cluster()
    facts["node2"]["gpu_info"].update(status="no_driver", gpus=[], driver_gpu_count=None, message="NVRM failed")
    results = evaluate(facts, {"cluster_gpu_counts": _role_counts(facts)})
    assert [f["code"] for f in fails(results["node2"])] == ["DRIVER_NOT_LOADED"]


def test_module_takes_the_cluster_counts_and_returns_distinct_counts(capsys):
    facts = cluster()
    _lose_gpu(facts["node2"]["gpu_info"], 6, from_pci=True)
    out = _run_module(capsys, dict(node="node2", thresholds={"cluster_gpu_counts": _role_counts(facts)},
                                   **facts["node2"]))
    assert "failed" not in out, out.get("msg")
    assert "GPU_COUNT_LOW" in {f["code"] for f in out["findings"]}
    assert out["gpu_counts"]["driver"] == 7 and out["gpu_counts"]["pci"] == 7


def test_ecc_still_pending_after_the_reboot_for_it_fails():
    gpu_info = gpu_info_from(H100X8)
    gpu_info["gpus"][0]["ecc_mode"] = {"current": "disabled", "pending": "enabled"}
    findings = health.check_gpus("n", gpu_info, {"ecc_pending_fails": True})
    ecc = [(f["code"], f["severity"], f["gpu_index"]) for f in findings if f["code"].startswith("ECC_")]
    assert ecc == [("ECC_ENABLE_NOT_APPLIED", "fail", 0)]
    assert "still Disabled after the reboot" in findings[[f["code"] for f in findings].index("ECC_ENABLE_NOT_APPLIED")]["message"]
    # Enabled after the reboot: nothing to say, strict or not.
    gpu_info["gpus"][0]["ecc_mode"]["current"] = "enabled"
    assert not [f for f in health.check_gpus("n", gpu_info, {"ecc_pending_fails": True}) if f["code"].startswith("ECC")]
