"""`gpufleet mirror`: apt resolution with the host's apt-get over a private state, against small signed
repositories built here and served on loopback; the mirror's own repositories resolve the same set."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gpufleet.mirror_apt import AptSandbox, AptSource, apt_problem, check_requests, driver_preferences
from gpufleet.mirror_repo import Signer, Staging, write_archive_repo, write_flat_repo
from gpufleet.mirror_targets import MirrorError
from mirror_helpers import REPO, index_archive, index_flat, make_deb, served

pytestmark = pytest.mark.skipif(not all(shutil.which(t) for t in ("apt-get", "apt-ftparchive", "dpkg-deb", "gpg")),
                                reason="needs apt-get, apt-ftparchive, dpkg-deb and gpg (a Debian/Ubuntu host)")
PIN_TEMPLATE = REPO / "roles/nvidia_driver/templates/etc/apt/preferences.d/gpufleet-nvidia-driver.j2"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """A flat 'NVIDIA' repository and a 'Debian' archive signed by an upstream key, served on loopback."""
    root = tmp_path_factory.mktemp("upstream")
    signer = Signer(tmp_path_factory.mktemp("upstream-gnupg"))
    flat = root / "cuda" / "testos" / "x86_64"
    flat.mkdir(parents=True)
    for version in ("500.1.01", "500.2.02"):
        make_deb(flat, "nvidia-utils-500", f"{version}-1", depends="libc6-fake")
        make_deb(flat, "cuda-drivers-500", f"{version}-1", depends=f"nvidia-utils-500 (>= {version})")
    make_deb(flat, "cuda-toolkit-12-2", "12.2.2-1")
    make_deb(flat, "libnccl2", "2.19.3-1+cuda12.2", depends="libc6-fake")
    make_deb(flat, "libnccl2", "2.18.5-1+cuda12.2", depends="libc6-fake")
    index_flat(flat, signer)
    pool = root / "os" / "pool" / "main"
    pool.mkdir(parents=True)
    make_deb(pool, "libc6-fake", "2.36-1")
    make_deb(pool, "make-fake", "4.3-1")
    make_deb(pool, "dkms-fake", "3.0-1", depends="make-fake")
    index_archive(root / "os", "testsuite", signer)
    keyring = root.parent / f"{root.name}-keyring.gpg"
    keyring.write_bytes(signer.export(armor=False))
    with served(root) as server:
        yield {"server": server, "keyring": keyring, "signer": signer, "root": root,
               "flat": AptSource(f"{server.url}/cuda/testos/x86_64/", "", (), keyring),
               "os": AptSource(f"{server.url}/os", "testsuite", ("main",), keyring)}


def sandbox(path: Path, sources, upstream_version: str = "500.1.01", status: bytes = b"") -> AptSandbox:
    box = AptSandbox(path, "x86_64", sources, driver_preferences(PIN_TEMPLATE, upstream_version), status)
    box.update()
    return box


REQUESTS = [{"name": "cuda-drivers-500", "version": "500.1.01", "match": "upstream"},
            {"name": "cuda-toolkit-12-2", "version": "", "match": "any"},
            {"name": "libnccl2", "version": "2.19.3-1+cuda12.2", "match": "exact"}]


def install_args(resolved: dict) -> list[str]:
    return ["cuda-drivers-500=" + resolved["cuda-drivers-500"], "cuda-toolkit-12-2",
            "libnccl2=" + resolved["libnccl2"], "dkms-fake"]


def test_the_closure_is_downloaded_at_the_pinned_release_and_checked(upstream, tmp_path):
    box = sandbox(tmp_path / "apt", [upstream["flat"], upstream["os"]])
    resolved = check_requests(box, REQUESTS)
    assert resolved == {"cuda-drivers-500": "500.1.01-1", "cuda-toolkit-12-2": "12.2.2-1",
                        "libnccl2": "2.19.3-1+cuda12.2"}
    debs = box.fetch(install_args(resolved))
    # cuda-drivers-500 depends on nvidia-utils-500 (>= 500.1.01): the driver role's pin keeps the planned release.
    assert {(d.name, d.version) for d in debs} == {
        ("cuda-drivers-500", "500.1.01-1"), ("nvidia-utils-500", "500.1.01-1"), ("cuda-toolkit-12-2", "12.2.2-1"),
        ("libnccl2", "2.19.3-1+cuda12.2"), ("libc6-fake", "2.36-1"), ("dkms-fake", "3.0-1"), ("make-fake", "4.3-1")}
    for deb in debs:
        assert deb.path.is_file() and deb.size == deb.path.stat().st_size
        assert f"SHA256: {deb.sha256}" in deb.record and deb.uri.startswith(upstream["server"].url)
    assert {d.name for d in debs if upstream["flat"].holds(d.uri)} == {
        "cuda-drivers-500", "nvidia-utils-500", "cuda-toolkit-12-2", "libnccl2"}


def test_without_the_pin_apt_would_take_the_newest_driver(upstream, tmp_path):
    """What the pin is for: the metapackage's `>=` dependency alone pulls the newest release."""
    box = AptSandbox(tmp_path / "apt", "x86_64", [upstream["flat"], upstream["os"]])
    box.update()
    debs = box.fetch(["cuda-drivers-500=500.1.01-1"])
    assert ("nvidia-utils-500", "500.2.02-1") in {(d.name, d.version) for d in debs}


def test_what_the_node_has_is_not_downloaded_again(upstream, tmp_path):
    status = (b"Package: libc6-fake\nStatus: install ok installed\nVersion: 2.36-1\nArchitecture: amd64\n"
              b"Maintainer: t\nDescription: t\n")
    box = sandbox(tmp_path / "apt", [upstream["flat"], upstream["os"]], status=status)
    names = {d.name for d in box.fetch(["libnccl2=2.19.3-1+cuda12.2"])}
    assert names == {"libnccl2"}


def test_a_missing_release_names_what_the_repository_offers(upstream, tmp_path):
    box = sandbox(tmp_path / "apt", [upstream["flat"], upstream["os"]])
    with pytest.raises(MirrorError) as err:
        check_requests(box, [{"name": "cuda-drivers-500", "version": "500.9.99", "match": "upstream"},
                             {"name": "cuda-drivers-999", "version": "", "match": "any"}])
    message = str(err.value)
    assert "cuda-drivers-500 500.9.99 is not in the repository; it offers cuda-drivers-500 500.2.02, 500.1.01" in message
    assert "cuda-drivers-999 is not in the repository; it offers cuda-drivers-500" in message
    assert upstream["flat"].uri in message


def test_a_dependency_no_source_holds_is_explained(upstream, tmp_path):
    box = sandbox(tmp_path / "apt", [upstream["flat"]])  # no OS archive: libc6-fake is nowhere
    with pytest.raises(MirrorError) as err:
        box.fetch(["libnccl2=2.19.3-1+cuda12.2"])
    assert "libnccl2 : Depends: libc6-fake but it is not installable" in str(err.value)


def test_an_unreachable_repository_is_named(upstream, tmp_path):
    from cli_helpers import closed_port

    dead = AptSource(f"http://127.0.0.1:{closed_port()}/cuda/testos/x86_64/", "", (), upstream["keyring"])
    with pytest.raises(MirrorError) as err:
        sandbox(tmp_path / "apt", [dead, upstream["os"]])
    assert dead.uri.rstrip("/") in str(err.value) and "reachable" in str(err.value)


def test_a_repository_signed_by_another_key_is_refused(upstream, tmp_path):
    other = Signer(tmp_path / "other-gnupg")
    (tmp_path / "other.gpg").write_bytes(other.export(armor=False))
    wrong = AptSource(upstream["flat"].uri, "", (), tmp_path / "other.gpg")
    with pytest.raises(MirrorError, match="NO_PUBKEY"):
        sandbox(tmp_path / "apt", [wrong])


def test_a_file_that_differs_from_the_signed_index_is_refused(upstream, tmp_path):
    """A repository (or proxy) that serves other bytes than its signed index lists."""
    source_dir = tmp_path / "repo"
    shutil.copytree(upstream["root"], source_dir)
    deb = source_dir / "cuda/testos/x86_64/cuda-toolkit-12-2_12.2.2-1_amd64.deb"
    make_deb(tmp_path, "cuda-toolkit-12-2", "12.2.2-1", payload=b"other bytes").replace(deb)
    with served(source_dir) as server:
        source = AptSource(f"{server.url}/cuda/testos/x86_64/", "", (), upstream["keyring"])
        box = sandbox(tmp_path / "apt", [source])
        with pytest.raises(MirrorError, match="checksum mismatch") as err:
            box.fetch(["cuda-toolkit-12-2"])
    assert "cuda-toolkit-12-2_12.2.2-1_amd64.deb: " in str(err.value)


def test_each_file_is_checked_against_its_index_record_once_more(upstream, tmp_path, monkeypatch):
    box = sandbox(tmp_path / "apt", [upstream["flat"]])
    other = {"Package": "cuda-toolkit-12-2", "Architecture": "amd64", "SHA256": "0" * 64, "Size": "1", "_text": ""}
    monkeypatch.setattr(box, "records", lambda pins: [other])
    with pytest.raises(MirrorError) as err:
        box.fetch(["cuda-toolkit-12-2"])
    assert "checksum mismatch: cuda-toolkit-12-2 12.2.2-1 (amd64)" in str(err.value)
    assert f"the repository's signed index says SHA256 {'0' * 64} size 1" in str(err.value)


def test_the_mirrors_repositories_resolve_the_same_set_with_only_the_mirrors_key(upstream, tmp_path):
    box = sandbox(tmp_path / "apt", [upstream["flat"], upstream["os"]])
    args = install_args(check_requests(box, REQUESTS))
    debs = box.fetch(args)
    signer = Signer(tmp_path / "mirror-gnupg")
    staging = Staging(tmp_path / "mirror", replace=False)
    with staging:
        write_flat_repo(staging, "compute/cuda/repos/testos/x86_64", [d for d in debs if upstream["flat"].holds(d.uri)],
                        signer, "amd64")
        write_archive_repo(staging, "os/testos", "testsuite", [d for d in debs if not upstream["flat"].holds(d.uri)],
                           signer, "amd64")
        staging.commit()
    (tmp_path / "mirror.gpg").write_bytes(signer.export(armor=False))
    with served(tmp_path / "mirror") as server:
        mirror = [AptSource(f"{server.url}/compute/cuda/repos/testos/x86_64/", "", (), tmp_path / "mirror.gpg"),
                  AptSource(f"{server.url}/os/testos", "testsuite", ("main",), tmp_path / "mirror.gpg")]
        offline = sandbox(tmp_path / "offline", mirror)
        simulated = offline.run("apt-get", "install", "-s", "-y", *args)
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr
    installed = set(re.findall(r"^Inst (\S+) \((\S+)", simulated.stdout, re.M))
    assert installed == {(d.name, d.version) for d in debs}
    # The mirror's index keeps upstream's record of each package (its SHA256 among it), with the mirror's file name.
    packages = (tmp_path / "mirror/compute/cuda/repos/testos/x86_64/Packages").read_text()
    assert "Filename: ./cuda-drivers-500_500.1.01-1_amd64.deb" in packages
    assert "Filename: pool/main/dkms-fake_3.0-1_all.deb" not in packages
    assert "Filename: pool/main/dkms-fake_3.0-1_amd64.deb" in (
        tmp_path / "mirror/os/testos/dists/testsuite/main/binary-amd64/Packages").read_text()


def test_the_driver_pin_is_the_roles_own_template():
    text = driver_preferences(PIN_TEMPLATE, "535.216.03")
    assert "Pin: version 535.216.03-*\nPin-Priority: 1001" in text
    assert "Pin: version *:535.216.03-*" in text and "Package: *nvidia* cuda-drivers*" in text


def test_apts_explanation_is_kept_and_its_boilerplate_dropped():
    output = ("Reading package lists...\nSome packages could not be installed. This may mean that you have\n"
              "The following packages have unmet dependencies:\n"
              " dkms : Depends: gcc but it is not installable or\n"
              "                 c-compiler\n"
              "E: Unable to correct problems, you have held broken packages.\n")
    assert apt_problem(output) == ("dkms : Depends: gcc but it is not installable or | c-compiler | "
                                   "E: Unable to correct problems, you have held broken packages.")
