"""The socket bandwidth tool measures real loopback traffic and stops only its own receiver."""

import json
import subprocess
import sys
import time
from pathlib import Path

TOOL = Path(__file__).resolve().parents[3] / "roles" / "bandwidth_isolation" / "files" / "gpufleet_socket_bw.py"


def tool(*args, timeout=60):
    proc = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(proc.stdout)


def test_loopback_reports_a_positive_socket_figure():
    result = tool("loopback", "--seconds", "0.3")
    assert result["transport"] == "tcp-socket" and result["bytes"] > 0 and result["gbps"] > 0
    assert result["bytes"] == result["sent"]


def test_serve_send_stop_by_pid(tmp_path):
    pidfile = tmp_path / "bw.pid"
    server = subprocess.Popen([sys.executable, str(TOOL), "serve", "--bind", "127.0.0.1", "--port", "29871",
                               "--pidfile", str(pidfile), "--idle-timeout", "30"])
    try:
        for _attempt in range(100):
            if pidfile.exists():
                break
            time.sleep(0.05)
        time.sleep(0.2)
        result = tool("send", "--to", "127.0.0.1", "--port", "29871", "--seconds", "0.3", "--repeat", "2")
        assert result["gbps"] > 0 and result["to"] == "127.0.0.1"
        assert len(result["samples_gbps"]) == 2 and result["gbps"] == max(result["samples_gbps"])
        assert tool("stop", "--pidfile", str(pidfile)) == {"stopped": True, "pid": server.pid}
        assert server.wait(timeout=10) is not None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_send_to_nobody_reports_no_figure_not_a_crash():
    result = tool("send", "--to", "127.0.0.1", "--port", "29872", "--seconds", "0.1")
    assert result["gbps"] is None and "29872" in result["error"]


def test_stop_refuses_a_pid_that_is_not_its_receiver(tmp_path):
    pidfile = tmp_path / "other.pid"
    pidfile.write_text("1\n")
    assert tool("stop", "--pidfile", str(pidfile))["stopped"] is False
