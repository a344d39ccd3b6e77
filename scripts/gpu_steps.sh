# The measuring steps of scripts/gpu-run.sh (sourced after scripts/gpu_items.sh): the machine's facts, the
# copy limit, loom-perf sweeps and latency, torch tensors over the loom backend. Each appends its
# figures to rows.jsonl (one JSON object per line, "kind" first) for scripts/gpu_summary.py.
# LOOM_GPU_DRY_RUN=1 (FakeCuda) shrinks sizes and iterations: the same selection, not the same figures.

if [ "${LOOM_GPU_DRY_RUN:-0}" = 1 ]; then
  max_bytes=${MAXBYTES:-1M} iters=${ITERS:-3} latency_iters=50 torch_device=cpu torch_peer=gloo
else
  max_bytes=${MAXBYTES:-1G} iters=${ITERS:-20} latency_iters=2000 torch_device=cuda torch_peer=nccl
fi

step_probe() {
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_cap --format=csv,noheader
    for tool in nvcc g++ python3 meson ninja; do printf '%s: ' "$tool"; "$tool" --version 2>&1 | grep -v '^\s*$' | tail -n 1; done
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(),
      "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)'
    echo "cores: $(nproc); MPS control: $(command -v nvidia-cuda-mps-control || echo none)"
    python3 -c 'import os, sysconfig; h = os.path.join(sysconfig.get_paths()["include"], "Python.h")
print("Python.h (the torch extension needs it):", h if os.path.exists(h) else "MISSING")' 
  } >"$items_work/probe.out" 2>&1
  tee -a "$items_log" <"$items_work/probe.out"
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  python3 - "$items_work/probe.out" "$gpu" >>"$rows" <<'EOF'
import json, sys
print(json.dumps({"kind": "probe", "gpu": sys.argv[2], "facts": open(sys.argv[1]).read().splitlines()[:12]}))
EOF
  if [ "${LOOM_GPU_DRY_RUN:-0}" = 1 ]; then item_record probe PASS 0 "dry run: no GPU expected (FakeCuda)"
  elif [ -n "$gpu" ]; then item_record probe PASS 0 "$gpu"
  else item_record probe FAIL 0 "nvidia-smi sees no GPU"; fi
}

# The copy limits: device to device (what a collective on one GPU is bounded by), pinned host<->device.
step_copy() {
  local binary=$1
  item_run copy 10 90 "$binary" "$(numfmt --from=iec "$max_bytes")" "$iters" || return
  awk '!/^#/ && NF == 4 { printf "{\"kind\": \"copy\", \"copy\": \"%s\", \"bytes\": %s, \"time_us\": %s, \"gbs\": %s}\n", $1, $2, $3, $4 }' \
    "$(item_out copy)" >>"$rows"
}

# The host's work per device call (perf/launch_cost): enqueue time of 1 rank and of 2 rank threads
# sharing the GPU, per call, p50/p99; its rows into rows.jsonl.
step_launch() {
  local binary=$1 json="$items_work/launch-cost.jsonl" args=(--ranks 1,2)
  if [ "${LOOM_GPU_DRY_RUN:-0}" = 1 ]; then args+=(--bytes 8,1M --warmup 70 --rounds 3 --calls 20); else args+=(--bytes 8,64M); fi
  LOOM_FAKE_CUDA_BLOCKS=8 item_run launch-cost 10 60 "$binary" "${args[@]}" --json "$json" || return
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    print(json.dumps({"kind": "launch-cost", **json.loads(line)}))' "$json" >>"$rows"
}

# perf_item NAME CONFIG BINARY ARGS...: one loom-perf run on device buffers, its rows into rows.jsonl.
perf_item() {
  local name=$1 config=$2 binary=$3
  shift 3
  local json="$items_work/$name.json" device=(-G cuda)
  [[ " $* " == *" -G "* ]] && device=()  # the item's own -G N (CUDA graphs; device memory too)
  item_run "$name" 10 90 "$binary" "${device[@]}" -T 80 -J "$json" "$@" || return
  python3 - "$json" "$config" >>"$rows" <<'EOF'
import json, sys
for row in json.load(open(sys.argv[1])):
    print(json.dumps({"kind": "loom-perf", "config": sys.argv[2], **row}))
EOF
}

# The goal rows first (2 rank threads, all_reduce; 8 B latency), then the rest while the budget lasts.
# 2 rank threads share the GPU as plan kernels (required, so a pass means they ran); 2 rank processes
# share it staged through pinned memory (processes on one GPU run plan kernels only with MPS).
step_perf() {
  local binary=$1 sweep=(-b 8 -e "$max_bytes" -f 2 -n "$iters" -w 5 -c 1)
  LOOM_DEVICE_PLANS=require perf_item perf-all_reduce-2threads 2threads "$binary" all_reduce -t 2 "${sweep[@]}"
  LOOM_DEVICE_PLANS=require perf_item latency-2threads 2threads "$binary" all_reduce -t 2 -b 8 -e 8 \
    -n "$latency_iters" -w 100 -c 1 --percentiles
  # The same in a CUDA graph (nccl-tests' -G): the host's work per call out of the loop.
  LOOM_DEVICE_PLANS=require perf_item latency-2threads-graph 2threads-graph "$binary" all_reduce -t 2 -b 8 -e 8 \
    -n 100 -w 100 -c 1 -G 20
  perf_item perf-all_reduce-1rank 1rank "$binary" all_reduce -t 1 "${sweep[@]}"
  perf_item latency-1rank 1rank "$binary" all_reduce -t 1 -b 8 -e 8 -n "$latency_iters" -w 100 -c 1 --percentiles
  local coll
  for coll in all_gather reduce_scatter; do
    LOOM_DEVICE_PLANS=require perf_item "perf-$coll-2threads" 2threads "$binary" "$coll" -t 2 "${sweep[@]}"
    perf_item "perf-$coll-1rank" 1rank "$binary" "$coll" -t 1 "${sweep[@]}"
  done
  for coll in all_reduce all_gather reduce_scatter; do  # staged: every 4th size is enough
    perf_item "perf-$coll-2procs" 2procs "$binary" "$coll" -np 2 -b 8 -e "$max_bytes" -f 4 -n "$iters" -w 5 -c 1
  done
}

# The Python package with the torch binding built against this machine's torch and the prebuilt library
# (scripts/package-prebuilt.sh; the kit's packages found through env.sh's PKG_CONFIG_PATH; ninja
# leaves an extension that is up to date as it is). torch_path: where step_torch imports it from.
step_extension() {
  local build=$1
  item_run extension 30 300 bash scripts/package-prebuilt.sh "$build" "$root/build-torch" &&
    torch_path="$(tail -n 1 "$(item_out extension)")"
}

# What bounds 2 rank threads' bandwidth (docs/PERFORMANCE.md, "GPU"): first where a lane's time goes
# (LOOM_DEVICE_PROFILE: waiting, data, publishing per step, in each row's "profile"), from 1 MiB up; then
# all_reduce at 64 MiB and 1 GiB over channel counts, FIFO slots and chunk sizes, one setting changed
# at a time from the defaults.
step_sweep() {
  local binary=$1 sizes=(-b 64M -e "$max_bytes" -f 16 -n "$iters" -w 3 -c 0) profiled=(-b 1M -e "$max_bytes" -f 8)
  [ "${LOOM_GPU_DRY_RUN:-0}" = 1 ] && sizes=(-b 64K -e 256K -f 4 -n "$iters" -w 1 -c 0) profiled=(-b 64K -e 256K -f 4)
  LOOM_DEVICE_PLANS=require LOOM_DEVICE_PROFILE=1 perf_item sweep-profile profile "$binary" all_reduce -t 2 \
    "${profiled[@]}" -n "$iters" -w 3 -c 0
  # The FIFO plans where the tuner takes peer-memory ones (rank threads sharing the GPU): the direct
  # kernels' gain, measured.
  LOOM_DEVICE_PLANS=require LOOM_DEVICE_PEER_MEMORY=0 perf_item sweep-fifo-plans "peer_memory=0" "$binary" all_reduce \
    -t 2 "${sizes[@]}"
  local v
  for v in 8 16 64; do
    LOOM_DEVICE_PLANS=require LOOM_DEVICE_NCHANNELS=$v perf_item "sweep-channels-$v" "channels=$v" "$binary" all_reduce \
      -t 2 "${sizes[@]}"
  done
  for v in 2 4 16; do
    LOOM_DEVICE_PLANS=require LOOM_DEVICE_FIFO_SLOTS=$v perf_item "sweep-slots-$v" "slots=$v" "$binary" all_reduce -t 2 \
      "${sizes[@]}"
  done
  # The step itself: the FIFOs' slot and the tuner's chunk both at the size (the default: 512 KiB slots).
  for v in 128K 2M; do
    local bytes
    bytes=$(numfmt --from=iec "$v")
    LOOM_DEVICE_PLANS=require LOOM_DEVICE_CHUNK_BYTES=$bytes LOOM_CHUNK_BYTES=$bytes perf_item "sweep-chunk-$v" "chunk=$v" \
      "$binary" all_reduce -t 2 "${sizes[@]}"
  done
}

# dropin_item NAME NPROCS [VAR=VALUE...]: torch's own backend over the libnccl.so.2 the loader binds
# (perf/torch_nccl_dropin.py: checked all_reduce and DDP step, then timed), its rows into rows.jsonl.
dropin_item() {
  local name=$1 np=$2
  shift 2
  local backend=nccl
  [ "$torch_device" = cpu ] && backend=gloo  # the dry run: the same script and checks, no GPU for NCCL
  item_run "$name" 20 150 env "$@" PYTHONUNBUFFERED=1 python3 perf/torch_nccl_dropin.py --backend "$backend" \
    --device "$torch_device" -np "$np" -b 8 -e "$max_bytes" -f 16 --json "$items_work/$name.json" || return
  python3 - "$items_work/$name.json" "$name" >>"$rows" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for row in doc["rows"]:
    print(json.dumps({"kind": "dropin", "item": sys.argv[2], "nprocs": doc["nprocs"], "backend": doc["backend"],
                      "library": doc["library"], "version": doc["version"], **row}))
EOF
}

# torch tensors of the device over the loom backend next to torch's own backend; torch's ProcessGroupNCCL
# over Loom's libnccl.so.2 (preloaded) at 1 and 2 processes (2 on one GPU: NVIDIA's refuses that)
# next to NVIDIA's NCCL at 1 process; the CUDA tests.
step_torch() {
  local bin=$1 np peer
  local dropin="$bin/src/compat/libnccl.so.2.30.0"
  for np in 1 2; do
    # torch's NCCL refuses two ranks on one GPU: the 2-process row is Loom's alone.
    peer=$torch_peer
    [ "$np" = 2 ] && [ "$torch_peer" = nccl ] && peer=none
    item_run "torch-allreduce-${np}proc" 20 120 env PYTHONPATH="$torch_path" PYTHONUNBUFFERED=1 \
      python3 perf/torch_allreduce.py --device "$torch_device" --peer "$peer" -np "$np" -b 8 -e "$max_bytes" -f 4 \
      --json "$items_work/torch-$np.json" || continue
    python3 - "$items_work/torch-$np.json" "$np" >>"$rows" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for row in doc["rows"]:
    print(json.dumps({"kind": "torch", "nprocs": int(sys.argv[2]), "device": doc["device"], "peer": doc["peer"], **row}))
EOF
  done
  dropin_item torch-dropin-1proc 1 LD_PRELOAD="$dropin"
  dropin_item torch-nvidia-nccl-1proc 1
  dropin_item torch-dropin-2proc 2 LD_PRELOAD="$dropin"
  item_run torch-cuda-tests 30 240 env PYTHONPATH="$torch_path" \
    python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py
  # A run on a GPU where torch sees CUDA must not pass by skipping.
  if [ "${LOOM_GPU_DRY_RUN:-0}" != 1 ] && grep -qE '[0-9]+ skipped' "$(item_out torch-cuda-tests)"; then
    item_record torch-cuda-skipped FAIL 0 "tests/python/test_cuda.py skipped on a GPU machine: $(tail -n 1 "$(item_out torch-cuda-tests)")"
  fi
}

# nccltests_item NAME NPROCS CONFIG TEST [VAR=VALUE...] -- ARGS...: one of NVIDIA's nccl-tests (the kit's,
# on Loom's libnccl.so.2), its table's rows into rows.jsonl; a run whose data check found a wrong value
# fails.
nccltests_item() {
  local name=$1 np=$2 config=$3 test=$4
  shift 4
  local nt="$root/.gpu-kit/nccl-tests" launcher=() vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift  # --
  [ "$np" -gt 1 ] && launcher=(mpiexec.hydra -n "$np")
  item_run "$name" 10 120 env LD_LIBRARY_PATH="$bin/src/compat:$nt/mpich/lib:${LD_LIBRARY_PATH:-}" \
    PATH="$nt/mpich/bin:$PATH" "${vars[@]}" "${launcher[@]}" "$nt/bin/${test}_perf_mpi" "$@" || return
  python3 - "$(item_out "$name")" "$name" "$test" "$np" "$config" >>"$rows" <<'PY' || item_record "$name-check" FAIL 0 "wrong values"
import json, sys
out, item, test, np, config = sys.argv[1:]
wrong = 0
for line in open(out):
    f = line.split()
    # size count type redop root | time algbw busbw #wrong (out of place) | the same in place
    if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
        for place, at in (("out-of-place", 5), ("in-place", 9)):
            if f[at + 3] not in ("0", "N/A"):
                wrong += 1
            print(json.dumps({"kind": "nccl-tests", "item": item, "collective": test, "nprocs": int(np),
                              "config": config, "bytes": int(f[0]), "place": place, "time_us": float(f[at]),
                              "algbw_gbs": float(f[at + 1]), "busbw_gbs": float(f[at + 2]), "wrong": f[at + 3]}))
sys.exit(1 if wrong else 0)
PY
}

# The MPS control daemon, where the machine has it: kernels of several processes then run side by side
# on one GPU. mps_start fails where there is none (or it does not start); mps_stop stops what it started.
mps_start() { command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d 2>/dev/null; }
mps_stop() { echo quit | nvidia-cuda-mps-control 2>/dev/null || true; }

# NVIDIA's nccl-tests, unchanged (issue of record: the GPU latency one, point 6): each collective's
# binary with one rank on the GPU, the data check on, and again captured into CUDA graphs (-G 20); then
# two processes sharing GPU 0. Kernels of two processes run side by side on one GPU only under MPS: where
# the machine has it, the daemon is started and the processes run plan kernels (LOOM_DEVICE_PLANS=1);
# without it they stage through host memory (the default never spins a kernel on a process whose
# kernels cannot run beside it). Which path ran is in the items' config.
step_nccltests() {
  local nt="$root/.gpu-kit/nccl-tests"
  if [ "${LOOM_GPU_DRY_RUN:-0}" = 1 ]; then
    item_skip nccl-tests "dry run: NVIDIA's nccl-tests need a GPU (scripts/gpu-kit.sh --check runs their launcher)"
    return
  fi
  if [ ! -x "$nt/bin/all_reduce_perf_mpi" ]; then
    item_record nccl-tests FAIL 0 "the kit has no nccl-tests (scripts/gpu-kit.sh builds them)"
    return
  fi
  local sizes=(-b 8 -e "$max_bytes" -f 4 -c 1) t
  for t in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    nccltests_item "nccl-tests-$t" 1 "1 rank" "$t" -- "${sizes[@]}" -g 1
  done
  nccltests_item nccl-tests-all_reduce-graph 1 "1 rank, graphs" all_reduce -- "${sizes[@]}" -g 1 -G 20
  local mps=staged plans=()
  if mps_start; then
    mps="plan kernels under MPS" plans=(LOOM_DEVICE_PLANS=1)
  fi
  note "nccl-tests: 2 processes on GPU 0: $mps"
  for t in all_reduce all_gather reduce_scatter sendrecv; do
    nccltests_item "nccl-tests-2proc-$t" 2 "2 processes on GPU 0, $mps" "$t" NCCL_TESTS_DEVICE=0 "${plans[@]}" -- "${sizes[@]}"
  done
  nccltests_item nccl-tests-2proc-all_reduce-graph 2 "2 processes on GPU 0, $mps, graphs" all_reduce \
    NCCL_TESTS_DEVICE=0 "${plans[@]}" -- "${sizes[@]}" -G 20
  # Buffers in windows (-R 2: ncclCommWindowRegister): under MPS, peer-memory plans between the
  # processes, the issue's "registered buffers within 10% of rank threads".
  if [ "$mps" != staged ]; then
    for t in all_reduce all_gather reduce_scatter; do
      nccltests_item "nccl-tests-2proc-$t-windows" 2 "2 processes on GPU 0, $mps, windows" "$t" \
        NCCL_TESTS_DEVICE=0 "${plans[@]}" -- "${sizes[@]}" -R 2
    done
  fi
  [ "$mps" = staged ] || mps_stop
}
