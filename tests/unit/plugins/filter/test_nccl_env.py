"""nccl_env: NCCL settings derived from the real ibstat and topo captures."""

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from fixtures_path import FIXTURES
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_env import FilterModule, nccl_env
from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import parse_ibstat
from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_env import classify_ports
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import (
    parse_nvidia_smi_topo,
)

REPO = Path(__file__).resolve().parents[4]
IB8_BOND = "ibstat/h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt"
IB8_ETH_DOWN = "ibstat/h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt"
ROCE12 = "ibstat/h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt"
ROCE_DOWN = "ibstat/h100-cx7-400-roce-2-ports-down-disabled.txt"
AZURE_IBPANIC = "ibstat/a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt"
STATE_DOWN_LINKUP = "ibstat/cx6-vf-state-down-physical-linkup-network-operator-issue249.txt"
HGX_TOPO = "topo/hgx-h100-8gpu-nv18-8nic-pix-2numa-sglang-issue30401.txt"
DELLA_TOPO = "topo/della-a100-pcie-2gpu-2nic-sys-no-nvlink.txt"


def read(rel):
    return (FIXTURES / rel).read_text()


def rdma(rel, peermem=True):
    return {"cas": parse_ibstat(read(rel)), "peermem_loaded": peermem}


def hca_list(result):
    value = result["env"]["NCCL_IB_HCA"]
    assert value.startswith("="), "exact-match prefix keeps mlx5_1 from matching mlx5_10"
    return value[1:].split(",")


def active_by_ibstat(rel, layer):
    return sorted(
        "%s:%s" % (ca["ca"], p["port"])
        for ca in parse_ibstat(read(rel))
        for p in ca["ports"]
        if p["state"] == "Active" and p["physical_state"] == "LinkUp" and p["link_layer"] == layer
    )


def test_ib_node_lists_exactly_the_active_ib_hcas_and_leaves_the_bf3_bond_out():
    result = nccl_env(rdma(IB8_BOND), topology=parse_nvidia_smi_topo(read(HGX_TOPO)), socket_ifname="eth0")
    assert result["transport"] == "ib"
    assert sorted(hca_list(result)) == active_by_ibstat(IB8_BOND, "InfiniBand")
    assert "mlx5_bond_0:1" not in hca_list(result)
    assert any(e["ca"] == "mlx5_bond_0" and "storage" in e["reason"] for e in result["excluded"])
    assert "NCCL_IB_GID_INDEX" not in result["env"]
    assert result["env"]["NCCL_SOCKET_IFNAME"] == "eth0"


def test_gpu_affinity_order_follows_topo_pix_pairs():
    topo = parse_nvidia_smi_topo(read(HGX_TOPO))
    cas = [{"ca": "mlx5_%d" % i, "ca_type": "MT4129",
            "ports": [{"port": 1, "state": "Active", "physical_state": "LinkUp", "rate_gbps": 400,
                       "link_layer": "InfiniBand"}]} for i in (7, 3, 0, 5, 1, 6, 2, 4)]
    result = nccl_env({"cas": cas, "peermem_loaded": True}, topology=topo)
    assert hca_list(result) == ["mlx5_%d:1" % i for i in range(8)]
    assert [p["distance"] for p in result["gpu_hca_pairs"]] == ["PIX"] * 8
    # every GPU sits PIX to its HCA, so GDR can stay at PIX
    assert result["env"]["NCCL_NET_GDR_LEVEL"] == "PIX"


def test_affinity_order_on_pcie_box_with_node_local_nics():
    topo = parse_nvidia_smi_topo(read(DELLA_TOPO))
    names = sorted({n for g in topo["gpus"] for n in g["nics"]})
    cas = [{"ca": n, "ca_type": "MT4123", "ports": [{"port": 1, "state": "Active",
            "physical_state": "LinkUp", "rate_gbps": 200, "link_layer": "InfiniBand"}]} for n in names]
    result = nccl_env({"cas": cas, "peermem_loaded": True}, topology=topo)
    assert sorted(hca_list(result)) == ["%s:1" % n for n in names]
    nearest0 = topo["gpus"][0]["nearest_nics"][0]
    assert hca_list(result)[0] == nearest0 + ":1"
    # never above PHB: GDR across the CPU interconnect is slower than staging
    assert result["env"]["NCCL_NET_GDR_LEVEL"] in ("PIX", "PXB", "PHB")


def test_ib_ports_down_are_excluded_and_ethernet_down_ports_are_not_fabric():
    result = nccl_env(rdma(IB8_ETH_DOWN), socket_ifname="eth0")
    assert result["transport"] == "ib"
    assert sorted(hca_list(result)) == active_by_ibstat(IB8_ETH_DOWN, "InfiniBand")
    assert len(hca_list(result)) == 8
    down_eth = {"%s:%s" % (ca["ca"], p["port"]) for ca in parse_ibstat(read(IB8_ETH_DOWN))
                for p in ca["ports"] if p["state"] == "Down"}
    assert len(down_eth) == 3
    assert not down_eth & set(hca_list(result))


def test_roce_node_uses_the_400g_cx7_group_and_sets_a_gid_index_with_a_warning():
    result = nccl_env(rdma(ROCE12), socket_ifname="eth0")
    assert result["transport"] == "roce"
    cx7 = sorted("%s:1" % ca["ca"] for ca in parse_ibstat(read(ROCE12)) if ca["ca_type"] == "MT4129")
    assert len(cx7) == 8
    assert sorted(hca_list(result)) == cx7
    assert result["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert result["gid_index_source"] == "default"
    assert any("GID" in w and "3" in w for w in result["warnings"])


def test_roce_gid_index_comes_from_the_gid_table_when_readable():
    # The RoCE bond ibv_devinfo shows in tests/fixtures/ibv_devinfo/cx7-roce-bond-h20-excerpt-deepep-issue137.txt.
    cas = [{"ca": "mlx5_bond_0", "ca_type": "MT4129", "ports": [
        {"port": 1, "state": "Active", "physical_state": "LinkUp", "rate_gbps": 400, "link_layer": "Ethernet"}]}]
    tables = {"mlx5_bond_0:1": [
        {"index": 0, "gid": "fe80:0000:0000:0000:0000:00ff:fe00:0001", "type": "IB/RoCE v1"},
        {"index": 1, "gid": "fe80:0000:0000:0000:0000:00ff:fe00:0001", "type": "RoCE v2"},
        {"index": 2, "gid": "0000:0000:0000:0000:0000:ffff:0a00:0005", "type": "IB/RoCE v1"},
        {"index": 5, "gid": "0000:0000:0000:0000:0000:ffff:0a00:0005", "type": "RoCE v2"},
    ]}
    result = nccl_env({"cas": cas, "peermem_loaded": False}, gid_tables=tables, socket_ifname="bond0")
    assert result["transport"] == "roce"
    assert hca_list(result) == ["mlx5_bond_0:1"]
    assert result["env"]["NCCL_IB_GID_INDEX"] == "5"
    assert result["gid_index_source"] == "gid_table"
    assert "NCCL_NET_GDR_LEVEL" not in result["env"]
    assert any("nvidia_peermem" in w for w in result["warnings"])


def test_roce_ports_down_are_left_out_and_named():
    result = nccl_env(rdma(ROCE_DOWN), socket_ifname="eth0")
    down = sorted("%s:%s" % (ca["ca"], p["port"]) for ca in parse_ibstat(read(ROCE_DOWN))
                  for p in ca["ports"] if p["state"] != "Active")
    assert len(down) == 2
    assert not set(down) & set(hca_list(result))
    assert any(all(d in w for d in down) for w in result["warnings"])


def test_ibpanic_capture_still_yields_the_eight_parsed_hcas():
    result = nccl_env(rdma(AZURE_IBPANIC), socket_ifname="eth0")
    assert len(hca_list(result)) == 8
    assert "mlx5_8:1" not in hca_list(result)


@pytest.mark.parametrize("rel", [STATE_DOWN_LINKUP, None])
def test_no_active_rdma_falls_back_to_sockets_with_a_cost_warning(rel):
    info = rdma(rel, peermem=False) if rel else {"cas": [], "peermem_loaded": False}
    nics = [{"name": "lo", "link": True, "speed_mbps": None},
            {"name": "eno1", "link": True, "speed_mbps": 25000}]
    result = nccl_env(info, nics=nics)
    assert result["transport"] == "socket"
    assert result["env"] == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eno1"}
    assert any("sockets" in w and "eno1" in w and "25000" in w for w in result["warnings"])


def test_operator_values_override_and_null_removes():
    result = nccl_env(rdma(IB8_BOND), socket_ifname="eth0",
                      overrides={"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_DEBUG": "WARN",
                                 "NCCL_NET_GDR_LEVEL": None, "NCCL_IB_PCI_RELAXED_ORDERING": 1})
    assert result["env"]["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert result["env"]["NCCL_DEBUG"] == "WARN"
    assert result["env"]["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    assert "NCCL_NET_GDR_LEVEL" not in result["env"]


def test_operator_hca_list_replaces_the_auto_rule():
    result = nccl_env(rdma(IB8_BOND), hcas=["mlx5_bond_0"])
    assert hca_list(result) == ["mlx5_bond_0:1"]
    assert result["transport"] == "roce"


def test_classify_rule_on_every_capture_keeps_slower_types_out():
    for rel in (ROCE12, IB8_ETH_DOWN, IB8_BOND):
        ports = classify_ports(parse_ibstat(read(rel)))
        compute_types = {p["ca_type"] for p in ports if p["role"] == "compute"}
        assert compute_types == {"MT4129"}, rel


def render_nccl_conf(derived):
    """/etc/nccl.conf as the nccl_config role writes it: the role's template, rendered by Ansible."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    try:
        from ansible.template import trust_as_template
    except ImportError:  # ansible-core < 2.19 trusts every template
        def trust_as_template(text):
            return text
    source = (REPO / "roles" / "nccl_config" / "templates" / "etc" / "nccl.conf.j2").read_text()
    templar = Templar(loader=DataLoader(), variables={"__nccl_config": derived, "ansible_managed": "managed"})
    return templar.template(trust_as_template(source))


def test_the_roles_template_writes_the_derived_env_and_the_filter_is_registered():
    result = nccl_env(rdma(IB8_BOND), socket_ifname="eth0")
    lines = render_nccl_conf(result).splitlines()
    assert lines[:3] == ["#", "# managed", "#"]  # ansible_managed | comment
    assert "NCCL_IB_HCA=" + result["env"]["NCCL_IB_HCA"] in lines
    assert [line for line in lines if not line.startswith("#")] == ["%s=%s" % kv for kv in sorted(result["env"].items())]
    assert FilterModule().filters()["nccl_env"] is nccl_env
    with pytest.raises(AnsibleFilterError):
        nccl_env(["not", "a", "dict"])


def test_gid_lines_from_sysfs_pick_the_roce_v2_ipv4_entry():
    text = "\n".join([
        "mlx5_0:1\t0\tfe80:0000:0000:0000:a288:c2ff:fe00:0001\tIB/RoCE v1",
        "mlx5_0:1\t1\tfe80:0000:0000:0000:a288:c2ff:fe00:0001\tRoCE v2",
        "mlx5_0:1\t2\t0000:0000:0000:0000:0000:ffff:0a00:0101\tIB/RoCE v1",
        "mlx5_0:1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0101\tRoCE v2",
        "mlx5_0:1\t4\t0000:0000:0000:0000:0000:0000:0000:0000\t",
        "mlx5_3:1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0201\tRoCE v2",
    ])
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_env import parse_gid_lines
    tables = parse_gid_lines(text)
    assert [g["index"] for g in tables["mlx5_0:1"]] == [0, 1, 2, 3]
    result = nccl_env(rdma(ROCE12), gid_tables=text, socket_ifname="eth0")
    assert result["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert result["gid_index_source"] == "gid_table"
    assert not any("GID" in w for w in result["warnings"])
