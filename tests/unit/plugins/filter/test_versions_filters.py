"""compare_versions / newest_version: the roles' version decisions, by the OS's and the tools' own rules."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.filter.versions import (
    FilterModule,
    compare_versions,
    newest_version,
    unmet_pins,
)


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {"compare_versions", "newest_version", "unmet_pins"}


@pytest.mark.parametrize("kernels, family, newest", [
    # A release candidate kernel beside a numbered one: a mix of letters and numbers the loose order cannot compare.
    (["6.1.0-18-amd64", "6.1.0-rc7-amd64", "6.1.0-9-amd64"], "Debian", "6.1.0-rc7-amd64"),
    (["6.1.0-9-amd64", "6.1.0-18-amd64"], "Debian", "6.1.0-18-amd64"),
    (["5.14.0-362.8.1.el9_3.x86_64", "5.14.0-70.13.1.el9_0.x86_64", "0-rescue-0123456789abcdef"], "RedHat",
     "5.14.0-362.8.1.el9_3.x86_64"),
    ([], "Debian", ""),
])
def test_newest_kernel_as_the_boot_loader_orders_them(kernels, family, newest):
    assert newest_version(kernels, family) == newest


def test_compare_by_scheme_name_or_os_family():
    assert compare_versions("535.104.05", "535.54.03", "dotted") == 1
    assert compare_versions("1:2.0~rc1-1", "2.0-1", "deb") == 1
    assert compare_versions("1.0~rc1", "1.0", "RedHat") == -1
    assert compare_versions("2.1.2+cu121", "2.1.2", "pep440") == 1


@pytest.mark.parametrize("call, words", [
    (lambda: compare_versions("535.x", "535.54.03", "dotted"), ["'535.x'", "dotted", "looks like"]),
    (lambda: compare_versions("1.0", "2.0", "Suse"), ["'Suse'", "Debian, RedHat"]),
    (lambda: newest_version("6.1.0", "Debian"), ["a list of versions", "str"]),
    (lambda: newest_version(["6.1.0_bad"], "Debian"), ["'6.1.0_bad'", "deb"]),
])
def test_bad_input_names_the_value_and_what_would_work(call, words):
    with pytest.raises(AnsibleFilterError) as err:
        call()
    assert all(word in str(err.value) for word in words), str(err.value)


@pytest.mark.parametrize("requirement, installed, met", [
    ("torch==2.1.2+cu121", {"torch": "2.1.2+cu121"}, True),
    ("torch==2.1.2+cu121", {"torch": "2.1.2+cu118"}, False),
    ("torch==2.1.2+cu121", {"torch": "2.1.2"}, False),
    # A pin without a local label accepts any build of that version (PEP 440).
    ("torch==2.1.2", {"torch": "2.1.2+cu121"}, True),
    ("numpy==1.26.04", {"numpy": "1.26.4"}, True),
    ("numpy==1.26.4", {"numpy": None}, False),
    ("numpy==1.26.4", {}, False),
    ("requests[socks]==2.32.3", {"requests": "2.32.3"}, True),
    ("PyYAML==6.0.1", {"pyyaml": "6.0.1"}, True),
    ("py_yaml == 6.0.1", {"Py.Yaml": "6.0.1"}, True),
    ("requests==2.32.3,<3", {"requests": "2.32.3"}, True),
    # Not a pin: judged elsewhere (installed or not).
    ("pyyaml>=6,<7", {"pyyaml": None}, True),
    ("requests", {}, True),
])
def test_unmet_pins_by_pep440(requirement, installed, met):
    assert unmet_pins([requirement], installed) == ([] if met else [requirement])


def test_unmet_pins_refuses_what_is_not_a_requirement():
    with pytest.raises(AnsibleFilterError, match="numpy==1.26.4"):
        unmet_pins(["==1.0"], {})
    with pytest.raises(AnsibleFilterError, match="pep440"):
        unmet_pins(["numpy==one"], {"numpy": "1.0"})
    with pytest.raises(AnsibleFilterError, match="a list of requirements and a dict"):
        unmet_pins("numpy==1.0", {})
