"""gpufleet fast node health check: Slurm HealthCheckProgram or a systemd timer's job.

Runs `dcgmi diag -r LEVEL -j` and `nvidia-smi nvlink -s`, judges them with the collection's parsers
(installed beside this program), writes the result to STATE_DIR/healthcheck.json and exits 1 on a
fail-level finding.
With drain on, a failing node is drained in Slurm with the same reason and marker as the slurm_drain
role ("gpufleet: CODES", STATE_DIR/slurm-drained-by-gpufleet), and a passing node that gpufleet drained
is resumed; a drain with any other reason (an operator's) is never touched. A check that cannot run is a
failure here: a health check that saw nothing cannot call the node healthy.

slurmd runs HealthCheckProgram with no arguments, no PATH and only SLURMD_NODENAME, kills it after 60 s
and ignores its exit code: so everything comes from the config file the role writes (--config), PATH is
set from it, the node name is SLURMD_NODENAME when slurmd gives it, and every command's timeout is cut
from one time budget (the role gives 45 s under Slurm).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

DEFAULT_CONFIG = "/etc/gpufleet/healthcheck.json"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Seconds kept back from the budget for what follows the diagnostic: the NVLink read and two scontrol calls.
RESERVED_S = 15


def load_config(path):
    """The role's settings ({} when the file is absent: a program run by hand takes its flags)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def options(argv):
    parser = argparse.ArgumentParser(prog="gpufleet-healthcheck")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--level", type=int)
    parser.add_argument("--budget", type=int, help="seconds for the whole check (Slurm kills it at 60)")
    parser.add_argument("--node")
    parser.add_argument("--nvlink-required", action="store_true", default=None)
    parser.add_argument("--drain", action="store_true", default=None, help="drain/resume the node in Slurm")
    parser.add_argument("--scontrol")
    parser.add_argument("--state-dir")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    # PATH: the role's (slurmd gives none), else the caller's, else the system's.
    settings = {"level": 1, "budget": 300, "nvlink_required": False, "drain": False, "scontrol": "scontrol",
                "state_dir": "/var/lib/gpufleet", "path": os.environ.get("PATH") or DEFAULT_PATH,
                "lib": os.environ.get("GPUFLEET_LIB", "/usr/local/lib/gpufleet")}
    settings.update(config)
    settings.update({k: v for k, v in vars(args).items() if v is not None and k != "config"})
    settings["node"] = (settings.get("node") or os.environ.get("SLURMD_NODENAME")
                        or socket.gethostname().split(".")[0])
    return settings


def collection(lib):
    """The collection's parsers, from the directory the role installed them in."""
    sys.path.insert(0, lib)
    from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm, findings, nvlink, slurm  # noqa: E402
    return dcgm, findings, nvlink, slurm


class Runner:
    """Runs commands in the C locale with the configured PATH, each within what is left of the budget."""

    def __init__(self, path, budget):
        self.env = dict(os.environ, LC_ALL="C", LANG="C", PATH=path)
        self.deadline = time.monotonic() + budget

    def left(self, keep=0):
        return max(1, int(self.deadline - time.monotonic() - keep))

    def __call__(self, cmd, timeout):
        timeout = min(timeout, self.left())
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env, check=False)
            return proc.returncode, proc.stdout, proc.stderr
        except FileNotFoundError:
            return None, "", "%s not found (PATH=%s)" % (cmd[0], self.env["PATH"])
        except subprocess.TimeoutExpired:
            return None, "", "%s timed out after %ss" % (" ".join(cmd), timeout)


def check(lib, run, settings):
    dcgm, findings_mod, nvlink = lib[:3]
    node, level, found = settings["node"], settings["level"], []
    rc, out, err = run(["dcgmi", "diag", "-r", str(level), "-j"], run.left(keep=RESERVED_S))
    try:
        parsed = dcgm.parse_dcgm_diag(out) if rc is not None else None
    except dcgm.DcgmParseError:
        parsed = None
    found += dcgm.evaluate_dcgm(parsed, node, level, rc=rc)
    if parsed is None and found:
        found[-1]["message"] += ": " + " ".join((err or out).split())[:200]
    rc, out, err = run(["nvidia-smi", "nvlink", "-s"], 10)
    status = nvlink.parse_nvlink_status(out) if rc == 0 else []
    if status:
        links, gbps = nvlink.expected_nvlink(status[0]["name"])
        found += nvlink.evaluate_nvlink(status, None, node, expected_links=links, expected_gbps=gbps)
    elif settings["nvlink_required"]:
        found.append(findings_mod.make_finding(
            "NVLINK_NOT_READ", "fail", node,
            "nvidia-smi nvlink -s gave no link status: %s" % " ".join((err or out).split())[:200],
            "Check the driver; run nvidia-smi nvlink -s by hand"))
    return found


def slurm_state(lib, run, settings, found, status):
    """Drain a failing node, resume one gpufleet drained once it passes, through the collection's one
    Slurm helper (the slurm_node module's): a drain with another reason keeps it, in both directions."""
    slurm = lib[3]
    record = os.path.join(settings["state_dir"], "slurm-drained-by-gpufleet")
    if status != "fail" and not slurm.read_record(record):
        return None  # nothing of ours to undo: Slurm is not asked at all
    reason = slurm.drain_reason(f["code"] for f in found if f["severity"] == "fail") if status == "fail" else None
    try:
        result = slurm.converge(lambda argv: run(argv, 5), settings["scontrol"], settings["node"],
                                "drained" if status == "fail" else "resumed", reason=reason, record_path=record)
    except (slurm.SlurmError, OSError) as exc:
        return "not %s: %s" % ("drained" if status == "fail" else "resumed", exc)
    return result["message"]


def write_atomically(path, text):
    temporary = "%s.%d.tmp" % (path, os.getpid())
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def main(argv):
    settings = options(argv)
    lib = collection(settings["lib"])
    run = Runner(settings["path"], settings["budget"])
    found = check(lib, run, settings)
    status = lib[1].worst_status(found)
    result = {"node": settings["node"], "status": status, "level": settings["level"], "findings": found,
              "checked_at": int(time.time())}
    if settings["drain"]:
        result["slurm"] = slurm_state(lib, run, settings, found, status)
    os.makedirs(settings["state_dir"], exist_ok=True)
    write_atomically(os.path.join(settings["state_dir"], "healthcheck.json"), json.dumps(result, indent=2))
    for finding in found:
        print(lib[1].format_finding(finding))
    print("%s: %s" % (settings["node"], status))
    return 1 if status == "fail" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
