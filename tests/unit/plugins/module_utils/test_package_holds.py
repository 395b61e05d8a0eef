"""Which holds keep NCCL off the plan's version, and which of them gpufleet set (issue 25, F17).

Formats from dpkg-query(1), apt_preferences(5) and the dnf versionlock plugin's list; the apt pin
stanza is the one the nccl role writes (roles/nccl/templates/etc/apt/preferences.d/gpufleet-nccl.j2).
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils import package_holds as ph

PLANNED = "2.18.3-1+cuda12.2"
NAMES = ["libnccl2", "libnccl-dev"]
GPUFLEET_PIN = """#
# Ansible managed
#
# NCCL stays at the plan's build for this CUDA version until the plan changes.
Package: libnccl2 libnccl-dev
Pin: version 2.18.1-1+cuda12.1
Pin-Priority: 1001
"""
OPERATOR_PINS = """Package: libnccl*
Pin: version 2.17.*
Pin-Priority: 1001

# keep the distribution's python
Package: python3
Pin: release a=stable
Pin-Priority: 900

Package: /^libnccl-dev$/
Pin: release *
Pin-Priority: -1
"""


def test_dpkg_selections_mark_holds():
    out = "libnccl2\t2.18.1-1+cuda12.1\thi \nlibnccl-dev\t2.18.1-1+cuda12.1\tii \n"
    assert ph.parse_dpkg_selections(out) == {
        "libnccl2": {"version": "2.18.1-1+cuda12.1", "held": True},
        "libnccl-dev": {"version": "2.18.1-1+cuda12.1", "held": False}}


def test_an_operator_hold_at_another_version_is_foreign_and_a_hold_at_the_plan_is_not():
    held = ph.parse_dpkg_selections("libnccl2\t2.18.1-1+cuda12.1\thi \n")
    holds = ph.holds_on(NAMES, held, [], [])
    assert ph.foreign_holds(holds, PLANNED, own={}) == holds
    assert ph.describe(holds) == "libnccl2 dpkg hold at 2.18.1-1+cuda12.1 (dpkg selection)"
    at_plan = ph.holds_on(NAMES, ph.parse_dpkg_selections(f"libnccl2\t{PLANNED}\thi \n"), [], [])
    assert ph.foreign_holds(at_plan, PLANNED, own={}) == []


def test_gpufleet_own_pin_and_hold_at_the_version_it_set_move_with_the_plan():
    pins = ph.parse_apt_preferences(GPUFLEET_PIN, "/etc/apt/preferences.d/gpufleet-nccl")
    own = ph.own_pins(pins, NAMES)
    assert own == {"libnccl2": "2.18.1-1+cuda12.1", "libnccl-dev": "2.18.1-1+cuda12.1"}
    held = ph.parse_dpkg_selections("libnccl2\t2.18.1-1+cuda12.1\thi \n")
    assert ph.foreign_holds(ph.holds_on(NAMES, held, pins, []), PLANNED, own) == []
    # Re-held by hand at another build after gpufleet: that hold is the operator's.
    rehold = ph.parse_dpkg_selections("libnccl2\t2.17.1-1+cuda12.0\thi \n")
    assert [h["version"] for h in ph.foreign_holds(ph.holds_on(NAMES, rehold, pins, []), PLANNED, own)] == ["2.17.1-1+cuda12.0"]


def test_operator_pins_by_glob_and_a_negative_priority_are_foreign_a_release_pin_is_not():
    pins = ph.parse_apt_preferences(OPERATOR_PINS, "/etc/apt/preferences.d/site")
    foreign = ph.foreign_holds(ph.holds_on(NAMES, {}, pins, []), PLANNED, own={})
    assert [(h["package"], h["kind"], h["version"]) for h in foreign] == [
        ("libnccl2", "apt pin (version, priority 1001)", "2.17.*"),
        ("libnccl-dev", "apt pin (version, priority 1001)", "2.17.*"),
        ("libnccl-dev", "apt pin (release, priority -1)", "")]
    assert ph.foreign_holds(ph.holds_on(NAMES, {}, pins, []), "2.17.1-1+cuda12.0", own={})[0]["kind"] == \
        "apt pin (release, priority -1)"


def test_dnf_version_locks_and_exclusions():
    text = "# Added locks on Tue\nlibnccl-0:2.18.1-1+cuda12.1.*\n!libnccl-devel-0:2.18.3-1+cuda12.2.*\nlibnccl-tests-0:1.0-1.*\n"
    locks = ph.parse_versionlock(text, ["libnccl", "libnccl-devel"], "/etc/dnf/plugins/versionlock.list")
    assert [(lock["package"], lock["kind"], lock["version"]) for lock in locks] == [
        ("libnccl", "versionlock", "2.18.1-1+cuda12.1"), ("libnccl-devel", "versionlock exclusion", PLANNED)]
    foreign = ph.foreign_holds(ph.holds_on(["libnccl", "libnccl-devel"], {}, [], locks), PLANNED, own={})
    assert len(foreign) == 2
    assert ph.foreign_holds(ph.holds_on(["libnccl"], {}, [], locks), PLANNED, own={"libnccl": "2.18.1-1+cuda12.1"}) == []
