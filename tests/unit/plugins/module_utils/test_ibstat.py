"""The ibstat parser and the IB sysfs reader, on the real captures."""

from collections import Counter
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils.ibstat import (
    active_ports,
    ibstat_errors,
    normalize_guid,
    normalize_phys_state,
    normalize_state,
    parse_ibstat,
    parse_ibstat_with_errors,
    read_ib_sysfs,
    roce_gid_index,
)

_REPO = Path(__file__).resolve().parents[4]

try:
    from tests.fixtures_path import FIXTURES
except ImportError:  # pragma: no cover - before tests/fixtures_path.py existed
    FIXTURES = _REPO.parent / "shared" / "fixtures"

IBSTAT = FIXTURES / "ibstat"
IBV = FIXTURES / "ibv_devinfo"


def _read(path):
    return path.read_text(encoding="utf-8")


def _ports(cas):
    return {(ca["ca"], p["port"]): p for ca in cas for p in ca["ports"]}


# One row per ibstat capture (SOURCES.md, "ibstat/"): CA count, Counter of
# (ca_type, state, physical_state, rate, link_layer) over ports, the ports that are not active,
# the number of error lines.
IBSTAT_CASES = {
    "h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt": dict(
        cas=12,
        ports=Counter({("MT4129", "Active", "LinkUp", 400, "Ethernet"): 8,
                       ("MT4125", "Active", "LinkUp", 100, "Ethernet"): 4}),
        not_active=set(),
        errors=0,
    ),
    "h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt": dict(
        cas=12,
        ports=Counter({("MT4129", "Active", "LinkUp", 400, "InfiniBand"): 8,
                       ("MT4125", "Active", "LinkUp", 100, "Ethernet"): 1,
                       ("MT4125", "Down", "Disabled", 40, "Ethernet"): 3}),
        not_active={"mlx5_2", "mlx5_7", "mlx5_8"},
        errors=0,
    ),
    "h100-cx7-400-roce-2-ports-down-disabled.txt": dict(
        cas=12,
        ports=Counter({("MT4129", "Active", "LinkUp", 400, "Ethernet"): 6,
                       ("MT4129", "Down", "Disabled", 40, "Ethernet"): 2,
                       ("MT4125", "Active", "LinkUp", 100, "Ethernet"): 4}),
        not_active={"mlx5_5", "mlx5_11"},
        errors=0,
    ),
    "h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt": dict(
        cas=9,
        ports=Counter({("MT4129", "Active", "LinkUp", 400, "InfiniBand"): 8,
                       ("MT41692", "Active", "LinkUp", 200, "Ethernet"): 1}),
        not_active=set(),
        errors=0,
    ),
    "a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt": dict(
        cas=8,
        ports=Counter({("MT4124", "Active", "LinkUp", 200, "InfiniBand"): 8}),
        not_active=set(),
        errors=1,
    ),
    "cx6-vf-state-down-physical-linkup-network-operator-issue249.txt": dict(
        cas=1,
        ports=Counter({("MT4124", "Down", "LinkUp", 200, "InfiniBand"): 1}),
        not_active={"mlx5_7"},
        errors=0,
    ),
}
# The ibstatus capture stays in the directory (the shared capture set); nothing parses ibstatus output.
IBSTATUS_CASES = {"ibstatus-a100-azure-cx6-vf-hdr200-x8.txt"}


def test_every_ibstat_capture_is_covered():
    on_disk = {p.name for p in IBSTAT.glob("*.txt")}
    assert on_disk, IBSTAT
    assert on_disk == set(IBSTAT_CASES) | IBSTATUS_CASES


@pytest.mark.parametrize("name", sorted(IBSTAT_CASES))
def test_parse_ibstat_captures(name):
    want = IBSTAT_CASES[name]
    cas, errors = parse_ibstat_with_errors(_read(IBSTAT / name))
    assert len(cas) == want["cas"]
    got = Counter(
        (ca["ca_type"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"])
        for ca in cas
        for p in ca["ports"]
    )
    assert got == want["ports"]
    assert {a["ca"] for a in cas} - {a["ca"] for a in active_ports(cas)} == want["not_active"]
    assert len(errors) == want["errors"]
    for ca in cas:
        assert ca["number_of_ports"] == len(ca["ports"]) == 1
        assert ca["firmware"] and ca["node_guid"].startswith("0x") and len(ca["node_guid"]) == 18
        assert isinstance(ca["ports"][0]["rate_gbps"], int)


def test_ibstat_first_ca_exact_shape():
    cas = parse_ibstat(_read(IBSTAT / "h100-12hca-cx7-400-roce-cx6dx-100-eth-all-active.txt"))
    first = cas[0]
    assert first["ca"] == "mlx5_0"
    assert first["ca_type"] == "MT4129"
    assert first["firmware"] == "28.39.1002"
    port = first["ports"][0]
    assert {k: port[k] for k in ("port", "state", "physical_state", "rate_gbps", "link_layer")} == {
        "port": 1, "state": "Active", "physical_state": "LinkUp", "rate_gbps": 400, "link_layer": "Ethernet",
    }
    # RoCE: no subnet manager, LID 0. CA order is ibstat's (lexical: mlx5_1, mlx5_10, ...).
    assert port["base_lid"] == 0 and port["sm_lid"] == 0
    assert [c["ca"] for c in cas][:3] == ["mlx5_0", "mlx5_1", "mlx5_10"]
    assert cas[1]["ca_type"] == "MT4125" and cas[1]["firmware"] == "22.39.1002"


def test_ibstat_azure_lids_guids_and_ibpanic():
    text = _read(IBSTAT / "a100-azure-cx6-vf-hdr200-x8-trailing-ibpanic-error.txt")
    cas, errors = parse_ibstat_with_errors(text)
    assert [c["ca"] for c in cas] == ["mlx5_%d" % i for i in range(8)]
    mlx5_0 = cas[0]
    assert mlx5_0["firmware"] == "20.41.1000"
    assert mlx5_0["hardware_version"] == "0"
    assert mlx5_0["node_guid"] == "0x00155dfffe3411eb"
    assert mlx5_0["system_guid"] == "0xb83fd203006e2704"
    port = mlx5_0["ports"][0]
    assert port["base_lid"] == 13247 and port["sm_lid"] == 1 and port["lmc"] == 0
    assert port["capability_mask"] == "0xa651ec48"
    assert port["port_guid"] == "0x00155dfffd3411eb"
    # The device that vanished is reported, not swallowed, and not invented as a CA.
    assert errors == ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]
    assert ibstat_errors(text) == errors
    assert "mlx5_8" not in {c["ca"] for c in cas}


def test_ibstat_down_ports_have_zero_guid_and_low_rate():
    cas = parse_ibstat(_read(IBSTAT / "h100-cx7-400-roce-2-ports-down-disabled.txt"))
    ports = _ports(cas)
    for name in ("mlx5_5", "mlx5_11"):
        port = ports[(name, 1)]
        assert (port["state"], port["physical_state"], port["rate_gbps"]) == ("Down", "Disabled", 40)
        assert port["port_guid"] == "0x0000000000000000"
    assert ports[("mlx5_0", 1)]["port_guid"] == "0xa288c2fffeadeab8"


def test_ibstat_state_down_but_physically_up_is_not_active():
    # Network-operator issue: the cable is up but no SM has brought the port to Active.
    cas = parse_ibstat(_read(IBSTAT / "cx6-vf-state-down-physical-linkup-network-operator-issue249.txt"))
    port = cas[0]["ports"][0]
    assert (cas[0]["ca"], cas[0]["firmware"]) == ("mlx5_7", "20.28.4000")
    assert port["state"] == "Down" and port["physical_state"] == "LinkUp"
    assert port["base_lid"] == 65535
    assert active_ports(cas) == []


def test_ibstat_bluefield_bond():
    cas = parse_ibstat(_read(IBSTAT / "h100-cx7-400-ib-x8-plus-bf3-bond-eth-200.txt"))
    bond = [c for c in cas if c["ca"] == "mlx5_bond_0"]
    assert len(bond) == 1
    assert bond[0]["ca_type"] == "MT41692" and bond[0]["firmware"] == "32.38.3056"
    assert {c["firmware"] for c in cas if c["ca_type"] == "MT4129"} == {"28.41.1000"}
    assert active_ports(cas)[-1] == {"ca": "mlx5_bond_0", "port": 1, "rate_gbps": 200, "link_layer": "Ethernet"}


@pytest.mark.parametrize("name", sorted(IBSTAT_CASES))
def test_ibstat_is_layout_agnostic(name):
    """Same result with CRLF line ends and with tabs turned into spaces (web copies do both)."""
    text = _read(IBSTAT / name)
    want = parse_ibstat_with_errors(text)
    assert parse_ibstat_with_errors(text.replace("\n", "\r\n")) == want
    assert parse_ibstat_with_errors(text.expandtabs(4)) == want


def test_ibstat_empty_and_garbage():
    assert parse_ibstat("") == []
    assert parse_ibstat(None) == []
    # Output that is not ibstat (e.g. the wrong program) yields no CA and reports every line.
    text = _read(IBV / "cx5-roce-mtu1024-h100-excerpt-deepep-issue60.txt")
    cas, errors = parse_ibstat_with_errors(text)
    assert cas == [] and errors


def test_active_ports_of_3_ports_down():
    cas = parse_ibstat(_read(IBSTAT / "h100-cx7-400-ib-x8-cx6dx-eth-3-ports-down.txt"))
    active = active_ports(cas)
    assert len(active) == 9
    assert sum(1 for p in active if p["link_layer"] == "InfiniBand" and p["rate_gbps"] == 400) == 8
    assert {"ca": "mlx5_1", "port": 1, "rate_gbps": 100, "link_layer": "Ethernet"} in active


def test_roce_gid_index_prefers_ipv4_roce_v2():
    port = {"gids": [
        {"index": 0, "gid": "fe80:0000:0000:0000:5e25:73ff:fe94:212a", "type": "RoCE v1"},
        {"index": 1, "gid": "fe80::5e25:73ff:fe94:212a", "type": "RoCE v2"},
        {"index": 3, "gid": "::ffff:10.0.0.2", "type": "RoCE v2"},
    ]}
    assert roce_gid_index(port) == 3
    assert roce_gid_index({"gids": port["gids"][:2]}) == 1
    assert roce_gid_index({}) is None


def test_normalizers_use_the_capture_spellings():
    # ibstatus and sysfs print "4: ACTIVE" / "5: LinkUp"; ibv_devinfo "PORT_ACTIVE (4)".
    assert normalize_state("4: ACTIVE") == normalize_state("PORT_ACTIVE (4)") == normalize_state("Active") == "Active"
    assert normalize_state("1: DOWN") == normalize_state("PORT_DOWN (1)") == "Down"
    assert normalize_state("2: INIT") == "Initializing"
    assert normalize_phys_state("5: LinkUp") == normalize_phys_state("LINK_UP (5)") == "LinkUp"
    assert normalize_phys_state("3: Disabled") == "Disabled"
    assert normalize_phys_state("2: Polling") == "Polling"
    assert normalize_guid("7cfe:9003:00a5:95c0") == "0x7cfe900300a595c0"
    assert normalize_guid("0x00155DFFFD3411EB") == "0x00155dfffd3411eb"


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _sysfs_tree(root):
    """/sys/class/infiniband layout of two CAs (the kernel's file names and value formats)."""
    ib = root / "class" / "infiniband"
    for name, state, phys, rate, layer, lid in (
        ("mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand", "0x33bf"),
        ("mlx5_10", "1: DOWN", "3: Disabled", "40 Gb/sec (4X QDR)", "Ethernet", "0x0"),
        ("mlx5_2", "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand", "0x5"),
    ):
        ca = ib / name
        _write(ca / "hca_type", "MT4129")
        _write(ca / "fw_ver", "28.39.1002")
        _write(ca / "hw_rev", "0x0")
        _write(ca / "node_guid", "a088:c203:003a:8710")
        _write(ca / "sys_image_guid", "a088:c203:003a:8710")
        _write(ca / "device" / "numa_node", "1")
        port = ca / "ports" / "1"
        _write(port / "state", state)
        _write(port / "phys_state", phys)
        _write(port / "rate", rate)
        _write(port / "link_layer", layer)
        _write(port / "lid", lid)
        _write(port / "sm_lid", "0x1")
        _write(port / "lid_mask_count", "0")
        _write(port / "cap_mask", "0xa651ec48")
        _write(port / "gids" / "0", "fe80:0000:0000:0000:0015:5dff:fd34:11eb")
    return ib


def test_read_ib_sysfs(tmp_path):
    cas = read_ib_sysfs(str(_sysfs_tree(tmp_path)))
    assert [c["ca"] for c in cas] == ["mlx5_0", "mlx5_2", "mlx5_10"]  # natural order
    first = cas[0]
    assert (first["ca_type"], first["firmware"], first["numa_node"]) == ("MT4129", "28.39.1002", 1)
    assert first["node_guid"] == "0xa088c203003a8710"
    port = first["ports"][0]
    assert (port["state"], port["physical_state"], port["rate_gbps"], port["link_layer"]) == (
        "Active", "LinkUp", 400, "InfiniBand")
    assert (port["base_lid"], port["sm_lid"], port["rate_detail"]) == (13247, 1, "4X NDR")
    assert port["port_guid"] == "0x00155dfffd3411eb"
    down = cas[2]["ports"][0]
    assert (down["state"], down["physical_state"], down["rate_gbps"]) == ("Down", "Disabled", 40)
    assert [a["ca"] for a in active_ports(cas)] == ["mlx5_0", "mlx5_2"]


def test_read_ib_sysfs_missing(tmp_path):
    assert read_ib_sysfs(str(tmp_path / "nope")) == []
    (tmp_path / "empty").mkdir()
    assert read_ib_sysfs(str(tmp_path / "empty")) == []
