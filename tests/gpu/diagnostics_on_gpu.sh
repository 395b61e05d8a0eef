#!/usr/bin/env bash
# Real-GPU check for issue 16 (diagnostics), on one GPU node:
#
#   OUT=/some/dir bash tests/gpu/diagnostics_on_gpu.sh     # from the repository root
#
# 1. captures `dcgmi diag -r 1 -j` (if dcgmi is installed; with nv-hostengine started by hand when no
#    service runs), `nvidia-smi nvlink -s` / `-e`, `nvidia-smi -q`, and parses/judges them with the
#    collection's pure parsers (module_utils dcgm / nvlink) -> $OUT/diagnostics.json;
# 2. runs the GEMM / copy-bandwidth microbenchmark on every GPU -> $OUT/microbench.jsonl.
# Everything it could not run is written down with the reason, never skipped silently.
# Exit status: 0 when nothing failed, 1 when a finding failed, 2 when DCGM (or the parsing) could not run.
set -u -o pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/tests/output/gpu-diagnostics}
mkdir -p "$OUT/captures"
rm -f "$OUT/diagnostics.json" "$OUT/microbench.jsonl"
say() { printf '[diagnostics_on_gpu] %s\n' "$*" | tee -a "$OUT/run.log"; }
PY=${GPUFLEET_GPU_PYTHON:-}
for cand in "$REPO/.venv/bin/python" python3; do
  [ -n "$PY" ] && break
  "$cand" -c 'import torch' >/dev/null 2>&1 && PY=$cand
done
[ -n "$PY" ] || { say "no python with torch"; PY=python3; }

HOSTENGINE_PID=""
if command -v dcgmi >/dev/null 2>&1; then
  if ! timeout 20 dcgmi discovery -l >/dev/null 2>&1 && command -v nv-hostengine >/dev/null 2>&1; then
    nv-hostengine -n --pid "$OUT/nv-hostengine.pid" >"$OUT/captures/nv-hostengine.log" 2>&1 &
    HOSTENGINE_PID=$!
    sleep 3
  fi
  timeout 300 dcgmi diag -r 1 -j >"$OUT/captures/dcgmi-diag-r1.json" 2>"$OUT/captures/dcgmi-diag-r1.stderr"
  echo $? >"$OUT/captures/dcgmi-diag-r1.rc"
  say "dcgmi diag -r 1 exit $(cat "$OUT/captures/dcgmi-diag-r1.rc")"
  [ -n "$HOSTENGINE_PID" ] && kill "$HOSTENGINE_PID" 2>/dev/null
else
  say "dcgmi not installed: DCGM not checked"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 60 nvidia-smi nvlink -s >"$OUT/captures/nvlink-s.txt" 2>&1; echo $? >"$OUT/captures/nvlink-s.rc"
  timeout 60 nvidia-smi nvlink -e >"$OUT/captures/nvlink-e.txt" 2>&1; echo $? >"$OUT/captures/nvlink-e.rc"
  timeout 60 nvidia-smi -q >"$OUT/captures/nvidia-smi-q.txt" 2>&1
  systemctl is-active nvidia-fabricmanager >"$OUT/captures/fabricmanager.txt" 2>&1
else
  say "no nvidia-smi"
fi

PYTHONPATH=$REPO/collections "$PY" - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
from ansible_collections.gpufleet.cluster.plugins.module_utils import dcgm, nvlink
from ansible_collections.gpufleet.cluster.plugins.module_utils.findings import worst_status
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_smi import parse_nvidia_smi
out = Path(sys.argv[1]); cap = out / "captures"
def read(name):
    p = cap / name
    return p.read_text(errors="replace") if p.exists() else None
findings, not_checked, facts = [], [], {}
doc = read("dcgmi-diag-r1.json")
if doc is None:
    not_checked.append({"check": "dcgm", "reason": "dcgmi not installed"})
else:
    rc = int(read("dcgmi-diag-r1.rc") or 1)
    try:
        parsed = dcgm.parse_dcgm_diag(doc)
        facts["dcgm"] = {k: parsed[k] for k in ("schema", "version", "driver_version", "tests_run")}
    except dcgm.DcgmParseError as exc:
        parsed = None; facts["dcgm_error"] = str(exc)
    findings += dcgm.evaluate_dcgm(parsed, "gpu-node", 1, rc=rc)
status_text = read("nvlink-s.txt")
if status_text is None or (read("nvlink-s.rc") or "1").strip() != "0":
    not_checked.append({"check": "nvlink", "reason": (status_text or "no nvidia-smi")[:300]})
else:
    status = nvlink.parse_nvlink_status(status_text)
    errors = nvlink.parse_nvlink_errors(read("nvlink-e.txt") or "")
    links, gbps = nvlink.expected_nvlink(status[0]["name"]) if status else (None, None)
    facts["nvlink"] = {"gpus": len(status), "links_per_gpu": sorted({len(g["links"]) for g in status}),
                       "gbps": sorted({l["gbps"] for g in status for l in g["links"] if l["gbps"]}),
                       "expected": [links, gbps]}
    if not status:
        not_checked.append({"check": "nvlink", "reason": "no GPU with NVLink listed"})
    findings += nvlink.evaluate_nvlink(status, errors, "gpu-node", expected_links=links, expected_gbps=gbps)
q = read("nvidia-smi-q.txt")
if q:
    gpus = parse_nvidia_smi(q)["gpus"]
    facts["fabric"] = [g.get("fabric") for g in gpus]
    fm_active = (read("fabricmanager.txt") or "").strip() == "active"
    has_fabric = any(g.get("fabric") for g in gpus)
    findings += nvlink.evaluate_fabric(gpus, "gpu-node", has_fabric, fm_active)
report = {"status": worst_status(findings), "findings": findings, "not_checked": not_checked, "facts": facts}
(out / "diagnostics.json").write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps({"status": report["status"], "codes": [f["code"] for f in findings], "not_checked": not_checked}))
PYEOF
PARSE_RC=$?

if "$PY" -c 'import torch' >/dev/null 2>&1; then
  read -r -a BENCH_ARGS <<<"${MICROBENCH_ARGS:-}"
  if timeout 300 "$PY" "$REPO/roles/gpu_benchmark/files/gpufleet_microbench.py" "${BENCH_ARGS[@]}" \
    >"$OUT/microbench.jsonl" 2>"$OUT/microbench.stderr"; then
    say "microbench: $(tr '\n' ' ' <"$OUT/microbench.jsonl")"
  else
    say "microbench failed: $(tail -3 "$OUT/microbench.stderr")"
  fi
fi
[ $PARSE_RC -eq 0 ] || exit 2
grep -q '"status": "fail"' "$OUT/diagnostics.json" && exit 1
# No DCGM result is no verdict: a node where nothing ran must not read as healthy.
grep -q '"check": "dcgm"' "$OUT/diagnostics.json" && { say "DCGM not checked: no verdict"; exit 2; }
exit 0
