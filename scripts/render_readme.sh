#!/usr/bin/env bash
# Renders the README's pictures into docs/images/: one PNG (480x300) per scene of
# `avbd list`, at a frame where something happens, and a few GIFs. Each line below is
# `scene frames [avbd render options...]`; the commands are printed as they run.
# Usage: scripts/render_readme.sh [scene...]   (no argument: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
cargo build --release --bin avbd -q
AVBD="${CARGO_TARGET_DIR:-target}/release/avbd"
OUT=docs/images
mkdir -p "$OUT"

PNGS='
stack 120
pyramid 120
slope 60 --camera=-2.5,7.5,7.5,-6.7,4.0,0
slide 30
springs_ratio 120
spring_chain 120
pendulum 40
two_heavy_balls 60
card_tower 40
breakable_wall 100
hinge_limit 60
motor 60
pile 100
large_pyramid 30
many_pyramids 30
joint_grid 120 --set rows=40 --set cols=40
arch 120
spinning_box 60
free_collision 60
cantilever 120
hanging_bar 120
soft_free_fall 60
twisting_beam 150
cloth_hang 120
soft_on_chain 120
soft_drop 24
soft_stack 240
squishy_balls 150 --camera=0.02,2.2,0.5,0,0.1,0
cloth_drape 180
cloth_pile 180
soft_incline 40 --camera=0.25,0.45,1.5,-0.3,-0.1,0
compress 120
tunnelling 2 --camera=-1.6,1.6,1.3,0.15,1.0,0
mattress 180
soft_collision 40
'
GIFS='
cloth_drape 180 --every 3
soft_stack 150 --every 2
pile 150 --every 2
'

want() { [ $# -eq 0 ] || [[ " $* " == *" $scene "* ]]; }
while read -r scene frames opts; do
  [ -n "$scene" ] && want "$@" || continue
  echo "avbd render $scene --frames $frames $opts --out $OUT/$scene.png"
  # shellcheck disable=SC2086
  "$AVBD" render "$scene" --frames "$frames" $opts --out "$OUT/$scene.png"
done <<< "$PNGS"
while read -r scene frames opts; do
  [ -n "$scene" ] && want "$@" || continue
  echo "avbd render $scene --frames $frames $opts --out $OUT/$scene.gif"
  # shellcheck disable=SC2086
  "$AVBD" render "$scene" --frames "$frames" $opts --out "$OUT/$scene.gif"
done <<< "$GIFS"
