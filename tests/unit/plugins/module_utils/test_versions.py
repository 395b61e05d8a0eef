"""versions: dpkg's, rpm's and PEP 440's orders, each checked against the real tool's answers.

- deb: the same table goes to ``dpkg --compare-versions`` on this machine; both must agree with it.
- rpm: rpm's own test tables (tests/fixtures/versions/, sources in SOURCES.md).
- pep440: ``packaging.version.Version`` (ansible-core's dependency on the controller).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import pytest
from fixtures_path import FIXTURES

from ansible_collections.gpufleet.cluster.plugins.module_utils import versions

# (left, right, expected) with expected as dpkg answers: -1 left is older, 0 equal, 1 newer.
DEB_TABLE = [
    # The two: a letter sorts after a digit run's end ("rc" is newer in Debian, hence "~rc"), and an epoch wins.
    ("2.19.3", "2.19.rc1", -1),
    ("1:2.0~rc1-1", "2.0-1", 1),
    ("2.0~rc1-1", "2.0-1", -1),
    # Debian Policy 5.6.12: ~~ < ~~a < ~ < (end) < a; letters before non-letters.
    ("1.0~~", "1.0~~a", -1),
    ("1.0~~a", "1.0~", -1),
    ("1.0~", "1.0", -1),
    ("1.0", "1.0a", -1),
    ("1.0a", "1.0+", -1),
    ("1.0-A", "1.0-a", -1),
    ("1.0~rc1", "1.0", -1),
    ("3.0.0~beta2", "3.0.0~alpha10", 1),
    ("1.0~beta1~svn1245-1", "1.0~beta1-1", -1),
    ("2.4.6", "2.4.6+really2.4.5", -1),
    # Digit runs compare as numbers; a missing revision equals "0"; epoch 0 equals none.
    ("1.001", "1.1", 0),
    ("2.30-1", "2.3-1", 1),
    ("10", "9", 1),
    ("1.0", "1.0-0", 0),
    ("0:1.0", "1.0", 0),
    ("1:0.1", "2.0", 1),
    ("1.0-1", "1.0-1.0", -1),
    ("1.0.0", "1.0", 1),
    ("7.6p2-4", "7.6-0", 1),
    ("0.0~git20230101", "0", 1),
    ("1.0+dfsg-1", "1.0-1", 1),
    ("1.0~rc1-1", "1.0-0", -1),
    ("1:1.0", "1:1.0", 0),
    # What NVIDIA's and Ubuntu's repositories and kernels really carry.
    ("535.104.05-0ubuntu1", "535.54.03-0ubuntu1", 1),
    ("1:535.104.05-0ubuntu1", "535.183.01-1", 1),
    ("2.18.3-1+cuda12.2", "2.18.3-1+cuda11.8", 1),
    ("2.18.3-1+cuda12.2", "2.18.5-1+cuda12.2", -1),
    ("2.28.9-1+cuda13.0", "2.28.9-1+cuda12.9", 1),
    ("390.77-0ubuntu0.18.04.1", "390.77-0ubuntu0.18.04.2", -1),
    ("550.54.14-1", "545.23.08-1", 1),
    ("6.1.0-18-amd64", "6.1.0-9-amd64", 1),
    ("6.1.0-18-amd64", "6.1.0-18-cloud-amd64", -1),
    ("5.15.0-91-generic", "5.15.0-101-generic", -1),
]


def _dpkg(left: str, op: str, right: str) -> bool:
    done = subprocess.run(["dpkg", "--compare-versions", left, op, right], capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), f"dpkg --compare-versions {left} {op} {right}: {done.stderr}"
    return done.returncode == 0


def dpkg_answer(left: str, right: str) -> int:
    if _dpkg(left, "eq", right):
        return 0
    return -1 if _dpkg(left, "lt", right) else 1


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not installed on this machine")
def test_the_table_is_what_dpkg_answers():
    assert [dpkg_answer(row[0], row[1]) for row in DEB_TABLE] == [row[2] for row in DEB_TABLE]


@pytest.mark.parametrize("older_or_not, other, expected", DEB_TABLE)
def test_deb_order_matches_dpkg(older_or_not, other, expected):
    assert versions.deb_compare(older_or_not, other) == expected
    assert versions.deb_compare(other, older_or_not) == -expected


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not installed on this machine")
def test_deb_sort_of_every_version_in_the_table_agrees_with_dpkg_pairwise():
    """Every pair across the table, not only the rows: catches an order that is right row by row only."""
    pool = sorted({version for row in DEB_TABLE for version in row[:2]})
    pairs = list(itertools.combinations(pool, 2))[::7]  # a spread of the pairs, enough to cross every group
    assert [versions.deb_compare(a, b) for a, b in pairs] == [dpkg_answer(a, b) for a, b in pairs]


@pytest.mark.parametrize("bad, why", [
    ("", "empty"),
    ("a:1.0", "epoch 'a' is not a number"),
    ("1:", "upstream version is empty"),
    ("1.0-", "revision after the last '-' is empty"),
    ("1.0 1", "' '"),
    ("1.0_1", "'_'"),
])
def test_deb_refuses_what_dpkg_calls_bad_syntax(bad, why):
    with pytest.raises(versions.VersionError, match=re.escape(why)) as err:
        versions.deb_compare(bad, "1.0")
    assert repr(bad) in str(err.value) and "looks like" in str(err.value)


def _rpm_table():
    rows = []
    for line in (FIXTURES / "versions" / "rpmvercmp.at").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^RPMVERCMP\(([^,]*), ([^,]*), (-?1|0)\)$", line)
        if match:
            rows.append((match.group(1), match.group(2), int(match.group(3))))
    return rows


def _rpm_evr_table():
    lines = (FIXTURES / "versions" / "rpm-evr.txt").read_text(encoding="utf-8").splitlines()
    return [(a, b, int(want)) for a, b, want in (line.split() for line in lines if line and not line.startswith("#"))]


def test_rpms_tables_are_read_whole():
    """Every case rpm's suite runs (a line opening with RPMVERCMP; dnl lines are not run) becomes a test case."""
    run_by_rpm = [line for line in (FIXTURES / "versions" / "rpmvercmp.at").read_text(encoding="utf-8").splitlines()
                  if line.startswith("RPMVERCMP(")]
    assert len(_rpm_table()) == len(run_by_rpm) == 91 and len(_rpm_evr_table()) == 14


@pytest.mark.parametrize("left, right, expected", _rpm_table())
def test_rpmvercmp_matches_rpms_own_table(left, right, expected):
    assert versions.rpmvercmp(left, right) == expected


@pytest.mark.parametrize("left, right, expected", _rpm_evr_table())
def test_rpm_epoch_version_release_matches_rpms_own_tests(left, right, expected):
    assert versions.rpm_compare(left, right) == expected


@pytest.mark.parametrize("left, right, expected", [
    ("3:535.104.05-1.el9", "3:535.54.03-1.el9", 1),
    ("3:535.104.05-1.el9", "535.183.01-1.el9", 1),
    ("2.18.3-1+cuda12.2", "2.18.3-1+cuda11.8", 1),
    ("550.54.15-1.el8", "550.54.15-1.el8_9", -1),
    ("5.14.0-362.8.1.el9_3.x86_64", "5.14.0-70.13.1.el9_0.x86_64", 1),
    # rpm compares releases only when both sides carry one (rpmverCmp).
    ("1.0", "1.0-7", 0),
])
def test_rpm_order_on_what_nvidias_and_rhels_repositories_carry(left, right, expected):
    assert versions.rpm_compare(left, right) == expected
    assert -versions.rpm_compare(*reversed((left, right))) == expected


PEP440_VERSIONS = [
    "2.1.2", "2.1.2.0", "2.1.2+cu121", "2.1.2+cu118", "2.13.0+cpu", "2.13.0", "2.13.0+cu126", "2.4.0rc1",
    "2.4.0", "1.0.dev1", "1.0a1", "1.0a1.dev2", "1.0b1", "1.0rc1", "1.0c2", "1.0", "1.0.post1", "1.0-2",
    "1.0.post1.dev1", "1!0.1", "2.0", "1.0+1", "1.0+abc", "1.0+abc.5", "1.0+ABC.5", "v1.0", "0", "0.0",
    "1.26.4", "1.26.04", "2.4.6", "1.0.0a", "1.0rev3", "2.19.rc1", "2.19.3",
]


def test_pep440_order_is_packagings():
    from packaging.version import Version
    pairs = list(itertools.combinations(PEP440_VERSIONS, 2))
    ours = [versions.pep440_compare(a, b) for a, b in pairs]
    theirs = [(Version(a) > Version(b)) - (Version(a) < Version(b)) for a, b in pairs]
    assert ours == theirs


@pytest.mark.parametrize("left, right, expected", [
    ("2.1.2+cu121", "2.1.2", 1),
    ("2.1.2", "2.1.2.0", 0),
    ("1.26.04", "1.26.4", 0),
    ("2.4.0rc1", "2.4.0", -1),
    ("2.19.3", "2.19.rc1", 1),
])
def test_pep440_wheel_versions(left, right, expected):
    assert versions.pep440_compare(left, right) == expected


@pytest.mark.parametrize("bad", ["", "abc", "2.1.2+", "2.1.2 cu121", "2..1"])
def test_pep440_refuses_what_pip_cannot_read(bad):
    with pytest.raises(versions.VersionError, match="pep440"):
        versions.pep440_key(bad)


@pytest.mark.parametrize("left, right, expected", [
    ("535.104.05", "535.54.03", 1),
    ("580.65.06", "580.65.6", 0),
    ("12.2", "12.2.0", 0),
    ("12.2", "12.10", -1),
    ("535", "535.0.1", -1),
])
def test_dotted_driver_versions(left, right, expected):
    assert versions.dotted_compare(left, right) == expected


@pytest.mark.parametrize("bad", ["", "535.x", "unknown", "535.104.05-1", None])
def test_dotted_refuses_anything_but_numbers_and_dots(bad):
    with pytest.raises(versions.VersionError, match="dotted"):
        versions.dotted_key(bad)


def test_by_scheme_newest_and_the_os_familys_rules():
    assert versions.newest(["6.1.0-9-amd64", "6.1.0-18-amd64", "6.1.0-17-amd64"], "deb") == "6.1.0-18-amd64"
    assert versions.newest([], "rpm") is None
    assert sorted(["1.0", "1.0~rc1", "1.0^git1"], key=versions.sort_key("rpm")) == ["1.0~rc1", "1.0", "1.0^git1"]
    assert versions.compare("2.0", "10.0", "dotted") == -1
    assert [versions.scheme_for(f) for f in ("Debian", "RedHat")] == ["deb", "rpm"]
    with pytest.raises(versions.VersionError, match="'Suse'"):
        versions.scheme_for("Suse")
    with pytest.raises(versions.VersionError, match="unknown version scheme 'semver'"):
        versions.compare("1", "2", "semver")
