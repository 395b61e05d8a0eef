"""A cancelled run (SIGTERM from CI, Ctrl-C) ends ansible-playbook and everything it started, exits 2,
and calls no node passed. The nodes hang on a tarpit: a loopback listener that accepts and never answers."""

import json
import signal

from cli_helpers import (REPO, Tarpit, clean_env, end_processes, hanging_inventory, process_ids_with, start_cli,
                         wait_for)


def test_sigterm_while_nodes_hang_ends_ansible_and_passes_no_node(tmp_path):
    tarpit = Tarpit()
    inventory = hanging_inventory(tmp_path / "inv.ini", tarpit)
    artifacts = tmp_path / "out"
    # The nodes hang for as long as the test needs: no SSH connect timeout cuts them short.
    env = clean_env(PYTHONPATH=str(REPO), ANSIBLE_TIMEOUT="600", ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp_path / "cp"))
    proc = start_cli(["run", "preflight", "-i", inventory, "--artifacts", artifacts], tmp_path, env)
    playbook_pids = []
    try:
        assert wait_for(lambda: len(tarpit.held) >= 2, 120), (tmp_path / "stdout").read_text()
        playbook_pids = process_ids_with(str(inventory))  # ansible-playbook and its workers
        assert playbook_pids
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        left = [pid for pid in playbook_pids if pid in process_ids_with(str(inventory))]
        left += process_ids_with(str(inventory)) + process_ids_with(f"-o Port={tarpit.port}")
        assert rc == 2, (tmp_path / "stderr").read_text()
        assert not left, f"left running after the cancel: {left}"
        summary = json.loads((artifacts / "summary.json").read_text())
        assert summary["result"] == "run_broken" and "SIGTERM" in summary["reason"]
        assert summary["ready_nodes"] == []
        assert not [name for name, node in summary["nodes"].items() if node["status"] == "passed"]
        assert summary["nodes"]["quick"]["status"] == "not_run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_processes(process_ids_with(str(inventory)) + process_ids_with(f"-o Port={tarpit.port}"))
        tarpit.close()
