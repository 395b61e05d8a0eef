#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_info
short_description: Report InfiniBand/RoCE HCAs, their ports and nvidia_peermem
version_added: "0.1.0"
description:
  - Lists the RDMA host channel adapters (HCAs) of a node with their ports, using C(ibstat)
    (infiniband-diags) and falling back to C(/sys/class/infiniband) when ibstat is not installed
    or lists nothing.
  - Reports whether the C(nvidia_peermem) kernel module (GPUDirect RDMA) is loaded.
  - Port states are normalised to ibstat's words (V(Active), V(Down), V(LinkUp), V(Disabled)),
    whatever the source, and rates are numbers in Gb/s.
  - Problems such as an C(ibpanic) line or a failing ibstat are reported in RV(errors), not
    swallowed; a missing tool is a state (RV(source=none)), not a failure.
  - Read-only; never changes anything.
options:
  ibstat:
    description:
      - Name or path of the ibstat program.
    type: str
    default: ibstat
  ib_sysfs_path:
    description:
      - The InfiniBand class directory read when ibstat is absent or lists no CA.
    type: path
    default: /sys/class/infiniband
  procfs_root:
    description:
      - Where procfs is mounted; C(<procfs_root>/modules) tells whether nvidia_peermem is loaded.
    type: path
    default: /proc
  module_sysfs_path:
    description:
      - The kernel module directory; C(<module_sysfs_path>/nvidia_peermem) also means loaded.
    type: path
    default: /sys/module
  fail_on_error:
    description:
      - Fail (with the command, rc, stdout and stderr) when ibstat reports an error, instead of
        returning the error in RV(errors).
    type: bool
    default: false
  timeout:
    description:
      - Seconds C(ibstat) may run before it is killed; a killed ibstat is an entry in RV(errors)
        and the ports are read from sysfs instead.
    type: int
    default: 30
extends_documentation_fragment:
  - gpufleet.cluster.read_only
notes:
  - ibstat runs with C(LC_ALL=C) so its output parses in every locale.
  - Ports count as active only when State is V(Active) and Physical state is V(LinkUp).
seealso:
  - module: gpufleet.cluster.host_info
  - module: gpufleet.cluster.gpu_info
author:
  - gpufleet engineers (@gpufleet)
"""

EXAMPLES = r"""
- name: Gather RDMA facts
  gpufleet.cluster.rdma_info:
  register: rdma

- name: Require eight active 400 Gb/s InfiniBand ports
  ansible.builtin.assert:
    that:
      - rdma.active_ports | selectattr('link_layer', 'equalto', 'InfiniBand')
        | selectattr('rate_gbps', 'equalto', 400) | list | length == 8
      - rdma.errors | length == 0
    fail_msg: "{{ rdma.active_ports }} / {{ rdma.errors }}"

- name: Read a copied sysfs tree instead of the live one
  gpufleet.cluster.rdma_info:
    ibstat: /nonexistent/ibstat
    ib_sysfs_path: /srv/capture/sys/class/infiniband
"""

RETURN = r"""
source:
  description: Where RV(cas) came from; V(none) when neither ibstat nor sysfs show an HCA.
  returned: always
  type: str
  choices: [ibstat, sysfs, none]
  sample: ibstat
cas:
  description:
    - One entry per CA (HCA), as C(parse_ibstat) returns it. Extra keys may be present
      (C(number_of_ports), C(hardware_version), C(node_guid), C(system_guid), C(numa_node)).
  returned: always
  type: list
  elements: dict
  contains:
    ca:
      description: CA name.
      type: str
      sample: mlx5_0
    ca_type:
      description: CA type as ibstat prints it (PCI device id), null when unknown.
      type: str
      sample: MT4129
    firmware:
      description: Firmware version.
      type: str
      sample: 28.39.1002
    ports:
      description: Ports of the CA.
      type: list
      elements: dict
      contains:
        port:
          description: Port number.
          type: int
          sample: 1
        state:
          description: Logical state (Active, Down, Initializing, Armed).
          type: str
          sample: Active
        physical_state:
          description: Physical state (LinkUp, Polling, Disabled, Sleep, ...).
          type: str
          sample: LinkUp
        rate_gbps:
          description: Link rate in Gb/s (an int, or a float such as 2.5).
          type: raw
          sample: 400
        link_layer:
          description: V(InfiniBand), or V(Ethernet) for RoCE.
          type: str
          sample: InfiniBand
        port_guid:
          description: Port GUID, C(0x) and 16 hex digits.
          type: str
          sample: "0x00155dfffd3411eb"
        base_lid:
          description: Base LID (0 on RoCE, 65535 before the subnet manager assigns one).
          type: int
          sample: 13247
        sm_lid:
          description: LID of the subnet manager.
          type: int
          sample: 1
  sample:
    - ca: mlx5_0
      ca_type: MT4129
      firmware: 28.39.1002
      ports:
        - port: 1
          state: Active
          physical_state: LinkUp
          rate_gbps: 400
          link_layer: InfiniBand
errors:
  description: Error lines (C(ibpanic ...)), ibstat's stderr and its exit status when it failed.
  returned: always
  type: list
  elements: str
  sample: ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]
peermem_loaded:
  description: Whether the nvidia_peermem kernel module is loaded.
  returned: always
  type: bool
  sample: true
active_ports:
  description: The ports that are Active and LinkUp.
  returned: always
  type: list
  elements: dict
  contains:
    ca:
      description: CA name.
      type: str
    port:
      description: Port number.
      type: int
    rate_gbps:
      description: Rate in Gb/s.
      type: raw
    link_layer:
      description: InfiniBand or Ethernet.
      type: str
  sample: [{ca: mlx5_0, port: 1, rate_gbps: 400, link_layer: InfiniBand}]
ibstat_rc:
  description: Exit status of ibstat, null when it did not run.
  returned: always
  type: int
  sample: 0
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE
from ansible_collections.gpufleet.cluster.plugins.module_utils.run_tool import run_tool
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import (
    active_ports,
    parse_ibstat_with_errors,
    read_ib_sysfs,
)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            ibstat=dict(type="str", default="ibstat"),
            ib_sysfs_path=dict(type="path", default="/sys/class/infiniband"),
            procfs_root=dict(type="path", default="/proc"),
            module_sysfs_path=dict(type="path", default="/sys/module"),
            fail_on_error=dict(type="bool", default=False),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )


def peermem_loaded(procfs_root, module_sysfs_path):
    try:
        with open(os.path.join(procfs_root, "modules"), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.split(" ", 1)[0] == "nvidia_peermem":
                    return True
    except OSError:
        pass
    return os.path.isdir(os.path.join(module_sysfs_path, "nvidia_peermem"))


def find_ibstat(module, name):
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return module.get_bin_path(name, required=False)


def gather(module):
    params = module.params
    result = {"changed": False, "source": "none", "cas": [], "errors": [], "ibstat_rc": None}
    ibstat = find_ibstat(module, params["ibstat"])
    if ibstat:
        rc, out, err, timed_out = run_tool(module, [ibstat], params["timeout"], environ_update=C_LOCALE)
        result["ibstat_rc"] = rc
        cas, errors = parse_ibstat_with_errors(out)
        errors += [line.strip() for line in (err or "").splitlines() if line.strip()]
        if timed_out:
            cas = []  # a cut-off listing is not the node's ports
            errors.append("%s did not answer within %d s and was killed" % (ibstat, params["timeout"]))
        elif rc != 0:
            errors.append("%s exited with rc %d" % (ibstat, rc))
        if errors and params["fail_on_error"]:
            module.fail_json(
                msg="%s reported errors: %s" % (ibstat, "; ".join(errors)),
                cmd=ibstat, rc=rc, stdout=out, stderr=err, **result
            )
        result["errors"] = errors
        if cas:
            result["source"] = "ibstat"
            result["cas"] = cas
    if not result["cas"]:
        cas = read_ib_sysfs(params["ib_sysfs_path"])
        if cas:
            result["source"] = "sysfs"
            result["cas"] = cas
    elif os.path.isdir(params["ib_sysfs_path"]):
        # ibstat does not print the NUMA node; NCCL and the report want it.
        for ca in result["cas"]:
            path = os.path.join(params["ib_sysfs_path"], ca["ca"], "device", "numa_node")
            try:
                with open(path, encoding="utf-8") as handle:
                    ca["numa_node"] = int(handle.read().strip())
            except (OSError, ValueError):
                pass
    result["active_ports"] = active_ports(result["cas"])
    result["peermem_loaded"] = peermem_loaded(params["procfs_root"], params["module_sysfs_path"])
    return result


def main():
    module = build_module()
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %d" % module.params["timeout"])
    module.exit_json(**gather(module))


if __name__ == "__main__":
    main()
