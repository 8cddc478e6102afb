#!/usr/bin/env bash
# Runs every fuzz target under fuzz/ for N seconds each (default 180) and prints the executions per target.
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]
# Exits non-zero if any target crashes (the crashing input is kept under fuzz/artifacts/<target>/).
#
# Stable Rust is enough: cargo-fuzz's nightly-only flags are allowed with RUSTC_BOOTSTRAP=1. cargo-fuzz is
# installed from crates.io into ~/.cache/memory-rs/cargo-tools when missing. Set FUZZ_SANITIZER=none to build
# without AddressSanitizer (faster; the Rust code is memory-safe, the sanitizer guards the C parts: SQLite).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-180}"
shift || true
tools="$HOME/.cache/memory-rs/cargo-tools"
export PATH="$tools/bin:$PATH"
export RUSTC_BOOTSTRAP=1
target_dir="${CARGO_TARGET_DIR_FUZZ:-$HOME/.cache/memory-rs/target-fuzz}"
sanitizer="${FUZZ_SANITIZER:-address}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz into $tools" >&2
    cargo install cargo-fuzz --locked --root "$tools"
fi

cd fuzz
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build --sanitizer "$sanitizer" --target-dir "$target_dir"

declare -A execs status
failed=0
for t in "${targets[@]}"; do
    # New inputs go to generated/ (git-ignored); the committed seeds in corpus/ are only read.
    mkdir -p "generated/$t" "corpus/$t" "artifacts/$t"
    log="generated/$t.log"
    echo "== $t: ${seconds}s" >&2
    dict=()
    [ -f "dict/$t.dict" ] && dict=("-dict=dict/$t.dict")
    if cargo fuzz run --sanitizer "$sanitizer" --target-dir "$target_dir" "$t" "generated/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" >"$log" 2>&1; then
        status[$t]=ok
    else
        status[$t]=CRASH
        failed=1
        grep -E "panicked|ERROR: |SUMMARY|Test unit written" "$log" | head -n 8 >&2 || true
    fi
    execs[$t]=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
    execs[$t]=${execs[$t]:-$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')}
done

printf '\n%-16s %14s  %s\n' target executions result
for t in "${targets[@]}"; do
    printf '%-16s %14s  %s\n' "$t" "${execs[$t]:-?}" "${status[$t]}"
done
exit "$failed"
