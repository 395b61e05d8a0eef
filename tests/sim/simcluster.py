#!/usr/bin/env python3
"""Simulated GPU cluster for gpufleet's integration tests and demo.

    simcluster.py up [--name N] [--subnet 10.200.K.0/24] --nodes 3 [--os debian12 | --os ubuntu22.04]
                     [--profile hgx-h100 | --profile node2=a100-sxm4]
                     [--capture NODE=FILE ...] [--fault NODE=FAULT ...]
                     [--preinstall driver=550.54.15[:open|:proprietary]] [--preinstall driver-run=535.183.01[:open]]
                     [--preinstall torch] [--inventory PATH]
    simcluster.py down [--name N | --all]
    simcluster.py leftovers --name N      # exit 1 naming what `down` left (netns, link, mount, process)
    simcluster.py status [--name N]
    simcluster.py fault [--name N] NODE FAULT
    simcluster.py clear [--name N] NODE [FAULT]

Run as root. See docs/simulated-cluster.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gfsim import cluster, hardware, manifest, util  # noqa: E402


def parse_pairs(values, what: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for value in values or []:
        if "=" not in value:
            raise SystemExit(f"--{what} wants NODE={what.upper()}, got {value!r}")
        node, item = value.split("=", 1)
        out.setdefault(node, []).append(item)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="simcluster.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)

    p_up = sub.add_parser("up", help="bring a cluster up (idempotent)")
    p_up.add_argument("--name", default=cluster.DEFAULT_NAME)
    p_up.add_argument("--subnet", default=cluster.DEFAULT_SUBNET)
    p_up.add_argument("--nodes", type=int, default=3)
    p_up.add_argument("--os", default=cluster.DEFAULT_OS, choices=sorted(manifest.OS_CHOICES),
                      help="what the nodes claim to be, and which NVIDIA repository they use (default debian12)")
    p_up.add_argument("--profile", action="append", default=[],
                      help=f"PROFILE for all nodes or NODE=PROFILE; known: {', '.join(sorted(hardware.PROFILES))}")
    p_up.add_argument("--capture", action="append", default=[], help="NODE=FILE: replay this capture on NODE")
    p_up.add_argument("--fault", action="append", default=[], help=f"NODE=FAULT; known: {', '.join(hardware.FAULTS)}")
    p_up.add_argument("--preinstall", action="append", default=[],
                      help="driver=VERSION[:open|proprietary] (packages from the manifest-built repository), "
                           "driver-run=VERSION[:FLAVOUR] (as NVIDIA's .run installer leaves it), or torch")
    p_up.add_argument("--inventory", action="append", default=[], help="also write the inventory here")
    p_up.add_argument("--seed", type=Path, help="start each node named in this directory from its saved layer "
                                                "(written by `save`)")

    p_save = sub.add_parser("save", help="save nodes' layers (what they changed) for `up --seed`")
    p_save.add_argument("--name", default=cluster.DEFAULT_NAME)
    p_save.add_argument("--to", type=Path, required=True)
    p_save.add_argument("nodes", nargs="+")

    p_down = sub.add_parser("down", help="remove the cluster and every trace of it")
    p_down.add_argument("--name", default=cluster.DEFAULT_NAME)
    p_down.add_argument("--all", action="store_true", help="remove every cluster this clone brought up")

    p_left = sub.add_parser("leftovers", help="list what the host still holds of a cluster; exit 1 if anything")
    p_left.add_argument("--name", default=cluster.DEFAULT_NAME)

    p_status = sub.add_parser("status", help="list clusters and nodes")
    p_status.add_argument("--name")
    p_status.add_argument("--json", action="store_true")

    p_fault = sub.add_parser("fault", help="inject a fault into a running node")
    p_fault.add_argument("--name", default=cluster.DEFAULT_NAME)
    p_fault.add_argument("node")
    p_fault.add_argument("fault", choices=hardware.FAULTS)

    p_clear = sub.add_parser("clear", help="clear one or all faults of a node")
    p_clear.add_argument("--name", default=cluster.DEFAULT_NAME)
    p_clear.add_argument("node")
    p_clear.add_argument("fault", nargs="?", choices=hardware.FAULTS)

    args = parser.parse_args(argv)
    if args.cmd in ("status", "leftovers"):   # read-only: no need to wait for a running job
        return run_command(args)
    with util.sim_lock(f"simcluster.py {args.cmd} --name {getattr(args, 'name', '')}"):
        return run_command(args)


def run_command(args) -> int:
    if args.cmd == "up":
        profiles: dict[str, str] = {}
        for value in args.profile:
            node, _sep, prof = value.rpartition("=")
            profiles[node or "*"] = prof
        for prof in profiles.values():
            if prof not in hardware.PROFILES:
                raise SystemExit(f"unknown profile {prof!r}; known: {', '.join(sorted(hardware.PROFILES))}")
        captures = {n: [Path(p).resolve() for p in ps] for n, ps in parse_pairs(args.capture, "capture").items()}
        faults = parse_pairs(args.fault, "fault")
        for fs in faults.values():
            for f in fs:
                if f not in hardware.FAULTS:
                    raise SystemExit(f"unknown fault {f!r}; known: {', '.join(hardware.FAULTS)}")
        inventories = [Path(p).resolve() for p in args.inventory]
        try:
            state = cluster.up(args.name, args.subnet, args.nodes, profiles, captures, faults,
                               args.preinstall, inventories, os_name=args.os,
                               seed=args.seed.resolve() if args.seed else None)
        except BaseException:
            print(f"[simcluster] bring-up failed; removing what was created "
                  f"(python {sys.argv[0]} down --name {args.name})", file=sys.stderr)
            cluster.down(args.name)
            raise
        inv = inventories[0] if inventories else cluster.state_dir(args.name) / "inventory.yml"
        me = Path(__file__).resolve()
        print(f"Cluster '{args.name}' ({state['os']}) is up and left running:")
        for node_name, entry in state["nodes"].items():
            print(f"  {node_name:8} {entry['ip']:15} profile={entry['profile']}"
                  + (f" faults={','.join(entry['faults'])}" if entry["faults"] else ""))
        print(f"Inventory: {inv}")
        print("Use it:")
        print(f"  ansible all -i {inv} -m ping")
        print(f"  ansible-playbook -i {inv} site.yml")
        print(f"  ssh -i {state['ssh_key']} -o UserKnownHostsFile={cluster.known_hosts_path(state)} "
              f"root@{state['nodes']['node1']['ip']}")
        print(f"Inject a fault:  {sys.executable} {me} fault --name {args.name} node1 ecc-uncorrectable")
        print(f"Remove it:       {sys.executable} {me} down --name {args.name}")
        return 0
    if args.cmd == "down":
        names = [c["name"] for c in cluster.status(None)] if args.all else [args.name]
        for name in names:
            cluster.down(name)
            print(f"Cluster '{name}' removed.")
        return 0
    if args.cmd == "leftovers":
        found = cluster.leftovers(args.name)
        for item in found:
            print(item)
        if found:
            print(f"cluster '{args.name}': {len(found)} things left behind", file=sys.stderr)
        return 1 if found else 0
    if args.cmd == "status":
        info = cluster.status(args.name)
        if args.json:
            print(json.dumps(info, indent=2))
            return 0
        if not info:
            print("No simulated cluster.")
        for c in info:
            print(f"{c['name']}: {c['status']} ({'healthy' if c['healthy'] else 'NOT healthy'}), {c['os']}, "
                  f"subnet {c['subnet']}, inventory {c['inventory']}")
            for n in c["nodes"]:
                print(f"  {n['node']:8} {n['ip']:15} {n['profile']:22} "
                      f"{'running' if n['running'] else 'stopped'}"
                      + (f" faults={','.join(n['faults'])}" if n["faults"] else ""))
        return 0
    if args.cmd == "save":
        cluster.save_nodes(args.name, args.nodes, args.to.resolve())
        return 0
    if args.cmd == "fault":
        cluster.fault(args.name, args.node, args.fault)
        return 0
    if args.cmd == "clear":
        cluster.clear(args.name, args.node, args.fault)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
