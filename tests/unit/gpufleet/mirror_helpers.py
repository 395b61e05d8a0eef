"""Small signed repositories, wheels and a loopback HTTP server for the `gpufleet mirror` tests."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

from gpufleet.mirror_repo import Signer

REPO = Path(__file__).resolve().parents[3]
SIM_DIR = REPO / "tests" / "sim"


def make_deb(directory: Path, name: str, version: str, depends: str = "", arch: str = "amd64",
             payload: bytes = b"") -> Path:
    """A minimal binary package built with dpkg-deb."""
    build = directory / f".build-{name}-{version}"
    (build / "DEBIAN").mkdir(parents=True)
    control = (f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: test <t@example.invalid>\n"
               + (f"Depends: {depends}\n" if depends else "") + f"Description: test package {name}\n")
    (build / "DEBIAN/control").write_text(control)
    (build / "usr/share/doc" / name).mkdir(parents=True)
    (build / "usr/share/doc" / name / "payload").write_bytes(payload or name.encode())
    out = directory / f"{name}_{version.split(':')[-1]}_{arch}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(build), str(out)],
                   check=True, capture_output=True)
    subprocess.run(["rm", "-rf", str(build)], check=True)
    return out


def _ftparchive(args: list[str], cwd: Path) -> str:
    return subprocess.run(["apt-ftparchive", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def index_flat(directory: Path, signer: Signer) -> None:
    """A flat repository like NVIDIA's: Packages and a signed Release beside the packages."""
    (directory / "Packages").write_text(_ftparchive(["packages", "."], directory))
    (directory / "Release").write_text(_ftparchive(["release", "."], directory))
    signer.sign_release(directory / "Release")


def index_archive(root: Path, suite: str, signer: Signer, arch: str = "amd64") -> None:
    """A distribution-style archive: pool/main/*.deb, dists/<suite>/main/binary-<arch>/Packages, signed."""
    binary = root / "dists" / suite / "main" / f"binary-{arch}"
    binary.mkdir(parents=True, exist_ok=True)
    (binary / "Packages").write_text(_ftparchive(["packages", "pool"], root))
    dist = root / "dists" / suite
    (dist / "Release").write_text(_ftparchive(
        ["-o", f"APT::FTPArchive::Release::Suite={suite}", "-o", f"APT::FTPArchive::Release::Codename={suite}",
         "-o", "APT::FTPArchive::Release::Components=main", "-o", f"APT::FTPArchive::Release::Architectures={arch}",
         "release", "."], dist))
    signer.sign_release(dist / "Release")


def make_wheel(directory: Path, name: str, version: str, tag: str = "py3-none-any", requires=()) -> Path:
    """A minimal wheel pip can resolve: METADATA, WHEEL and RECORD."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{dist}-{tag}.whl"
    files = {
        f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
        f"{name.replace('-', '_')}/__init__.py": f"VERSION = {version!r}\n",
    }
    record = []
    for rel, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as archive:
        for rel, text in files.items():
            archive.writestr(rel, text)
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, fmt, *args):  # the test asks `served.requests` instead
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        super().do_GET()


@contextlib.contextmanager
def served(directory: Path):
    """The directory over HTTP on a free loopback port, for as long as the block runs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory)))
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        server.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def sim_packages():
    """tests/sim/gfsim's builders of the NVIDIA-shaped stand-in packages (sourced manifests)."""
    if str(SIM_DIR) not in sys.path:
        sys.path.insert(0, str(SIM_DIR))
    from gfsim import manifest as manifest_lib, packages  # noqa: E402  pylint: disable=import-outside-toplevel

    return manifest_lib, packages
