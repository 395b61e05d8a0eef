#!/usr/bin/env bash
# Real-GPU check for the smoke test and the facts modules, on one GPU node (an H200 from time to time).
#
#   OUT=/some/dir bash tests/gpu/run_on_gpu.sh        # from the repository root
#
# 1. records what the node is (nvidia-smi captures: -L, -q -x, --query-gpu, topo -m) under $OUT/captures;
# 2. runs gpufleet.cluster.gpu_info / host_info / rdma_info against the real nvidia-smi when ansible is
#    importable (their JSON under $OUT/modules), else says why not;
# 3. runs the smoke job through the same launcher the role uses (single node: no roll call, c10d
#    rendezvous on 127.0.0.1), backend nccl, one process per GPU, sweep 8 B .. 1 GiB, NCCL_DEBUG=INFO;
# 4. builds smoke.json / smoke.junit.xml / smoke.md / smoke_busbw.svg with the same pure functions
#    the controller uses (plugins/module_utils/smoke_{report,verdict,render}.py) under $OUT/reports;
# 5. with ansible present, also runs playbooks/smoke_test.yml against localhost (connection local).
#
# Knobs: GPUFLEET_GPU_PYTHON (a python whose torch has CUDA; default: the first of .venv/bin/python,
# python3 that has one), SMOKE_MAX_BYTES (default 1073741824), SMOKE_STEPS (100), SMOKE_TIMEOUT (300 s
# per step), GPUFLEET_SKIP_PLAYBOOK=1 (skip step 5). GPUFLEET_ALLOW_CPU=1 runs the same path with gloo when no GPU is there (tested on CI).
# Exit status: 0 when the smoke verdict passed, 1 when it failed, 2 when nothing could run.
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/tests/output/gpu}
# A verdict or report left by an earlier run in the same OUT must never stand in for this one.
rm -rf "$OUT/verdict.txt" "$OUT/reports" "$OUT/ansible-reports" "$OUT/node.json" "$OUT/probe.json"
mkdir -p "$OUT/captures" "$OUT/modules" "$OUT/reports" "$OUT/work"
LOG=$OUT/run.log
: >"$LOG"
say() { printf '[run_on_gpu] %s\n' "$*" | tee -a "$LOG"; }
STEP_TIMEOUT=${SMOKE_TIMEOUT:-300}
MAX_BYTES=${SMOKE_MAX_BYTES:-1073741824}
STEPS=${SMOKE_STEPS:-100}
JOB=$REPO/roles/smoke_test/files/gpufleet_smoke.py

# ---- 1. what is this node -------------------------------------------------------------------
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 60 nvidia-smi >"$OUT/captures/nvidia-smi.txt" 2>&1
  timeout 60 nvidia-smi -L >"$OUT/captures/nvidia-smi-L.txt" 2>&1
  timeout 60 nvidia-smi -q -x >"$OUT/captures/nvidia-smi-q.xml" 2>&1
  timeout 60 nvidia-smi -q >"$OUT/captures/nvidia-smi-q.txt" 2>&1
  timeout 60 nvidia-smi topo -m >"$OUT/captures/nvidia-smi-topo-m.txt" 2>&1
  timeout 60 nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,ecc.mode.current,persistence_mode \
    --format=csv,noheader >"$OUT/captures/query-gpu.csv" 2>&1
  NGPU=$(grep -c '^GPU ' "$OUT/captures/nvidia-smi-L.txt" || true)
  say "nvidia-smi lists $NGPU GPU(s): $(head -1 "$OUT/captures/nvidia-smi-L.txt")"
else
  say "no nvidia-smi on PATH"
fi

# ---- find a python whose torch sees the GPUs --------------------------------------------------
PY=""
for cand in ${GPUFLEET_GPU_PYTHON:-} "$REPO/.venv/bin/python" python3; do
  [ -n "$cand" ] || continue
  command -v "$cand" >/dev/null 2>&1 || [ -x "$cand" ] || continue
  # One import of torch per candidate (about 1.5 s each): rc 0 sees GPUs (and prints how many), rc 3 has a
  # torch without CUDA (a CPU candidate), anything else has no usable torch.
  TORCH_GPUS=$("$cand" -c 'import torch,sys; print(torch.cuda.device_count()); sys.exit(0 if torch.cuda.is_available() else 3)' 2>/dev/null)
  case $? in
    0) PY=$cand; break ;;
    3) [ "${GPUFLEET_ALLOW_CPU:-0}" = 1 ] && CPU_PY=${CPU_PY:-$cand} ;;
  esac
done
BACKEND=nccl
if [ -z "$PY" ]; then
  if [ "$NGPU" -gt 0 ]; then
    # A GPU node whose torch cannot see the GPUs is a failure to report, never a gloo pass.
    say "nvidia-smi lists $NGPU GPU(s) but no python here has a torch that sees them (set GPUFLEET_GPU_PYTHON)"; exit 1
  fi
  if [ "${GPUFLEET_ALLOW_CPU:-0}" = 1 ] && [ -n "${CPU_PY:-}" ]; then
    PY=$CPU_PY; BACKEND=gloo; NGPU=0
    say "no CUDA torch: GPUFLEET_ALLOW_CPU=1, running the CPU path with gloo ($PY)"
  else
    say "no python with a CUDA-enabled torch found (set GPUFLEET_GPU_PYTHON)"; exit 2
  fi
fi
PYBIN=$(dirname "$(command -v "$PY" || echo "$PY")")
TORCHRUN=$PYBIN/torchrun
[ -x "$TORCHRUN" ] || { say "no torchrun beside $PY"; exit 2; }
"$PY" "$JOB" probe >"$OUT/probe.json" 2>>"$LOG"
say "probe: $(cat "$OUT/probe.json")"
if [ "$BACKEND" = nccl ]; then
  NPROC=$TORCH_GPUS
else
  NPROC=2
fi

# ---- 2. the facts modules against the real nvidia-smi ----------------------------------------
if "$PY" -c 'import ansible' >/dev/null 2>&1; then
  for mod in gpu_info host_info rdma_info; do
    printf '{"ANSIBLE_MODULE_ARGS": {}}' >"$OUT/modules/$mod.args.json"
    PYTHONPATH=$REPO/collections timeout 120 "$PY" "$REPO/plugins/modules/$mod.py" "$OUT/modules/$mod.args.json" \
      >"$OUT/modules/$mod.json" 2>"$OUT/modules/$mod.stderr"
    say "module $mod rc=$? -> $OUT/modules/$mod.json"
  done
else
  say "ansible is not importable by $PY: facts modules not run (captures are under $OUT/captures)"
fi

# ---- 3. the smoke job through the role's launcher ----------------------------------------------
ADDR=127.0.0.1
NODE=$(hostname -s 2>/dev/null || echo gpu-node)
RUN_ID=gpu-$(date -u +%Y%m%dT%H%M%SZ)
SWEEP_ARGS=(--backend "$BACKEND" --min-bytes 8 --max-bytes "$MAX_BYTES" --steps "$STEPS")
[ "$BACKEND" = gloo ] && SWEEP_ARGS=(--backend gloo --min-bytes 8 --max-bytes "${SMOKE_MAX_BYTES:-4194304}" --warmup 1 --iters 3 --steps "$STEPS")
say "smoke job: backend $BACKEND, $NPROC process(es), sweep up to ${SWEEP_ARGS[5]} B"
T0=$(date +%s)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV TORCH_NCCL_ASYNC_ERROR_HANDLING=1 GLOO_SOCKET_IFNAME=lo \
  timeout --kill-after=10 $((STEP_TIMEOUT + 30)) "$PY" "$JOB" node --node-name "$NODE" --peers "$NODE=$ADDR" \
  --nproc "$NPROC" --torchrun "$TORCHRUN" --rdzv-port "${SMOKE_RDZV_PORT:-29400}" --run-id "$RUN_ID" \
  --join-timeout 60 --timeout "$STEP_TIMEOUT" --work-dir "$OUT/work" -- "${SWEEP_ARGS[@]}" \
  >"$OUT/node.json" 2>>"$LOG"
RC=$?
say "launcher rc=$RC in $(( $(date +%s) - T0 )) s; torchrun log: $OUT/work/torchrun-$RUN_ID.log"

# ---- 4. reports with the controller's pure functions ---------------------------------------------
NODE="$NODE" NPROC="$NPROC" BACKEND="$BACKEND" OUT="$OUT" REPO="$REPO" "$PY" - <<'PYEOF' 2>&1 | tee -a "$LOG"
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.environ["REPO"], "collections"))
from ansible_collections.gpufleet.cluster.plugins.module_utils import report_writer, smoke_render as srd, smoke_report as sr, smoke_verdict as sv

out_dir, node, backend = os.environ["OUT"], os.environ["NODE"], os.environ["BACKEND"]
try:
    launcher = json.loads(open(os.path.join(out_dir, "node.json")).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError) as exc:
    launcher = {"error": "launcher gave no JSON: %s" % exc}
gpu = {"status": "no_driver"}
csv = os.path.join(out_dir, "captures", "query-gpu.csv")
if os.path.exists(csv) and backend == "nccl":
    rows = [[c.strip() for c in line.split(",")] for line in open(csv) if line.count(",") >= 3]
    head = open(os.path.join(out_dir, "captures", "nvidia-smi.txt")).read()
    m = re.search(r"CUDA Version:\s*([\d.]+)", head)
    gpu = {"status": "ok", "driver_version": rows[0][3] if rows else None, "cuda_version": m.group(1) if m else None,
           "driver_gpu_count": len(rows), "gpus": [{"name": r[1]} for r in rows]}
modules_gpu = os.path.join(out_dir, "modules", "gpu_info.json")
if os.path.exists(modules_gpu):
    try:
        gpu = json.load(open(modules_gpu))
    except ValueError:
        pass
probe = json.load(open(os.path.join(out_dir, "probe.json")))
nodes = {node: {"address": "127.0.0.1", "nproc": int(os.environ["NPROC"]), "gpu": gpu, "probe": probe}}
report = sr.build_report("gpu-node", [node], nodes, {node: launcher}, backend,
                         notes=["tests/gpu/run_on_gpu.sh on %s" % node])
sv.evaluate(report, sv.resolve_thresholds(report, {}))
rep = os.path.join(out_dir, "reports")
open(os.path.join(rep, "smoke.json"), "w").write(report_writer.render_json(report))
open(os.path.join(rep, "smoke.junit.xml"), "w").write(srd.render_junit(report))
open(os.path.join(rep, "smoke.md"), "w").write(srd.render_markdown(report))
open(os.path.join(rep, "smoke_busbw.svg"), "w").write(srd.render_svg(report))
sweep = report.get("sweep") or {}
print("[run_on_gpu] verdict: %s; backend %s; world %s; nccl %s; transports %s; large busbw %s GB/s"
      % ("PASSED" if report["verdict"]["passed"] else "FAILED", report["backend"], report["world_size"],
         report["versions"].get("nccl"), ",".join(report["transports"]), sweep.get("busbw_large_gbps")))
for reason in report["verdict"]["reasons"]:
    print("[run_on_gpu]   " + reason)
open(os.path.join(out_dir, "verdict.txt"), "w").write("passed\n" if report["verdict"]["passed"] else "failed\n")
PYEOF
REPORT_RC=$?
[ "$REPORT_RC" = 0 ] || { say "building the report failed (rc=$REPORT_RC)"; exit 1; }

# ---- 5. the playbook itself, when ansible is here ----------------------------------------------------
if [ "${GPUFLEET_SKIP_PLAYBOOK:-0}" != 1 ] && command -v ansible-playbook >/dev/null 2>&1 \
   && "$PY" -c 'import ansible' >/dev/null 2>&1; then
  say "ansible-playbook present: running playbooks/smoke_test.yml on localhost"
  (cd "$REPO" && timeout $((STEP_TIMEOUT + 120)) ansible-playbook playbooks/smoke_test.yml -i localhost, -c local \
     -e gpufleet_hosts=all -e ansible_host=127.0.0.1 -e "ansible_python_interpreter=$PY" -e "smoke_test_venv=$(dirname "$PYBIN")" \
     -e "gpufleet_report_dir=$OUT/ansible-reports" -e "smoke_test_work_dir=$OUT/work-ansible" \
     -e "smoke_test_backend=$BACKEND" >"$OUT/ansible-playbook.log" 2>&1)
  PLAYBOOK_RC=$?
  say "playbook rc=$PLAYBOOK_RC (log $OUT/ansible-playbook.log)"
  # The role's own verdict counts as much as the hand-built one.
  [ "$PLAYBOOK_RC" = 0 ] || exit 1
fi

[ "$(cat "$OUT/verdict.txt" 2>/dev/null)" = passed ] && exit 0
exit 1
