#!/usr/bin/env bash
# The GPU figures issues #20 and #22 ask for, in one run on a machine with a GPU (the
# workplace's device tool, or any CUDA-class card with a Vulkan driver). Each figure lands
# in its own file under the output folder; the adapter's name is in every CSV and JSON.
#
#   bench/device-check.sh [out]    default out: $OUT, else bench/device
#   SMALL=1 bench/device-check.sh  tiny sizes: checks the script itself (lavapipe will do)
#
# Uses target/release/avbd (AVBD=path for another binary; built here if missing). BASE=path
# runs a second binary (an earlier commit's) right after it on #22's two scenes, into
# files named base-*, so that the two compare on one machine.
set -euo pipefail
out=${1:-${OUT:-bench/device}}
avbd=${AVBD:-target/release/avbd}
mkdir -p "$out"
[ -x "$avbd" ] || cargo build --release --bin avbd
(nvidia-smi -L || echo "no nvidia-smi") > "$out/gpu.txt" 2>&1
if [ "${SMALL:-0}" = 1 ]; then
    pile4=1000 pile3=1000 balls=2 frames=10 settle=2 short="--frames 10" grid=10
else
    pile4=110000 pile3=510000 balls=140 frames=60 settle=30 short="" grid=300
fi
# Each command gets its own time limit (LIMIT seconds, default 240), so one slow figure
# cannot take the others' time on a leased machine; a timed-out figure is reported, not fatal.
run() {
    echo "== $*" >&2
    local t0=$SECONDS
    timeout "${LIMIT:-240}" "$@" || echo "!! exit $? after $((SECONDS - t0)) s: $*" >&2
    echo "   $((SECONDS - t0)) s" >&2
}

# #20: the paper's pile at 4 iterations (goal: <= 3.5 ms of GPU solve, <= 9.8 ms a frame with
# collision): gpu.csv, per-stage GPU and host times, bytes, dispatches, colours.
# The series keeps the velocities on the device (poses read back only); the same with them
# read back every step, as the Bevy plugin does: what the 24 B a body cost there.
run "$avbd" bench --backend gpu --scene pile --pile-counts $pile4 --gpu-iterations 4 \
    --gpu-settle $settle --gpu-frames 10 --out "$out/pile-4it" > "$out/pile-4it.md"
run "$avbd" bench --backend gpu --scene pile --pile-counts $pile4 --gpu-iterations 4 \
    --gpu-settle $settle --gpu-frames 10 --gpu-velocity-readback \
    --out "$out/pile-4it-velocities" > "$out/pile-4it-velocities.md"
# #20: the same pile's GPU time kernel by kernel (every dispatch of the step timed:
# `kernel_ms` and `kernel_dispatches` per frame), and at a tenth of the size, so that a
# kernel's fixed cost per dispatch shows apart from its work. With BASE, the two binaries
# alternate, twice each (base-kernels-pile-*), so that a change of the records or the narrow
# phase can be told from the spread of one machine.
for count in $pile4 $((pile4 / 10)); do
    for round in 1 2; do
        for bin in "$avbd" ${BASE:+"$BASE"}; do
            tag=$([ "$bin" = "$avbd" ] && echo "" || echo "base-")
            run "$bin" run pile --backend gpu --set count=$count --frames 40 --config iterations=4 \
                --config gpu_kernel_timings=1 --json > "$out/${tag}kernels-pile-$count-$round.json"
        done
    done
done

# #22: cloth_drape at 2,500 vertices (goal: <= 2 ms a frame) and squishy_balls at 140 balls,
# 200,620 tets (<= 16 ms a frame), both with 0 intersections.
for bin in "$avbd" ${BASE:+"$BASE"}; do
    tag=$([ "$bin" = "$avbd" ] && echo "" || echo "base-")
    run "$bin" run cloth_drape --backend gpu $short --json > "$out/${tag}cloth_drape.json"
    run "$bin" run squishy_balls --backend gpu --set count=$balls --frames $frames --json \
        > "$out/${tag}squishy_balls.json"
done
# #22: where the deformables' GPU time goes, kernel by kernel (SolverConfig::gpu_kernel_timings:
# a timestamp inside the pass after each dispatch; `kernel_ms` in the JSON, per frame).
run "$avbd" run cloth_drape --backend gpu $short --config gpu_kernel_timings=1 --json \
    > "$out/kernels-cloth_drape.json"
run "$avbd" run squishy_balls --backend gpu --set count=$balls --frames $frames \
    --config gpu_kernel_timings=1 --json > "$out/kernels-squishy_balls.json"
# #22: the contact broad phase on the device (the default on a GPU) against the host's BVHs
# (SolverConfig::gpu_contact_broad_phase): the frame and the set-up's broad-phase ms, beside
# the default runs above.
run "$avbd" run cloth_drape --backend gpu $short --config gpu_contact_broad_phase=host \
    --json > "$out/broad-host-cloth_drape.json"
run "$avbd" run squishy_balls --backend gpu --set count=$balls --frames $frames \
    --config gpu_contact_broad_phase=host --json > "$out/broad-host-squishy_balls.json"
# #22: the cages kept for the frame (SolverConfig::contact_cage_rebuild off): every step one
# submission of the same dispatches, no run again; its frame time and lost motion beside the
# default runs above.
run "$avbd" run cloth_drape --backend gpu $short --config contact_cage_rebuild=0 --json \
    > "$out/cages-kept-cloth_drape.json"
run "$avbd" run squishy_balls --backend gpu --set count=$balls --frames $frames \
    --config contact_cage_rebuild=0 --json > "$out/cages-kept-squishy_balls.json"
# #22: lanes per vertex in the sweeps (SolverConfig::gpu_vertex_lanes, default 1), on the
# cloth (360 vertices a colour) and the balls: which count the default should be.
for lanes in 4 8 16; do
    run "$avbd" run cloth_drape --backend gpu $short --config gpu_vertex_lanes=$lanes --json \
        > "$out/lanes$lanes-cloth_drape.json"
    run "$avbd" run squishy_balls --backend gpu --set count=$balls --frames $frames \
        --config gpu_vertex_lanes=$lanes --json > "$out/lanes$lanes-squishy_balls.json"
done
# #20: joints on the device (warm start, fracture test, row states resident): a 300 x 300
# grid of balls, 179,700 joints, on both backends (frame time, bytes up and down).
for backend in gpu cpu; do
    run "$avbd" run joint_grid --backend $backend --set rows=$grid --set cols=$grid \
        --frames 60 --json > "$out/joint_grid-$backend.json"
done
# #20: the 510k pile at 3 iterations (<= 17.6 ms a frame); the longest run, so after #22's two.
run "$avbd" bench --backend gpu --scene pile --pile-counts $pile3 --gpu-iterations 3 \
    --gpu-settle $settle --gpu-frames 10 --out "$out/pile-3it" > "$out/pile-3it.md"


run "$avbd" bench --backend gpu --scene cantilever --scene cloth_hang --gpu-settle 2 \
    --gpu-frames 5 --out "$out/soft" > "$out/soft.md"
for scene in soft_drop soft_stack soft_collision tunnelling compress mattress; do
    for backend in cpu gpu; do
        run "$avbd" run $scene --backend $backend $short --json > "$out/$scene-$backend.json"
    done
done
echo "done: $out" >&2
grep -h -E "^\|" "$out"/*.md >&2 || true
# One line per run: frame time, contact metrics, adapter.
for f in "$out"/*.json; do
    python3 - "$f" <<'PY' >&2 || true
import json, sys
r = json.load(open(sys.argv[1]))
m, t = r.get("metrics", {}), r.get("timing_ms", {})
print(f"{sys.argv[1].split('/')[-1]:28} {r['scene']:15} {r['backend']:3} frames {r['frames']:4} median {t.get('median', 0):9.3f} ms "
      f"p95 {t.get('p95', 0):9.3f} ms  intersections {m.get('intersections')} "
      f"inverted {m.get('inverted_elements')} mean lost motion {m.get('mean_lost_motion')}  "
      f"{r.get('adapter', '')}")
k, d = r.get("kernel_ms", {}), r.get("kernel_dispatches", {})
for name in sorted(k, key=k.get, reverse=True)[:10]:
    print(f"    {name:28} {k[name]:9.3f} ms a frame in {d.get(name, 0):7.1f} dispatches")
PY
done
