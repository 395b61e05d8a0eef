"""Keeps one node's container running across reboots.

Started detached by the harness (its PID is recorded). systemd-nspawn exits
with 133 when the container's systemd reboots; the supervisor then boots the
same overlay again. Any other exit ends the supervisor. SIGTERM shuts the
container down cleanly (nspawn forwards it as a poweroff request), waits, and
kills nspawn only if it does not finish in time.

Usage: python supervisor.py NSPAWN_PID_FILE LOG_FILE -- systemd-nspawn ARGS...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

REBOOT_EXIT_CODE = 133
STOP_GRACE_SECONDS = 15


def main() -> int:
    sep = sys.argv.index("--")
    pid_file, log_file = sys.argv[1:sep]
    command = sys.argv[sep + 1:]
    stopping = False
    child: subprocess.Popen | None = None

    def on_term(signum, frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    with open(log_file, "ab", buffering=0) as log:
        while not stopping:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            with open(pid_file + ".tmp", "w") as fh:
                fh.write(f"{child.pid}\n")
            os.replace(pid_file + ".tmp", pid_file)
            deadline = None
            while True:
                try:
                    rc = child.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if stopping:
                        deadline = deadline or time.monotonic() + STOP_GRACE_SECONDS
                        if time.monotonic() > deadline:
                            child.kill()
            log.write(f"[supervisor] {time.strftime('%H:%M:%S')} nspawn exited rc={rc}\n".encode())
            if rc != REBOOT_EXIT_CODE:
                break
            log.write(b"[supervisor] container rebooted; booting it again\n")
    try:
        os.unlink(pid_file)
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
