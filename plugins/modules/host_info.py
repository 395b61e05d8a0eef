#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_info
short_description: Report CPU, memory/ECC, disks, NICs, kernel, Secure Boot and virtualization
version_added: "0.1.0"
description:
  - Gathers the host facts a GPU training node is checked against, without relying on Ansible's
    setup facts.
  - CPU from C(lscpu) (run with C(LC_ALL=C)), else C(/proc/cpuinfo) and
    C(/sys/devices/system/node).
  - Host memory ECC from EDAC (C(/sys/devices/system/edac/mc/mc*)); when EDAC is absent the ECC
    state is reported as unknown (null), never as off.
  - Secure Boot from C(mokutil --sb-state), else the C(SecureBoot-8be4df61-...) EFI variable.
  - Container and VM from C(systemd-detect-virt), else C(/.dockerenv), C(/run/.containerenv),
    C(container=) in the environment of PID 1, DMI product names and the cpuinfo
    C(hypervisor) flag.
  - Read-only; never changes anything. A missing tool is a state, not a failure.
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. When not V(/sys), every sysfs fact is read from there and
        C(lscpu) is not used, so a copied or simulated tree is read consistently.
    type: path
    default: /sys
  procfs_root:
    description:
      - Where procfs is mounted (C(meminfo), C(cpuinfo), C(1/environ), C(sys/kernel/osrelease)).
        When not V(/proc), C(lscpu) and C(systemd-detect-virt) are not used.
    type: path
    default: /proc
  root_path:
    description:
      - Root of the file system for C(etc/os-release), C(.dockerenv) and C(run/.containerenv).
    type: path
    default: /
  timeout:
    description: Seconds each tool (C(lscpu), C(mokutil), C(systemd-detect-virt)) may run before it
      is killed; a killed tool counts as absent and the fact falls back to sysfs/procfs or unknown.
    type: int
    default: 30
extends_documentation_fragment:
  - gpufleet.cluster.read_only
seealso:
  - module: gpufleet.cluster.rdma_info
  - module: gpufleet.cluster.gpu_info
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Gather host facts
  gpufleet.cluster.host_info:
  register: host

- name: Refuse nodes whose memory reports uncorrectable errors
  ansible.builtin.assert:
    that:
      - host.memory.edac_uncorrected is none or host.memory.edac_uncorrected == 0
    fail_msg: "EDAC reports {{ host.memory.edac_uncorrected }} uncorrectable memory errors"

- name: Read a simulated node's trees
  gpufleet.cluster.host_info:
    sysfs_root: /srv/sim/node1/sys
    procfs_root: /srv/sim/node1/proc
"""

RETURN = r"""
cpu:
  description: CPU topology.
  returned: always
  type: dict
  contains:
    model:
      description: Model name of the first CPU kind.
      type: str
      sample: Intel(R) Xeon(R) Platinum 8468
    sockets:
      description: Number of sockets.
      type: int
      sample: 2
    cores:
      description: Physical cores in total.
      type: int
      sample: 96
    threads:
      description: Logical CPUs.
      type: int
      sample: 96
    numa_nodes:
      description: NUMA nodes.
      type: int
      sample: 2
    source:
      description: V(lscpu) or V(cpuinfo).
      type: str
      sample: lscpu
memory:
  description: Host memory and its ECC state.
  returned: always
  type: dict
  contains:
    total_mib:
      description: MemTotal in MiB.
      type: int
      sample: 2063937
    ecc_active:
      description:
        - True when EDAC reports an ECC mode on some memory controller, false when every mode it
          reports is Unknown/None, null when EDAC is absent (unknown, not off).
      type: bool
      sample: true
    edac_corrected:
      description: Sum of C(ce_count) over the EDAC memory controllers; null without EDAC.
      type: int
      sample: 0
    edac_uncorrected:
      description: Sum of C(ue_count) over the EDAC memory controllers; null without EDAC.
      type: int
      sample: 0
    edac_controllers:
      description: Number of EDAC memory controllers.
      type: int
      sample: 2
block_devices:
  description: Block devices from C(/sys/block), without loop, ram and zram.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Kernel name.
      type: str
      sample: nvme0n1
    nvme:
      description: Whether it is an NVMe namespace.
      type: bool
      sample: true
    size_bytes:
      description: Size in bytes.
      type: int
      sample: 3840755982336
    rotational:
      description: Whether the kernel reports a rotating disk; null when unknown.
      type: bool
      sample: false
    model:
      description: Device model, null when the kernel has none.
      type: str
      sample: SAMSUNG MZWLR3T8HBLS-00007
nics:
  description: Network interfaces from C(/sys/class/net), without C(lo).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Interface name.
      type: str
      sample: ens21f0np0
    speed_mbps:
      description: Link speed in Mb/s; null when unknown (virtual NICs, link down).
      type: int
      sample: 400000
    link:
      description: Whether the carrier is up.
      type: bool
      sample: true
    mtu:
      description: MTU.
      type: int
      sample: 9000
    driver:
      description: Kernel driver, null for virtual interfaces.
      type: str
      sample: mlx5_core
    address:
      description: Hardware address.
      type: str
      sample: "b8:3f:d2:6e:27:04"
kernel:
  description: Running kernel release.
  returned: always
  type: str
  sample: 6.1.0-18-amd64
secure_boot:
  description: Secure Boot state.
  returned: always
  type: str
  choices: [enabled, disabled, unknown]
  sample: disabled
virtualization:
  description: Whether this runs in a container and/or a VM (both can be true).
  returned: always
  type: dict
  contains:
    container:
      description: Running in a container.
      type: bool
      sample: false
    vm:
      description: Running in a virtual machine.
      type: bool
      sample: false
    type:
      description: The container type when in a container, else the VM type, else V(none).
      type: str
      sample: none
    container_type:
      description: Container type (docker, podman, lxc, ...) or null.
      type: str
    vm_type:
      description: VM type (kvm, microsoft, vmware, ...) or null.
      type: str
os:
  description: Operating system from C(/etc/os-release).
  returned: always
  type: dict
  contains:
    id:
      description: C(ID).
      type: str
      sample: ubuntu
    version_id:
      description: C(VERSION_ID).
      type: str
      sample: "22.04"
    family:
      description: debian, redhat, suse, or the id itself.
      type: str
      sample: debian
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import (
    detect_virtualization,
    parse_cpuinfo,
    parse_lscpu,
    parse_meminfo,
    parse_mokutil_sb_state,
    parse_os_release,
    read_block_devices,
    read_edac,
    read_nics,
    read_numa_nodes,
    read_secure_boot_efivar,
    read_text,
)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
            root_path=dict(type="path", default="/"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )


def _run(module, name, args):
    """Run a tool if installed: (rc, stdout, stderr), or None when it is missing or hung."""
    path = module.get_bin_path(name, required=False)
    if not path:
        return None
    rc, out, err, timed_out = run_tool(module, [path] + args, module.params["timeout"], environ_update=C_LOCALE)
    return None if timed_out else (rc, out, err)


def gather_cpu(module, live):
    sysfs, procfs = module.params["sysfs_root"], module.params["procfs_root"]
    cpu = None
    if live:
        ran = _run(module, "lscpu", [])
        if ran and ran[0] == 0:
            parsed = parse_lscpu(ran[1])
            if parsed["threads"]:
                cpu = {key: parsed[key] for key in ("model", "sockets", "cores", "threads", "numa_nodes")}
                cpu["source"] = "lscpu"
    if cpu is None:
        parsed = parse_cpuinfo(read_text(os.path.join(procfs, "cpuinfo")))
        cpu = {key: parsed[key] for key in ("model", "sockets", "cores", "threads")}
        cpu["numa_nodes"] = None
        cpu["source"] = "cpuinfo"
    if cpu["numa_nodes"] is None:
        cpu["numa_nodes"] = read_numa_nodes(sysfs)
    return cpu


def gather_secure_boot(module, live):
    if live:
        ran = _run(module, "mokutil", ["--sb-state"])
        if ran:
            state = parse_mokutil_sb_state((ran[1] or "") + "\n" + (ran[2] or ""))
            if state != "unknown":
                return state
    return read_secure_boot_efivar(module.params["sysfs_root"])


def gather_virtualization(module, live):
    params = module.params
    files = detect_virtualization(params["root_path"], params["sysfs_root"], params["procfs_root"])
    container_type, vm_type = files["container_type"], files["vm_type"]
    if live and module.get_bin_path("systemd-detect-virt", required=False):
        # systemd-detect-virt exits 1 and prints "none" when there is nothing to detect.
        ran = _run(module, "systemd-detect-virt", ["--container"])
        if ran:
            found = ran[1].strip()
            container_type = found if ran[0] == 0 and found and found != "none" else container_type
        ran = _run(module, "systemd-detect-virt", ["--vm"])
        if ran:
            found = ran[1].strip()
            vm_type = found if ran[0] == 0 and found and found != "none" else vm_type
    return {
        "container": container_type is not None,
        "vm": vm_type is not None,
        "type": container_type or vm_type or "none",
        "container_type": container_type,
        "vm_type": vm_type,
    }


def gather(module):
    params = module.params
    sysfs, procfs = params["sysfs_root"], params["procfs_root"]
    # Tools read the live /sys and /proc; with a redirected tree only files are read.
    live = os.path.realpath(sysfs) == "/sys" and os.path.realpath(procfs) == "/proc"
    meminfo = parse_meminfo(read_text(os.path.join(procfs, "meminfo")))
    edac = read_edac(sysfs)
    memory = {"total_mib": meminfo["total_mib"]}
    memory.update(edac)
    kernel = read_text(os.path.join(procfs, "sys", "kernel", "osrelease"))
    if not kernel and live:
        kernel = platform.release()
    os_release = parse_os_release(
        read_text(os.path.join(params["root_path"], "etc", "os-release"))
        or read_text(os.path.join(params["root_path"], "usr", "lib", "os-release"))
    )
    return {
        "changed": False,
        "cpu": gather_cpu(module, live),
        "memory": memory,
        "block_devices": read_block_devices(sysfs),
        "nics": read_nics(sysfs),
        "kernel": kernel,
        "secure_boot": gather_secure_boot(module, live),
        "virtualization": gather_virtualization(module, live),
        "os": {key: os_release[key] for key in ("id", "version_id", "family", "pretty_name")},
    }


def main():
    module = build_module()
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %d" % module.params["timeout"])
    module.exit_json(**gather(module))


if __name__ == "__main__":
    main()
