#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet contributors
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_info
short_description: Gather NVIDIA GPU facts from the PCI bus and nvidia-smi
version_added: "0.1.0"
description:
  - Counts NVIDIA GPUs (PCI vendor C(0x10de), display/3D classes) and NVSwitches from sysfs,
    so a GPU the driver no longer sees ("fell off the bus") shows as a mismatch between
    O(pci_sysfs_path) and the driver.
  - Whether this is an NVSwitch system (RV(nvswitch)) follows how the host sees the switches, per generation (NVIDIA Fabric
    Manager User Guide release 2.3, sections 1.3.1, 1.3.2 and 1.6.4,
    U(https://docs.nvidia.com/datacenter/tesla/pdf/fabric-manager-user-guide.pdf)).
    HGX A100 and H100/H200 - each NVSwitch is an NVIDIA PCI function of class C(0x0680)
    (C(10de:1af1), C(10de:22a3)), counted in RV(pci_nvswitch_count).
    HGX B100/B200 (fourth-generation NVSwitch) - the NVSwitches are B(not) PCI functions; the host reaches
    them through the ConnectX-7 bridge on the GPU baseboard, whose Limited PFs (the ones FM and NVLSM
    bind to) carry C(SMDL=SW_MNG) in their PCI VPD, while ordinary ConnectX-7 NICs share the same id
    C(15b3:1021) without it. Those functions are counted in RV(pci_nvswitch_bridge_count).
    HGX B300 is assumed to be the same (the guide names B100/B200 only). Any node whose GPUs report an
    NVLink fabric state (nvidia-smi) counts as well.
  - Reading a function's C(vpd) needs root. Without it no bridge is seen, and a B200 node looks like a node
    without NVSwitches until the driver reports the fabric state.
  - A node that counts only the B200 GPU id (C(10de:2901), as aws-parallelcluster-cookbook PR 2987 does for
    P6 instances, whose NVSwitches show no PCI function) is not treated as an NVSwitch system; an 8-GPU
    PCIe or VM node with that id would be misjudged.
  - Runs C(nvidia-smi -q -x) (C locale) and returns per-GPU facts parsed by
    C(gpufleet.cluster.plugins.module_utils.nvidia_smi.parse_nvidia_smi), plus C(nvidia-smi topo -m).
  - Works on a node with no GPU, with GPUs but no driver, with a broken driver and with a working one,
    and says which in RV(status). A missing tool or driver is reported, never a failure.
  - Read-only; never changes anything and always returns C(changed=false).
  - PCI bus ids are normalized to nvidia-smi's form, an 8-hex-digit domain and upper-case hex
    (C(00000000:18:00.0)); sysfs names (C(0000:18:00.0)) are converted to it so the two compare equal.
author:
  - gpufleet engineers (@gpufleet)
options:
  pci_sysfs_path:
    description: Directory of PCI devices to count NVIDIA functions from.
    type: path
    default: /sys/bus/pci/devices
  nvidia_smi:
    description: Name (looked up on E(PATH) and the usual driver directories) or path of C(nvidia-smi).
    type: str
    default: nvidia-smi
  include_topology:
    description: Also run C(nvidia-smi topo -m) and return RV(topology) when the driver works.
    type: bool
    default: true
  timeout:
    description:
      - Seconds each C(nvidia-smi) call may run before it is killed. A call that does not answer in
        time makes RV(status) C(driver_error) with RV(timed_out) true, so a node with a hung GPU is
        reported by name while the other nodes finish.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.cluster.read_only
notes:
  - Compute capability comes from C(nvidia-smi --query-gpu=compute_cap) where the driver has it
    (R510 and later), else from the collection's GPU model table.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpufleet.cluster.gpu_info:
  register: gpu

- name: Stop when the driver is broken
  ansible.builtin.assert:
    that: gpu.status in ['ok', 'no_gpu']
    fail_msg: "{{ gpu.status }}: {{ gpu.message }}"

- name: Find GPUs that fell off the bus
  ansible.builtin.debug:
    msg: "{{ gpu.pci_gpu_count }} GPUs on PCI, {{ gpu.driver_gpu_count }} seen by the driver"
  when: gpu.pci_gpu_count != gpu.driver_gpu_count

- name: Use a stand-in nvidia-smi and a fake sysfs tree
  gpufleet.cluster.gpu_info:
    nvidia_smi: /opt/sim/bin/nvidia-smi
    pci_sysfs_path: /opt/sim/sys/bus/pci/devices
    include_topology: false
"""

RETURN = r"""
status:
  description: C(ok) (driver works, at least one GPU), C(no_gpu) (no NVIDIA GPU on the bus, or the
    driver says no devices), C(no_driver) (GPUs on the bus but no nvidia-smi), C(driver_error)
    (nvidia-smi failed, or lists no GPU while PCI shows some).
  returned: always
  type: str
  sample: ok
message:
  description: What nvidia-smi printed when it failed, or why the status was chosen; empty when C(ok).
  returned: always
  type: str
  sample: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
timed_out:
  description: True when C(nvidia-smi -q -x) did not answer within O(timeout) and was killed.
  returned: always
  type: bool
nvidia_smi_rc:
  description:
    - Exit code of the failing nvidia-smi call (9 = driver not loaded, 124 = killed at O(timeout));
      null otherwise.
    - Not named C(rc), because Ansible marks any result with a non-zero C(rc) as failed, and a broken
      driver is a state to report.
  returned: always
  type: int
  sample: 9
nvidia_smi_path:
  description: The nvidia-smi that was run, or null when none was found.
  returned: always
  type: str
driver_version:
  description: Driver version nvidia-smi reports.
  returned: always
  type: str
  sample: "535.183.01"
cuda_version:
  description: Highest CUDA version the driver supports, as nvidia-smi reports it.
  returned: always
  type: str
  sample: "12.2"
driver_gpu_count:
  description: Number of GPUs nvidia-smi lists; null when nvidia-smi did not run successfully.
  returned: always
  type: int
  sample: 8
pci_gpu_count:
  description: NVIDIA display/3D-class functions on the PCI bus.
  returned: always
  type: int
  sample: 8
pci_nvswitch_count:
  description: NVIDIA NVSwitch bridges on the PCI bus.
  returned: always
  type: int
  sample: 4
gpu_count_mismatch:
  description: True when the driver works and sees fewer (or more) GPUs than the PCI bus shows.
  returned: always
  type: bool
missing_from_driver:
  description: Bus ids of PCI GPUs that nvidia-smi does not list.
  returned: always
  type: list
  elements: str
pci_devices:
  description: NVIDIA GPUs, NVSwitches and NVSwitch management bridges found on the PCI bus, sorted by bus id.
  returned: always
  type: list
  elements: dict
  contains:
    bus_id: {description: "Normalized bus id (C(00000000:18:00.0)).", type: str}
    sysfs_name: {description: "Directory name under O(pci_sysfs_path).", type: str}
    vendor_id: {description: "C(0x10de), or C(0x15b3) for an NVSwitch management bridge.", type: str}
    device_id: {description: "PCI device id, C(0x2330).", type: str}
    class: {description: "PCI class code, C(0x030200).", type: str}
    kind: {description: "C(gpu), C(nvswitch) or C(nvswitch_bridge).", type: str}
    model: {description: "Model name from the PCI device id, null when unknown.", type: str}
pci_nvswitch_bridge_count:
  description: ConnectX-7 functions whose VPD marks them as the NVSwitch management bridge (C(SMDL=SW_MNG)),
    the way an HGX B200 host reaches its NVSwitches.
  returned: always
  type: int
  sample: 2
nvswitch:
  description: NVSwitches on the bus, an NVSwitch management bridge, or a GPU reporting NVLink fabric state.
  returned: always
  type: bool
topology:
  description: Parse of C(nvidia-smi topo -m) (C(gpus) with C(links), C(nics), C(nearest_nics),
    C(cpu_affinity), C(numa_affinity), C(gpu_numa_id); C(nics); C(matrix); C(link_types); C(nvlink));
    null when not asked for or when it fails.
  returned: always
  type: dict
gpus:
  description: One entry per GPU in nvidia-smi order. Values nvidia-smi prints as N/A, Not Supported
    or deprecated are null. A section the GPU does not have is null.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: "Position in nvidia-smi output (nvidia-smi's GPU index).", type: int, sample: 0}
    name: {description: "Product name.", type: str, sample: "NVIDIA H100 80GB HBM3"}
    uuid: {description: "GPU UUID.", type: str}
    serial: {description: "Board serial number.", type: str}
    pci_bus_id: {description: "Normalized bus id.", type: str, sample: "00000000:18:00.0"}
    pci_device_id: {description: "PCI device id.", type: str, sample: "0x2330"}
    pci_sub_system_id: {description: "PCI subsystem id as nvidia-smi prints it (device then vendor).", type: str, sample: "0x16c110de"}
    vbios_version: {description: "VBIOS version.", type: str}
    memory_total_mib: {description: "Framebuffer total, MiB.", type: int, sample: 81559}
    architecture: {description: "From the output where present, else from the model table.", type: str, sample: Hopper}
    architecture_source: {description: "C(nvidia-smi), C(model_table) or C(compute_capability).", type: str}
    compute_capability: {description: "From the output where present, else from the model table.", type: str, sample: "9.0"}
    compute_capability_source: {description: "C(nvidia-smi) or C(model_table).", type: str}
    model: {description: "Key of the gpu_models table entry, null when unknown.", type: str}
    persistence_mode: {description: "Persistence mode on.", type: bool}
    mig_mode: {description: "C(current), C(pending): C(enabled), C(disabled) or null.", type: dict}
    mig_devices: {description: "MIG devices (index, gpu_instance_id, compute_instance_id, multiprocessor_count, memory_total_mib).", type: list}
    ecc_mode: {description: "C(current), C(pending): C(enabled), C(disabled) or null.", type: dict}
    ecc_errors:
      description: C(volatile) and C(aggregate), each C(correctable) and C(uncorrectable), totals over every
        memory kind listed (SRAM+DRAM, or single/double-bit per location on older drivers).
      type: dict
      sample: {volatile: {correctable: 0, uncorrectable: 0}, aggregate: {correctable: 0, uncorrectable: 0}}
    ecc_errors_detail: {description: "Per-kind counters as listed, plus repair/threshold flags.", type: dict}
    retired_pages: {description: "C(single_bit), C(double_bit), C(pending); null on GPUs that remap rows.", type: dict}
    remapped_rows:
      description: C(correctable), C(uncorrectable), C(pending), C(failure) (and C(histogram)); null on GPUs
        without row remapping (Volta and older) and while MIG hides it.
      type: dict
    pcie: {description: "C(gen_current), C(gen_max), C(width_current), C(width_max) (and device/host max, replay_counter).", type: dict}
    power_limit_w: {description: "Current (enforced) power limit, W.", type: float, sample: 700.0}
    power_draw_w: {description: "Power draw, W.", type: float}
    temperature_c: {description: "GPU temperature, C.", type: int, sample: 34}
    memory_temperature_c: {description: "HBM temperature, C, where reported.", type: int}
    clock_event_reasons_active:
      description: Active clock-event (throttle) reasons, e.g. C(gpu_idle), C(sw_power_cap),
        C(hw_thermal_slowdown); null when the output lists none.
      type: list
      elements: str
    clock_event_reasons: {description: "Every clock-event reason listed, name -> active (bool).", type: dict}
    fabric: {description: "C(state), C(status), C(clique_id), C(cluster_uuid) on NVSwitch systems; null elsewhere.", type: dict}
    gpu_recovery_action: {description: "Recovery action newer drivers report (C(None) when healthy).", type: str}
    reset_required: {description: "GPU Reset Status / Reset Required, where reported.", type: bool}
    drain_and_reset_recommended: {description: "GPU Reset Status / Drain and Reset Recommended, where reported.", type: bool}
    virtualization_mode: {description: "C(None), C(Pass-Through), C(VGPU), ...", type: str}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool

from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import (
    NvidiaSmiParseError,
    parse_nvidia_smi,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_topo,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gpu_models import architecture_for_cc, normalize_cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.pci import normalize_pci_bus_id, scan_nvidia_pci

DRIVER_DIRS = ["/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/usr/lib/wsl/lib"]
NO_DEVICES_MARKERS = ("No devices were found", "No devices found")


class GpuInfo(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.result = {
            "changed": False,
            "status": None,
            "message": "",
            "nvidia_smi_rc": None,
            "timed_out": False,
            "nvidia_smi_path": None,
            "driver_version": None,
            "cuda_version": None,
            "gpus": [],
            "driver_gpu_count": None,
            "pci_gpu_count": 0,
            "pci_nvswitch_count": 0,
            "pci_nvswitch_bridge_count": 0,
            "gpu_count_mismatch": False,
            "missing_from_driver": [],
            "pci_devices": [],
            "nvswitch": False,
            "topology": None,
        }

    def run(self, args):
        """(rc, stdout, stderr, timed_out) within the module's timeout."""
        return run_tool(self.module, args, self.params["timeout"], environ_update=C_LOCALE)

    def find_nvidia_smi(self):
        name = self.params["nvidia_smi"]
        if os.sep in name:
            return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        return self.module.get_bin_path(name, required=False, opt_dirs=DRIVER_DIRS)

    def gather(self):
        r = self.result
        pci = scan_nvidia_pci(self.params["pci_sysfs_path"])
        r["pci_devices"] = pci
        r["pci_gpu_count"] = sum(1 for d in pci if d["kind"] == "gpu")
        r["pci_nvswitch_count"] = sum(1 for d in pci if d["kind"] == "nvswitch")
        r["pci_nvswitch_bridge_count"] = sum(1 for d in pci if d["kind"] == "nvswitch_bridge")
        r["nvswitch"] = r["pci_nvswitch_count"] > 0 or r["pci_nvswitch_bridge_count"] > 0

        smi = self.find_nvidia_smi()
        r["nvidia_smi_path"] = smi
        if smi is None:
            if r["pci_gpu_count"]:
                r["status"] = "no_driver"
                r["message"] = "%d NVIDIA GPU(s) on the PCI bus but %s was not found" % (
                    r["pci_gpu_count"], self.params["nvidia_smi"])
            else:
                r["status"] = "no_gpu"
                r["message"] = "no NVIDIA GPU on the PCI bus and %s not found" % self.params["nvidia_smi"]
            return r

        rc, out, err, timed_out = self.run([smi, "-q", "-x"])
        if timed_out:
            r["status"] = "driver_error"
            r["timed_out"] = True
            r["nvidia_smi_rc"] = rc
            r["message"] = ("'%s -q -x' did not answer within %d s and was killed: the driver or a GPU is "
                            "hung (look for Xid errors in the kernel log; a GPU reset or reboot clears it)"
                            % (smi, self.params["timeout"]))
            return r
        if rc != 0:
            msg = (out.strip() + "\n" + err.strip()).strip()
            if not r["pci_gpu_count"] and any(m in msg for m in NO_DEVICES_MARKERS):
                r["status"] = "no_gpu"
            else:
                r["status"] = "driver_error"
                r["nvidia_smi_rc"] = rc
            r["message"] = msg
            return r

        try:
            parsed = parse_nvidia_smi(out)
        except NvidiaSmiParseError as e:
            self.module.fail_json(msg="cannot parse '%s -q -x' output: %s" % (smi, e), rc=rc, stdout=out, stderr=err)

        gpus = parsed["gpus"]
        self.add_compute_capability(smi, gpus)
        r["driver_version"] = parsed["driver_version"]
        r["cuda_version"] = parsed["cuda_version"]
        r["gpus"] = gpus
        r["driver_gpu_count"] = len(gpus)
        if any(g.get("fabric") and g["fabric"].get("state") for g in gpus):
            r["nvswitch"] = True

        driver_ids = set(g["pci_bus_id"] for g in gpus)
        r["missing_from_driver"] = [d["bus_id"] for d in pci if d["kind"] == "gpu" and d["bus_id"] not in driver_ids]
        # Inside a VM or container sysfs may not show the GPUs at all: only a
        # non-empty PCI count can disagree with the driver.
        r["gpu_count_mismatch"] = bool(r["pci_gpu_count"]) and r["pci_gpu_count"] != len(gpus)

        if not gpus:
            if r["pci_gpu_count"]:
                r["status"] = "driver_error"
                r["message"] = "nvidia-smi lists no GPU while the PCI bus shows %d" % r["pci_gpu_count"]
            else:
                r["status"] = "no_gpu"
                r["message"] = "nvidia-smi lists no GPU"
            return r

        r["status"] = "ok"
        if r["missing_from_driver"]:
            r["message"] = "GPU(s) on the PCI bus but not seen by the driver: %s" % ", ".join(r["missing_from_driver"])
        if self.params["include_topology"]:
            trc, tout, terr, _timed_out = self.run([smi, "topo", "-m"])
            if trc == 0:
                try:
                    r["topology"] = parse_nvidia_smi_topo(tout)
                except NvidiaSmiParseError:
                    r["topology"] = None
        return r

    def add_compute_capability(self, smi, gpus):
        """compute_cap is a --query-gpu field only (R510+); older drivers reject it: keep the table value."""
        rc, out, err, timed_out = self.run([smi, "--query-gpu=pci.bus_id,compute_cap", "--format=csv"])
        if rc != 0 or timed_out:
            return
        try:
            rows = parse_nvidia_smi_csv(out)
        except NvidiaSmiParseError:
            return
        by_bus = {}
        for row in rows:
            cc = normalize_cc(row.get("compute_cap"))
            bus = normalize_pci_bus_id(row.get("pci.bus_id"))
            if cc and bus:
                by_bus[bus] = cc
        for g in gpus:
            cc = by_bus.get(g["pci_bus_id"])
            if cc:
                g["compute_capability"] = cc
                g["compute_capability_source"] = "nvidia-smi"
                if g.get("architecture") is None:
                    g["architecture"] = architecture_for_cc(cc)
                    g["architecture_source"] = "compute_capability" if g["architecture"] else None


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            pci_sysfs_path=dict(type="path", default="/sys/bus/pci/devices"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            include_topology=dict(type="bool", default=True),
            timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %d" % module.params["timeout"])
    module.exit_json(**GpuInfo(module).gather())


if __name__ == "__main__":
    main()
