# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The driver's keep / install / upgrade / switch / replace decision, from what the node's package manager says.

Pure functions. The nvidia_driver_info module runs the detection commands and describes the node with
``describe_node``; the driver_decision filter calls ``decide`` with that description, the plan and the
repository's answer; ``repository_requests`` says what the repository is asked for. Formats (real captures
in tests/fixtures/driver/, sources in its SOURCES.md):

- ``sh -c 'command -v nvidia-smi; modinfo -n nvidia; command -v nvidia-uninstall'``: one path per line;
- ``dpkg -S FILE...``: ``pkg[:arch][, pkg2[:arch]]: /path`` per owned file, ``diversion by ...`` lines;
  an unowned file prints nothing on stdout (dpkg-query says so on stderr, rc 1);
- ``rpm -qf FILE...``: ``name-version-release.arch`` per owned file, ``file /path is not owned by any package``;
- ``dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' NAME...``: the status's first letter is
  the selection (``h`` hold), its second the state (``i`` installed);
- ``rpm -q NAME...``: ``name-version-release.arch`` or ``package NAME is not installed``.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cluster.plugins.module_utils import versions

CHANGING_ACTIONS = ("install", "upgrade", "switch", "replace")
# NVIDIA's per-branch pinning packages (R580 on, "nvidia-driver-pinning-580") carry a branch-level version
# ("580-5"), not the driver's: the repository is asked for the branch, and apt's newest of it is installed.
_PINNING = re.compile(r"^nvidia-driver-pinning-(\d+)$")
_DONE = {"install": "installed", "upgrade": "upgraded", "switch": "switched", "replace": "replaced"}


# --- parsers ---------------------------------------------------------------------------------------------


def parse_driver_files(text: str) -> tuple[list, str]:
    """(driver files, NVIDIA's uninstaller path or "") from the file-finding command."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    uninstaller = next((line for line in lines if line.endswith("nvidia-uninstall")), "")
    return [line for line in lines if not line.endswith("nvidia-uninstall")], uninstaller


def parse_dpkg_owners(text: str) -> list:
    """Package names that own the files, in order, from ``dpkg -S`` (architecture suffixes dropped)."""
    names = []
    for line in (text or "").splitlines():
        if ": " not in line or line.startswith(("diversion ", "dpkg-query: ")):
            continue
        for package in line.split(": ", 1)[0].split(", "):
            name = package.split(":", 1)[0].strip()
            if name and name not in names:
                names.append(name)
    return names


def _split_nvra(text: str) -> tuple[str, str] | None:
    """``nvidia-driver-cuda-535.104.05-1.el9.x86_64`` -> (``nvidia-driver-cuda``, ``535.104.05-1.el9``)."""
    text = text.strip()
    if not text or " " in text:
        return None
    text = re.sub(r"\.(x86_64|aarch64|noarch|i686|ppc64le|s390x)$", "", text)
    parts = text.rsplit("-", 2)
    if len(parts) != 3 or not parts[1][:1].isdigit():
        return None
    return parts[0], parts[1] + "-" + parts[2]


def parse_rpm_owners(text: str) -> list:
    """Package names that own the files, from ``rpm -qf``; ``... is not owned by any package`` lines skipped."""
    names = []
    for line in (text or "").splitlines():
        nvr = _split_nvra(line)
        if nvr and nvr[0] not in names:
            names.append(nvr[0])
    return names


def parse_dpkg_query(text: str) -> dict:
    """``{name: {version, held}}`` for the installed packages of a ``${Package} ${Version} ${db:Status-Abbrev}`` listing."""
    found = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 3 and len(fields[2]) >= 2 and fields[2][1] == "i":
            found[fields[0].split(":", 1)[0]] = {"version": fields[1], "held": fields[2][0] == "h"}
    return found


def parse_rpm_query(text: str) -> dict:
    """``{name: {version, held: False}}`` from ``rpm -q``; dnf's version locks are no package state."""
    found = {}
    for line in (text or "").splitlines():
        nvr = _split_nvra(line)
        if nvr:
            found[nvr[0]] = {"version": nvr[1], "held": False}
    return found


def upstream_version(version: str) -> str:
    """``1:535.104.05-0ubuntu1`` -> ``535.104.05``; ``535.104.05-1.el9`` -> ``535.104.05``."""
    text = re.sub(r"^\d+:", "", (version or "").strip())
    return text.rsplit("-", 1)[0] if "-" in text else text


# --- the node ----------------------------------------------------------------------------------------------


def installed_flavour(installed, flavour_packages: dict, kmod_flavours: dict | None = None) -> str:
    """open / proprietary / unknown: from the kernel module package where the family names one (dnf), else the
    flavour whose own names (those the other flavour lacks) are all installed."""
    names = set(installed)
    for kmod, flavour in (kmod_flavours or {}).items():
        if kmod in names:
            return flavour
    open_names = [n for n in flavour_packages.get("open", []) if not n.startswith("@")]
    prop_names = [n for n in flavour_packages.get("proprietary", []) if not n.startswith("@")]
    open_own = [n for n in open_names if n not in prop_names]
    prop_own = [n for n in prop_names if n not in open_names]
    if open_own and all(n in names for n in open_own):
        return "open"
    if prop_own and all(n in names for n in prop_own):
        return "proprietary"
    if open_names and not open_own and all(n in names for n in open_names) and not names & set(prop_own):
        return "open"
    if prop_names and not prop_own and all(n in names for n in prop_names) and not names & set(open_own):
        return "proprietary"
    return "unknown"


def describe_node(manager: str, outputs: dict, flavour_packages: dict, kmod_flavours: dict | None = None) -> dict:
    """What driver the node has. ``outputs``: ``files``, ``owners``, ``packages`` (the package query),
    ``smi_version`` (nvidia-smi's driver_version, read only without an owner), ``previous`` (names this role
    installed last time) and ``branch_packages`` (the installed names carrying the current branch).

    Returns ``{files, uninstaller, owners, installed: {name: version}, held, previous, current}`` where
    ``current`` is None, ``{kind: package, package, version, upstream, branch, flavour}`` for the
    installed package that owns nvidia-smi (or the kernel module), or ``{kind: unpackaged, files, upstream,
    uninstaller}`` when no package owns them (NVIDIA's .run installer).
    """
    files, uninstaller = parse_driver_files(outputs.get("files", ""))
    parse_owners, parse_query = ((parse_rpm_owners, parse_rpm_query) if manager == "dnf"
                                 else (parse_dpkg_owners, parse_dpkg_query))
    owners = parse_owners(outputs.get("owners", "")) if files else []
    packages = parse_query(outputs.get("packages", ""))
    installed = {name: entry["version"] for name, entry in packages.items()}
    node = {"files": files, "uninstaller": uninstaller, "owners": owners, "installed": installed,
            "held": sorted(n for n, e in packages.items() if e["held"]),
            "previous": list(outputs.get("previous") or []),
            "branch_packages": sorted(parse_query(outputs.get("branch_packages", ""))),
            "current": None}
    owner = next((name for name in owners if name in installed), "")
    if owner:
        upstream = upstream_version(installed[owner])
        node["current"] = {"kind": "package", "package": owner, "version": installed[owner], "upstream": upstream,
                           "branch": upstream.split(".", 1)[0],
                           "flavour": installed_flavour(installed, flavour_packages, kmod_flavours)}
    elif files:
        smi = [line.strip() for line in (outputs.get("smi_version") or "").splitlines() if line.strip()]
        node["current"] = {"kind": "unpackaged", "files": files, "upstream": smi[0] if smi else "unknown",
                           "uninstaller": uninstaller}
    return node


# --- the repository's part ----------------------------------------------------------------------------------


def pinning_branch(name: str) -> str:
    """The branch a pinning package names ("nvidia-driver-pinning-595" -> "595"), else ""."""
    match = _PINNING.match(name)
    return match.group(1) if match else ""


def fabric_names(plan: dict) -> list:
    """The packages beside the driver: fabric manager and IMEX (at exactly the driver's version), then NVLSM
    (``nvlsm_packages``: versioned by its own release date, at ``nvlsm_version`` or the repository's newest)."""
    return (list(plan.get("fabricmanager_packages") or []) + list(plan.get("imex_packages") or [])
            + list(plan.get("nvlsm_packages") or []))


def install_names(plan: dict, action: str = "install") -> list:
    """Everything one install transaction names, in NVIDIA's order: a switch's install steps, the driver,
    fabric manager, IMEX and NVLSM (dnf: the module stream's RPMs, named by the plan's ``rpm_packages``)."""
    switch = [n for step in plan.get("flavour_switch") or [] if step.get("action") == "install"
              for n in step.get("packages", [])] if action == "switch" else []
    driver = list(plan.get("rpm_packages") or []) or [n for n in plan.get("packages", []) if not n.startswith("@")]
    return list(dict.fromkeys(switch + driver + fabric_names(plan)))


def _request(name: str, plan: dict) -> dict:
    if name in (plan.get("nvlsm_packages") or []):
        version = plan.get("nvlsm_version") or ""
        return {"name": name, "version": version, "match": "upstream" if version else "any"}
    branch = pinning_branch(name)
    if branch:
        return {"name": name, "version": branch, "match": "branch"}
    return {"name": name, "version": plan["version"], "match": "upstream"}


def repository_requests(plan: dict) -> list:
    """What the repository is asked for before anything moves: every name a transaction could install at the
    plan's driver version (a pinning package at its branch, NVLSM at its own version or the newest), then the
    plan's other packages (toolkit, NCCL)."""
    return [_request(name, plan) for name in install_names(plan, "switch")] + list(plan.get("repo_check_packages") or [])


def _dnf_arg(name: str, plan: dict) -> str:
    if name in (plan.get("nvlsm_packages") or []):
        return f"{name}-{plan['nvlsm_version']}" if plan.get("nvlsm_version") else name
    return f"{name}-{plan['version']}"


def version_locks(plan: dict, target: dict | None) -> list:
    """``[{name, version}]`` the package manager locks after the run: the driver's release for every name but
    NVLSM's, which keeps the version installed (its own release date)."""
    if not target:
        return []
    own = set(plan.get("nvlsm_packages") or [])
    return [{"name": n, "version": upstream_version(v) if n in own else target["upstream"]}
            for n, v in target["packages"].items()]


# --- the decision ------------------------------------------------------------------------------------------


def _action(node: dict, plan: dict) -> str:
    """keep / install / upgrade / switch / replace / keep-unpackaged / refuse-unpackaged."""
    current = node["current"]
    if current is None:
        return "install"
    if current["kind"] == "unpackaged":
        return "keep-unpackaged" if plan.get("keep_unpackaged") else "refuse-unpackaged"
    same_branch = current["branch"] == str(plan["branch"])
    if same_branch and current["flavour"] == plan["kernel_modules"]:
        floor = plan.get("min_version") or ""
        planned = [n for n in list(plan.get("packages", [])) + fabric_names(plan) if not n.startswith("@")]
        meets_floor = not floor or versions.compare(current["upstream"], floor, "dotted") >= 0
        # Kept only when it meets the floor and every planned name (fabric manager included) is installed.
        return "keep" if meets_floor and all(n in node["installed"] for n in planned) else "upgrade"
    if same_branch and current["flavour"] in ("open", "proprietary"):
        return "switch"
    return "replace"


def _flavour_note(current: dict, plan: dict) -> str:
    if current["flavour"] != "unknown":
        return f" ({current['flavour']} kernel modules)"
    # The plan's branch, but no kernel module package or name of either flavour: another packaging of the driver
    # (a distribution's own build). Of another branch, the flavour is not told by the plan's names.
    return " (kernel modules of a packaging the plan does not name)" if current["branch"] == str(plan["branch"]) else ""


def _stop(node: dict, plan: dict, action: str, repository: dict, host: str) -> str:
    """Why the node must stop before anything moves, or ""."""
    current = node["current"] or {}
    if action == "refuse-unpackaged":
        return (f"{host}: a driver that no package owns is installed ({', '.join(current['files'])}; it reports "
                f"{current['upstream']}) — NVIDIA's .run installer put it there, and packages laid over it would break "
                f"both. Nothing was changed. Choose one: uninstall it with {current['uninstaller'] or 'nvidia-uninstall'} "
                f"(then reboot) and re-run to install the planned {plan['version']} from the repository; or set "
                "nvidia_driver_keep_unpackaged: true for this node to keep it and install no driver packages there "
                "(the toolkit and libraries are still installed).")
    if action in ("switch", "replace") and not plan.get("allow_replace"):
        what = ("switch the flavour as NVIDIA documents it" if action == "switch"
                else f"replace it with {' '.join(install_names(plan))} {plan['version']}")
        return (f"{host}: installed driver {current['package']} {current['upstream']}{_flavour_note(current, plan)} is "
                f"not the plan's branch {plan['branch']} with {plan['kernel_modules']} kernel "
                f"modules; it was left as it is. Set nvidia_driver_allow_replace: true to {what} (a reboot follows), "
                "or change the plan.")
    if action == "switch" and not plan.get("flavour_switch"):
        return (f"{host}: the installed driver has {current['flavour']} kernel modules, the plan wants "
                f"{plan['kernel_modules']}, and the plan carries no documented switch for this OS and branch "
                "(nvidia_driver_flavour_switch is empty). Nothing was changed; switch by hand or keep the installed "
                "flavour.")
    if repository is not None and not repository.get("ok", False) and action != "pending":
        return (f"{host}: the repository {plan.get('repository', '')} cannot serve the plan: "
                f"{repository.get('message', '')}. Nothing was installed on this node.")
    return ""


def _target(node: dict, plan: dict, action: str, repository: dict, names: list) -> dict | None:
    """The driver release and the packages this run leaves installed ({name: version}), or None."""
    if action in ("keep-unpackaged", "refuse-unpackaged", "pending"):
        return None
    if action == "keep":
        current = node["current"]
        keep = ([current["package"]] + list(plan.get("packages", [])) + list(plan.get("rpm_packages") or [])
                + fabric_names(plan))
        return {"upstream": current["upstream"],
                "packages": {n: v for n, v in node["installed"].items() if n in keep}}
    resolved = (repository or {}).get("resolved") or {}
    return {"upstream": plan["version"], "packages": {n: resolved.get(n, "") for n in names}}


def _report(node: dict, plan: dict, action: str, names: list) -> str:
    current = node["current"] or {}
    cur = f"{current.get('package', 'unpackaged driver')} {current.get('upstream', '')}" if current else ""
    new = f"{' '.join(names)} {plan['version']}"
    floor = plan.get("min_version") or ""
    return {
        "keep": f"keeping installed driver {cur} (satisfies the plan{', at least ' + floor if floor else ''})",
        "keep-unpackaged": (f"keeping the driver NVIDIA's .run installer put there ({cur}); no driver packages are "
                            "installed (nvidia_driver_keep_unpackaged)"),
        "refuse-unpackaged": f"a driver no package owns is installed ({cur})",
        "pending": f"the repository is not configured yet (check mode); {new} would be installed",
        "install": f"installing {new}",
        "upgrade": (f"upgrading {cur} to {plan['version']} (below the plan's floor {floor or 'none'}, or a planned "
                    "package is not installed)"),
        "switch": (f"switching {cur} from {current.get('flavour', '')} to {plan['kernel_modules']} kernel modules as "
                   "NVIDIA documents it"),
        "replace": f"replacing {cur} with {new}",
    }[action]


def _removals(node: dict, action: str, names: list, target: dict | None) -> list:
    """Installed packages the transaction removes: the previous plan's names the new one drops (switch,
    replace) and, on a branch change, every installed package of the old branch (apt's resolver stops at the
    first Conflicts chain it cannot untangle otherwise)."""
    if action not in ("switch", "replace"):
        return []
    obsolete = [n for n in node["previous"] if n in node["installed"] and n not in names]
    current = node["current"] or {}
    if (action == "replace" and current.get("kind") == "package" and target
            and current["branch"] != target["upstream"].split(".", 1)[0]):
        obsolete += [n for n in node["branch_packages"]
                     if re.search(r"nvidia|^cuda-drivers", n) and n not in names]
    return list(dict.fromkeys(obsolete))


def decide(node: dict, plan: dict, repository: dict | None = None, check_mode: bool = False,
           sources_changed: bool = False, host: str = "") -> dict:
    """The decision for one node. ``node``: describe_node()'s result. ``plan``: ``branch``, ``min_version``,
    ``version``, ``kernel_modules``, ``packages``, ``fabricmanager_packages``, ``imex_packages``,
    ``nvlsm_packages``, ``nvlsm_version``, ``flavour_packages``,
    ``flavour_switch``, ``keep_unpackaged``, ``allow_replace``, ``repository`` (its URL, for messages),
    ``manager`` and, on dnf, ``rpm_packages``. ``repository``: repo_packages_info's answer (``ok``, ``message``,
    ``resolved``), or None where it is asked later.

    Returns ``{action, stop, report, current, target, install_names, install_args, remove, switch_options,
    held, locks}``: ``stop`` is the message to fail the node with ("" to go on); ``install_args`` are the package
    manager's arguments for the one transaction (apt ``name=version`` and ``name-`` removals, dnf
    ``name-version``); ``locks`` what dnf versionlock pins afterwards (``version_locks``).
    """
    action = _action(node, plan)
    names = install_names(plan, action)
    # A fresh node in check mode has no repository yet: report what would be installed, do not fail.
    if check_mode and repository is not None and not repository.get("ok") and sources_changed:
        action = "pending"
    stop = _stop(node, plan, action, repository, host)
    target = None if stop else _target(node, plan, action, repository, names)
    remove = _removals(node, action, names, target) if target else []
    switch_options = (list(dict.fromkeys(o for step in plan.get("flavour_switch") or [] if step.get("action") == "install"
                                         for o in step.get("options", []) if re.match(r"^--[a-z-]+$", o)))
                      if action == "switch" else [])
    if plan.get("manager") == "dnf":
        args = [_dnf_arg(n, plan) for n in names]
    else:
        args = [f"{n}={(target or {}).get('packages', {}).get(n, '')}" for n in names] + [f"{n}-" for n in remove]
    return {"action": action, "stop": stop, "report": f"{host}: {_report(node, plan, action, names)}",
            "current": node["current"], "target": target, "install_names": names,
            "install_args": args if action in CHANGING_ACTIONS else [], "remove": remove,
            "switch_options": switch_options, "held": node["held"], "changing": action in CHANGING_ACTIONS,
            "locks": version_locks(plan, target)}


def reboot_requests(decision: dict, plan: dict, changed: dict, node_state: dict) -> dict:
    """Reboot requests this run makes: file name -> the line it holds. ``changed``: ``install`` and ``nouveau``
    (did those tasks change the node); ``node_state``: ``kernel``, ``newest_kernel``, ``kernel_drift``,
    ``loaded`` and ``installed`` (driver versions)."""
    requests = {}
    action = decision["action"]
    if changed.get("install") and action in _DONE:
        switched = f" ({plan['kernel_modules']} kernel modules)" if action == "switch" else ""
        requests["driver-" + _DONE[action]] = (f"nvidia_driver: driver {decision['target']['upstream']} "
                                               f"{_DONE[action]}{switched}; load it with a reboot")
    if changed.get("nouveau"):
        requests["nouveau-blacklisted"] = "nvidia_driver: nouveau blacklisted and initramfs rebuilt"
    if node_state.get("kernel_drift"):
        requests["kernel-changed"] = (f"nvidia_driver: running kernel {node_state['kernel']}, newest installed "
                                      f"{node_state['newest_kernel']}")
    loaded, installed = node_state.get("loaded") or "", node_state.get("installed") or ""
    if loaded and loaded != installed:
        requests["driver-mismatch"] = f"nvidia_driver: loaded module {loaded}, installed {installed}"
    return requests
