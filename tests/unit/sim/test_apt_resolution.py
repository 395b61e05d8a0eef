"""apt resolves NVIDIA's documented commands against the manifest-built repositories (no
simulated cluster: the host's apt-get in simulate mode over a private state directory)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SIM_DIR = Path(__file__).resolve().parents[2] / "sim"
sys.path.insert(0, str(SIM_DIR))

from gfsim import manifest as manifest_lib  # noqa: E402
from gfsim import packages  # noqa: E402

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("apt-get", "apt-ftparchive", "dpkg-deb")),
    reason="needs apt-get, apt-ftparchive and dpkg-deb (a Debian/Ubuntu host with apt-utils)")

# What every node has before the NVIDIA repository is used: the OS packages the manifests
# depend on come from the node's own mirror.
BASE = {"dkms": "3.0.10-8+deb12u1", "libc6": "2.36-9+deb12u10", "systemd-coredump": "252.39-1~deb12u2"}


class AptSandbox:
    def __init__(self, root: Path, repo: Path):
        self.root = root
        for d in ("state/lists/partial", "cache/archives/partial", "etc"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "etc/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
        self.installed: dict[str, str] = {}
        self.auto: set[str] = set()
        self.control: dict[tuple[str, str], str] = {}
        for stanza in (repo / "Packages").read_text().strip().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
            keep = [line for line in stanza.splitlines()
                    if line.split(":", 1)[0] in ("Package", "Version", "Architecture", "Depends", "Provides",
                                                 "Conflicts", "Replaces", "Maintainer", "Description")]
            self.control[(fields["Package"], fields["Version"])] = "\n".join(keep)
        self._write_status()
        self.apt("update")

    def _write_status(self):
        stanzas = [f"Package: {n}\nStatus: install ok installed\nVersion: {v}\nArchitecture: amd64\n"
                   "Maintainer: base\nDescription: base package" for n, v in BASE.items()]
        for name, version in self.installed.items():
            stanzas.append(self.control[(name, version)].replace("Package: " + name,
                                                                 f"Package: {name}\nStatus: install ok installed", 1))
        (self.root / "status").write_text("\n\n".join(stanzas) + "\n")
        (self.root / "state/extended_states").write_text("".join(
            f"Package: {n}\nArchitecture: amd64\nAuto-Installed: 1\n\n" for n in sorted(self.auto)))

    def install(self, pins: list[str], manual: list[str]):
        """Mark name=version pins installed; all but `manual` as pulled in automatically, as
        after `apt-get install <manual>`."""
        for pin in pins:
            name, version = pin.split("=", 1)
            self.installed[name] = version
            if name not in manual:
                self.auto.add(name)
        self._write_status()

    def apt(self, *args: str) -> subprocess.CompletedProcess:
        opts = [f"-oDir::State={self.root}/state", f"-oDir::State::status={self.root}/status",
                f"-oDir::Cache={self.root}/cache", f"-oDir::Etc::SourceList={self.root}/etc/sources.list",
                "-oDir::Etc::SourceParts=/dev/null", "-oDir::Etc::Preferences=/dev/null",
                "-oDir::Etc::PreferencesParts=/dev/null", "-oAPT::Architecture=amd64",
                "-oAPT::Architectures::=amd64", "-oDebug::NoLocking=1", "-oAPT::Get::List-Cleanup=0",
                "-oAPT::Sandbox::User=root", "-oDPkg::Lock::Timeout=0", "-oAPT::Install-Recommends=0"]
        return subprocess.run(["apt-get", *opts, *args], capture_output=True, text=True, check=False)

    def simulate(self, *args: str) -> tuple[int, set[str], set[str], str]:
        """(rc, installed name=version, removed names, output) of `apt-get install -s`."""
        proc = self.apt("install", "-s", "-y", *args)
        pattern = r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+)"
        inst = {m.group(1) + "=" + m.group(2) for m in re.finditer(pattern, proc.stdout, re.M)}
        remv = {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("Remv ")}
        return proc.returncode, inst, remv, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    built = {}
    for name, manifest in manifest_lib.load_all().items():
        repo = tmp_path_factory.mktemp(name)
        packages.build_manifest_debs(manifest, repo)
        index = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, capture_output=True, text=True,
                               check=True).stdout
        (repo / "Packages").write_text(index)
        built[name] = repo
    return built


@pytest.fixture
def ubuntu(repos, tmp_path):
    return AptSandbox(tmp_path, repos["ubuntu2204"])


@pytest.fixture
def debian(repos, tmp_path):
    return AptSandbox(tmp_path, repos["debian12"])


def names(inst: set[str]) -> set[str]:
    return {i.split("=")[0] for i in inst}


def test_ubuntu_documented_open_install_resolves_to_the_open_module(ubuntu):
    rc, inst, _remv, out = ubuntu.simulate("nvidia-kernel-open-535", "cuda-drivers-535")
    assert rc == 0, out
    assert "nvidia-dkms-535-open=535.247.01-0ubuntu1" in inst, out
    assert "nvidia-dkms-535" not in names(inst)


def test_ubuntu_cuda_drivers_alone_installs_the_proprietary_module(ubuntu):
    rc, inst, _remv, out = ubuntu.simulate("cuda-drivers-535")
    assert rc == 0, out
    assert "nvidia-dkms-535" in names(inst) and "nvidia-dkms-535-open" not in names(inst)


def test_ubuntu_names_nvidia_does_not_ship_are_refused(ubuntu):
    # (nvidia-open without a branch is NVIDIA's name from R590 on, which ubuntu2204 carries: not a wrong name.)
    for wrong in ("nvidia-driver-535-open", "nvidia-kernel-open-dkms"):
        rc, _inst, _remv, out = ubuntu.simulate(wrong)
        assert rc != 0 and f"Unable to locate package {wrong}" in out, out


def test_ubuntu_cuda_drivers_pin_alone_does_not_hold_an_old_driver(ubuntu):
    """cuda-drivers-535=535.104.05-1 depends on nvidia-driver-535 (>= 535.104.05): apt takes the newest."""
    rc, inst, _remv, out = ubuntu.simulate("cuda-drivers-535=535.104.05-1")
    assert rc == 0, out
    assert "nvidia-driver-535=535.247.01-0ubuntu1" in inst, out


def test_ubuntu_upgrade_from_535_54_03_to_535_104_05(ubuntu):
    m = manifest_lib.load_all()["ubuntu2204"]
    ubuntu.install(m.preinstall_pins("535.54.03", "proprietary"),
                   manual=sorted(set(m.names()) - set(m.preinstall_auto("535.54.03", "proprietary"))))
    pins = m.preinstall_pins("535.104.05", "proprietary")
    rc, inst, _remv, out = ubuntu.simulate(*pins)
    assert rc == 0, out
    assert "nvidia-dkms-535=535.104.05-0ubuntu1" in inst and "cuda-drivers-535=535.104.05-1" in inst, out


def test_ubuntu_branch_upgrade_535_to_570_needs_the_old_metapackages_removed(ubuntu):
    m = manifest_lib.load_all()["ubuntu2204"]
    ubuntu.install(m.preinstall_pins("535.183.01", "open"),
                   manual=sorted(set(m.names()) - set(m.preinstall_auto("535.183.01", "open"))))
    rc, _inst, _remv, out = ubuntu.simulate("nvidia-kernel-open-570", "cuda-drivers-570")
    assert rc != 0 and "Conflicts" in out, out     # the R535 set holds on: both branches cannot coexist
    # Naming the top-level packages of the old branch for removal is not enough for apt's resolver
    # with these (sourced) Conflicts on virtual names ...
    rc, _inst, _remv, out = ubuntu.simulate("nvidia-kernel-open-570", "cuda-drivers-570", "cuda-drivers-535-",
                                            "nvidia-kernel-open-535-")
    assert rc != 0, out
    # ... removing the old branch's whole set in the same transaction is.
    old = [p.split("=")[0] + "-" for p in m.preinstall_pins("535.183.01", "open")]
    rc, inst, remv, out = ubuntu.simulate("nvidia-kernel-open-570", "cuda-drivers-570", *old)
    assert rc == 0, out
    assert "nvidia-dkms-570-open" in names(inst) and "nvidia-dkms-535-open" in remv, out
    assert "nvidia-dkms-570" not in names(inst)


def test_debian12_has_no_r535_and_documented_commands_resolve(debian):
    rc, _inst, _remv, out = debian.simulate("cuda-drivers-535")
    assert rc != 0 and "Unable to locate package cuda-drivers-535" in out
    rc, inst, _remv, out = debian.simulate("nvidia-kernel-open-dkms", "cuda-drivers-570")
    assert rc == 0, out
    assert "nvidia-kernel-open-dkms" in names(inst) and "nvidia-kernel-dkms" not in names(inst), out
    rc, inst, _remv, out = debian.simulate("cuda-drivers-550")
    assert rc == 0 and "nvidia-kernel-dkms" in names(inst), out
    rc, _inst, _remv, out = debian.simulate("cuda-toolkit-12-2")
    assert rc != 0 and "Unable to locate package cuda-toolkit-12-2" in out


@pytest.mark.parametrize("sandbox, dcgm3, major", [("ubuntu", "1:3.3.6", "12"), ("ubuntu", "1:3.3.5", "11"),
                                                   ("debian", "1:3.3.5", "12")])
def test_dcgm4_install_replaces_dcgm3_in_one_transaction(request, sandbox, dcgm3, major):
    """The gpu_diagnostics role's install (the plan's -core and -cuda<major> at its version, issue 27 item 6) on a
    node with DCGM 3: apt removes datacenter-gpu-manager in the same transaction, installs both at the version."""
    apt = request.getfixturevalue(sandbox)
    apt.install(["datacenter-gpu-manager=" + dcgm3], manual=["datacenter-gpu-manager"])
    wanted = ["datacenter-gpu-manager-4-core=1:4.5.2-1", "datacenter-gpu-manager-4-cuda%s=1:4.5.2-1" % major]
    rc, inst, remv, out = apt.simulate(*wanted)
    assert rc == 0, out
    assert inst == set(wanted), out
    assert remv == {"datacenter-gpu-manager"}, out
