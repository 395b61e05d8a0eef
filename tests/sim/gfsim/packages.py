"""Stand-in packages built from the sourced manifests (tests/sim/manifests/*.yml).

Names, versions and relations come from the manifest entry as they are; only the payload is
ours: wrapper scripts that run the stand-in programs, version files the stand-ins read, and
systemd units that behave like the real ones where the roles depend on it (fabric manager
refuses a driver it does not match). Nothing here reads the project's roles or solver data.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .manifest import Entry, Manifest
from .util import run

KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
SIM_LIB = "/usr/lib/gpufleet-sim"
# What the stand-ins read: the userspace package's version (nvidia-smi/NVML) and the kernel
# module package's "<version> <flavour>". nvidia-smi reports the module's version and fails
# like the real tool when the two differ or no module is installed.
USERSPACE_VERSION = f"{SIM_LIB}/userspace_version"
KERNEL_MODULE = f"{SIM_LIB}/kernel_module"

STANDIN_WRAPPER = '#!/bin/sh\nexec /usr/bin/python3 /usr/lib/gpufleet-sim/standins/{prog} "$@"\n'


def build_deb(out_dir: Path, name: str, version: str, *, arch="amd64", depends="", provides="",
              conflicts="", replaces="", description="", files=None, symlinks=None,
              postinst="", prerm="", section="multiverse/devel") -> Path:
    files = files or {}
    symlinks = symlinks or {}
    with tempfile.TemporaryDirectory(prefix="gfsim-deb-") as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        fields = [f"Package: {name}", f"Version: {version}", f"Architecture: {arch}",
                  "Maintainer: gpufleet simulator <sim@gpufleet.invalid>", f"Section: {section}",
                  "Priority: optional"]
        for key, value in (("Depends", depends), ("Provides", provides),
                           ("Conflicts", conflicts), ("Replaces", replaces)):
            if value:
                fields.append(f"{key}: {value}")
        fields.append(f"Description: gpufleet simulator stand-in for {description or name}")
        (root / "DEBIAN/control").write_text("\n".join(fields) + "\n")
        for script_name, body in (("postinst", postinst), ("prerm", prerm)):
            if body:
                script = root / "DEBIAN" / script_name
                script.write_text("#!/bin/sh\nset -e\n" + body)
                script.chmod(0o755)
        for path, (content, mode) in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            target.chmod(mode)
        for path, dest in symlinks.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(dest)
        deb = out_dir / f"{name}_{version.split(':')[-1]}_{arch}.deb"
        run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", root, deb])
    return deb


def _systemd_postinst(unit: str, start: bool) -> str:
    body = f"deb-systemd-helper enable {unit} >/dev/null || true\n"
    body += "if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true\n"
    if start:
        body += f"  deb-systemd-invoke restart {unit} >/dev/null || true\n"
    return body + "fi\n"


def _systemd_prerm(unit: str) -> str:
    return (f"if [ -d /run/systemd/system ]; then deb-systemd-invoke stop {unit} >/dev/null || true; fi\n"
            f"if [ \"$1\" = remove ]; then deb-systemd-helper purge {unit} >/dev/null || true; fi\n")


def _relation(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def payload_files(entry: Entry) -> tuple[dict, dict, str, str]:
    """(files, symlinks, postinst, prerm) for one manifest entry's stand-in payload."""
    kind = entry.payload["kind"]
    up = entry.upstream
    if kind == "none":
        return {}, {}, "", ""
    if kind == "userspace":
        return ({"/usr/bin/nvidia-smi": (STANDIN_WRAPPER.format(prog="nvidia_smi.py"), 0o755),
                 USERSPACE_VERSION: (up + "\n", 0o644)}, {}, "", "")
    if kind == "persistenced":
        daemon = ("#!/bin/sh\n# Stand-in daemon: persistence mode is on while it runs.\n"
                  "mkdir -p /run/gpufleet-sim && echo Enabled > /run/gpufleet-sim/persistence_mode\n"
                  "exec sleep infinity\n")
        unit = ("[Unit]\nDescription=NVIDIA Persistence Daemon\n\n[Service]\nType=simple\n"
                "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n"
                "ExecStopPost=/bin/rm -f /run/gpufleet-sim/persistence_mode\n\n"
                "[Install]\nWantedBy=multi-user.target\n")
        return ({"/usr/bin/nvidia-persistenced": (daemon, 0o755),
                 "/lib/systemd/system/nvidia-persistenced.service": (unit, 0o644)},
                {}, _systemd_postinst("nvidia-persistenced.service", start=True),
                _systemd_prerm("nvidia-persistenced.service"))
    if kind == "kmod":
        # One path for every flavour and branch: two module packages installed at once collide
        # in dpkg unless the manifest's Conflicts/Replaces say how one replaces the other.
        return {KERNEL_MODULE: (f"{up} {entry.payload['flavour']}\n", 0o644)}, {}, "", ""
    if kind == "fabricmanager":
        return _fabricmanager_payload(up)
    if kind == "imex":
        return _imex_payload()
    if kind == "nvlsm":
        # The path the fabric manager looks for on NVLink 5 systems ("/opt/nvidia/nvlsm/sbin/nvlsm does not exist.
        # Please install ... (nvlsm) package") and the config gpu-driver-container hands it; the stand-in fabric
        # manager does not start it.
        return ({"/opt/nvidia/nvlsm/sbin/nvlsm": (f"#!/bin/sh\n# Stand-in NVLink Subnet Manager {up}\nexec sleep infinity\n",
                                                  0o755),
                 "/usr/share/nvidia/nvlsm/nvlsm.conf": ("# stand-in\n", 0o644)}, {}, "", "")
    if kind == "toolkit":
        return _toolkit_payload(entry.payload)
    if kind in ("nccl", "nccl-dev"):
        return _nccl_payload(entry, dev=kind == "nccl-dev")
    if kind == "dcgm":
        unit = ("[Unit]\nDescription=NVIDIA DCGM service\n\n[Service]\nType=simple\n"
                "ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm\n\n"
                "[Install]\nWantedBy=multi-user.target\n")
        # dcgmi is the stand-in that replays real `dcgmi diag` captures, told the package's version.
        dcgmi = f"#!/bin/sh\nGPUFLEET_SIM_DCGM_VERSION='{up}' exec /usr/bin/python3 /usr/lib/gpufleet-sim/standins/dcgmi \"$@\"\n"
        return ({"/usr/bin/dcgmi": (dcgmi, 0o755),
                 "/usr/bin/nv-hostengine": ("#!/bin/sh\nexec sleep infinity\n", 0o755),
                 "/lib/systemd/system/nvidia-dcgm.service": (unit, 0o644)}, {}, "", "")
    raise ValueError(f"{entry.name}: no stand-in for payload kind {kind!r}")


def _fabricmanager_payload(upstream: str):
    script = (
        "#!/bin/sh\n"
        f"FM_VERSION={upstream}\n"
        'case "$1" in -v|--version) echo "Fabric Manager version is : $FM_VERSION"; exit 0;; esac\n'
        f"DRV=$(cut -d' ' -f1 {KERNEL_MODULE} 2>/dev/null || echo none)\n"
        'if [ "$DRV" != "$FM_VERSION" ]; then\n'
        '  echo "fabric manager NVIDIA GPU driver interface version $FM_VERSION don\'t match with driver version $DRV. '
        'Please update with matching NVIDIA driver package." >&2\n  exit 1\nfi\n'
        # Forks like the real daemon (Type=forking), so a version mismatch fails `systemctl start`
        # itself instead of a moment after it.
        "mkdir -p /run/nvidia-fabricmanager\n"
        "sleep infinity </dev/null >/dev/null 2>&1 &\n"
        "echo $! > /run/nvidia-fabricmanager/nv-fabricmanager.pid\n")
    files = {
        "/usr/bin/nv-fabricmanager": (script, 0o755),
        "/usr/share/nvidia/nvswitch/fabricmanager.cfg": ("LOG_LEVEL=4\n", 0o644),
        "/lib/systemd/system/nvidia-fabricmanager.service": (
            "[Unit]\nDescription=NVIDIA fabric manager service\n\n[Service]\nType=forking\n"
            "PIDFile=/run/nvidia-fabricmanager/nv-fabricmanager.pid\n"
            "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n\n"
            "[Install]\nWantedBy=multi-user.target\n", 0o644),
    }
    postinst = ("deb-systemd-helper enable nvidia-fabricmanager.service >/dev/null || true\n"
                "if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi\n")
    return files, {}, postinst, _systemd_prerm("nvidia-fabricmanager.service")


def _imex_payload():
    """nvidia-imex and its unit; not enabled by the package (DGX OS 7 enables nvidia-imex.service itself,
    NVIDIA/deepops dgx_os7_imex_services), so the role's enabling it is what the simulator sees."""
    unit = ("[Unit]\nDescription=NVIDIA IMEX service\n\n[Service]\nType=simple\n"
            "ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
    return ({"/usr/bin/nvidia-imex": ("#!/bin/sh\nexec sleep infinity\n", 0o755),
             "/etc/nvidia-imex/nodes_config.cfg": ("", 0o644),
             "/lib/systemd/system/nvidia-imex.service": (unit, 0o644)}, {}, "", _systemd_prerm("nvidia-imex.service"))


def _toolkit_payload(p: dict):
    cuda = p["cuda"]
    prefix = f"/usr/local/cuda-{cuda}"
    lines = ["nvcc: NVIDIA (R) Cuda compiler driver", f"Copyright (c) {p['copyright']} NVIDIA Corporation"]
    if p.get("built_on"):
        lines.append(f"Built on {p['built_on']}")
    lines.append(f"Cuda compilation tools, release {cuda}, V{p['nvcc_release']}")
    if p.get("build"):
        lines.append(f"Build {p['build']}")
    nvcc = "#!/bin/sh\ncat <<'END'\n" + "\n".join(lines) + "\nEND\n"
    version_json = ('{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "%s"\n   },\n'
                    '   "cuda_nvcc" : {\n      "name" : "CUDA NVCC",\n      "version" : "%s"\n   }\n}\n'
                    % (p["toolkit_version"], p["nvcc_release"]))
    priority = int(cuda.replace(".", ""))
    return ({f"{prefix}/bin/nvcc": (nvcc, 0o755), f"{prefix}/version.json": (version_json, 0o644)}, {},
            f"update-alternatives --install /usr/local/cuda cuda {prefix} {priority}\n",
            f'if [ "$1" = remove ]; then update-alternatives --remove cuda {prefix}; fi\n')


def _nccl_payload(entry: Entry, dev: bool):
    upstream = entry.upstream
    cuda = entry.version.split("+cuda")[-1]
    if not dev:
        lib = f"/usr/lib/x86_64-linux-gnu/libnccl.so.{upstream}"
        return ({lib: (f"NCCL {upstream} built for CUDA {cuda} (stand-in)\n", 0o644)},
                {"/usr/lib/x86_64-linux-gnu/libnccl.so.2": f"libnccl.so.{upstream}"}, "", "")
    major, minor, patch = upstream.split(".")
    header = (f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n"
              '#define NCCL_SUFFIX ""\n'
              f"#define NCCL_VERSION_CODE {int(major) * 10000 + int(minor) * 100 + int(patch)}\n")
    return ({"/usr/include/nccl.h": (header, 0o644)},
            {"/usr/lib/x86_64-linux-gnu/libnccl.so": "libnccl.so.2"}, "", "")


def build_entry(out: Path, entry: Entry) -> Path:
    payload = dict(entry.payload)
    if payload["kind"] == "toolkit":
        payload["toolkit_version"] = entry.upstream
        entry = Entry(**{**entry.__dict__, "payload": payload})
    files, symlinks, postinst, prerm = payload_files(entry)
    note = f" [unverified: {entry.unverified}]" if entry.unverified else ""
    return build_deb(out, entry.name, entry.version, depends=_relation(entry.depends),
                     provides=_relation(entry.provides), conflicts=_relation(entry.conflicts),
                     replaces=_relation(entry.replaces),
                     description=f"{entry.name} (sources: {', '.join(entry.source)}){note}",
                     files=files, symlinks=symlinks, postinst=postinst, prerm=prerm)


def build_manifest_debs(manifest: Manifest, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [build_entry(out, entry) for entry in manifest.entries]


def build_keyring_package(out: Path, keyring: bytes, repo_url: str, manifest: Manifest) -> Path:
    """cuda-keyring for one cluster and repository: the test key and a source line for it."""
    k = manifest.keyring
    return build_deb(
        out, k["name"], str(k["version"]), arch="all", section="misc",
        description=f"GPG keyring for the CUDA repository (sources: {', '.join(k['source'])})",
        files={
            KEYRING: (keyring, 0o644),
            k["list_file"]: (f"deb [signed-by={KEYRING}] {repo_url}/{manifest.repository}/x86_64/ /\n", 0o644),
        },
    )


def build_headers_package(out: Path, kernel_release: str) -> Path:
    """linux-headers-$(uname -r): nodes run the host's kernel, whose headers no mirror has."""
    return build_deb(
        out, f"linux-headers-{kernel_release}", "1.0-gpufleet-sim", section="kernel",
        description=f"Header files for Linux {kernel_release}",
        files={f"/usr/src/linux-headers-{kernel_release}/Makefile": (
            f"# stand-in headers for {kernel_release}\nKERNELRELEASE = {kernel_release}\n", 0o644)},
        symlinks={f"/lib/modules/{kernel_release}/build": f"/usr/src/linux-headers-{kernel_release}"},
    )
