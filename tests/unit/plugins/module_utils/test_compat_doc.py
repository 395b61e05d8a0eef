"""docs/compatibility.md's tables are rendered from the compat_* data modules; this test fails when
the data changes and the document does not. Rewrite the tables with:
    .venv/bin/python tests/unit/plugins/module_utils/test_compat_doc.py
"""

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[4]
if __name__ == "__main__":  # pragma: no cover - run as a script
    sys.path.insert(0, str(_REPO / "collections"))

from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_data as d  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils import compat_facts as f  # noqa: E402
from ansible_collections.gpufleet.cluster.plugins.module_utils.stack_solver import (  # noqa: E402
    fabricmanager_packages, repository_cuda_releases, supported_branches, vkey)

DOC = _REPO / "docs" / "compatibility.md"
START = "## Tables (generated from the compat_* modules)\n"
END = "## Sources and what was checked\n"


def _steps(rule, flavour):
    return "; ".join("%s %s%s" % (s["action"], " ".join(s["packages"]),
                                  (" (" + " ".join(s["options"]) + ")") if s["options"] else "")
                     for s in rule[flavour]["switch_to"])


def _source_key(kind, key):
    return next("`%s`" % source for k, row_key, _v, source in f.FACTS if k == kind and row_key == key)


def _render_supported_os(w):
    w("### Supported operating systems\n")
    w("The one list (compat_packages `SUPPORTED_OS`): the stack solver plans only these, preflight checks nodes "
      "against them and the stack roles accept them (filter `gpufleet.cluster.supported_os`). Any other OS is "
      "refused at plan time (`UNSUPPORTED_OS`) with this list.\n")
    w("| os | name | os_family | package manager | python3 | NVIDIA repository | Ansible facts the roles accept | source |")
    w("|---|---|---|---|---|---|---|---|")
    for k, row in sorted(d.SUPPORTED_OS.items()):
        w("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            k, row["name"], row["os_family"], row["package_manager"], row["python"], row["repository"],
            ", ".join(row["ansible"]), _source_key("supported_os", k)))
    w("\nRefused although NVIDIA publishes a repository for them:\n")
    w("| os | why | source |")
    w("|---|---|---|")
    for k, row in sorted(d.REFUSED_OS.items()):
        w("| %s | %s | %s |" % (k, row["reason"], _source_key("refused_os", k)))
    w("\nThe sources are listed under the sourced table below.")


def render_tables():
    out = []
    w = out.append
    _render_supported_os(w)
    w("\n### CUDA toolkits (Table 3 minimum driver per release, minor-version floor, NCCL)\n")
    w("| CUDA | release | Table 3 min driver (Linux) | minor-compat floor | libnccl2 version in NVIDIA's repo | package |")
    w("|---|---|---|---|---|---|")
    for c in sorted(d.CUDA_TOOLKITS, key=vkey):
        e = d.CUDA_TOOLKITS[c]
        for r in sorted(e["updates"], key=vkey):
            tag = " (GA)" if r.endswith(".0") else ""
            inst = " ← installed" if r == e["full_version"] else ""
            w("| %s | %s%s%s | %s | %s | %s | cuda-toolkit-%s |" % (
                c, r, tag, inst, e["updates"][r], e["driver_min_minor_compat"], e["nccl"], c.replace(".", "-")))
    w("\n### Compute capability → CUDA support\n")
    w("| CC | first CUDA | last CUDA | source |")
    w("|---|---|---|---|")
    for cc in sorted(d.CC_SUPPORT, key=vkey):
        e = d.CC_SUPPORT[cc]
        w("| %s | %s | %s | %s |" % (cc, e["first_cuda"], e["last_cuda"] or "–", e["source"]))
    w("\n### Driver branches\n")
    w("| branch | type | end of life | max CUDA (full features) | recommended (fabric manager at the same version) | releases |")
    w("|---|---|---|---|---|---|")
    for b in sorted(d.DRIVER_BRANCHES, key=vkey):
        e = d.DRIVER_BRANCHES[b]
        if e.get("eol"):
            eol = "yes" + (" (%s)" % e["eol_date"] if e.get("eol_date") else "")
        else:
            eol = "no (until %s)" % e["eol_date"] if e.get("eol_date") else "no"
        row = (b, e.get("type") or "not sourced", eol, e["max_cuda"], e["recommended"], ", ".join(e["versions"]))
        w("| R%s | %s | %s | %s | %s | %s |" % row)
    w("\nA request that names no branch gets the newest of the supported long-term and production branches "
      "(now %s) that runs its GPUs, reaches the driver floor and is seen in the OS's repository (Decisions, 4)."
      % ", ".join("R%s (%s)" % (b, d.DRIVER_BRANCHES[b]["type"]) for b in supported_branches()))
    w("\n### PyTorch wheels\n")
    w("| torch | CUDA variants (download.pytorch.org/whl/<variant>) | default PyPI variant | torchvision | torchaudio "
      "| NCCL in the default wheel | Python (wheels' cp tags that Requires-Python admits) |")
    w("|---|---|---|---|---|---|---|")
    for t in sorted(d.TORCH_RELEASES, key=vkey):
        e = d.TORCH_RELEASES[t]
        w("| %s | %s | %s | %s | %s | %s | %s |" % (
            t, ", ".join(e["variants"]), e.get("default_variant") or "not sourced", e["torchvision"], e["torchaudio"],
            e.get("bundled_nccl") or "not recorded", ", ".join(e["python"]["versions"]) if e.get("python") else "not read"))
    w("\n### Each OS's Python (what the torch venv is made from)\n")
    w("| os | python3 | source |")
    w("|---|---|---|")
    for k in sorted(d.REPO_DISTROS):
        py = d.OS_PYTHON.get(k)
        w("| %s | %s | %s |" % (k, py["python"] if py else "not sourced: torch's Python not checked",
                                py["source"] if py else ""))
    w("\n### Repositories and the CUDA releases they carry\n")
    w("| os | repository path | family | CUDA carried | bound sourced | driver branches seen in it |")
    w("|---|---|---|---|---|---|")
    for k in sorted(d.REPO_DISTROS):
        distro, fam, _graph = d.REPO_DISTROS[k]
        rng = d.REPO_CUDA_RANGE[distro]
        w("| %s | %s/%s/{x86_64,sbsa}/ | %s | %s | %s | %s |" % (
            k, d.CUDA_REPO_BASE, distro, fam, ", ".join(repository_cuda_releases(distro)),
            ", ".join(rng["verified"]) or "none (assumed open)",
            ", ".join("R" + b for b in d.REPO_BRANCHES[distro]) or "none sourced"))
    w("\n### Driver package graphs (names without versions, NVIDIA's install order)\n")
    w("| OS graph | branches | open | proprietary | switch to open | switch to proprietary | fabric manager | verified |")
    w("|---|---|---|---|---|---|---|---|")
    for graph, rules in d.DRIVER_PACKAGE_GRAPHS.items():
        for i, r in enumerate(rules):
            nxt = rules[i + 1]["from_branch"] if i + 1 < len(rules) else None
            span = "R%s–%s" % (r["from_branch"], "R%d" % (int(nxt) - 1) if nxt else "")
            fm = ", ".join(fabricmanager_packages(graph, r["from_branch"])).replace(r["from_branch"], "{B}")
            w("| %s | %s | %s | %s | %s | %s | %s | names %s, switch %s |" % (
                graph, span, ", ".join(r["open"]["packages"]), ", ".join(r["proprietary"]["packages"]),
                _steps(r, "open"), _steps(r, "proprietary"), fm,
                "yes" if r["verified"]["packages"] else "pattern", "yes" if r["verified"]["switch"] else "pattern"))
    w("\nSources per graph:\n")
    for graph, rules in d.DRIVER_PACKAGE_GRAPHS.items():
        for r in rules:
            w("- **%s from R%s**: %s" % (graph, r["from_branch"], r["source"]))
    w("- **fabric manager**: %s" % d.FABRIC_MANAGER_PACKAGES["source"])
    w("\n### NVLink packages beside the fabric manager\n")
    w("| package | OS graph | from branch | names | for GPUs | version |")
    w("|---|---|---|---|---|---|")
    for graph in ("ubuntu", "debian", "rhel"):
        for r in d.IMEX_PACKAGES[graph]:
            w("| IMEX | %s | R%s | %s | %s (and NVSwitch or not) | exactly the driver's |" % (
                graph, r["from_branch"], ", ".join(r["packages"]), ", ".join(d.IMEX_PACKAGES["gpus"])))
    w("| NVLSM | every | – | %s (+ kernel module %s) | %s with NVSwitch | its own (release date), held |" % (
        ", ".join(d.NVLSM_PACKAGES["packages"]), ", ".join(d.NVLSM_PACKAGES["kernel_modules"]),
        ", ".join(d.NVLSM_PACKAGES["gpus"])))
    w("\n- **IMEX**: %s" % d.IMEX_PACKAGES["source"])
    w("- **NVLSM**: %s" % d.NVLSM_PACKAGES["source"])
    w("\n### DCGM 4 (gpu_diagnostics)\n")
    w("| CUDA major | packages | version (apt / dnf) | replaces |")
    w("|---|---|---|---|")
    for major in d.DCGM_PACKAGES["cuda_majors"]:
        names = ", ".join(n.format(MAJOR=major) for n in d.DCGM_PACKAGES["packages"])
        w("| %s | %s | %s / %s | %s |" % (major, names, d.DCGM_PACKAGES["version"]["apt"],
                                          d.DCGM_PACKAGES["version"]["dnf"], ", ".join(d.DCGM_PACKAGES["replaces"])))
    w("\n- **DCGM 4**: %s" % d.DCGM_PACKAGES["source"])
    w("\n### The sourced table (plugins/module_utils/compat_facts.py, reviewed %s)\n" % f.AS_OF)
    w("One row per fact, one source per row; the sources, with the date each was read, follow the table.\n")
    w("| kind | key | value | source |")
    w("|---|---|---|---|")
    for kind, key, value, source in f.FACTS:
        shown = ", ".join(value) if isinstance(value, list) else (
            ", ".join("%s %s" % kv for kv in value.items()) if isinstance(value, dict) else value)
        w("| %s | %s | %s | %s |" % (kind, key, "–" if shown is None else shown, source))
    w("\nSources of the table:\n")
    for key, src in f.SOURCES.items():
        w("- `%s` (read %s): %s. %s" % (key, src["read"], src["document"], src["url"]))
    w("\n### Rule ids\n")
    w("| rule | what holds in every plan |")
    w("|---|---|")
    for k in sorted(d.RULES):
        w("| `%s` | %s |" % (k, d.RULES[k]))
    return "\n".join(out) + "\n\n"


def _split(text):
    head, rest = text.split(START, 1)
    _tables, tail = rest.split(END, 1)
    return head, _tables, tail


def test_doc_tables_match_the_data():
    _head, tables, _tail = _split(DOC.read_text())
    assert tables == "\n" + render_tables(), "docs/compatibility.md tables are stale; run this file as a script"


if __name__ == "__main__":  # pragma: no cover
    head, _tables, tail = _split(DOC.read_text())
    DOC.write_text(head + START + "\n" + render_tables() + END + tail)
    print("rewrote the tables in %s" % DOC)
