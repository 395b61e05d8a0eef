"""Signing key, the local Debian mirror, the per-cluster CUDA repositories and their HTTP server.

Layout served on http://<bridge-ip>:<port>/ (one server per cluster, bound to
the bridge address only):
    compute/cuda/repos/<repository>/x86_64/   flat repositories like NVIDIA's, one per manifest
                                              (debian12, ubuntu2204, ubuntu2404), built from tests/sim/manifests
    debian/                                   dists/bookworm/main/binary-amd64 mirror
    ubuntu/                                   the same Debian packages under dists/jammy and dists/noble
                                              (Ubuntu nodes' inbox packages: there is no Ubuntu archive here)
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from . import image, manifest as manifest_lib, packages, util
from .util import CACHE_ROOT, DEBIAN_SUITE, log, run

# Bump when what the repositories hold changes, so caches of an older build are not reused.
REPO_VERSION = "5"
GNUPGHOME = CACHE_ROOT / "gnupg"
KEY_DIR = CACHE_ROOT / "keys"


def _standin_digest() -> str:
    """The built packages follow the manifests and the builder: a change to either is a new cache."""
    h = hashlib.sha256()
    for path in sorted(manifest_lib.MANIFEST_DIR.glob("*.yml")) + [Path(packages.__file__), Path(manifest_lib.__file__)]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


STANDIN_DEBS = CACHE_ROOT / f"standin-debs-v{REPO_VERSION}-{_standin_digest()}"
DEBIAN_MIRROR = CACHE_ROOT / f"debian-mirror-v{REPO_VERSION}"
HTTP_PORT = 8765
CUDA_REPO_SUBDIR = "compute/cuda/repos"
KEY_UID = "gpufleet simulated CUDA repository <sim@gpufleet.invalid>"

# Inbox packages the roles install; their dependency closure is mirrored.
MIRROR_PACKAGES = [
    "rdma-core", "infiniband-diags", "ibverbs-utils", "perftest", "dkms", "initramfs-tools",
    "python3-venv", "python3-pip", "pciutils", "mokutil", "numactl", "ethtool", "kmod", "gnupg",
    "python3-apt", "iproute2", "procps",
    # The TCP fallback of the bandwidth pair tests (roles/bandwidth_isolation) runs the real iperf3.
    "iperf3",
    # nvidia-fabricmanager-<branch> Depends on it (NVIDIA's control file; see the manifests).
    "systemd-coredump",
]


def gpg(home: Path, *args: str, capture=True, input=None) -> subprocess.CompletedProcess:
    return run(["gpg", "--batch", "--quiet", "--homedir", home, *args], capture=capture, input=input)


def stop_gpg_agent(home: Path) -> None:
    """gpg starts an agent per home; it is ours, so end it."""
    run(["gpgconf", "--homedir", home, "--kill", "all"], check=False, capture=True)


def generate_key(home: Path, uid: str = KEY_UID) -> str:
    """A signing key in a private GNUPGHOME; returns its fingerprint."""
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o700)
    try:
        gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
        out = gpg(home, "--with-colons", "--list-secret-keys").stdout
    finally:
        stop_gpg_agent(home)
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))


def ensure_key() -> str:
    fpr_file = KEY_DIR / "fingerprint"
    if fpr_file.exists():
        return fpr_file.read_text().strip()
    with util.file_lock(CACHE_ROOT / ".key.lock"):
        if fpr_file.exists():
            return fpr_file.read_text().strip()
        shutil.rmtree(GNUPGHOME, ignore_errors=True)
        fpr = generate_key(GNUPGHOME)
        KEY_DIR.mkdir(parents=True, exist_ok=True)
        (KEY_DIR / "archive-keyring.gpg").write_bytes(export_key(GNUPGHOME, fpr, armor=False))
        (KEY_DIR / "archive-key.asc").write_bytes(export_key(GNUPGHOME, fpr, armor=True))
        fpr_file.write_text(fpr + "\n")
        return fpr


def export_key(home: Path, fpr: str, armor: bool) -> bytes:
    cmd = ["gpg", "--batch", "--homedir", str(home), "--export"] + (["--armor"] if armor else []) + [fpr]
    proc = subprocess.run(cmd, capture_output=True, check=True)
    stop_gpg_agent(home)
    return proc.stdout


def sign_release(directory: Path, home: Path, fpr: str) -> None:
    """InRelease (clearsigned) and Release.gpg (detached), as apt expects."""
    release = directory / "Release"
    try:
        gpg(home, "--yes", "--local-user", fpr, "--digest-algo", "SHA256", "--clearsign",
            "--output", str(directory / "InRelease"), str(release))
        gpg(home, "--yes", "--local-user", fpr, "--digest-algo", "SHA256", "--armor", "--detach-sign",
            "--output", str(directory / "Release.gpg"), str(release))
    finally:
        stop_gpg_agent(home)


def index_flat_repo(directory: Path, home: Path, fpr: str, origin: str) -> None:
    packages_text = run(["apt-ftparchive", "packages", "."], cwd=directory, capture=True).stdout
    (directory / "Packages").write_text(packages_text)
    run(["gzip", "-9kf", "Packages"], cwd=directory)
    release = run(["apt-ftparchive", "-o", f"APT::FTPArchive::Release::Origin={origin}",
                   "-o", f"APT::FTPArchive::Release::Label={origin}",
                   "-o", "APT::FTPArchive::Release::Architecture=x86_64",
                   "release", "."], cwd=directory, capture=True).stdout
    (directory / "Release").write_text(release)
    sign_release(directory, home, fpr)


def ensure_standin_debs() -> Path:
    if (STANDIN_DEBS / ".gpufleet-complete").exists():
        return STANDIN_DEBS
    with util.file_lock(CACHE_ROOT / ".debs.lock"):
        if (STANDIN_DEBS / ".gpufleet-complete").exists():
            return STANDIN_DEBS
        staging = STANDIN_DEBS.with_name(STANDIN_DEBS.name + ".building")
        shutil.rmtree(staging, ignore_errors=True)
        log("building the stand-in NVIDIA packages from the manifests (once)")
        for name, manifest in manifest_lib.load_all().items():
            packages.build_manifest_debs(manifest, staging / name)
        (staging / ".gpufleet-complete").write_text("ok\n")
        os.rename(staging, STANDIN_DEBS)
    return STANDIN_DEBS


def _ubuntu_suites() -> list[str]:
    """The codenames the Ubuntu manifests claim (jammy, noble): each gets the same Debian packages."""
    return sorted({m.os["codename"] for m in manifest_lib.load_all().values() if m.os["id"] == "ubuntu"})


def _write_suite(mirror: Path, suite: str, origin: str, packages_text: str, fpr: str) -> None:
    dist = mirror / "dists" / suite
    binary = dist / "main/binary-amd64"
    binary.mkdir(parents=True, exist_ok=True)
    (binary / "Packages").write_text(packages_text)
    run(["gzip", "-9kf", "Packages"], cwd=binary)
    release = run(["apt-ftparchive",
                   "-o", f"APT::FTPArchive::Release::Origin={origin}",
                   "-o", f"APT::FTPArchive::Release::Label=gpufleet-sim mirror ({suite})",
                   "-o", f"APT::FTPArchive::Release::Suite={suite}",
                   "-o", f"APT::FTPArchive::Release::Codename={suite}",
                   "-o", "APT::FTPArchive::Release::Components=main",
                   "-o", "APT::FTPArchive::Release::Architectures=amd64",
                   "release", "."], cwd=dist, capture=True).stdout
    (dist / "Release").write_text(release)
    sign_release(dist, GNUPGHOME, fpr)


def _ensure_ubuntu_suites(mirror: Path, fpr: str) -> None:
    """Ubuntu nodes read the Debian packages under their own codename (no Ubuntu archive is reachable
    here, see docs/simulated-cluster.md); a codename a newer manifest brings is added to a cached mirror."""
    missing = [s for s in _ubuntu_suites() if not (mirror / "dists" / s / "InRelease").exists()]
    if not missing:
        return
    with util.file_lock(CACHE_ROOT / ".mirror.lock"):
        packages_text = (mirror / "dists" / DEBIAN_SUITE / "main/binary-amd64/Packages").read_text()
        for suite in missing:
            if not (mirror / "dists" / suite / "InRelease").exists():
                _write_suite(mirror, suite, "gpufleet-sim (Debian 12 packages)", packages_text, fpr)


def ensure_debian_mirror(rootfs: Path, fpr: str) -> Path:
    """Download the inbox packages' closure (relative to the node tree) once and index it."""
    if (DEBIAN_MIRROR / ".gpufleet-complete").exists():
        _ensure_ubuntu_suites(DEBIAN_MIRROR, fpr)
        return DEBIAN_MIRROR
    with util.file_lock(CACHE_ROOT / ".mirror.lock"):
        if (DEBIAN_MIRROR / ".gpufleet-complete").exists():
            return DEBIAN_MIRROR
        staging = DEBIAN_MIRROR.with_name(DEBIAN_MIRROR.name + ".building")
        shutil.rmtree(staging, ignore_errors=True)
        pool = staging / "pool/main"
        pool.mkdir(parents=True)
        log("downloading the inbox packages for the local Debian mirror (once)")
        mirror = util.debian_mirror_uri()
        # A throwaway apt state inside a copy-free run of the tree: the tree's own
        # dpkg status decides what is missing; --reinstall also fetches preinstalled ones.
        script = (
            "mkdir -p /tmp/gfsim-apt/lists/partial /tmp/gfsim-apt/archives/partial\n"
            f"echo 'deb {mirror} {DEBIAN_SUITE} main' > /tmp/gfsim-apt/sources.list\n"
            "O='-o Dir::Etc::SourceList=/tmp/gfsim-apt/sources.list -o Dir::Etc::SourceParts=/dev/null "
            "-o Dir::State::Lists=/tmp/gfsim-apt/lists -o Dir::Cache::Archives=/tmp/gfsim-apt/archives "
            "-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root'\n"
            "apt-get $O update -qq\n"
            "apt-get $O install -y -qq --download-only --reinstall --no-install-recommends "
            + " ".join(MIRROR_PACKAGES) + " >/dev/null\n"
            "cp /tmp/gfsim-apt/archives/*.deb /out/\n"
        )
        image.nspawn_run_rw(rootfs, script, bind=[(pool, "/out")])
        kernel = platform.release()
        packages.build_headers_package(pool, kernel)
        packages_text = run(["apt-ftparchive", "packages", "pool"], cwd=staging, capture=True).stdout
        # Debian nodes read it as bookworm; Ubuntu nodes as their codename (the same Debian packages:
        # no Ubuntu archive is reachable here, see docs/simulated-cluster.md).
        _write_suite(staging, DEBIAN_SUITE, "Debian", packages_text, fpr)
        for suite in _ubuntu_suites():
            _write_suite(staging, suite, "gpufleet-sim (Debian 12 packages)", packages_text, fpr)
        (staging / ".gpufleet-complete").write_text("ok\n")
        os.rename(staging, DEBIAN_MIRROR)
    return DEBIAN_MIRROR


def key_short_id(fpr: str) -> str:
    return fpr[-8:].lower()


def build_cluster_repo(www: Path, repo_url: str, fpr: str) -> dict[str, Path]:
    """The per-cluster flat CUDA repositories, one per manifest, at NVIDIA's layout
    (compute/cuda/repos/<repository>/x86_64/): cached debs linked in, cuda-keyring built for this
    cluster's URL, indexed and signed. Returns repository name -> directory."""
    debs = ensure_standin_debs()
    keyring = (KEY_DIR / "archive-keyring.gpg").read_bytes()
    flats = {}
    for name, manifest in manifest_lib.load_all().items():
        flat = www / manifest.path
        if flat.exists():
            shutil.rmtree(flat)
        flat.mkdir(parents=True)
        for deb in (debs / name).glob("*.deb"):
            os.link(deb, flat / deb.name)
        packages.build_keyring_package(flat, keyring, repo_url, manifest)
        shutil.copy(KEY_DIR / "archive-key.asc", flat / f"{key_short_id(fpr)}.pub")
        index_flat_repo(flat, GNUPGHOME, fpr, origin="gpufleet-sim CUDA")
        flats[name] = flat
    for link_name in ("debian", "ubuntu"):
        mirror_link = www / link_name
        if mirror_link.is_symlink() or mirror_link.exists():
            mirror_link.unlink()
        mirror_link.symlink_to(DEBIAN_MIRROR)
    return flats


def resign_flat_repo(flat: Path, home: Path) -> str:
    """Sign the repository with another key (for the negative signature test)."""
    fpr = generate_key(home, "gpufleet simulator impostor <impostor@gpufleet.invalid>")
    sign_release(flat, home, fpr)
    return fpr


def start_http_server(www: Path, bind_ip: str, log_path: Path) -> int:
    """One static server per cluster, on the bridge address only; returns its PID."""
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(HTTP_PORT), "--bind", bind_ip, "--directory", str(www)],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True)
    return proc.pid
