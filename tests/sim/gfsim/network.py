"""Bridge, namespaces and veths of one cluster, and the network faults.

Interface names are derived from a hash of the cluster name (IFNAMSIZ is 15),
so `down` can find and remove them even when the state file is lost.
"""

from __future__ import annotations

import hashlib
import ipaddress

from .util import run

NODE_HOST_OFFSET = 10        # node1 is .11, node2 .12, ...
DEAD_END_OFFSET = 254        # default route target: an address nothing answers on


def short_id(cluster: str) -> str:
    return hashlib.sha1(cluster.encode()).hexdigest()[:6]


def bridge_name(cluster: str) -> str:
    return f"gfb{short_id(cluster)}"


def veth_name(cluster: str, index: int) -> str:
    return f"gfv{short_id(cluster)}n{index}"


def netns_name(cluster: str, node: str) -> str:
    return f"gfsim-{cluster}-{node}"


def netns_prefix(cluster: str) -> str:
    return f"gfsim-{cluster}-"


class Subnet:
    def __init__(self, cidr: str):
        self.net = ipaddress.ip_network(cidr, strict=True)
        if self.net.prefixlen > 24:
            raise ValueError(f"subnet {cidr}: need at least a /24")

    def host(self, offset: int) -> str:
        return str(self.net.network_address + offset)

    @property
    def bridge_ip(self) -> str:
        return self.host(1)

    @property
    def dead_end(self) -> str:
        return self.host(DEAD_END_OFFSET)

    def node_ip(self, index: int) -> str:
        return self.host(NODE_HOST_OFFSET + index)

    @property
    def prefixlen(self) -> int:
        return self.net.prefixlen


def link_exists(name: str) -> bool:
    return run(["ip", "link", "show", "dev", name], check=False, capture=True).returncode == 0


def existing_netns() -> list[str]:
    out = run(["ip", "netns", "list"], capture=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def address_in_use(ip: str) -> str | None:
    """Name of the host interface that already holds ip, if any."""
    out = run(["ip", "-o", "-4", "addr", "show"], capture=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if fields[3].split("/")[0] == ip:
            return fields[1]
    return None


def create_bridge(cluster: str, subnet: Subnet) -> None:
    br = bridge_name(cluster)
    if not link_exists(br):
        holder = address_in_use(subnet.bridge_ip)
        if holder:
            raise RuntimeError(f"{subnet.bridge_ip} is already on {holder}: "
                               "another cluster uses this subnet; pick another --subnet")
        run(["ip", "link", "add", br, "type", "bridge"])
        run(["ip", "addr", "add", f"{subnet.bridge_ip}/{subnet.prefixlen}", "dev", br])
    run(["ip", "link", "set", br, "up"])


def create_node_net(cluster: str, node: str, index: int, subnet: Subnet) -> str:
    """Namespace + veth: eth0 inside with the node address, its peer on the bridge."""
    ns = netns_name(cluster, node)
    veth = veth_name(cluster, index)
    if ns not in existing_netns():
        run(["ip", "netns", "add", ns])
    if not link_exists(veth):
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge_name(cluster), "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    addr = f"{subnet.node_ip(index)}/{subnet.prefixlen}"
    present = run(["ip", "-n", ns, "-o", "-4", "addr", "show", "dev", "eth0"], capture=True).stdout
    if addr not in present:
        run(["ip", "-n", ns, "addr", "add", addr, "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    # A default route fills ansible_default_ipv4; its gateway is an address
    # nobody holds and the host does not forward, so nothing leaves the machine.
    run(["ip", "-n", ns, "route", "replace", "default", "via", subnet.dead_end])
    return ns


def destroy(cluster: str, node_count_hint: int = 0) -> None:
    """Remove every namespace, veth and the bridge of a cluster (idempotent)."""
    for ns in existing_netns():
        if ns.startswith(netns_prefix(cluster)):
            run(["ip", "netns", "delete", ns], check=False)
    # Deleting a namespace deletes its eth0 and with it the veth peer; sweep any
    # leftover host-side veth whose namespace was never created.
    out = run(["ip", "-o", "link", "show"], capture=True).stdout
    prefix = f"gfv{short_id(cluster)}n"
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefix):
            run(["ip", "link", "delete", name], check=False)
    if link_exists(bridge_name(cluster)):
        run(["ip", "link", "delete", bridge_name(cluster)], check=False)


# --- network faults, applied inside the node's namespace -----------------------

IPT_CHAIN = "GPUFLEET_SIM"


def apply_link_cut(ns: str, subnet: Subnet) -> None:
    """Cut the data link to the other nodes; the controller (bridge address) still reaches it,
    so Ansible can run and report what the cut breaks (rendezvous, NCCL/gloo traffic)."""
    clear_link_cut(ns)
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-N", IPT_CHAIN])
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-A", IPT_CHAIN, "-s", subnet.bridge_ip, "-j", "RETURN"])
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-A", IPT_CHAIN, "-d", subnet.bridge_ip, "-j", "RETURN"])
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-A", IPT_CHAIN, "-j", "DROP"])
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-I", "INPUT", "-i", "eth0", "-j", IPT_CHAIN])
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-I", "OUTPUT", "-o", "eth0", "-j", IPT_CHAIN])


def clear_link_cut(ns: str) -> None:
    for chain_hook in (["INPUT", "-i", "eth0"], ["OUTPUT", "-o", "eth0"]):
        while run(["ip", "netns", "exec", ns, "iptables", "-w", "-D", chain_hook[0], *chain_hook[1:],
                   "-j", IPT_CHAIN], check=False, capture=True).returncode == 0:
            pass
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-F", IPT_CHAIN], check=False, capture=True)
    run(["ip", "netns", "exec", ns, "iptables", "-w", "-X", IPT_CHAIN], check=False, capture=True)


def apply_link_slow(ns: str, rate: str = "10mbit") -> None:
    """netem is missing on this kernel; a token bucket on eth0 makes the link slow."""
    run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root",
         "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"])


def clear_link_slow(ns: str) -> None:
    run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"], check=False, capture=True)
