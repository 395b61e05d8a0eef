"""Stand-in packages named, versioned and related like NVIDIA's CUDA repository.

Payloads are tiny: wrapper scripts that run the stand-in programs, version
files the stand-ins read, and systemd units that behave like the real ones
where the roles depend on it (fabric manager refuses a driver mismatch).
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from .util import REPO_ROOT, run

DRIVER_VERSIONS = ["525.147.05", "535.104.05", "535.183.01", "550.127.05"]
# (toolkit package version, nvcc "V" release, build tag) per CUDA X.Y, as NVIDIA ships them.
CUDA_TOOLKITS = {
    "11.7": ("11.7.1", "11.7.99", "cuda_11.7.r11.7/compiler.31442593_0", "Tue_Jun__7_18:48:49_PDT_2022"),
    "11.8": ("11.8.0", "11.8.89", "cuda_11.8.r11.8/compiler.31833905_0", "Wed_Sep_21_10:33:58_PDT_2022"),
    "12.0": ("12.0.1", "12.0.140", "cuda_12.0.r12.0/compiler.32267302_0", "Fri_Jan__6_16:45:21_PST_2023"),
    "12.1": ("12.1.1", "12.1.105", "cuda_12.1.r12.1/compiler.32688072_0", "Tue_Feb__7_19:32:13_PST_2023"),
    "12.2": ("12.2.2", "12.2.140", "cuda_12.2.r12.2/compiler.33191640_0", "Tue_Aug_15_22:02:13_PDT_2023"),
}
FALLBACK_NCCL = {
    "11.7": "2.14.3-1+cuda11.7", "11.8": "2.16.5-1+cuda11.8", "12.0": "2.18.1-1+cuda12.0",
    "12.1": "2.18.3-1+cuda12.1", "12.2": "2.18.3-1+cuda12.2",
}
EXTRA_NCCL = "2.19.3"       # a second version per CUDA so pinning has something to refuse
DCGM_VERSION = "1:3.3.5"
KEYRING_VERSION = "1.1-1"

STANDIN_WRAPPER = '#!/bin/sh\nexec /usr/bin/python3 /usr/lib/gpufleet-sim/standins/{prog} "$@"\n'


def nccl_versions() -> dict[str, str]:
    """Per-CUDA NCCL apt versions, read from the project's compat data when it has them."""
    versions = dict(FALLBACK_NCCL)
    path = REPO_ROOT / "plugins/module_utils/compat_data.py"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return versions
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CUDA_TOOLKITS" for t in node.targets):
            try:
                data = ast.literal_eval(node.value)
            except ValueError:
                return versions
            for cuda, entry in data.items():
                if cuda in versions and isinstance(entry, dict) and isinstance(entry.get("nccl"), str):
                    versions[cuda] = entry["nccl"]
    return versions


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
        fields.append(f"Description: {description or name} (gpufleet simulator stand-in)")
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


def build_driver_packages(out: Path) -> None:
    for full in DRIVER_VERSIONS:
        branch = full.split(".", maxsplit=1)[0]
        version = f"{full}-1"
        for flavour in ("", "-open"):
            name = f"nvidia-driver-{branch}{flavour}"
            build_deb(
                out, name, version, depends="python3",
                provides="nvidia-driver-any", conflicts="nvidia-driver-any", replaces="nvidia-driver-any",
                description=f"NVIDIA driver metapackage, branch {branch}{flavour}",
                files={
                    "/usr/bin/nvidia-smi": (STANDIN_WRAPPER.format(prog="nvidia_smi.py"), 0o755),
                    "/usr/lib/gpufleet-sim/driver_version": (full + "\n", 0o644),
                    "/usr/lib/gpufleet-sim/driver_flavour": (("open" if flavour else "proprietary") + "\n", 0o644),
                    "/usr/bin/nvidia-persistenced": (
                        "#!/bin/sh\n# Stand-in daemon: persistence mode is on while it runs.\n"
                        "mkdir -p /run/gpufleet-sim && echo Enabled > /run/gpufleet-sim/persistence_mode\n"
                        "exec sleep infinity\n", 0o755),
                    "/lib/systemd/system/nvidia-persistenced.service": (
                        "[Unit]\nDescription=NVIDIA Persistence Daemon\n\n[Service]\nType=simple\n"
                        "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n"
                        "ExecStopPost=/bin/rm -f /run/gpufleet-sim/persistence_mode\n\n"
                        "[Install]\nWantedBy=multi-user.target\n", 0o644),
                },
                postinst=_systemd_postinst("nvidia-persistenced.service", start=True),
                prerm=_systemd_prerm("nvidia-persistenced.service"),
            )
        build_deb(out, f"cuda-drivers-{branch}", version,
                  depends=f"nvidia-driver-{branch} (= {version}) | nvidia-driver-{branch}-open (= {version})",
                  description=f"CUDA driver metapackage for branch {branch}")
        build_deb(out, "cuda-drivers", version, depends=f"cuda-drivers-{branch} (= {version})",
                  description="CUDA driver metapackage (latest branch)")
        fm_script = (
            "#!/bin/sh\n"
            f"FM_VERSION={full}\n"
            'case "$1" in -v|--version) echo "Fabric Manager version is : $FM_VERSION"; exit 0;; esac\n'
            "DRV=$(cat /usr/lib/gpufleet-sim/driver_version 2>/dev/null || echo none)\n"
            'if [ "$DRV" != "$FM_VERSION" ]; then\n'
            '  echo "fabric manager NVIDIA GPU driver interface version $FM_VERSION don\'t match with driver version $DRV. '
            'Please update with matching NVIDIA driver package." >&2\n  exit 1\nfi\n'
            # Forks like the real daemon (Type=forking), so a version mismatch fails `systemctl start`
            # itself instead of a moment after it.
            "mkdir -p /run/nvidia-fabricmanager\n"
            "sleep infinity </dev/null >/dev/null 2>&1 &\n"
            "echo $! > /run/nvidia-fabricmanager/nv-fabricmanager.pid\n")
        build_deb(
            out, f"nvidia-fabricmanager-{branch}", version,
            provides="nvidia-fabricmanager-any", conflicts="nvidia-fabricmanager-any",
            replaces="nvidia-fabricmanager-any",
            description=f"NVIDIA Fabric Manager for driver {full}",
            files={
                "/usr/bin/nv-fabricmanager": (fm_script, 0o755),
                "/usr/share/nvidia/nvswitch/fabricmanager.cfg": ("LOG_LEVEL=4\n", 0o644),
                "/lib/systemd/system/nvidia-fabricmanager.service": (
                    "[Unit]\nDescription=NVIDIA fabric manager service\n\n[Service]\nType=forking\n"
                    "PIDFile=/run/nvidia-fabricmanager/nv-fabricmanager.pid\n"
                    "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n\n"
                    "[Install]\nWantedBy=multi-user.target\n", 0o644),
            },
            postinst="deb-systemd-helper enable nvidia-fabricmanager.service >/dev/null || true\n"
                     "if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi\n",
            prerm=_systemd_prerm("nvidia-fabricmanager.service"),
        )


def build_cuda_packages(out: Path) -> None:
    for cuda, (pkg_version, nvcc_release, build_tag, built_on) in CUDA_TOOLKITS.items():
        dash = cuda.replace(".", "-")
        prefix = f"/usr/local/cuda-{cuda}"
        nvcc = ("#!/bin/sh\ncat <<'END'\nnvcc: NVIDIA (R) Cuda compiler driver\n"
                f"Copyright (c) 2005-2023 NVIDIA Corporation\nBuilt on {built_on}\n"
                f"Cuda compilation tools, release {cuda}, V{nvcc_release}\nBuild {build_tag}\nEND\n")
        version_json = ('{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "%s"\n   },\n'
                        '   "cuda_nvcc" : {\n      "name" : "CUDA NVCC",\n      "version" : "%s"\n   }\n}\n'
                        % (pkg_version, nvcc_release))
        priority = int(cuda.replace(".", ""))
        build_deb(
            out, f"cuda-toolkit-{dash}", f"{pkg_version}-1",
            description=f"CUDA Toolkit {cuda} meta-package",
            files={f"{prefix}/bin/nvcc": (nvcc, 0o755), f"{prefix}/version.json": (version_json, 0o644)},
            postinst=f"update-alternatives --install /usr/local/cuda cuda {prefix} {priority}\n",
            prerm=f'if [ "$1" = remove ]; then update-alternatives --remove cuda {prefix}; fi\n',
        )
    for cuda, apt_version in nccl_versions().items():
        for nccl_version in sorted({apt_version, f"{EXTRA_NCCL}-1+cuda{cuda}"}):
            upstream = nccl_version.split("-")[0]
            major, minor, patch = upstream.split(".")
            lib = f"/usr/lib/x86_64-linux-gnu/libnccl.so.{upstream}"
            build_deb(out, "libnccl2", nccl_version, section="libs",
                      description=f"NVIDIA Collective Communication Library (NCCL) runtime for CUDA {cuda}",
                      files={lib: (f"NCCL {upstream} built for CUDA {cuda} (stand-in)\n", 0o644)},
                      symlinks={"/usr/lib/x86_64-linux-gnu/libnccl.so.2": f"libnccl.so.{upstream}"})
            header = (f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n"
                      '#define NCCL_SUFFIX ""\n'
                      f"#define NCCL_VERSION_CODE {int(major) * 10000 + int(minor) * 100 + int(patch)}\n")
            build_deb(out, "libnccl-dev", nccl_version, section="libdevel", depends=f"libnccl2 (= {nccl_version})",
                      description=f"NCCL development files for CUDA {cuda}",
                      files={"/usr/include/nccl.h": (header, 0o644)},
                      symlinks={"/usr/lib/x86_64-linux-gnu/libnccl.so": "libnccl.so.2"})


def build_dcgm_package(out: Path) -> None:
    upstream = DCGM_VERSION.rsplit(":", maxsplit=1)[-1]
    build_deb(
        out, "datacenter-gpu-manager", DCGM_VERSION,
        description="NVIDIA Data Center GPU Manager",
        files={
            "/usr/bin/dcgmi": (f"#!/bin/sh\necho 'Version : {upstream}'\n", 0o755),
            "/usr/bin/nv-hostengine": ("#!/bin/sh\nexec sleep infinity\n", 0o755),
            "/lib/systemd/system/nvidia-dcgm.service": (
                "[Unit]\nDescription=NVIDIA DCGM service\n\n[Service]\nType=simple\n"
                "ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm\n\n"
                "[Install]\nWantedBy=multi-user.target\n", 0o644),
        },
    )


def build_keyring_package(out: Path, keyring: bytes, repo_url: str) -> Path:
    """cuda-keyring for one cluster: the test key and a source pointing at its repository."""
    return build_deb(
        out, "cuda-keyring", KEYRING_VERSION, arch="all", section="misc",
        description="GPG keyring for the CUDA repository",
        files={
            "/usr/share/keyrings/cuda-archive-keyring.gpg": (keyring, 0o644),
            "/etc/apt/sources.list.d/cuda-debian12-x86_64.list": (
                f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {repo_url}/debian12/x86_64/ /\n",
                0o644),
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


def build_all_standins(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    build_driver_packages(out)
    build_cuda_packages(out)
    build_dcgm_package(out)
