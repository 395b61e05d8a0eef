"""The bandwidth_isolation role through ansible-playbook on this machine (connection local, one node).

One node has no ring and no pairs, but every step of the role runs: the plan (network, tool, devices),
the tool's servers (systemd-run, here a stand-in that starts the command in the background and stops it
by unit name), the node's own loopback test through the bandwidth_test module, the verdict, the node's
baseline and bandwidth.json. Without RDMA the real iperf3 measures the address's interface and the
report says it is the TCP fallback; on a simulated HGX H100 node (ibstat and ib_write_bw are the
simulator's stand-ins, replaying real captures) the loopback runs ib_write_bw on each HCA NCCL uses.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from test_gpu_benchmark_compute import BIN, REPO, sim_node

STANDINS = REPO / "tests" / "sim" / "standins"
PLAY = """
- name: The bandwidth tests on this machine
  hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.cluster.bandwidth_isolation
"""
# systemd-run and systemctl as the role calls them: a transient unit is a background process group
# whose pid is kept under the unit's name; `systemctl stop PATTERN` ends the matching ones.
SYSTEMD_RUN = textwrap.dedent("""\
    #!{python}
    import os, subprocess, sys
    args = sys.argv[1:]
    unit = args[args.index("--unit") + 1]
    command = args[args.index("--") + 1:]
    log = open(os.path.join(os.environ["FAKE_UNITS"], unit + ".log"), "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    open(os.path.join(os.environ["FAKE_UNITS"], unit + ".pid"), "w").write(str(proc.pid))
    """)
SYSTEMCTL = textwrap.dedent("""\
    #!{python}
    import fnmatch, os, signal, sys
    assert sys.argv[1] == "stop", sys.argv
    units = os.environ["FAKE_UNITS"]
    for name in os.listdir(units):
        if name.endswith(".pid") and fnmatch.fnmatch(name[:-4], sys.argv[2]):
            try:
                os.killpg(int(open(os.path.join(units, name)).read()), signal.SIGTERM)
            except ProcessLookupError:
                pass
            os.rename(os.path.join(units, name), os.path.join(units, name[:-4] + ".stopped"))
    """)


def tools_dir(tmp_path, rdma):
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in (("systemd-run", SYSTEMD_RUN), ("systemctl", SYSTEMCTL)):
        (tools / name).write_text(text.format(python=sys.executable))
        (tools / name).chmod(0o755)
    if rdma:
        for name in ("ibstat", "ib_write_bw"):
            (tools / name).symlink_to(STANDINS / name)
    (tmp_path / "units").mkdir()
    return tools


def run_role(tmp_path, env, tools, *extra):
    (tmp_path / "bandwidth.yml").write_text(PLAY)
    (tmp_path / "hosts.ini").write_text("node1 ansible_connection=local ansible_host=127.0.0.1\n")
    env = dict(env, ANSIBLE_NOCOLOR="1", FAKE_UNITS=str(tmp_path / "units"),
               PATH="%s%s%s%s%s" % (tools, os.pathsep, BIN, os.pathsep, env["PATH"]))
    cmd = [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "bandwidth.yml"),
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-e", json.dumps({"gpufleet_report_dir": str(tmp_path / "reports"),
                             "gpufleet_baseline_dir": str(tmp_path / "baselines"),
                             "bandwidth_isolation_install_tools": False, "bandwidth_isolation_seconds": 1,
                             "bandwidth_isolation_repeats": 1})] + list(extra)
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600, check=False)
    report = tmp_path / "reports" / "bandwidth.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def stopped_units(tmp_path):
    units = tmp_path / "units"
    return sorted(p.stem for p in units.iterdir() if p.suffix == ".stopped"), \
        sorted(p.stem for p in units.iterdir() if p.suffix == ".pid")


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (apt-get install iperf3)")
def test_without_rdma_iperf3_measures_the_addresss_interface_labelled_as_the_tcp_fallback(tmp_path):
    tools = tools_dir(tmp_path, rdma=False)
    proc, report = run_role(tmp_path, dict(os.environ), tools,
                            "-e", "bandwidth_isolation_nccl_conf=%s" % (tmp_path / "no-nccl.conf"))
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert (report["network"], report["tool"], report["rails"]) == ("tcp", "iperf3", 1), report["why"]
    assert report["why"].startswith("TCP fallback: no Active RDMA port on node1")
    assert report["note"].startswith("TCP FALLBACK, not RDMA: iperf3")
    tcp = report["endpoints"]["node1"]["tcp"]
    assert (tcp["interface"], tcp["address"]) == ("lo", "127.0.0.1"), tcp
    assert "NCCL_SOCKET_IFNAME is not set" in tcp["source"]
    loop = report["per_node"]["node1"]
    assert (loop["src"], loop["dst"], loop["network"], loop["tool"]) == ("node1", "node1", "tcp", "iperf3")
    assert loop["gbps"] > 0 and loop["rails"][0]["src_device"] == "lo" and loop.get("error") is None, loop
    # One node: no link to measure, and no baseline stored yet, both said (never a pass).
    assert report["ring"] == [] and report["findings"] == [] and report["status"] == "not_checked", report
    assert [n["check"] for n in report["not_checked"]] == ["inter-node bandwidth", "links baseline"]
    # The iperf3 server ran as a unit of its own and was stopped by name at the end.
    stopped, running = stopped_units(tmp_path)
    assert len(stopped) == 1 and re.fullmatch(r"gpufleet-bw-\d{14}-iperf3", stopped[0]) and running == [], (stopped, running)


def test_on_a_simulated_hgx_node_ib_write_bw_runs_on_each_hca_nccl_uses(tmp_path):
    _merged, env = sim_node(tmp_path, [])
    tools = tools_dir(tmp_path, rdma=True)
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA==mlx5_0:1,mlx5_4:1\nNCCL_SOCKET_IFNAME=eth0\n")
    proc, report = run_role(tmp_path, env, tools, "-e", "bandwidth_isolation_nccl_conf=%s" % conf)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert (report["network"], report["tool"], report["rails"]) == ("rdma", "ib_write_bw", 2), report["why"]
    assert [d["ca"] for d in report["endpoints"]["node1"]["rdma"]["devices"]] == ["mlx5_0", "mlx5_4"]
    loop = report["per_node"]["node1"]
    assert [(r["src_device"], r["dst_device"], r["port"]) for r in loop["rails"]] == [
        ("mlx5_0", "mlx5_0", 29517), ("mlx5_4", "mlx5_4", 29518)], loop
    # The captured figure (a 400 Gb/s port) replayed on this node's 400 Gb/s ports.
    assert all(r["gbps"] > 300 for r in loop["rails"]) and loop["line_rate_gbps"] == 400.0, loop
    assert report["findings"] == [] and report["thresholds"]["rate_fraction"] == 0.8
    # One unit served both rails of the loopback (one start on the node), stopped by name when its phase was
    # over, and named by this run (a unit an earlier run left is never in the way).
    stopped, running = stopped_units(tmp_path)
    assert [re.sub(r"^gpufleet-bw-\d{14}-", "", s) for s in stopped] == ["loop-servers"] and running == [], \
        (stopped, running)
    assert len({s.rsplit("-", 2)[0] for s in stopped}) == 1, stopped
