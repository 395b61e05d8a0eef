"""The simulated NVIDIA repositories: sourced manifests, built exactly as listed, and kept apart
from the project's roles and plugins (no simulated cluster needed)."""

from __future__ import annotations

import ast
import os
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

MANIFESTS = manifest_lib.load_all()


def test_the_repositories_are_there():
    assert {"ubuntu2204", "debian12", "ubuntu2404"} <= set(MANIFESTS)
    for name, m in MANIFESTS.items():
        assert m.path == f"compute/cuda/repos/{name}/x86_64"


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_every_entry_cites_a_source_listed_in_sources_md(name):
    m = MANIFESTS[name]
    sources_md = (manifest_lib.MANIFEST_DIR / "SOURCES.md").read_text()
    cited = {k for e in m.entries for k in e.source}
    cited |= {k for r in m.driver_releases for k in r["source"]}
    cited |= set(m.keyring["source"])
    assert cited, name
    for key in cited:
        assert key in m.sources and m.sources[key].strip(), f"{name}: {key}"
        assert re.search(rf"(^|[\s|,]){re.escape(key)}([\s|,]|$)", sources_md, re.M), f"SOURCES.md lacks {key}"
    for e in m.entries:
        assert e.source, f"{name}: {e.name}={e.version}"


def test_a_manifest_entry_without_a_source_is_refused(tmp_path):
    text = (manifest_lib.MANIFEST_DIR / "debian12.yml").read_text()
    marker = "    source:\n      - dcgm-debian12\n"
    assert marker in text
    broken = text.replace(marker, "    source: []\n")
    path = tmp_path / "debian12.yml"
    path.write_text(broken)
    with pytest.raises(manifest_lib.ManifestError, match="datacenter-gpu-manager.*no source"):
        manifest_lib.load(path)
    path.write_text(text.replace(marker, "    source: [no-such-key]\n"))
    with pytest.raises(manifest_lib.ManifestError, match="unknown source"):
        manifest_lib.load(path)


def test_ubuntu_names_are_the_ones_nvidia_documents():
    m = MANIFESTS["ubuntu2204"]
    names = m.names()
    assert {"nvidia-kernel-open-535", "cuda-drivers-535", "nvidia-fabricmanager-535",
            "cuda-drivers-570", "nvidia-fabricmanager-570"} <= names
    assert "nvidia-driver-535-open" not in names        # Canonical's archive name, not NVIDIA's repository
    assert {"535.54.03-1", "535.104.05-1", "535.183.01-1"} <= set(m.versions("cuda-drivers-535"))
    assert set(m.versions("cuda-toolkit-12-2")) == {"12.2.2-1"}


def test_debian12_has_debian_names_and_no_r535_or_cuda_before_12_3():
    m = MANIFESTS["debian12"]
    names = m.names()
    assert {"nvidia-driver", "nvidia-kernel-dkms", "nvidia-kernel-open-dkms", "cuda-drivers-550"} <= names
    assert not any(n.endswith("-535") or n.startswith("nvidia-driver-5") for n in names)
    assert not [u for u in m.driver_upstreams() if u.startswith("535.")]
    assert "cuda-toolkit-12-2" not in names and "cuda-toolkit-12-3" in names


def _at(m, upstream):
    return {e.name: e.version for e in m.entries if e.driver == upstream}


@pytest.mark.parametrize("name, upstream", [("ubuntu2204", "595.91.07"), ("ubuntu2404", "595.91.07"),
                                            ("ubuntu2404", "595.45.04")])
def test_ubuntu_r590_and_later_names_carry_no_branch(name, upstream):
    """NVIDIA's driver installation guide: from R590 the Ubuntu packages drop the branch from their names."""
    m = MANIFESTS[name]
    at = _at(m, upstream)
    assert {"nvidia-open", "nvidia-driver-open", "nvidia-dkms-open", "nvidia-kernel-source-open",
            "nvidia-fabricmanager", "cuda-drivers"} <= set(at)
    assert not [n for n in at if n.endswith("-595") or "-595-" in n]
    assert at["nvidia-open"] == at["nvidia-fabricmanager"] == upstream + "-1ubuntu1"
    assert m.versions("nvidia-driver-pinning-595")


def test_ubuntu2204_r580_keeps_the_branch_names_and_renames_the_fabric_manager():
    m = MANIFESTS["ubuntu2204"]
    first, later = _at(m, "580.82.07"), _at(m, "580.126.20")
    assert {"nvidia-open-580", "nvidia-fabricmanager-580", "nvidia-dkms-580-open", "cuda-drivers-580"} <= set(first)
    assert later["nvidia-fabricmanager"] == "580.126.20-1" and "nvidia-fabricmanager-580" not in later
    assert "nvidia-open" not in first and "nvidia-open" not in later


def test_debian12_r580_has_the_pinning_package_and_the_renamed_fabric_manager():
    m = MANIFESTS["debian12"]
    assert set(m.versions("nvidia-driver-pinning-580")) == {"580-1", "580-5"}
    at = _at(m, "580.126.16")
    assert at["nvidia-open"] == at["nvidia-fabricmanager"] == at["nvidia-kernel-open-dkms"] == "580.126.16-1"
    assert not [u for u in m.driver_upstreams() if u.startswith("595.")]
    assert set(m.versions("libnccl2")) >= {"2.19.3-1+cuda12.3"}


def test_ubuntu2404_starts_at_cuda_12_5_and_carries_cuda_13():
    m = MANIFESTS["ubuntu2404"]
    toolkits = sorted(n for n in m.names() if n.startswith("cuda-toolkit-"))
    assert toolkits == ["cuda-toolkit-12-5", "cuda-toolkit-13-0", "cuda-toolkit-13-2"]
    assert {u.split(".")[0] for u in m.driver_upstreams()} == {"595"}
    assert m.preinstall_pins("595.58.03", "open")[-1] == "nvidia-open=595.58.03-1ubuntu1"


def test_preinstall_of_an_r590_release_uses_nvidias_unversioned_names_and_the_pinning_package():
    m = MANIFESTS["ubuntu2204"]
    pins = m.preinstall_pins("595.91.07", "proprietary")
    assert pins[0] == "nvidia-driver-pinning-595=595-1" and "cuda-drivers=595.91.07-1" in pins
    assert "nvidia-dkms=595.91.07-1ubuntu1" in pins and not [p for p in pins if "-595=" in p and "pinning" not in p]
    assert m.preinstall_auto("595.91.07", "open") == [
        "nvidia-utils", "nvidia-persistenced", "libnvidia-compute", "nvidia-kernel-common", "nvidia-kernel-source-open",
        "nvidia-dkms-open", "nvidia-driver-open"]
    # The branch-named releases keep their own list.
    assert "cuda-drivers-580=580.82.07-1" in m.preinstall_pins("580.82.07", "proprietary")


def test_preinstall_pins_every_flavour_package_and_refuses_unknown_releases():
    m = MANIFESTS["ubuntu2204"]
    pins = m.preinstall_pins("535.54.03", "proprietary")
    assert "nvidia-dkms-535=535.54.03-0ubuntu1" in pins and "cuda-drivers-535=535.54.03-1" in pins
    assert not any("open" in p for p in pins)
    assert "nvidia-kernel-open-535=535.54.03-0ubuntu1" in m.preinstall_pins("535.54.03", "open")
    assert set(m.preinstall_auto("535.54.03", "open")) == {
        p.split("=")[0] for p in m.preinstall_pins("535.54.03", "open")} - {"nvidia-kernel-open-535", "cuda-drivers-535"}
    with pytest.raises(manifest_lib.ManifestError, match=r"debian12.*no driver 535\.183\.01.*550\.54\.15"):
        MANIFESTS["debian12"].preinstall_pins("535.183.01", "open")


def _control_fields(deb: Path) -> dict:
    text = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line
                                              and not line.startswith(" "))}


def _parse_index(text: str) -> list[dict]:
    stanzas = []
    for block in text.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line.startswith(" ") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key] = value.strip()
        stanzas.append(fields)
    return stanzas


@pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("apt-ftparchive") is None,
                    reason="needs dpkg-deb and apt-ftparchive (apt-get install dpkg-dev apt-utils)")
@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_built_packages_index_lists_exactly_the_manifest(name, tmp_path):
    m = MANIFESTS[name]
    packages.build_manifest_debs(m, tmp_path)
    index = subprocess.run(["apt-ftparchive", "packages", "."], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout
    served = {(s["Package"], s["Version"]): s for s in _parse_index(index)}
    wanted = {(e.name, e.version): e for e in m.entries}
    assert set(served) == set(wanted)
    for key, entry in wanted.items():
        stanza = served[key]
        for field, values in (("Depends", entry.depends), ("Provides", entry.provides),
                              ("Conflicts", entry.conflicts), ("Replaces", entry.replaces)):
            assert stanza.get(field, "") == ", ".join(values), f"{key} {field}"
    # A kernel-module package says which flavour it is; userspace says its version.
    kmod = next(e for e in m.entries if e.payload["kind"] == "kmod" and e.payload["flavour"] == "open")
    deb = next(tmp_path.glob(f"{kmod.name}_{kmod.version.split(':')[-1]}_*.deb"))
    listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
    assert b"usr/lib/gpufleet-sim/kernel_module" in listing
    assert _control_fields(deb)["Package"] == kmod.name


def _python_sources() -> list[Path]:
    return list(SIM_DIR.rglob("*.py")) + [p for p in (SIM_DIR / "standins").iterdir() if p.is_file()]


def test_nothing_under_tests_sim_reads_the_projects_roles_or_plugins():
    offenders = []
    for path in _python_sources():
        text = path.read_text(errors="replace")
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    offenders += [f"{path}: import {m}" for m in mods
                                  if m.split(".")[0] in ("plugins", "roles", "ansible_collections", "gpufleet")]
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if re.search(r"(^|/)(plugins|roles)/|compat_data|module_utils", node.value):
                        offenders.append(f"{path}: string {node.value[:60]!r}")
        elif re.search(r"(^|/)(plugins|roles)/|compat_data", text):
            offenders.append(f"{path}: names the project's data")
    for path in manifest_lib.MANIFEST_DIR.glob("*.yml"):
        if re.search(r"compat_data|plugins/|roles/", path.read_text()):
            offenders.append(f"{path}: names the project's data")
    assert offenders == []


# --- the nvidia-smi stand-in reads what is installed ---------------------------------------

# The project's own copy (tests/fixtures): the test must run, not skip, in a clone without ../shared.
H100 = SIM_DIR.parent / "fixtures" / "nvidia-smi-q" / "h100-sxm-80gb-hbm3-x8-drv535.183.01-cuda12.2.txt"


def _smi(tmp_path, *args, userspace=None, kmod=None, requires_open=False, capture=H100):
    etc, lib, run = tmp_path / "etc", tmp_path / "lib", tmp_path / "run"
    for d in (etc, lib, run):
        d.mkdir(exist_ok=True)
    (etc / "node.json").write_text(
        '{"profile": "p", "faults": [], "requires_open_modules": %s, "gpu_capture": %s}'
        % ("true" if requires_open else "false", f'"{capture}"' if capture else "null"))
    (etc / "ecc.json").write_text('{"current": "Enabled", "pending": "Enabled"}')
    for name, value in (("userspace_version", userspace), ("kernel_module", kmod)):
        if value is not None:
            (lib / name).write_text(value + "\n")
    env = dict(os.environ, GPUFLEET_SIM_ETC=str(etc), GPUFLEET_SIM_DRIVER_DIR=str(lib), GPUFLEET_SIM_RUN=str(run))
    return subprocess.run([sys.executable, str(SIM_DIR / "standins" / "nvidia_smi.py"), *args],
                          capture_output=True, text=True, env=env, check=False)


def test_nvidia_smi_reports_the_installed_module_and_refuses_wrong_combinations(tmp_path):
    ok = _smi(tmp_path, "--query-gpu=driver_version", "--format=csv,noheader",
              userspace="535.104.05", kmod="535.104.05 proprietary")
    assert ok.returncode == 0 and set(ok.stdout.split()) == {"535.104.05"}, ok.stdout + ok.stderr
    (tmp_path / "a").mkdir()
    no_module = _smi(tmp_path / "a", userspace="535.104.05")
    assert no_module.returncode == 9 and "couldn't communicate with the NVIDIA driver" in no_module.stdout
    (tmp_path / "b").mkdir()
    mismatch = _smi(tmp_path / "b", "-q", userspace="550.54.15", kmod="535.104.05 open")
    assert mismatch.returncode == 18
    assert mismatch.stdout.splitlines() == ["Failed to initialize NVML: Driver/library version mismatch",
                                            "NVML library version: 550.54"]
    (tmp_path / "c").mkdir()
    blackwell = _smi(tmp_path / "c", "-L", userspace="570.124.06", kmod="570.124.06 proprietary",
                     requires_open=True, capture=None)
    assert blackwell.returncode == 6 and blackwell.stdout == "No devices were found\n"
    (tmp_path / "d").mkdir()
    no_capture = _smi(tmp_path / "d", "-L", userspace="570.124.06", kmod="570.124.06 open",
                      requires_open=True, capture=None)
    assert no_capture.returncode == 2 and "PCI ids only" in no_capture.stdout


def test_ubuntu_2404_nodes_use_their_repository_and_a_noble_suite_of_the_mirror():
    from gfsim import repo  # noqa: PLC0415 - the repository builder, imported where it is tested

    m = manifest_lib.for_os("ubuntu24.04")
    assert m.repository == "ubuntu2404" and m.os["version_id"] == "24.04" and m.os["codename"] == "noble"
    assert repo._ubuntu_suites() == ["jammy", "noble"]
    with pytest.raises(manifest_lib.ManifestError, match="unknown --os 'ubuntu26.04'; known: debian12, ubuntu22.04, ubuntu24.04"):
        manifest_lib.for_os("ubuntu26.04")


# ---------------------------------------------------------------- Blackwell's NVLink stack (issue 27 item 5)


def test_imex_is_served_at_each_releases_driver_version():
    """IMEX is released with the driver (gpu-driver-container installs nvidia-imex=${DRIVER_VERSION}*)."""
    u2204, u2404 = MANIFESTS["ubuntu2204"], MANIFESTS["ubuntu2404"]
    assert _at(u2204, "595.91.07")["nvidia-imex"] == _at(u2204, "595.91.07")["nvidia-fabricmanager"] == "595.91.07-1ubuntu1"
    assert _at(u2204, "580.126.20")["nvidia-imex"] == _at(u2204, "580.126.20")["nvidia-fabricmanager"] == "580.126.20-1"
    assert "nvidia-imex" not in _at(u2204, "535.183.01")
    assert {_at(u2404, u)["nvidia-imex"] for u in u2404.driver_upstreams()} == {
        u + "-1ubuntu1" for u in u2404.driver_upstreams()}


def test_nvlsm_keeps_its_own_date_versions_apart_from_the_driver():
    for name, versions in (("ubuntu2204", {"2025.06.5-1", "2025.10.11-1"}), ("ubuntu2404", {"2025.06.10-1"})):
        m = MANIFESTS[name]
        assert set(m.versions("nvlsm")) == versions
        assert all(e.driver is None for e in m.entries if e.name == "nvlsm")


def test_the_nvlink_payloads_ship_what_the_services_need():
    u2204 = MANIFESTS["ubuntu2204"]
    imex = next(e for e in u2204.entries if e.name == "nvidia-imex" and e.driver == "595.91.07")
    files, _links, postinst, prerm = packages.payload_files(imex)
    assert "/lib/systemd/system/nvidia-imex.service" in files and "/usr/bin/nvidia-imex" in files
    assert postinst == "" and "nvidia-imex.service" in prerm   # the role enables it, the package does not
    nvlsm = u2204.entry("nvlsm", "2025.10.11-1")
    files, _links, _post, _pre = packages.payload_files(nvlsm)
    assert files["/opt/nvidia/nvlsm/sbin/nvlsm"][1] == 0o755


def test_an_hgx_b200_plan_is_served_by_the_ubuntu2204_repository():
    """Every name a B200 NVSwitch plan installs is in the simulated repository at the version the role asks for:
    the driver and fabric manager at the plan's release, NVLSM at any (its newest) version."""
    from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import stack_plan
    from ansible_collections.gpufleet.cluster.plugins.module_utils import driver_decision
    plan = stack_plan({"cuda": "12.8"}, gpus=["NVIDIA B200"] * 8, os="ubuntu22.04", arch="x86_64", nvswitch=True)
    role_plan = {"version": plan["driver_recommended_version"], "packages": plan["packages"]["driver"],
                 "fabricmanager_packages": plan["packages"]["fabricmanager"],
                 "imex_packages": plan["packages"]["imex"], "nvlsm_packages": plan["packages"]["nvlsm"]}
    m = MANIFESTS["ubuntu2204"]
    assert plan["packages"]["nvlsm"] == ["nvlsm"]
    for request in driver_decision.repository_requests(role_plan):
        offered = m.versions(request["name"])
        assert offered, request
        if request["match"] == "upstream":
            assert any(v.split(":")[-1].rsplit("-", 1)[0] == request["version"] for v in offered), request
        elif request["match"] == "branch":
            assert any(v.startswith(request["version"] + "-") for v in offered), request


@pytest.mark.parametrize("name, os_in, cuda", [("ubuntu2204", "ubuntu22.04", "12.8"), ("ubuntu2204", "ubuntu22.04", "11.8"),
                                               ("debian12", "debian12", "12.4"), ("ubuntu2404", "ubuntu24.04", "13.2"),
                                               ("ubuntu2404", "ubuntu24.04", "12.5")])
def test_the_dcgm4_packages_a_plan_names_are_served_at_its_version(name, os_in, cuda):
    """The simulated repositories offer DCGM 4 as the plan names it (issue 27 item 6): -core and the -cuda<major>
    package at the plan's DCGM release, -core replacing DCGM 3's package, dcgmi and the host engine unit in -core."""
    from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import stack_plan
    plan = stack_plan({"cuda": cuda}, gpus=["NVIDIA H100 80GB HBM3"], os=os_in, arch="x86_64", nvswitch=False)
    m = MANIFESTS[name]
    assert plan["packages"]["dcgm"][-1].endswith("-cuda" + cuda.split(".")[0])
    for package in plan["packages"]["dcgm"]:
        assert plan["dcgm_version"] in m.versions(package), (package, m.versions(package))
    core = m.entry("datacenter-gpu-manager-4-core", plan["dcgm_version"])
    assert "datacenter-gpu-manager" in core.conflicts and "datacenter-gpu-manager" in core.replaces
    files, _links, _post, _pre = packages.payload_files(core)
    assert {"/usr/bin/dcgmi", "/lib/systemd/system/nvidia-dcgm.service"} <= set(files)
    cuda_pkg = m.entry(plan["packages"]["dcgm"][-1], plan["dcgm_version"])
    assert cuda_pkg.depends == ("datacenter-gpu-manager-4-core (= %s)" % plan["dcgm_version"],)
