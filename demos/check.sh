#!/usr/bin/env bash
# Builds the windowed demos (release) and runs each scene in a real window under Xvfb, on
# Mesa's software Vulkan driver (lavapipe): N physics frames, screenshots through Bevy's
# screenshot API, exit. Each scene fails on a missing screenshot, a blank one (under 64
# colours or one colour over 95% of it), bodies that change under 0.5% of the pixels
# against the same view without them, or a picture that changed under 0.1% since frame 0.
#
#   demos/check.sh                 # every scene of the demo
#   demos/check.sh pile cloth_drape
#
# Screenshots and logs go to $CARGO_TARGET_DIR/demos-check (default target/demos-check):
# NAME.png (judged), NAME_bg.png, NAME_early.png, NAME_hud.png (with the text overlay).
# Not run by CI (.ci/run): Bevy's renderer takes about 19 minutes to build on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v xvfb-run >/dev/null 2>&1 || need+=(xvfb xauth)
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers libvulkan1)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "check.sh: missing ${need[*]} (run as root to install them with apt-get)" >&2
        exit 1
    fi
    apt-get update -qq
    # winit's X11 backend loads libX11, libxcb, Xcursor, Xrandr, Xi and xkbcommon at run time.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
        libx11-6 libx11-xcb1 libxcursor1 libxrandr2 libxi6 libxkbcommon-x11-0 >/dev/null
fi

# Bevy 0.20's shader crate (wesl 0.6) declares Rust 1.97.1 but builds on 1.95.
start=$(date +%s)
cargo build --release -p demos --ignore-rust-version
echo "build: $(($(date +%s) - start)) s"
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release/demos"
out="$target/demos-check"
mkdir -p "$out"

# lavapipe, whatever else the machine has.
export WGPU_BACKEND=vulkan
lvp=$(ls /usr/share/vulkan/icd.d/lvp_icd*.json | head -n 1)
export VK_ICD_FILENAMES="$lvp" VK_DRIVER_FILES="$lvp"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

# Physics frames per scene (60 Hz): about those of the README's pictures
# (scripts/render_readme.sh), where what the scene is about has happened, shortened where
# that costs nothing to see (lavapipe renders about 2 frames a second here); more for the
# pile (the sphere reaches it at about frame 100) and tunnelling (its picture is of
# frame 2, too early to have moved).
frames_of() {
    case "$1" in
        pile) echo 130 ;;
        pendulum | card_tower | soft_incline | soft_collision) echo 40 ;;
        breakable_wall | twisting_beam | squishy_balls) echo 100 ;;
        joint_grid | soft_free_fall) echo 60 ;;
        soft_drop) echo 24 ;;
        tunnelling) echo 20 ;;
        soft_stack | cloth_drape | cloth_pile | mattress) echo 120 ;;
        *) echo 90 ;;
    esac
}

# Scene parameters of the check: the hanging bar is 10× softer than the catalogue's (its
# 5 mm stretch under its own weight is 3 pixels here, under the "unchanged" threshold).
params_of() {
    case "$1" in
        hanging_bar) echo "--param youngs=1e5" ;;
    esac
}

if [ $# -gt 0 ]; then
    scenes=("$@")
else
    mapfile -t scenes < <("$bin" --list | awk '{print $2}')
fi

passed=0
failed=0
for s in "${scenes[@]}"; do
    rm -f "$out/$s.png" "$out/${s}_bg.png" "$out/${s}_early.png" "$out/${s}_hud.png"
    t0=$(date +%s)
    rc=0
    timeout 900 xvfb-run -a -s "-screen 0 1280x720x24" \
        "$bin" --scene "$s" $(params_of "$s") --frames "$(frames_of "$s")" \
        --screenshot "$out/$s.png" --exit \
        >"$out/$s.log" 2>&1 || rc=$?
    took=$(($(date +%s) - t0))
    if [ $rc -ne 0 ] || [ ! -f "$out/$s.png" ]; then
        echo "$s: FAIL: exit $rc, screenshot $( [ -f "$out/$s.png" ] && echo saved || echo missing ) (${took} s; log: $out/$s.log)"
        tail -n 5 "$out/$s.log" | sed 's/^/    /'
        failed=$((failed + 1))
        continue
    fi
    if "$bin" --image-stats "$out/$s.png" --background "$out/${s}_bg.png" \
        --early "$out/${s}_early.png" | sed "s|\$| (${took} s)|"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
echo "demos check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
