# Copyright: gpufleet engineers
# Apache License 2.0 (see galaxy.yml)
"""Run an external tool with a deadline, for the facts modules.

AnsibleModule.run_command has no timeout: one hung ``nvidia-smi`` (a GPU stuck in the driver)
would hold the task, and with it the whole play, forever. This runs the tool in its own
process group, kills the group when the deadline passes, and does not wait on a process the
kernel will not let die (a task in D state keeps the pipes open), so the caller always gets an
answer within about ``timeout_s + KILL_GRACE_S`` seconds.

Output is decoded as UTF-8 with undecodable bytes replaced (U+FFFD): one stray byte in a
tool's output must not turn a node's facts into a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess

from ansible_collections.gpufleet.cluster.plugins.module_utils.c_locale import C_LOCALE

# Seconds to collect what a killed tool printed before giving up on it.
KILL_GRACE_S = 5
# rc reported for a tool killed at its deadline (the value coreutils timeout uses).
TIMEOUT_RC = 124


def _text(data):
    return (data or b"").decode("utf-8", errors="replace")


def run_tool(module, args, timeout_s, environ_update=None):
    """``(rc, stdout, stderr, timed_out)`` for ``args`` run in the C locale.

    ``module`` is unused here; it keeps the signature the modules' tests replace. A tool that
    cannot be started gives rc 127 and the reason in stderr.
    """
    del module
    env = dict(os.environ)
    env.update(C_LOCALE if environ_update is None else environ_update)
    timeout_s = int(timeout_s)
    if timeout_s <= 0:
        raise ValueError("timeout must be a positive number of seconds, got %r" % timeout_s)
    try:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
    except OSError as exc:
        return 127, "", "cannot run %s: %s" % (args[0], exc), False
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, _text(out), _text(err), False
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    out, err = b"", b""
    try:
        out, err = proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        # Still alive after SIGKILL: stuck in the kernel. Leave it; the answer matters more.
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
    return TIMEOUT_RC, _text(out), _text(err), True
