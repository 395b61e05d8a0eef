"""The driver decision (keep, install, upgrade, switch, replace, .run), table-tested on real detection output.

The dpkg captures come from simulated nodes (real dpkg over packages with NVIDIA's names, versions and relations),
the rpm ones from public machines and rpm itself (tests/fixtures/driver/SOURCES.md). The plans come from the solver,
as the stack playbook wires them into the role.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.cluster.plugins.filter.stack_plan import stack_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils import driver_decision as dd

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "driver"
H100 = ["NVIDIA H100 80GB HBM3"]
UBUNTU_KMODS = {"nvidia-dkms-open": "open", "nvidia-dkms": "proprietary",
                "nvidia-dkms-535-open": "open", "nvidia-dkms-535": "proprietary"}
DEBIAN_KMODS = {"nvidia-kernel-open-dkms": "open", "nvidia-kernel-dkms": "proprietary"}
RHEL_KMODS = {"kmod-nvidia-open-dkms": "open", "kmod-nvidia-latest-dkms": "proprietary"}
RPM_FLAVOURS = {"open": ["nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-libs", "kmod-nvidia-open-dkms"],
                "proprietary": ["nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-libs", "kmod-nvidia-latest-dkms"]}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def role_plan(os_name: str, nvswitch=True, allow_replace=False, keep_unpackaged=False, **request) -> dict:
    """The solver's plan as playbooks/tasks/gpu_stack_roles.yml hands it to the role (roles/nvidia_driver/vars)."""
    plan = stack_plan({"torch": "2.8.0", **request}, gpus=H100, os=os_name, arch="x86_64", nvswitch=nvswitch)
    dnf = plan["package_family"] == "dnf"
    return {"branch": plan["driver_branch"], "min_version": plan["driver_min_version"],
            "version": plan["driver_recommended_version"], "kernel_modules": plan["kernel_modules"],
            "packages": plan["packages"]["driver"], "fabricmanager_packages": plan["packages"]["fabricmanager"],
            "flavour_packages": plan["driver_flavour_packages"], "flavour_switch": plan["driver_flavour_switch"],
            "keep_unpackaged": keep_unpackaged, "allow_replace": allow_replace, "repo_check_packages": [],
            "repository": plan["repository"], "manager": "dnf" if dnf else "apt",
            "rpm_packages": RPM_FLAVOURS[plan["kernel_modules"]] if dnf else []}


def node(manager="apt", files="", owners="", packages="", smi="", previous=(), branch_packages="", plan=None,
         kmods=None):
    flavours = (plan or {}).get("flavour_packages", {})
    return dd.describe_node(manager, {"files": files, "owners": owners, "packages": packages, "smi_version": smi,
                                      "previous": list(previous), "branch_packages": branch_packages},
                            flavours, kmods)


def repo(plan: dict, ok=True, message="") -> dict:
    """The repository's answer as repo_packages_info gives it: every requested name resolved."""
    versions = {"nvidia-driver-pinning-595": "595-1", "nvidia-driver-pinning-580": "580-5"}
    resolved = {r["name"]: versions.get(r["name"], r["version"] + "-1ubuntu1") for r in dd.repository_requests(plan)}
    return {"ok": ok, "message": message, "resolved": resolved if ok else {}}


def test_parsers_read_the_captures():
    files, uninstaller = dd.parse_driver_files(fixture("files-runfile.txt"))
    assert files == ["/usr/bin/nvidia-smi"] and uninstaller == "/usr/bin/nvidia-uninstall"
    assert dd.parse_dpkg_owners(fixture("dpkg-S-ubuntu2204-r595.txt")) == ["nvidia-utils"]
    assert dd.parse_dpkg_owners(fixture("dpkg-S-runfile.txt")) == []
    assert dd.parse_dpkg_owners("libnvidia-compute-535:amd64, nvidia-utils-535: /usr/bin/x\n"
                                "diversion by nvidia-x from: /usr/bin/x\n") == ["libnvidia-compute-535", "nvidia-utils-535"]
    held = dd.parse_dpkg_query(fixture("dpkg-query-ubuntu2204-r595-proprietary-held.txt"))
    assert held["cuda-drivers"] == {"version": "595.91.07-1", "held": True}
    assert held["nvidia-driver-pinning-595"] == {"version": "595-1", "held": False}
    assert "nvidia-driver-open" not in held  # "un": known to dpkg, not installed
    rpm = dd.parse_rpm_query(fixture("rpm-qa-rhel9-r570-open.txt"))
    assert rpm["kmod-nvidia-open-dkms"]["version"] == "570.124.06-1.el9" and rpm["nvidia-open"]["version"] == "570.124.06-1.el9"
    assert dd.parse_rpm_query(fixture("rpm-q-not-installed.txt")) == {}
    assert dd.parse_rpm_owners(fixture("rpm-qf-not-owned.txt")) == []
    negativo = dd.parse_rpm_query(fixture("rpm-qa-rhel9-negativo17-575.txt"))
    assert negativo["kmod-nvidia-5.14.0-570.el9_6"]["version"] == "575.64.03-1.el9"


def test_fresh_node_installs_the_plan_with_the_pinning_package_at_its_branch():
    plan = role_plan("ubuntu22.04")
    assert plan["packages"] == ["nvidia-driver-pinning-595", "nvidia-open"]
    requests = dd.repository_requests(plan)
    assert {"name": "nvidia-driver-pinning-595", "version": "595", "match": "branch"} in requests
    assert {"name": "nvidia-open", "version": plan["version"], "match": "upstream"} in requests
    assert {"name": "nvidia-fabricmanager", "version": plan["version"], "match": "upstream"} in requests
    decision = dd.decide(node(plan=plan), plan, repo(plan), host="n1")
    assert decision["action"] == "install" and not decision["stop"]
    assert decision["install_args"] == ["nvidia-driver-pinning-595=595-1", f"nvidia-open={plan['version']}-1ubuntu1",
                                        f"nvidia-fabricmanager={plan['version']}-1ubuntu1"]
    assert decision["target"]["upstream"] == plan["version"]


def test_installed_driver_of_the_plan_is_kept():
    plan = role_plan("ubuntu24.04", nvswitch=False)
    found = node(files=fixture("files-packaged.txt"), owners=fixture("dpkg-S-ubuntu2404-r595.txt"),
                 packages=fixture("dpkg-query-ubuntu2404-r595-open.txt"), plan=plan, kmods=UBUNTU_KMODS)
    assert found["current"] == {"kind": "package", "package": "nvidia-utils", "version": "595.91.07-1ubuntu1",
                                "upstream": "595.91.07", "branch": "595", "flavour": "open"}
    decision = dd.decide(found, plan, repo(plan), host="n1")
    assert decision["action"] == "keep" and decision["install_args"] == [] and not decision["changing"]
    assert decision["target"]["packages"] == {"nvidia-utils": "595.91.07-1ubuntu1", "nvidia-open": "595.91.07-1ubuntu1",
                                              "nvidia-driver-pinning-595": "595-1"}
    # With NVSwitch the plan adds fabric manager, which is not installed: the driver is upgraded to the plan.
    with_fm = role_plan("ubuntu24.04")
    assert dd.decide(node(files=fixture("files-packaged.txt"), owners=fixture("dpkg-S-ubuntu2404-r595.txt"),
                          packages=fixture("dpkg-query-ubuntu2404-r595-open.txt"), plan=with_fm, kmods=UBUNTU_KMODS),
                     with_fm, repo(with_fm))["action"] == "upgrade"


def test_driver_below_the_floor_is_upgraded_without_asking():
    plan = role_plan("ubuntu22.04", driver_branch="535")
    assert plan["min_version"] == "535.104.05"
    found = node(files=fixture("files-packaged.txt"), owners=fixture("dpkg-S-ubuntu2204-r535.txt"),
                 packages=fixture("dpkg-query-ubuntu2204-r535-open-535.54.03.txt"), plan=plan, kmods=UBUNTU_KMODS)
    assert found["current"]["package"] == "nvidia-utils-535" and found["current"]["upstream"] == "535.54.03"
    decision = dd.decide(found, plan, repo(plan), host="n3")
    assert decision["action"] == "upgrade" and not decision["stop"] and decision["remove"] == []
    assert decision["report"] == f"n3: upgrading nvidia-utils-535 535.54.03 to {plan['version']} (below the plan's floor " \
                                 "535.104.05, or a planned package is not installed)"


def test_branch_change_replaces_only_when_allowed_and_removes_the_old_branch():
    plan = role_plan("ubuntu22.04")
    args = dict(files=fixture("files-packaged.txt"), owners=fixture("dpkg-S-ubuntu2204-r535.txt"),
                packages=fixture("dpkg-query-ubuntu2204-r535-open-535.54.03.txt"),
                # dpkg-query -W '*-535' '*-535-open': the same listing form.
                branch_packages=fixture("dpkg-query-ubuntu2204-r535-open-535.54.03.txt"), plan=plan, kmods=UBUNTU_KMODS)
    refused = dd.decide(node(**args), plan, repo(plan), host="n1")
    assert refused["action"] == "replace" and refused["target"] is None
    assert refused["stop"].startswith("n1: installed driver nvidia-utils-535 535.54.03 is not "
                                      "the plan's branch 595 with open kernel modules; it was left as it is.")
    assert "replace it with nvidia-driver-pinning-595 nvidia-open nvidia-fabricmanager 595.91.07" in refused["stop"]
    plan["allow_replace"] = True
    decision = dd.decide(node(**args), plan, repo(plan), host="n1")
    assert decision["action"] == "replace" and not decision["stop"]
    assert decision["remove"] == ["cuda-drivers-535", "nvidia-kernel-open-535", "nvidia-utils-535"]
    assert decision["install_args"][-3:] == ["cuda-drivers-535-", "nvidia-kernel-open-535-", "nvidia-utils-535-"]


def test_flavour_switch_follows_nvidias_steps_and_releases_the_holds():
    plan = role_plan("ubuntu22.04")
    args = dict(files=fixture("files-packaged.txt"), owners=fixture("dpkg-S-ubuntu2204-r595.txt"),
                packages=fixture("dpkg-query-ubuntu2204-r595-proprietary-held.txt"), plan=plan, kmods=UBUNTU_KMODS)
    found = node(**args)
    assert found["current"]["flavour"] == "proprietary" and found["held"] == ["cuda-drivers"]
    refused = dd.decide(found, plan, repo(plan), host="n2")
    assert refused["action"] == "switch" and "switch the flavour as NVIDIA documents it" in refused["stop"]
    plan["allow_replace"] = True
    decision = dd.decide(found, plan, repo(plan), host="n2")
    assert decision["action"] == "switch" and not decision["stop"]
    assert decision["switch_options"] == ["--autoremove", "--purge"]
    assert [a.split("=")[0] for a in decision["install_args"]] == [
        "nvidia-open", "nvidia-driver-open", "nvidia-driver-pinning-595", "nvidia-fabricmanager"]
    assert decision["held"] == ["cuda-drivers"]
    plan["flavour_switch"] = []
    assert "carries no documented switch" in dd.decide(found, plan, repo(plan), host="n2")["stop"]


def test_run_file_driver_is_reported_with_the_choice_and_never_overlaid():
    plan = role_plan("ubuntu22.04")
    found = node(files=fixture("files-runfile.txt"), owners=fixture("dpkg-S-runfile.txt"), packages="",
                 smi=fixture("nvidia-smi-driver-version-runfile.txt"), plan=plan)
    assert found["current"] == {"kind": "unpackaged", "files": ["/usr/bin/nvidia-smi"], "upstream": "535.183.01",
                                "uninstaller": "/usr/bin/nvidia-uninstall"}
    decision = dd.decide(found, plan, repo(plan), host="n4")
    assert decision["action"] == "refuse-unpackaged" and decision["target"] is None
    assert "n4: a driver that no package owns is installed (/usr/bin/nvidia-smi; it reports 535.183.01)" in decision["stop"]
    assert "/usr/bin/nvidia-uninstall" in decision["stop"] and "nvidia_driver_keep_unpackaged: true" in decision["stop"]
    plan["keep_unpackaged"] = True
    kept = dd.decide(found, plan, repo(plan), host="n4")
    assert kept["action"] == "keep-unpackaged" and not kept["stop"] and kept["target"] is None


def test_foreign_package_owner_is_replaced_only_when_allowed():
    """negativo17's RHEL packaging owns nvidia-smi: none of NVIDIA's kernel module packages, so no flavour is known."""
    plan = role_plan("rhel9", driver_branch="580")
    owner_line = next(line for line in fixture("rpm-qa-rhel9-negativo17-575.txt").splitlines()
                      if line.startswith("nvidia-driver-cuda-575"))
    found = node("dnf", files=fixture("files-packaged.txt"), owners=owner_line + "\n",
                 packages=fixture("rpm-qa-rhel9-negativo17-575.txt"), plan=plan, kmods=RHEL_KMODS)
    assert found["current"]["package"] == "nvidia-driver-cuda" and found["current"]["flavour"] == "unknown"
    decision = dd.decide(found, {**plan, "branch": "575"}, repo(plan), host="r1")
    assert decision["action"] == "replace"
    assert "(kernel modules of a packaging the plan does not name)" in decision["stop"]


def test_rhel_driver_found_by_rpm_flavour_from_its_kmod():
    plan = role_plan("rhel9", driver_branch="580", nvswitch=False)
    capture = fixture("rpm-qa-rhel9-r570-open.txt")
    owner_line = next(line for line in capture.splitlines() if line.startswith("nvidia-driver-cuda-570"))
    found = node("dnf", files=fixture("files-packaged.txt"), owners=owner_line + "\n" + fixture("rpm-qf-not-owned.txt"),
                 packages=capture, plan=plan, kmods=RHEL_KMODS)
    assert found["current"] == {"kind": "package", "package": "nvidia-driver-cuda", "version": "570.124.06-1.el9",
                                "upstream": "570.124.06", "branch": "570", "flavour": "open"}
    plan["allow_replace"] = True
    decision = dd.decide(found, plan, repo(plan))
    assert decision["action"] == "replace"
    assert decision["install_args"] == [f"{n}-{plan['version']}" for n in RPM_FLAVOURS["open"]]
    same = {**plan, "branch": "570", "version": "570.124.06", "min_version": "570.124.06"}
    assert dd.decide(found, same, repo(same))["action"] == "keep"


def test_debian_names_of_the_planned_branch_are_upgraded_to_the_plans_names():
    """R580 open installed the older way (nvidia-kernel-open-dkms + cuda-drivers-580): the kernel module package
    tells the flavour, so the plan's pinning + nvidia-open are an upgrade, not a replacement that needs asking."""
    plan = role_plan("debian12")
    assert plan["branch"] == "580" and plan["packages"] == ["nvidia-driver-pinning-580", "nvidia-open"]
    found = node(files=fixture("files-packaged.txt"), owners=fixture("dpkg-S-debian12.txt"),
                 packages=fixture("dpkg-query-debian12-r580-open-dkms.txt"), plan=plan, kmods=DEBIAN_KMODS)
    assert found["current"]["package"] == "nvidia-smi" and found["current"]["flavour"] == "open"
    decision = dd.decide(found, plan, repo(plan))
    assert decision["action"] == "upgrade" and not decision["stop"]
    assert decision["install_args"][0] == "nvidia-driver-pinning-580=580-5"


def test_a_repository_without_the_plan_stops_the_node_before_anything_moves():
    plan = role_plan("ubuntu22.04")
    answer = repo(plan, ok=False, message="nvidia-open 595.91.07 is not in the repository; it offers nvidia-open 580.1")
    decision = dd.decide(node(plan=plan), plan, answer, host="n1")
    assert decision["stop"] == (f"n1: the repository {plan['repository']} cannot serve the plan: nvidia-open 595.91.07 is "
                                "not in the repository; it offers nvidia-open 580.1. Nothing was installed on this node.")
    pending = dd.decide(node(plan=plan), plan, answer, check_mode=True, sources_changed=True, host="n1")
    assert pending["action"] == "pending" and not pending["stop"] and pending["target"] is None


@pytest.mark.parametrize("changed, state, expected", [
    ({"install": True}, {}, {"driver-installed": "nvidia_driver: driver 595.91.07 installed; load it with a reboot"}),
    ({"install": False, "nouveau": True}, {"kernel_drift": True, "kernel": "6.1.0-1", "newest_kernel": "6.1.0-2"},
     {"nouveau-blacklisted": "nvidia_driver: nouveau blacklisted and initramfs rebuilt",
      "kernel-changed": "nvidia_driver: running kernel 6.1.0-1, newest installed 6.1.0-2"}),
    ({}, {"loaded": "535.54.03", "installed": "595.91.07"},
     {"driver-mismatch": "nvidia_driver: loaded module 535.54.03, installed 595.91.07"}),
])
def test_reboot_requests(changed, state, expected):
    plan = role_plan("ubuntu22.04")
    decision = dd.decide(node(plan=plan), plan, repo(plan))
    assert dd.reboot_requests(decision, plan, changed, state) == expected
