# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""`gpufleet plan`: what the stack would install, and why, before any node is touched (issue 34).

The plan is the solver's (plugins/module_utils/stack_solver.py, the one the stack playbook runs), for an
OS and GPUs named on the command line: no node, no network. With ``-i INVENTORY`` each host of gpu_nodes
brings its own ``gpufleet_stack_request`` (hosts with the same request and OS form one group), and with
``--facts-cache DIR`` (Ansible's jsonfile fact cache) its own OS and architecture; the GPUs are named
with --gpu either way (a facts cache holds no GPU models). It prints, per node group, each
choice (CUDA, driver branch, torch and its wheel variant, the OS's Python, NCCL) with the reason the solver
gives for it, what it refused and why, and its warnings, in 80 columns; ``--json`` prints the plan
documents themselves (PLAN_CONTRACT.md). A request the solver refuses exits 2, the configuration-error
exit, with the rule id in brackets (``[TORCH_NO_WHEEL_FOR_PYTHON] ...``) and the requests that work.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from gpufleet import children

# What the stack playbook plans when the inventory sets no request (playbooks/tasks/gpu_stack_plan.yml).
DEFAULT_REQUEST = {"torch": "2.8.0"}
WIDTH = 80
LABEL = 15  # label column, then the value; reasons indented under the value
EXIT_PLANNED = 0
EXIT_CONFIGURATION = 2
# Hyphenated words ("long-term", "minor-version") stay whole; addresses longer than a line still break.
_wrap = functools.partial(textwrap.wrap, break_on_hyphens=False)

DESCRIPTION = ("Print the stack plan (CUDA, driver branch, torch and its wheel, the OS's Python, NCCL) "
               "with the reason for each choice, for an OS and GPUs named here: nothing is contacted.")
EPILOG = ("Exit codes: 0 a plan; 2 the request is refused (the rule in brackets, and requests that work).\n"
          "Examples:\n"
          "  gpufleet plan --os ubuntu24.04 --gpu \"NVIDIA H100 80GB HBM3\"\n"
          "  gpufleet plan --os rhel9 --gpu \"NVIDIA H100 80GB HBM3\" --gpu-count 8 --nvswitch "
          "--cuda 12.4 --torch 2.6.0\n"
          "  gpufleet plan --os ubuntu24.04 --gpu \"NVIDIA B200\" --torch none --json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--os", help="the nodes' OS, one of the supported list (docs/compatibility.md): ubuntu22.04, "
                        "ubuntu24.04, debian12, rhel9 (Rocky 9: rhel9), ...; with --facts-cache, each host's own")
    parser.add_argument("-i", "--inventory", help="read each gpu_nodes host's gpufleet_stack_request from it")
    parser.add_argument("--facts-cache", help="Ansible's jsonfile fact cache directory: each host's OS and arch")
    parser.add_argument("--gpu", required=True, action="append",
                        help="a GPU model as nvidia-smi names it, or a compute capability (9.0); repeat for mixed nodes")
    parser.add_argument("--gpu-count", type=int, default=1, help="GPUs per node (default 1)")
    parser.add_argument("--arch", default="x86_64", help="x86_64 (default) or aarch64")
    parser.add_argument("--nvswitch", action="store_true", help="the nodes have NVSwitches (fabric manager)")
    parser.add_argument("--cuda", help="CUDA toolkit X.Y (or X.Y.Z); default: the solver's choice")
    parser.add_argument("--torch", help="torch release, or 'none' for no PyTorch; default: the newest that fits")
    parser.add_argument("--torch-variant", help="wheel variant such as cu126; default: the solver's choice")
    parser.add_argument("--driver-branch", help="driver branch such as 580; default: the solver's choice")
    parser.add_argument("--kernel-modules", choices=["open", "proprietary"], help="driver kernel modules")
    parser.add_argument("--json", action="store_true", help="print the plan documents as JSON")


def request_from(args: argparse.Namespace) -> dict:
    """The stack request (gpufleet_stack_request's shape) the command line describes."""
    request = {"os": args.os, "arch": args.arch, "gpus": [g for g in args.gpu for copy in range(max(args.gpu_count, 1))]}
    for key in ("cuda", "torch", "torch_variant", "driver_branch", "kernel_modules"):
        if getattr(args, key) not in (None, ""):
            request[key] = getattr(args, key)
    if args.nvswitch:
        request["nvswitch"] = True
    return request


class PlanInputError(ValueError):
    """The command line or the inventory cannot give a request to plan."""


def inventory_hosts(inventory: str, group: str = "gpu_nodes") -> dict:
    """{host: its variables} of the group, as ansible-inventory reads them (group_vars, host_vars)."""
    binary = Path(sys.executable).parent / "ansible-inventory"
    try:
        proc = children.run([str(binary), "-i", inventory, "--list"], capture_output=True, text=True, timeout=300,
                            check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PlanInputError("cannot run ansible-inventory on %s: %s" % (inventory, exc)) from exc
    if proc.returncode != 0:
        raise PlanInputError("ansible-inventory -i %s failed: %s" % (inventory, proc.stderr.strip()[-800:]))
    listing = json.loads(proc.stdout)
    hosts = _group_hosts(listing, group)
    if not hosts:
        raise PlanInputError("the inventory %s has no host in %s (its groups: %s)" % (
            inventory, group, ", ".join(sorted(k for k in listing if k != "_meta"))))
    hostvars = listing.get("_meta", {}).get("hostvars", {})
    return {h: hostvars.get(h, {}) for h in hosts}


def _group_hosts(listing: dict, group: str) -> list:
    entry = listing.get(group, {})
    hosts = list(entry.get("hosts", []))
    for child in entry.get("children", []):
        hosts += [h for h in _group_hosts(listing, child) if h not in hosts]
    return hosts


def cached_os(facts_cache: str, host: str) -> tuple:
    """(os key as the stack playbook builds it, architecture) from a host's jsonfile fact cache entry."""
    path = Path(facts_cache) / host
    try:
        facts = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlanInputError("no readable fact cache entry for %s at %s (%s): gather facts into the cache "
                             "(fact_caching = jsonfile) or give --os" % (host, path, exc)) from exc
    facts = facts.get("ansible_facts", facts)

    def get(name):  # the jsonfile cache keeps the ansible_ prefix; a facts dump may not
        return facts.get("ansible_" + name, facts.get(name, ""))

    if get("distribution") == "Ubuntu":
        os_key = "ubuntu" + str(get("distribution_version"))
    elif get("distribution") in ("RedHat", "Rocky"):  # the rebuild the one OS list names; Alma etc. keep their id
        os_key = "rhel" + str(get("distribution_major_version"))
    else:
        os_key = str(get("distribution")).lower() + str(get("distribution_major_version"))
    return os_key, get("architecture") or "x86_64"


def groups_from(args: argparse.Namespace) -> list:
    """[(group name, request)]: the command line's request, or one per distinct (request, OS) of the inventory.
    From an inventory, the command line's --cuda/--torch/... fill only what a host's request leaves out."""
    if not args.inventory:
        if not args.os:
            raise PlanInputError("--os is needed (or -i INVENTORY with --facts-cache DIR)")
        return [("command line", request_from(args))]
    grouped = {}
    for host, hostvars in inventory_hosts(args.inventory).items():
        os_key, arch = cached_os(args.facts_cache, host) if args.facts_cache else (args.os, args.arch)
        if not os_key:
            raise PlanInputError("no OS for %s: give --os or --facts-cache" % host)
        request = dict(request_from(args), **dict(hostvars.get("gpufleet_stack_request") or DEFAULT_REQUEST))
        request.update(os=os_key, arch=arch, gpus=request_from(args)["gpus"])
        grouped.setdefault(json.dumps(request, sort_keys=True), []).append(host)
    return [("%d host%s: %s" % (len(hosts), "" if len(hosts) == 1 else "s", ", ".join(hosts)), json.loads(key))
            for key, hosts in grouped.items()]


def _solver():
    from gpufleet.mirror_targets import module_utils
    return module_utils("stack_solver")


def plan_group(name: str, request: dict) -> dict:
    """{"name", "request", "plan"} or {"name", "request", "refused": {"rule", "message", "alternatives"}}.
    The request is checked first as `gpufleet run` checks it (unknown keys with the nearest, kinds, versions):
    a misspelt key plans nothing rather than a plan that silently ignored it."""
    from gpufleet.mirror_targets import module_utils
    problems = module_utils("request_schema").request_problems(
        {k: v for k, v in request.items() if k not in ("os", "arch", "gpus")})
    if problems:
        rule, message = problems[0][1:].split("] ", 1)
        return {"name": name, "request": request,
                "refused": {"rule": rule, "message": " ".join([message] + problems[1:]), "alternatives": []}}
    solver = _solver()
    try:
        return {"name": name, "request": request, "plan": solver.solve(request)}
    except solver.StackError as exc:
        return {"name": name, "request": request,
                "refused": {"rule": exc.rule, "message": exc.args[0], "alternatives": exc.alternatives}}


# ---------------------------------------------------------------- the table


def _row(label: str, value: str, why: str = "") -> list[str]:
    lines = _wrap(value, WIDTH - LABEL - 2, subsequent_indent="  ") or [""]
    out = [("  %-*s%s" % (LABEL - 2, label, lines[0])).rstrip()]
    out += [" " * LABEL + line for line in lines[1:]]
    if why:
        out += _wrap(why, WIDTH, initial_indent=" " * (LABEL + 2), subsequent_indent=" " * (LABEL + 2))
    return out


def _gpus_text(plan: dict) -> str:
    return ", ".join("%d× %s" % (g["count"], g["name"]) for g in plan["gpus"]) or "no GPUs given"


def _torch_rows(plan: dict) -> list[str]:
    reasons, torch = plan.get("reasons", {}), plan["torch"]
    if not torch:
        return _row("torch", "none", reasons.get("torch", "not requested"))
    rows = _row("torch", "%s (wheel %s)" % (torch["version"], torch["variant"]), reasons.get("torch", ""))
    rows += _row("  variant", torch["variant"], reasons.get("variant", ""))
    companions = ", ".join("%s %s" % (n, torch[n]) for n in ("torchvision", "torchaudio") if torch.get(n))
    rows += _row("  with", companions or "no torchvision or torchaudio")
    return rows


def _python_rows(plan: dict) -> list[str]:
    python, torch = plan.get("python"), plan["torch"]
    if not python:
        return _row("Python", "unknown", "the OS's python3 is not in the compatibility data; not checked")
    why = "the python3 of %s (%s)" % (plan["os"], python["url"])
    if torch and torch.get("python_versions"):
        why += "; torch %s has wheels for Python %s (PyPI)" % (torch["version"], ", ".join(torch["python_versions"]))
    return _row("Python", python["python"], why)


def render_plan(group: dict) -> list[str]:
    """The lines of one group's plan: each choice, its value and why; then what was refused, and warnings."""
    plan, reasons = group["plan"], group["plan"].get("reasons", {})
    lines = _wrap("%s: %s on %s (%s)" % (group["name"], _gpus_text(plan), plan["os"], plan["arch"]), WIDTH)
    lines += _row("CUDA", "%s (installs %s)" % (plan["cuda_version"], plan["toolkit_full_version"]),
                  reasons.get("cuda", ""))
    lines += _row("driver", "R%s %s, %s modules, >= %s" % (
        plan["driver_branch"], plan["driver_recommended_version"], plan["kernel_modules"], plan["driver_min_version"]),
        reasons.get("driver_branch", ""))
    lines += _torch_rows(plan) + _python_rows(plan)
    lines += _row("NCCL", plan["nccl_package_version"])
    # The address whole, on a line of its own (75 characters for NVIDIA's; wrapped only when longer).
    lines += _row("repository", "NVIDIA's, for %s" % plan["os"])
    lines += _wrap(plan["repository"], WIDTH, initial_indent="  ", subsequent_indent="  ")
    for item in plan.get("refused", []):
        lines += _row("not taken", item)
    for warning in plan.get("warnings", []):
        lines += _wrap(warning, WIDTH, initial_indent="  warning: ", subsequent_indent=" " * 11)
    return lines


def render_refusal(group: dict) -> list[str]:
    refused = group["refused"]
    return (_wrap("%s: refused" % group["name"], WIDTH)
            + _wrap("[%s] %s" % (refused["rule"], refused["message"]), WIDTH,
                    initial_indent="  ", subsequent_indent="  "))


def plan_from_reports(reports: Path) -> str | None:
    """The plan a preflight run wrote (reports/plan.json) as this command's table, or None when the run
    wrote no plan (another stage, or the solver refused: its reason is then the run's own message)."""
    try:
        plan = json.loads((Path(reports) / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(plan, dict) or "error" in plan or "cuda_version" not in plan:
        return None
    try:
        return render([{"name": "the plan (reports/plan.json)", "plan": plan}])
    except (KeyError, TypeError, ValueError):
        return None  # a plan from another gpufleet version: the file itself is still there to read


def render(groups: list[dict]) -> str:
    blocks = [render_plan(g) if "plan" in g else render_refusal(g) for g in groups]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def main(args: argparse.Namespace, _argv: list[str]) -> int:
    try:
        groups = [plan_group(name, request) for name, request in groups_from(args)]
    except PlanInputError as exc:
        sys.stderr.write("\n".join(_wrap("gpufleet plan: %s" % exc, WIDTH)) + "\n")
        return EXIT_CONFIGURATION
    refused = [g for g in groups if "refused" in g]
    if args.json:
        sys.stdout.write(json.dumps({"groups": groups}, indent=1, sort_keys=True) + "\n")
    elif refused:
        sys.stderr.write(render(groups))
    else:
        sys.stdout.write(render(groups))
    return EXIT_CONFIGURATION if refused else EXIT_PLANNED
