#!/usr/bin/env bash
# Real-GPU check for issue 27 (per-GPU figures, nccl-tests, MFU), on one GPU node (an H200 from time to time):
#
#   OUT=/some/dir bash tests/gpu/benchmark_on_gpu.sh        # from the repository root
#
# 1. the GEMM (bf16, fp16, fp8 where the GPU has it) and memory microbenchmark on every GPU
#    (roles/gpu_benchmark/files/gpufleet_microbench.py, CUDA_DEVICE_ORDER=PCI_BUS_ID), judged against the
#    model's datasheet peak and the node's other GPUs with the collection's pure functions -> $OUT/compute.json;
# 2. nccl-tests' all_reduce_perf within the node on all its GPUs (NCCL_TESTS_DIR, else the usual paths;
#    "not run" with the reason when there is none) -> $OUT/nccl_tests.log, parsed and judged;
# 3. the smoke job through tests/gpu/run_on_gpu.sh (same launcher and report code as the role) ->
#    $OUT/smoke/reports/smoke.json, with its MFU;
# 4. the smoke job's bandwidth against nccl-tests' on the same GPUs, size by size (busbw with more than one GPU,
#    algbw with one, where busbw is 0 by definition) -> $OUT/benchmark.json.
#
# Knobs: GPUFLEET_GPU_PYTHON (a python whose torch has CUDA), NCCL_TESTS_DIR, NCCL_TESTS_ARGS (default
# "-b 32M -e 1G -f 2"), NCCL_TESTS_GPUS (default: the GPUs torch sees), MICROBENCH_ARGS, GPUFLEET_ALLOW_CPU=1 (the
# CPU path, tested on CI: CPU figures labelled as such, the smoke job on gloo, no comparison with NCCL).
# Exit status: 0 when everything that ran passed, 1 when a finding failed, 2 when nothing could run.
set -u -o pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/tests/output/gpu-benchmark}
rm -rf "$OUT/benchmark.json" "$OUT/compute.json" "$OUT/microbench.jsonl" "$OUT/nccl_tests.log" "$OUT/smoke"
mkdir -p "$OUT"
say() { printf '[benchmark_on_gpu] %s\n' "$*" | tee -a "$OUT/run.log"; }

PY=""
for cand in ${GPUFLEET_GPU_PYTHON:-} "$REPO/.venv/bin/python" python3; do
  [ -n "$cand" ] || continue
  # One import of torch per candidate: rc 0 sees GPUs (and prints how many), rc 3 is a torch without CUDA.
  TORCH_GPUS=$("$cand" -c 'import torch,sys; print(torch.cuda.device_count()); sys.exit(0 if torch.cuda.is_available() else 3)' 2>/dev/null)
  case $? in
    0) PY=$cand; NGPU=$TORCH_GPUS; break ;;
    3) [ "${GPUFLEET_ALLOW_CPU:-0}" = 1 ] && CPU_PY=${CPU_PY:-$cand} ;;
  esac
done
if [ -z "$PY" ]; then
  if [ "${GPUFLEET_ALLOW_CPU:-0}" = 1 ] && [ -n "${CPU_PY:-}" ]; then
    PY=$CPU_PY; NGPU=0; say "no CUDA torch: GPUFLEET_ALLOW_CPU=1, the CPU path ($PY)"
  else
    say "no python with a CUDA-enabled torch found (set GPUFLEET_GPU_PYTHON)"; exit 2
  fi
fi

# ---- 1. GEMM and memory on every GPU ---------------------------------------------------------------
read -r -a BENCH_ARGS <<<"${MICROBENCH_ARGS:-}"
CUDA_DEVICE_ORDER=PCI_BUS_ID timeout 900 "$PY" "$REPO/roles/gpu_benchmark/files/gpufleet_microbench.py" "${BENCH_ARGS[@]}" \
  >"$OUT/microbench.jsonl" 2>"$OUT/microbench.stderr"
say "microbench rc=$?: $(wc -l <"$OUT/microbench.jsonl") device line(s)"

# ---- 2. nccl-tests within the node ------------------------------------------------------------------
NT_BIN=""
for dir in ${NCCL_TESTS_DIR:-} /opt/gpufleet/nccl-tests/build /usr/local/bin /usr/bin; do
  [ -x "$dir/all_reduce_perf" ] && { NT_BIN=$dir/all_reduce_perf; break; }
done
NT_GPUS=${NCCL_TESTS_GPUS:-$NGPU}
if [ -z "$NT_BIN" ]; then
  echo "nccl-tests not found (set NCCL_TESTS_DIR)" >"$OUT/nccl_tests.reason"; say "$(cat "$OUT/nccl_tests.reason")"
elif [ "$NT_GPUS" -lt 1 ]; then
  echo "no GPU for nccl-tests (CPU path)" >"$OUT/nccl_tests.reason"; say "$(cat "$OUT/nccl_tests.reason")"
else
  read -r -a NT_ARGS <<<"${NCCL_TESTS_ARGS:--b 32M -e 1G -f 2}"
  timeout 900 "$NT_BIN" "${NT_ARGS[@]}" -g "$NT_GPUS" >"$OUT/nccl_tests.log" 2>"$OUT/nccl_tests.stderr"
  echo $? >"$OUT/nccl_tests.rc"
  say "nccl-tests $NT_BIN -g $NT_GPUS rc=$(cat "$OUT/nccl_tests.rc")"
fi

# ---- 3. the smoke job, as the role runs it -----------------------------------------------------------
OUT="$OUT/smoke" GPUFLEET_SKIP_PLAYBOOK=1 GPUFLEET_GPU_PYTHON="$PY" bash "$REPO/tests/gpu/run_on_gpu.sh" >>"$OUT/run.log" 2>&1
SMOKE_RC=$?
say "smoke job rc=$SMOKE_RC (reports in $OUT/smoke/reports)"

# ---- 4. judge, compare, write benchmark.json --------------------------------------------------------
OUT="$OUT" SMOKE_RC="$SMOKE_RC" NT_GPUS="$NT_GPUS" PYTHONPATH="$REPO/collections" "$PY" - <<'PYEOF' 2>&1 | tee -a "$OUT/run.log"
import json, os, sys
from ansible_collections.gpufleet.cluster.plugins.module_utils import gpu_benchmark as gb, gpu_compute as gc

out = os.environ["OUT"]
def read(name, default=None):
    path = os.path.join(out, name)
    return open(path).read() if os.path.exists(path) else default

compute = gc.compute_verdict(["gpu-node"], {"gpu-node": {"stdout": read("microbench.jsonl", ""), "rc": 0,
                                                        "stderr": read("microbench.stderr", "")}})
open(os.path.join(out, "compute.json"), "w").write(json.dumps(compute, indent=2) + "\n")
doc = {"compute": {"summary": compute["summary"], "findings": compute["findings"], "not_checked": compute["not_checked"]}}
findings = list(compute["findings"])

log = read("nccl_tests.log")
nccl = None
if log is None:
    doc["nccl_tests"] = {"run": False, "reason": (read("nccl_tests.reason") or "not run").strip()}
else:
    gpus = int(os.environ["NT_GPUS"])
    nccl = gb.nccl_run_summary(log, int(read("nccl_tests.rc", "1").strip() or 1), "all_reduce", gpus)
    model = (compute["gpus"][0]["model_key"] if compute["gpus"] else None)
    floor, source = gb.nccl_floor("all_reduce", model, gpus, 1)
    findings += gb.judge_run("single-node", nccl, floor, source, ["gpu-node"], "all_reduce_perf")
    doc["nccl_tests"] = gb.run_record("single", ["gpu-node"], "all_reduce_perf", nccl, floor, source)

smoke = json.loads(read("smoke/reports/smoke.json", "null") or "null")
doc["smoke"] = None if smoke is None else {
    "rc": int(os.environ["SMOKE_RC"]), "backend": smoke["backend"], "world_size": smoke["world_size"],
    "busbw_large_gbps": (smoke.get("sweep") or {}).get("busbw_large_gbps"),
    "mfu": (smoke.get("training") or {}).get("mfu"), "passed": smoke["verdict"]["passed"]}

# The smoke sweep against nccl-tests, size by size, on the same GPUs and only when both ran NCCL.
if smoke is None or nccl is None or smoke["backend"] != "nccl":
    doc["comparison"] = {"compared": False, "reason": "the smoke job %s and nccl-tests %s: nothing to set side by side" % (
        "ran %s" % smoke["backend"] if smoke else "did not report", "ran" if nccl else "did not run")}
else:
    field = "busbw_gbps" if smoke["world_size"] > 1 else "algbw_gbps"
    mine = {r["size_bytes"]: r.get(field) for r in smoke["sweep"]["rows"]}
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nccl_tests import parse_nccl_tests
    theirs = {}
    for test in parse_nccl_tests(log):
        for r in test["rows"]:
            theirs[r["size_bytes"]] = max(h.get(field) or 0 for h in (r["out_of_place"], r["in_place"]))
    rows = [{"size_bytes": s, "smoke": mine[s], "nccl_tests": theirs[s],
             "ratio": round(mine[s] / theirs[s], 3) if mine[s] and theirs[s] else None} for s in sorted(set(mine) & set(theirs))]
    doc["comparison"] = {"compared": True, "figure": field, "rows": rows}
doc["findings"] = findings
open(os.path.join(out, "benchmark.json"), "w").write(json.dumps(doc, indent=2) + "\n")
for line in compute["summary"] + [json.dumps(doc["nccl_tests"])[:300], json.dumps(doc["comparison"])[:600]]:
    print("[benchmark_on_gpu] " + line)
sys.exit(1 if any(f["severity"] == "fail" for f in findings) else 0)
PYEOF
JUDGE_RC=$?
[ -s "$OUT/benchmark.json" ] || { say "no benchmark.json"; exit 2; }
[ "$JUDGE_RC" = 0 ] && [ "$SMOKE_RC" = 0 ] && exit 0
exit 1
