"""Bring a named cluster up, take it down, inject faults: the orchestration.

State lives in .sim/<name>/state.json and is written before each resource is
created, so `down` can remove everything even after an `up` that failed
half-way (and the resources' names are derived from the cluster name as a
second line of defence).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import yaml

from . import hardware, image, manifest as manifest_lib, network, node as nodelib, packages, repo, util
from .util import STATE_ROOT, log, run

DEFAULT_NAME = "gfsim"
DEFAULT_SUBNET = "10.200.0.0/24"
DEFAULT_OS = "ubuntu22.04"
TORCH_LAYER_VERSION = "1"
TORCH_LAYER = util.CACHE_ROOT / f"layer-torch-v{TORCH_LAYER_VERSION}"
VENV = "/opt/gpufleet/venv"
SSH_READY_TIMEOUT = 120


def state_dir(name: str) -> Path:
    return STATE_ROOT / name


def load_state(name: str) -> dict | None:
    return util.read_json(state_dir(name) / "state.json")


def save_state(state: dict) -> None:
    util.write_json(state_dir(state["name"]) / "state.json", state)


# --- bring-up -----------------------------------------------------------------------

def parse_preinstall(items: list[str], manifest: manifest_lib.Manifest) -> list[dict]:
    """--preinstall values, checked against the node OS's manifest before anything is created:
    driver=VERSION[:open|proprietary] (packages from the repository), driver-run=VERSION[:FLAVOUR]
    (as NVIDIA's .run installer leaves it: files, no package), torch."""
    known = set(manifest.driver_upstreams())
    every = {u for m in manifest_lib.load_all().values() for u in m.driver_upstreams()}
    parsed = []
    for item in items:
        kind, _sep, value = item.partition("=")
        if kind == "torch" and not value:
            parsed.append({"kind": "torch"})
            continue
        if kind not in ("driver", "driver-run") or not value:
            raise SystemExit(f"--preinstall {item!r}: wanted driver=VERSION[:open|proprietary], "
                             "driver-run=VERSION[:open|proprietary] or torch")
        version, _sep, flavour = value.partition(":")
        flavour = flavour or "proprietary"
        if flavour not in manifest_lib.FLAVOURS:
            raise SystemExit(f"--preinstall {item!r}: flavour {flavour!r}; known: {', '.join(manifest_lib.FLAVOURS)}")
        if kind == "driver" and version not in known:
            raise SystemExit(f"--preinstall {item!r}: NVIDIA's {manifest.repository} repository (manifest "
                             f"{manifest.file.name}) has no driver {version}; it has: {', '.join(manifest.driver_upstreams())}")
        if kind == "driver-run" and version not in every:
            raise SystemExit(f"--preinstall {item!r}: {version} is no driver release the manifests cite; "
                             f"known: {', '.join(sorted(every))}")
        parsed.append({"kind": kind, "version": version, "flavour": flavour})
    return parsed


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_NODE = 16   # a booted node's systemd, journald, udev and logind hold about 7 inotify instances


def ensure_inotify_instances(new_nodes: int) -> None:
    """Raise the host's per-user inotify instance limit when the nodes would run out of it.

    Measured: with the default 128, node20 of a 20-node cluster logged "Failed to create inotify
    object: Too many open files" and its sshd never started. The limit is per user (every node runs as
    root), so nodes of other running clusters count too."""
    running = subprocess.run(["pgrep", "-c", "-x", "systemd-nspawn"], capture_output=True, text=True,
                             check=False).stdout.strip()
    needed = 128 + INOTIFY_PER_NODE * (new_nodes + int(running or 0))
    current = int(INOTIFY_INSTANCES.read_text())
    if current < needed:
        log(f"raising fs.inotify.max_user_instances from {current} to {needed} for {new_nodes} more node(s)")
        INOTIFY_INSTANCES.write_text(f"{needed}\n")


def up(name: str, subnet_cidr: str, count: int, profiles: dict[str, str], captures: dict[str, list[Path]],
       faults: dict[str, list[str]], preinstall: list[str], inventories: list[Path],
       os_name: str = DEFAULT_OS, seed: Path | None = None) -> dict:
    """Bring the cluster up. `seed` is a directory of saved node layers (save_nodes): each node named
    there starts from its saved upper layer (packages, files, identity) instead of a bare tree."""
    if os.geteuid() != 0:
        raise SystemExit("simcluster needs root (namespaces, mounts, systemd-nspawn)")
    try:
        os_manifest = manifest_lib.for_os(os_name)
    except manifest_lib.ManifestError as exc:
        raise SystemExit(str(exc)) from None
    preinstall_plan = parse_preinstall(preinstall, os_manifest)
    subnet = network.Subnet(subnet_cidr)
    node_names = [f"node{i}" for i in range(1, count + 1)]
    wanted = {"subnet": subnet_cidr, "nodes": node_names, "profiles": profiles,
              "captures": {k: [str(p) for p in v] for k, v in captures.items()},
              "faults": faults, "preinstall": sorted(preinstall), "os": os_name,
              "seed": str(seed) if seed else None}
    existing = load_state(name)
    if existing and existing.get("request") == wanted and healthy(existing):
        log(f"cluster {name} is already up")
        for inv in inventories:
            write_inventory(existing, inv)
        existing["inventories"] = sorted(set(existing.get("inventories", [])) | {str(p) for p in inventories})
        save_state(existing)
        return existing
    if existing or network.link_exists(network.bridge_name(name)):
        log(f"removing the previous (different or broken) cluster {name} first")
        down(name)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        wheels_future = pool.submit(image.build_wheels)
        rootfs = image.build_rootfs()
        fpr = repo.ensure_key()
        repo.ensure_standin_debs()
        repo.ensure_debian_mirror(rootfs, fpr)
        wheels = wheels_future.result()
    lowers = [rootfs]
    if any(p["kind"] == "torch" for p in preinstall_plan):
        lowers = [build_torch_layer(rootfs, wheels), rootfs]

    sdir = state_dir(name)
    sdir.mkdir(parents=True, exist_ok=True)
    base_url = f"http://{subnet.bridge_ip}:{repo.HTTP_PORT}"
    state = {"name": name, "request": wanted, "subnet": subnet_cidr, "bridge": network.bridge_name(name),
             "bridge_ip": subnet.bridge_ip, "repo_url": f"{base_url}/{repo.CUDA_REPO_SUBDIR}",
             "os": os_name, "cuda_repository": os_manifest.repository,
             "mirror_url": f"{base_url}/{'ubuntu' if os_manifest.os['id'] == 'ubuntu' else 'debian'}",
             "fingerprint": fpr, "nodes": {}, "http": None,
             "ssh_key": str(sdir / "ssh/id_ed25519"), "inventories": [str(p) for p in inventories],
             "lowers": [str(p) for p in lowers], "status": "starting"}
    save_state(state)

    key = Path(state["ssh_key"])
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gfsim-{name}", "-f", key])
    pubkey = key.with_suffix(".pub").read_text()

    ensure_inotify_instances(count)
    network.create_bridge(name, subnet)
    www = sdir / "www"
    repo.build_cluster_repo(www, state["repo_url"], fpr)
    pid = repo.start_http_server(www, subnet.bridge_ip, sdir / "http.log")
    state["http"] = {"pid": pid, "start": util.proc_start_time(pid)}
    save_state(state)

    hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" + "".join(
        f"{subnet.node_ip(i)}\t{n}\n" for i, n in enumerate(node_names, 1))
    keyring = (repo.KEY_DIR / "archive-keyring.gpg").read_bytes()
    for index, node_name in enumerate(node_names, 1):
        override = {hardware.classify_capture(p): p for p in captures.get(node_name, [])}
        hw = hardware.node_hardware(profiles.get(node_name, profiles.get("*", "hgx-h100")), override)
        netns = network.netns_name(name, node_name)
        entry = {"index": index, "ip": subnet.node_ip(index), "netns": netns, "profile": hw["profile"],
                 "faults": sorted(set(faults.get(node_name, []))), "supervisor": None}
        state["nodes"][node_name] = entry
        save_state(state)
        network.create_node_net(name, node_name, index, subnet)
        paths = nodelib.NodePaths(sdir, node_name)
        if seed is not None and (seed / node_name / "upper").is_dir():
            # Before the overlay is mounted: an upper layer must not change under a mounted overlay.
            copy_tree(seed / node_name / "upper", paths.upper)
        nodelib.mount_overlay(paths, lowers)
        nodelib.write_node_files(paths.merged, node=node_name, hosts=hosts, pubkey=pubkey,
                                 mirror_url=state["mirror_url"], keyring=keyring, hw=hw, faults=entry["faults"],
                                 os_info=os_manifest.os)
        spid, sstart = nodelib.start_supervisor(paths, nodelib.nspawn_command(paths, node_name, netns, wheels))
        entry["supervisor"] = {"pid": spid, "start": sstart}
        save_state(state)
    for node_name in node_names:
        apply_net_faults(state, node_name)
    # The host keys were generated into the nodes' trees before boot: trust exactly those from here on.
    known_hosts = write_known_hosts(state)

    # All nodes boot at once on the host's few CPUs (measured: with 32 nodes on 2 CPUs one node's sshd
    # missed a fixed 120 s deadline). The package work after boot runs a few nodes at a time, so it does
    # not compete with the nodes still booting, and the SSH deadline grows with the node count.
    heavy = threading.Semaphore(max(2, 2 * (os.cpu_count() or 1)))
    ssh_deadline = SSH_READY_TIMEOUT + 5 * max(0, count - 8)

    def ready(node_name: str) -> None:
        ip = state["nodes"][node_name]["ip"]
        nodelib.wait_ssh(key, ip, ssh_deadline, known_hosts)
        with heavy:
            # Fresh package lists from the local mirror, as a real server would have.
            ssh(state, node_name, "apt-get update -qq", check=True)
            for item in preinstall_plan:
                if item["kind"] == "driver":
                    install_driver(state, node_name, os_manifest, item["version"], item["flavour"])
                elif item["kind"] == "driver-run":
                    install_driver_runfile(state, node_name, item["version"], item["flavour"])

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(node_names)) as pool:
        for future in [pool.submit(ready, n) for n in node_names]:
            future.result()
    state["status"] = "up"
    save_state(state)
    for inv in [sdir / "inventory.yml", *inventories]:
        write_inventory(state, inv)
    log(f"cluster {name}: {count} node(s) ready in {time.monotonic() - started:.1f}s")
    return state


def copy_tree(source: Path, dest: Path) -> None:
    """An overlay layer, whole: owners, modes, xattrs (opaque directories) and whiteouts (0/0 devices)."""
    dest.mkdir(parents=True, exist_ok=True)
    run(["cp", "-a", "--reflink=auto", f"{source}/.", str(dest)])


def save_nodes(name: str, nodes: list[str], dest: Path) -> None:
    """Save the named nodes' upper layers (what they changed over the cached tree) into dest/<node>/upper,
    for `up(seed=dest)`. The nodes are flushed first; the copy is taken while they run, so it holds what
    was on disk then (a quiet node: call it between runs, not during one)."""
    state = load_state(name)
    if not state:
        raise SystemExit(f"no cluster {name}")
    for node_name in nodes:
        ssh(state, node_name, "sync", check=True, timeout=120)
        copy_tree(nodelib.NodePaths(state_dir(name), node_name).upper, dest / node_name / "upper")


def install_driver(state: dict, node_name: str, manifest: manifest_lib.Manifest, version: str, flavour: str) -> None:
    """As NVIDIA documents it: fetch cuda-keyring from the repository, dpkg -i, update, install the
    flavour's driver packages (every one pinned to the version, so an older release stays put)."""
    keyring_url = f"{state['repo_url']}/{manifest.repository}/x86_64/cuda-keyring_{manifest.keyring['version']}_all.deb"
    pins = " ".join(manifest.preinstall_pins(version, flavour))
    auto = " ".join(manifest.preinstall_auto(version, flavour))
    ssh(state, node_name,
        f"python3 -c 'import urllib.request as u; u.urlretrieve(\"{keyring_url}\", \"/tmp/cuda-keyring.deb\")' && "
        "dpkg -i /tmp/cuda-keyring.deb >/dev/null && rm -f /tmp/cuda-keyring.deb && apt-get update -qq && "
        f"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {pins} >/dev/null && "
        f"apt-mark auto {auto} >/dev/null",
        check=True)


RUNFILE_SCRIPT = """set -e
# What NVIDIA-Linux-x86_64-{version}.run leaves behind, as far as the roles look: nvidia-smi
# and the module of the chosen flavour, the installer's own tools and log; no dpkg package.
mkdir -p {lib} /lib/modules/$(uname -r)/kernel/drivers/video /var/log
printf '%s\n' '#!/bin/sh' 'exec /usr/bin/python3 /usr/lib/gpufleet-sim/standins/nvidia_smi.py "$@"' > /usr/bin/nvidia-smi
chmod 755 /usr/bin/nvidia-smi
echo {version} > {userspace}
echo '{version} {flavour}' > {kmod}
: > /lib/modules/$(uname -r)/kernel/drivers/video/nvidia.ko
for tool in nvidia-installer nvidia-uninstall; do
  printf '%s\n' '#!/bin/sh' "echo '$tool: gpufleet simulator stand-in for the {version} .run installer' >&2" 'exit 1' > /usr/bin/$tool
  chmod 755 /usr/bin/$tool
done
echo 'nvidia-installer log file (gpufleet simulator stand-in): installed {version} ({flavour} kernel modules)' \
  > /var/log/nvidia-installer.log
"""


def install_driver_runfile(state: dict, node_name: str, version: str, flavour: str) -> None:
    ssh(state, node_name, RUNFILE_SCRIPT.format(
        version=version, flavour=flavour, lib=packages.SIM_LIB, userspace=packages.USERSPACE_VERSION,
        kmod=packages.KERNEL_MODULE), check=True)


def build_torch_layer(rootfs: Path, wheels: Path) -> Path:
    """An extra lower layer with /opt/gpufleet/venv holding torch: built once, free when warm."""
    if (TORCH_LAYER / ".gpufleet-complete").exists():
        return TORCH_LAYER
    with util.file_lock(util.CACHE_ROOT / ".torch-layer.lock"):
        if (TORCH_LAYER / ".gpufleet-complete").exists():
            return TORCH_LAYER
        log("building the torch venv layer (once)")
        staging = TORCH_LAYER.with_name(TORCH_LAYER.name + ".building")
        if staging.exists():
            shutil.rmtree(staging)
        work = TORCH_LAYER.with_name(TORCH_LAYER.name + ".work")
        merged = TORCH_LAYER.with_name(TORCH_LAYER.name + ".merged")
        for d in (staging, work, merged):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={rootfs},upperdir={staging},workdir={work}", merged])
        try:
            image.nspawn_run(merged, f"python3 -m venv {VENV} && {VENV}/bin/pip install -q --no-index "
                             f"--find-links /wheels torch==2.13.0 numpy=={image.NUMPY_VERSION}", bind_ro=[(wheels, "/wheels")])
        finally:
            run(["umount", merged])
        shutil.rmtree(work, ignore_errors=True)
        merged.rmdir()
        (staging / ".gpufleet-complete").unlink(missing_ok=True)
        os.rename(staging, TORCH_LAYER)
        (TORCH_LAYER / ".gpufleet-complete").write_text("ok\n")
    return TORCH_LAYER


def healthy(state: dict) -> bool:
    if state.get("status") != "up":
        return False
    http = state.get("http") or {}
    if not util.pid_alive(http.get("pid", 0), http.get("start")):
        return False
    for entry in state["nodes"].values():
        sup = entry.get("supervisor") or {}
        if not util.pid_alive(sup.get("pid", 0), sup.get("start")):
            return False
    return True


# --- access -------------------------------------------------------------------------

def ssh(state: dict, node_name: str, command: str, check: bool = False, timeout: int = 600):
    proc = subprocess.run(nodelib.ssh_command(Path(state["ssh_key"]), state["nodes"][node_name]["ip"], command,
                                              known_hosts_path(state)),
                          capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{node_name}: `{command}` failed rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def known_hosts_path(state: dict) -> Path:
    return state_dir(state["name"]) / "known_hosts"


def write_known_hosts(state: dict) -> Path:
    """The host keys the nodes were given at bring-up, by address and name: the only keys the
    inventory trusts, so Ansible checks host keys against the sim exactly as against real servers."""
    lines = []
    for node_name, entry in state["nodes"].items():
        pub = nodelib.NodePaths(state_dir(state["name"]), node_name).upper / "etc/ssh/ssh_host_ed25519_key.pub"
        try:
            key_type, key = pub.read_text().split()[:2]
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{node_name}: no usable SSH host key at {pub} ({exc}); "
                               f"bring the cluster up again (simcluster.py up --name {state['name']})") from exc
        lines.append(f"{entry['ip']},{node_name} {key_type} {key}\n")
    path = known_hosts_path(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


def inventory_data(state: dict) -> dict:
    hosts = {n: {"ansible_host": e["ip"]} for n, e in state["nodes"].items()}
    repo_url = state["repo_url"]
    group_vars = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": state["ssh_key"],
        # Checked against the sim's own known_hosts (write_known_hosts), never switched off.
        "ansible_ssh_common_args": f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={known_hosts_path(state)}",
        "ansible_python_interpreter": "/usr/bin/python3",
        "gpufleet_sim": True,
        "gpufleet_cluster_name": state["name"],
        # The GPU side of the built-in training profile applies as it is; the host side cannot:
        # the nodes are containers on a 2-core machine with a veth, no NVMe, and no InfiniBand
        # sysfs before the rdma role installs ibstat.
        "gpufleet_profile": "sim-training",
        "gpufleet_custom_profiles": {
            "sim-training": {
                "extends": "training",
                "require_nvme": False,
                "min_nic_gbps": None,
                "min_ram_per_vram": None,
                "min_cpu_cores_per_gpu": None,
                "require_rdma_multinode": False,
            }
        },
        "gpufleet_stack_request": {"cuda": "12.2", "torch": "2.1.2"},
        "gpufleet_cuda_repo_url": repo_url,
        "gpufleet_cuda_repo_key_url": (f"{repo_url}/{state.get('cuda_repository', 'debian12')}/x86_64/"
                                       f"{repo.key_short_id(state['fingerprint'])}.pub"),
        "gpufleet_cuda_repo_key_fingerprint": state["fingerprint"],
        "gpufleet_debian_mirror_url": state["mirror_url"],
        "gpufleet_pytorch_wheel_dir": nodelib.WHEELS_MOUNT,
        "gpufleet_pytorch_override": {"version": "2.13.0", "variant": "cpu"},
        "gpufleet_pytorch_numpy_version": image.NUMPY_VERSION,
        "gpufleet_pci_sysfs_path": "/" + hardware.PCI_TREE,
        # The stand-in dcgmi has captured output for level 1 only (tests/fixtures/diagnostics/SOURCES.md).
        "gpu_diagnostics_level": 1,
    }
    return {"all": {"children": {"gpu_nodes": {"hosts": hosts, "vars": group_vars}}}}


def write_inventory(state: dict, path: Path) -> None:
    write_known_hosts(state)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Simulated cluster '{state['name']}' written by tests/sim/simcluster.py.\n"
              f"# Remove it with: python tests/sim/simcluster.py down --name {state['name']}\n")
    path.write_text(header + yaml.safe_dump(inventory_data(state), sort_keys=False, default_flow_style=False))


# --- faults ---------------------------------------------------------------------------

def apply_net_faults(state: dict, node_name: str) -> None:
    entry = state["nodes"][node_name]
    subnet = network.Subnet(state["subnet"])
    faults = set(entry["faults"])
    if "link-cut" in faults:
        network.apply_link_cut(entry["netns"], subnet)
    else:
        network.clear_link_cut(entry["netns"])
    if "link-slow" in faults:
        network.apply_link_slow(entry["netns"])
    else:
        network.clear_link_slow(entry["netns"])


def set_faults(name: str, node_name: str, faults: list[str]) -> None:
    state = load_state(name)
    if not state or node_name not in state.get("nodes", {}):
        raise SystemExit(f"no node {node_name} in cluster {name}")
    unknown = set(faults) - set(hardware.FAULTS)
    if unknown:
        raise SystemExit(f"unknown fault(s) {', '.join(sorted(unknown))}; known: {', '.join(hardware.FAULTS)}")
    state["nodes"][node_name]["faults"] = sorted(set(faults))
    save_state(state)
    hardware.set_faults(nodelib.NodePaths(state_dir(name), node_name).merged, faults)
    apply_net_faults(state, node_name)


def fault(name: str, node_name: str, fault_name: str) -> None:
    state = load_state(name) or {"nodes": {}}
    current = state["nodes"].get(node_name, {}).get("faults", [])
    set_faults(name, node_name, [*current, fault_name])


def clear(name: str, node_name: str, fault_name: str | None) -> None:
    state = load_state(name) or {"nodes": {}}
    current = state["nodes"].get(node_name, {}).get("faults", [])
    set_faults(name, node_name, [] if fault_name is None else [f for f in current if f != fault_name])


# --- tear-down ------------------------------------------------------------------------

def _our_stray_pids(sdir: Path) -> list[int]:
    """Processes whose command line names this cluster's state directory: only ours,
    found when an interrupted `up` died before recording a PID."""
    needle = str(sdir).encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def down(name: str) -> None:
    sdir = state_dir(name)
    state = load_state(name) or {"nodes": {}}
    # Ask every container to power off at once, then wait: a few seconds in total.
    recorded = []
    for node_name, entry in state.get("nodes", {}).items():
        sup = entry.get("supervisor")
        if sup:
            recorded.append((sup["pid"], sup.get("start")))
        pid = nodelib.nspawn_pid(nodelib.NodePaths(sdir, node_name))
        if pid:
            recorded.append(pid)
    if state.get("http"):
        recorded.append((state["http"]["pid"], state["http"].get("start")))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(recorded))) as pool:
        list(pool.map(lambda p: util.terminate_pid(p[0], p[1], grace=25), recorded))
    if sdir.exists():
        for pid in _our_stray_pids(sdir):
            util.terminate_pid(pid, util.proc_start_time(pid), grace=10)
    # Overlays (recorded or not) under the state directory.
    mounts = run(["findmnt", "-rn", "-o", "TARGET"], capture=True).stdout.split()
    for target in sorted((m for m in mounts if m.startswith(str(sdir) + "/")), reverse=True):
        if run(["umount", target], check=False, capture=True).returncode != 0:
            run(["umount", "-l", target], check=False, capture=True)
    network.destroy(name)
    for inv in state.get("inventories", []):
        Path(inv).unlink(missing_ok=True)
    if sdir.exists():
        shutil.rmtree(sdir)


def leftovers(name: str) -> list[str]:
    """Everything of cluster `name` the host still shows: namespaces, links, mounts, processes, state.

    Empty after a clean `down`; the integration tests and molecule's destroy both check it."""
    found = []
    netns = run(["ip", "netns", "list"], check=False, capture=True).stdout
    found += [f"netns {line}" for line in netns.splitlines() if line.startswith(network.netns_prefix(name))]
    links = run(["ip", "-o", "link", "show"], check=False, capture=True).stdout
    tag = network.short_id(name)
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines() if tag in line.split(":")[1]]
    mounts = run(["findmnt", "-rn", "-o", "TARGET"], check=False, capture=True).stdout
    sdir = str(state_dir(name))
    found += [f"mount {m}" for m in mounts.split() if m.startswith(sdir)]
    ps = run(["ps", "-eo", "pid,stat,args"], check=False, capture=True).stdout
    found += [f"process {line.strip()}" for line in ps.splitlines()
              if sdir in line and " Z" not in line and "ps -eo" not in line]
    if Path(sdir).exists():
        found.append(f"state dir {sdir}")
    return found


def status(name: str | None) -> list[dict]:
    names = [name] if name else sorted(p.name for p in STATE_ROOT.glob("*") if (p / "state.json").exists())
    result = []
    for n in names:
        state = load_state(n)
        if not state:
            continue
        nodes = []
        for node_name, entry in state["nodes"].items():
            sup = entry.get("supervisor") or {}
            nodes.append({"node": node_name, "ip": entry["ip"], "profile": entry["profile"],
                          "faults": entry["faults"],
                          "running": util.pid_alive(sup.get("pid", 0), sup.get("start"))})
        result.append({"name": n, "subnet": state["subnet"], "status": state.get("status"),
                       "os": state.get("os", DEFAULT_OS),
                       "healthy": healthy(state), "inventory": str(state_dir(n) / "inventory.yml"),
                       "nodes": nodes})
    return result
