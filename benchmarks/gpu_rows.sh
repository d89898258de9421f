#!/usr/bin/env bash
# The benchmarks' GPU rows in one go, for a GPU machine: each part under its own time limit, its log in
# LOGS (default gpu-logs/), a short summary on stdout. Parts that need packages the machine lacks fail
# alone; the others still run.
#
#   bash benchmarks/gpu_rows.sh [LOGS]
#
# 1. env: the GPU, driver, Python and torch; the CUDA tests of explorer/graphs.py and the resident walk
# 2. live: bench_live.py on shakespeare (with torch.compile) and shakespeare-large
# 3. hf: bench_hf.py --llada-8b-shape, greedy and T = 1, 256 and 1,024 tokens
# 4. sampler: bench_sampler.py --device cuda --quick, without CUDA graphs, then its overhead and sweep with them
# 5. cache: bench_cache.py's stand-in at LLaDA-8B's shape, uncached against the prefix and dual caches
# 6. load: load_test.py, 8 then 30 sessions at Explore's default run served on the GPU by one process, then
#    30 by eight (--num-procs 8)
# 6b. scrub: one session dragging the temperature slider on a scrubbing server: finished runs a second
# 7. opt-in (PARTS names them): train-uniform and evaluate-uniform, the uniform-state twin of `shakespeare`
# PARTS="live hf" runs only those parts; LIVE_ARGS adds bench_live flags (--profile).
set -u
logs=${1:-gpu-logs}
mkdir -p "$logs"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
py=${PYTHON:-python3}

part() {  # part NAME SECONDS COMMAND...: run it under `timeout` (when PARTS names it), log it, print its tail
  local name=$1 limit=$2 start rc
  shift 2
  case " ${PARTS:-all} " in
    *" $name "*) ;;
    *" all "*) case " $OPT_IN " in *" $name "*) return 0 ;; esac ;;  # opt-in parts run when named
    *) return 0 ;;
  esac
  start=$(date +%s)
  echo "=== $name: $*" >"$logs/$name.log"
  timeout -k 10 "$limit" "$@" >>"$logs/$name.log" 2>&1
  rc=$?
  echo "=== $name: exit $rc after $(( $(date +%s) - start )) s (limit $limit s)" | tee -a "$logs/$name.log"
  tail -n "${TAIL:-25}" "$logs/$name.log" | grep -v '^===' | cut -c1-200
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  "$py" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name())"
} >"$logs/env.log" 2>&1
cat "$logs/env.log"
OPT_IN="train-uniform evaluate-uniform"
serve="--device cuda --num-threads 4 --no-auto-sweep --offline"
class="--sessions 30 --seconds 20 --think 2 --length 256 --steps 64 --load-timeout 80 --timeout 40"
TAIL=6 part graphs 60 "$py" -m pytest -p no:cacheprovider -o addopts="" tests/unit/test_graphs.py \
  tests/unit/sampling/test_resident.py -q -k "cuda or gpu"
TAIL=32 part live 110 "$py" benchmarks/bench_live.py --checkpoint shakespeare shakespeare-large --runs 5 ${LIVE_ARGS:-}
TAIL=6 part compile 50 "$py" benchmarks/bench_live.py --checkpoint shakespeare --runs 5 --compile --only fp32 compile
TAIL=12 part hf 115 "$py" benchmarks/bench_hf.py --llada-8b-shape --device cuda --length 256 1024 --temperature 0 1 \
  --rounds 3
TAIL=40 MDLM_EXPLORER_CUDA_GRAPHS=off part sampler 90 "$py" benchmarks/bench_sampler.py --device cuda --quick
TAIL=30 part sampler-graphs 60 "$py" benchmarks/bench_sampler.py --device cuda --quick --parts overhead,sweep
TAIL=12 part cache 60 "$py" benchmarks/bench_cache.py --llada-8b-shape --device cuda --length 1024 --steps 64 128 \
  --temperatures 0
TAIL=20 part load 150 "$py" benchmarks/load_test.py $class --sessions 8 30 --server-args "$serve"
TAIL=20 part load-procs 100 "$py" benchmarks/load_test.py $class --server-args "$serve --num-procs 8 --threads 1"
TAIL=3 part scrub 60 "$py" benchmarks/load_test.py --sessions --scrub 10 --length 256 --steps 64 --load-timeout 40 \
  --server-args "$serve --scrub on"
# opt-in: the uniform-state twin of `shakespeare` trained as the masked one was (from shakespeare-ar, 6,000 steps
# of 32 rows), then its held-out figures; DATA is Tiny Shakespeare's file
TAIL=12 part train-uniform 420 "$py" run.py train --out "$logs/shakespeare-uniform.safetensors" \
  --data "${DATA:-tinyshakespeare.txt}" --kind diffusion --process uniform --init-from shakespeare-ar \
  --shift-logits true --n-layer 6 --n-embd 256 --n-head 4 --block-size 256 --batch-size 32 --max-steps "${STEPS:-6000}" \
  --lr 5e-4 --min-lr-ratio 0.05 --warmup-steps 200 --min-length 16 --short-fraction 0.3 --eval-every 500 \
  --eval-sequences 48 --save-every 500 --seed 0 --device "${DEVICE:-cuda}" --max-minutes 6
TAIL=30 part evaluate-uniform 240 "$py" run.py evaluate --checkpoint "$logs/shakespeare-uniform.safetensors" \
  --data "${DATA:-tinyshakespeare.txt}" --device "${DEVICE:-cuda}" -n "${SAMPLES:-30}"
