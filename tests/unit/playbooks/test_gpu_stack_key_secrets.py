"""The stack record's key carries no credential in clear (issue 25, F5).

The key parts are a module argument of gpufleet.cluster.stack_state, and Ansible records module
arguments in its events (ansible-runner's job_events, which pipelines upload). These tests template
the play's own module arguments, as Ansible does, with a token in the index URL and a proxy password
that holds an "@", and look for both in what the module would receive.
"""

from __future__ import annotations

import json
from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar

PLAYBOOK = Path(__file__).resolve().parents[3] / "playbooks" / "gpu_stack.yml"
NODE_RECORD = PLAYBOOK.parent / "tasks" / "gpu_stack_node_record.yml"

init_plugin_loader()
LOADER = DataLoader()
STACK_PLAY = next(p for p in LOADER.load_from_file(str(PLAYBOOK), trusted_as_template=True)
                  if p.get("name") == "Install the planned GPU software stack")
PLAN = {"cuda_version": "12.2", "driver_branch": "535", "driver_min_version": "535.104.05", "kernel_modules": "open",
        "nccl_package_version": "2.18.3-1+cuda12.2", "driver_flavour_packages": {"open": ["nvidia-driver-535-open"]},
        "packages": {"fabricmanager": [], "driver": ["nvidia-driver-535-open"], "toolkit": ["cuda-toolkit-12-2"],
                     "nccl": ["libnccl2=2.18.3-1+cuda12.2"]},
        "torch": {"version": "2.1.2", "variant": "cu121"}, "repository": "ubuntu2204/x86_64", "warnings": []}
TOKEN = "glpat-Zx81kQ2TOKEN"
PROXY_PASSWORD = "p@ss:w0rd"


def module_args(task_name: str, tasks: list, **inventory) -> dict:
    variables = {**STACK_PLAY["vars"], "inventory_hostname": "gpu-a01", "gpu_stack_plan": PLAN, **inventory}
    task = next(t for t in tasks if t.get("name") == task_name)
    templar = Templar(loader=LOADER, variables=variables)
    return templar.template(task["gpufleet.cluster.stack_state"])


def secrets(token: str = TOKEN) -> dict:
    return {"gpufleet_pytorch_index_url": f"https://{token}@gitlab.example.com/api/v4/projects/7/packages/pypi/simple",
            "gpufleet_proxy_env": {"https_proxy": f"http://svc-gpu:{PROXY_PASSWORD}@proxy.example.com:3128"},
            "nccl_hold": True}


def test_the_compare_and_the_record_receive_no_credential_in_clear():
    compare = module_args("Compare the node with its last converged state", STACK_PLAY["pre_tasks"], **secrets())
    record = module_args("Record the converged state for the next run", LOADER.load_from_file(str(NODE_RECORD), trusted_as_template=True),
                         **secrets(), gpu_stack_watch={}, gpu_stack_record={"installed": {}})
    for args in (compare, record):
        sent = json.dumps(args)
        assert TOKEN not in sent and PROXY_PASSWORD not in sent and "svc-gpu" not in sent, sent
        # The drift report still names the inputs.
        assert {"gpufleet_pytorch_index_url", "gpufleet_proxy_env", "nccl_hold"} <= set(args["key_parts"]["inputs"])


def test_a_changed_credential_still_changes_the_key_and_names_the_input():
    before = module_args("Compare the node with its last converged state", STACK_PLAY["pre_tasks"], **secrets())
    after = module_args("Compare the node with its last converged state", STACK_PLAY["pre_tasks"],
                        **secrets(token="glpat-rotated"))
    assert before["key"] != after["key"]
    changed = [name for name, digest in after["key_parts"]["inputs"].items()
               if before["key_parts"]["inputs"][name] != digest]
    assert changed == ["gpufleet_pytorch_index_url"]
