"""`gpufleet mirror` end to end without a cluster: a plan mirrored from NVIDIA-shaped repositories (the
simulator's sourced manifests), an OS archive and a wheel directory served on loopback; the failures that
must leave nothing behind; and the inventory mode's facts read from a local-connection node."""

from __future__ import annotations

import functools
import http.server
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from gpufleet import cli
from gpufleet.mirror_apt import AptSandbox, AptSource, driver_preferences, parse_records, sha256_of
from gpufleet.mirror_repo import Signer
from gpufleet.mirror_targets import MirrorError, PlanOptions, collect_inventory_facts, targets_from_facts
from gpufleet.mirror_wheels import pip_env
from mirror_helpers import REPO, index_archive, index_flat, make_deb, make_wheel, served, sim_packages
from test_mirror_plan import DNF_PLAN, PLAN

pytestmark = pytest.mark.skipif(not all(shutil.which(t) for t in ("apt-get", "apt-ftparchive", "dpkg-deb", "gpg")),
                                reason="needs apt-get, apt-ftparchive, dpkg-deb and gpg (a Debian/Ubuntu host)")
KERNEL = "6.1.0-99-test"
NUMPY = yaml.safe_load((REPO / "roles/pytorch/vars/main.yml").read_text())["__pytorch_numpy_default"]
INSTALL = ["nvidia-kernel-open-535=535.216.03-0ubuntu1", "cuda-drivers-535=535.216.03-1",
           "nvidia-fabricmanager-535=535.216.03-1", "cuda-toolkit-12-2", "libnccl2=2.19.3-1+cuda12.2",
           "libnccl-dev=2.19.3-1+cuda12.2", f"linux-headers-{KERNEL}", "dkms", "python3-venv", "python3-pip"]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream")
    signer = Signer(tmp_path_factory.mktemp("upstream-gnupg"))
    manifest_lib, packages = sim_packages()
    flat = root / "cuda" / "ubuntu2204" / "x86_64"
    packages.build_manifest_debs(manifest_lib.load_all()["ubuntu2204"], flat)
    index_flat(flat, signer)
    (root / "key.asc").write_bytes(signer.export(armor=True))
    pool = root / "os" / "pool" / "main"
    pool.mkdir(parents=True)
    for name in ("libc6", "systemd-coredump", "python3-venv", "python3-pip", f"linux-headers-{KERNEL}"):
        make_deb(pool, name, "99.0-1")
    make_deb(pool, "dkms", "99.0-1", depends="make")
    make_deb(pool, "make", "99.0-1")
    index_archive(root / "os", "jammy", signer)
    keyring = root.parent / f"{root.name}.gpg"
    keyring.write_bytes(signer.export(armor=False))
    wheels = root.parent / f"{root.name}-wheels"
    wheels.mkdir()
    for name, version in (("torch", "2.1.2+cu121"), ("torchvision", "0.16.2+cu121"), ("torchaudio", "2.1.2+cu121")):
        make_wheel(wheels, name, version, "cp310-cp310-linux_x86_64", requires=["filelock"])
    make_wheel(wheels, "numpy", NUMPY, "cp310-cp310-manylinux_2_17_x86_64")
    make_wheel(wheels, "filelock", "3.13.1")
    with served(root) as server:
        yield {"url": server.url, "fingerprint": signer.fingerprint, "keyring": keyring, "wheels": wheels,
               "server": server}


def mirror_args(upstream, tmp_path, plan: dict, **over) -> list[str]:
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    args = {"--plan": tmp_path / "plan.json", "--dest": tmp_path / "mirror", "--key-dir": tmp_path / "key",
            "--kernel": KERNEL, "--cuda-repo-url": f"{upstream['url']}/cuda",
            "--cuda-repo-key-url": f"{upstream['url']}/key.asc", "--cuda-repo-key-fingerprint": upstream["fingerprint"],
            "--os-mirror-url": f"{upstream['url']}/os", "--os-keyring": upstream["keyring"], "--os-components": "main",
            "--wheel-source": upstream["wheels"], "--url": "http://10.9.9.9:8080/m"}
    args.update(over)
    return ["mirror"] + [str(part) for key, value in args.items() for part in (key, value)]


def repository_set(directory: Path) -> set[tuple[str, str]]:
    return {(r["Package"], r["Version"]) for r in parse_records((directory / "Packages").read_text())}


def test_a_plan_is_mirrored_exactly_and_the_mirror_alone_serves_it(upstream, tmp_path, capsys):
    rc = cli.main(mirror_args(upstream, tmp_path, PLAN))
    out, err = capsys.readouterr()
    assert rc == 0, err
    mirror = tmp_path / "mirror"
    fingerprint = Signer(tmp_path / "key").fingerprint
    values = yaml.safe_load(out)
    assert values["gpufleet_cuda_repo_key_fingerprint"] == fingerprint
    assert values["gpufleet_mirror_url"] == "http://10.9.9.9:8080/m"
    assert (mirror / "mirror-vars.yml").read_text() == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key", "mirror", "plan.json"]  # no staging left

    # Exactly what apt installs for the plan on an empty system, from the upstream sources: no more, no less.
    box = AptSandbox(tmp_path / "apt", "x86_64", [
        AptSource(f"{upstream['url']}/cuda/ubuntu2204/x86_64/", "", (), upstream["keyring"]),
        AptSource(f"{upstream['url']}/os", "jammy", ("main",), upstream["keyring"])],
        driver_preferences(REPO / "roles/nvidia_driver/templates/etc/apt/preferences.d/gpufleet-nvidia-driver.j2",
                           "535.216.03"))
    box.update()
    simulated = box.run("apt-get", "install", "-s", "-y", *INSTALL)
    wanted = set(re.findall(r"^Inst (\S+) \((\S+)", simulated.stdout, re.M))
    cuda = repository_set(mirror / "compute/cuda/repos/ubuntu2204/x86_64")
    archive = repository_set(mirror / "os/ubuntu22.04/dists/jammy/main/binary-amd64")
    assert cuda | archive == wanted and not cuda & archive
    assert ("nvidia-driver-535", "535.216.03-0ubuntu1") in cuda and ("dkms", "99.0-1") in archive
    assert sorted(p.name for p in (mirror / "wheels").glob("*.whl")) == [
        "filelock-3.13.1-py3-none-any.whl", f"numpy-{NUMPY}-cp310-cp310-manylinux_2_17_x86_64.whl",
        "torch-2.1.2+cu121-cp310-cp310-linux_x86_64.whl", "torchaudio-2.1.2+cu121-cp310-cp310-linux_x86_64.whl",
        "torchvision-0.16.2+cu121-cp310-cp310-linux_x86_64.whl"]
    assert (mirror / "wheels/simple/torch/index.html").is_file()

    # The hash lock the pytorch role installs with, pinned in the variables by its SHA256; pip takes it against
    # the mirror's own index in --require-hashes mode, every wheel checked.
    lock = mirror / "wheels/requirements.lock"
    assert values["gpufleet_pytorch_mirror_lock_sha256"] == sha256_of(lock)
    torch_wheel = mirror / "wheels/torch-2.1.2+cu121-cp310-cp310-linux_x86_64.whl"
    assert f"torch==2.1.2+cu121 \\\n    --hash=sha256:{sha256_of(torch_wheel)}\n" in lock.read_text()
    with served(mirror) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--isolated", "--no-input",
             "--report", str(tmp_path / "report.json"), "--target", str(tmp_path / "t"), "--only-binary=:all:",
             "--python-version", "3.10", "--platform", "linux_x86_64", "--platform", "manylinux_2_17_x86_64",
             "--index-url", f"{server.url}/wheels/simple/", "--require-hashes", "-r", str(lock)],
            capture_output=True, text=True, env=pip_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    installed = json.loads((tmp_path / "report.json").read_text())["install"]
    assert sorted(item["metadata"]["name"] for item in installed) == [
        "filelock", "numpy", "torch", "torchaudio", "torchvision"]
    (tmp_path / "report.json").unlink()

    manifest = json.loads((mirror / "manifest.json").read_text())
    listed = {f["path"]: f for f in manifest["files"]}
    on_disk = {p.relative_to(mirror).as_posix() for p in mirror.rglob("*") if p.is_file()}
    assert set(listed) == on_disk - {"manifest.json", "manifest.json.asc"}
    for rel, entry in listed.items():
        assert entry["sha256"] == sha256_of(mirror / rel) and entry["size"] == (mirror / rel).stat().st_size
    assert listed["keys/upstream/ubuntu2204-x86_64-key.asc"]["fingerprint"] == upstream["fingerprint"]
    assert listed["compute/cuda/repos/ubuntu2204/x86_64/cuda-drivers-535_535.216.03-1_amd64.deb"]["source"] == (
        f"{upstream['url']}/cuda/ubuntu2204/x86_64/./cuda-drivers-535_535.216.03-1_amd64.deb")
    assert manifest["targets"][0]["plan"]["driver"] == "535.216.03"

    # The roles' view: gpufleet_cuda_repo_url + <distro>/<arch>, trusted with the mirror's key only.
    with served(mirror) as server:
        offline = AptSandbox(tmp_path / "offline", "x86_64", [
            AptSource(f"{server.url}/compute/cuda/repos/ubuntu2204/x86_64/", "", (), mirror / "keys/gpufleet-mirror.gpg"),
            AptSource(f"{server.url}/os/ubuntu22.04", "jammy", ("main",), mirror / "keys/gpufleet-mirror.gpg")],
            box.root.joinpath("etc/preferences").read_text())
        offline.update()
        again = offline.run("apt-get", "install", "-s", "-y", *INSTALL)
    assert again.returncode == 0, again.stdout + again.stderr
    assert set(re.findall(r"^Inst (\S+) \((\S+)", again.stdout, re.M)) == wanted


@pytest.mark.parametrize("plan, over, words", [
    (PLAN, {"--cuda-repo-key-fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC"},
     ["/key.asc was refused", "the pin is EB693B3035CD5710E231E123A4B469963BF863CC", "--cuda-repo-key-fingerprint"]),
    (PLAN, {"--cuda-repo-url": "http://127.0.0.1:9/cuda"},
     ["http://127.0.0.1:9/cuda/ubuntu2204/x86_64", "reachable"]),
    (PLAN, {"--cuda-repo-url": "http://127.0.0.1:9/cuda", "--cuda-repo-key-url": ""},
     ["could not download http://127.0.0.1:9/cuda/ubuntu2204/x86_64/3bf863cc.pub", "--cuda-repo-key-url"]),
    (dict(PLAN, driver_recommended_version="535.999.99"), {},
     ["cuda-drivers-535 535.999.99 is not in the repository; it offers cuda-drivers-535 535.247.01"]),
    (PLAN, {"--wheel-source": "/nonexistent/wheels"}, ["'/nonexistent/wheels' is neither an http"]),
    (PLAN, {"--url": "http://10.9.9.9/m\ngpufleet_cuda_repo_key_fingerprint: EVIL"},
     ["--url 'http://10.9.9.9/m\\ngpufleet_cuda_repo_key_fingerprint: EVIL'", "whitespace or a control character"]),
    (PLAN, {"--url": "10.9.9.9:8080/m"}, ["--url '10.9.9.9:8080/m'", "http://HOST:PORT/PATH"]),
])
def test_bad_input_is_named_and_nothing_is_written(upstream, tmp_path, capsys, plan, over, words):
    rc = cli.main(mirror_args(upstream, tmp_path, plan, **over))
    _out, err = capsys.readouterr()
    assert rc == 2
    for word in words:
        assert word in err, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "key") == ["plan.json"]


def test_a_wheel_url_that_names_a_path_is_refused_and_nothing_is_written(upstream, tmp_path, capsys):
    """An index links torch as ..%2Fescape%2Ftorch-...whl: its file name would be a path out of --dest."""
    index = tmp_path / "index"
    (index / "escape").mkdir(parents=True)
    evil = ""
    for wheel in sorted(upstream["wheels"].iterdir()):
        project = wheel.name.split("-")[0]
        if project == "torch":
            shutil.copy(wheel, index / "escape" / wheel.name)
            evil = "../../..%2Fescape%2F" + wheel.name.replace("+", "%2B")
            href = evil
        else:
            shutil.copy(wheel, index / wheel.name)
            href = f"../../{wheel.name.replace('+', '%2B')}"
        (index / "simple" / project).mkdir(parents=True)
        (index / "simple" / project / "index.html").write_text(f'<a href="{href}">{wheel.name}</a>')
    with served(index) as server:
        rc = cli.main(mirror_args(upstream, tmp_path, PLAN, **{"--wheel-source": f"{server.url}/simple/"}))
    _out, err = capsys.readouterr()
    assert rc == 2, err
    assert "not a wheel file name" in err and "%2Fescape%2Ftorch-2.1.2" in err, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "key") == ["index", "plan.json"]
    assert not (tmp_path / "escape").exists()


@pytest.mark.skipif(shutil.which("dnf") is not None, reason="this machine has dnf")
def test_an_rpm_plan_says_dnf_is_not_available_here(upstream, tmp_path, capsys):
    rc = cli.main(mirror_args(upstream, tmp_path, DNF_PLAN))
    _out, err = capsys.readouterr()
    assert rc == 2 and "dnf is not available on this machine" in err and "rhel9" in err
    assert not (tmp_path / "mirror").exists()


@pytest.fixture
def gpu_sysfs(tmp_path):
    device = tmp_path / "sys" / "0000:18:00.0"
    device.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200")):
        (device / name).write_text(value + "\n")
    return tmp_path / "sys"


def test_the_inventory_mode_reads_each_nodes_plan_and_state(tmp_path, gpu_sysfs):
    from cli_helpers import local_inventory

    inventory = local_inventory(tmp_path / "inventory.json", hosts=("n1",), gpufleet_pci_sysfs_path=str(gpu_sysfs),
                                gpufleet_stack_request={"cuda": "12.4", "torch": "2.4.1"},
                                gpufleet_pytorch_override={"version": "2.13.0", "variant": "cpu"},
                                gpufleet_cuda_repo_url="http://10.1.1.1/cuda", gpufleet_nccl_version="9.9.9-1+cuda12.4")
    from gpufleet import collection
    from gpufleet.mirror import ansible_environment

    found = collection.locate()
    records = collect_inventory_facts(str(inventory), None, [], ansible_environment(found), found.root)
    target, = targets_from_facts(records, PlanOptions(os_keyring="/k.gpg"))
    assert target.nodes == ("n1",) and target.kernel == platform.release()
    assert target.cuda.url.startswith("http://10.1.1.1/cuda/") and target.cuda.key_url.startswith("http://10.1.1.1/cuda/")
    assert f"linux-headers-{platform.release()}" in target.os_packages
    assert target.stack.nccl_version == "9.9.9-1+cuda12.4"
    assert target.stack.wheel_requirements[0] == "torch==2.13.0+cpu"  # the override, as the role installs it
    assert any(r.startswith("numpy==") for r in target.stack.wheel_requirements)
    assert target.base_status == Path("/var/lib/dpkg/status").read_bytes()
    assert target.python == "%d.%d" % tuple(map(int, platform.python_version_tuple()[:2]))


def test_a_node_the_plan_fails_on_is_named(tmp_path):
    from cli_helpers import local_inventory
    from gpufleet import collection
    from gpufleet.mirror import ansible_environment

    (tmp_path / "empty").mkdir()
    inventory = local_inventory(tmp_path / "inventory.json", hosts=("n1",), gpufleet_pci_sysfs_path=str(tmp_path / "empty"))
    found = collection.locate()
    with pytest.raises(MirrorError) as err:
        collect_inventory_facts(str(inventory), None, [], ansible_environment(found), found.root)
    assert "failed or unreachable: n1" in str(err.value) and "no NVIDIA GPU found" in str(err.value)


class _HeldWheels:
    """An index whose torch wheel is served only once released: the mirror is caught inside pip's download."""

    def __init__(self, index: Path):
        self.index, self.release, self.asked = index, threading.Event(), threading.Event()

    def handler(self):
        held = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                if self.path.endswith(".whl") and "torch-" in self.path:
                    held.asked.set()
                    held.release.wait(120)
                super().do_GET()
        return functools.partial(Handler, directory=str(self.index))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_cancelled_mirror_leaves_no_temporary_directory_of_its_own_or_of_pip(upstream, tmp_path, signum):
    index = tmp_path / "index"
    index.mkdir()
    for wheel in sorted(upstream["wheels"].iterdir()):
        project = wheel.name.split("-")[0]
        shutil.copy(wheel, index / wheel.name)
        (index / "simple" / project).mkdir(parents=True)
        (index / "simple" / project / "index.html").write_text(
            f'<a href="../../{wheel.name.replace("+", "%2B")}">{wheel.name}</a>')
    held = _HeldWheels(index)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), held.handler())
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    argv = mirror_args(upstream, tmp_path, PLAN, **{"--wheel-source": f"http://127.0.0.1:{server.server_address[1]}/simple/"})
    env = dict(os.environ, TMPDIR=str(scratch))
    try:
        child = subprocess.Popen([sys.executable, "-m", "gpufleet", *argv], cwd=REPO, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert held.asked.wait(300), "the mirror never asked for the torch wheel"
        during = sorted(p.name for p in scratch.iterdir())
        child.send_signal(signum)
        _out, err = child.communicate(timeout=120)
    finally:
        held.release.set()
        server.shutdown()
        server.server_close()
    assert child.returncode == 2, err
    assert "stopped" in err and "nothing was written" in err, err
    assert during, "pip was not caught while it held temporary files"
    left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*"))
    assert left == [], f"left behind in TMPDIR: {left[:10]}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "key", "plan.json", "tmp"]
