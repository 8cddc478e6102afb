#!/usr/bin/env bash
# Runs every test: installs what the tests need (scripts/setup.sh), then the whole workspace's tests.
# The build cache lives outside the clone so repeated runs are fast.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memory-rs/target}"
eval "$(bash scripts/setup.sh | grep '^export ')"
# Everything setup installs must be used: a test missing its model, QMD or a build feature fails instead of
# skipping. What this machine does not allow (mounting a tmpfs, dropping capabilities) is skipped and listed below.
export MEMORY_TEST_REQUIRE_ALL=1
MEMORY_TEST_SKIP_REPORT="$(mktemp)"
export MEMORY_TEST_SKIP_REPORT
report_skips() {
    if [ -s "$MEMORY_TEST_SKIP_REPORT" ]; then
        echo "Skipped on this machine ($(wc -l < "$MEMORY_TEST_SKIP_REPORT") tests):"
        sort "$MEMORY_TEST_SKIP_REPORT" | sed 's/^/  /'
    else
        echo "No test was skipped."
    fi
    rm -f "$MEMORY_TEST_SKIP_REPORT"
}
trap report_skips EXIT
# Lints when the whole suite runs (not for a filtered run): formatting first; clippy with warnings as errors and the
# libraries' documentation after the tests.
if [ "$#" -eq 0 ]; then
    cargo fmt --all --check
fi
cargo test --workspace --features memory-cli/lancedb "$@"
if [ "$#" -eq 0 ]; then
    cargo clippy --workspace --all-targets --features memory-cli/lancedb -- -D warnings
    # The libraries' documentation (what a plugin author reads) builds without a broken or private link. The
    # binaries' doc comments are their --help text, written for the terminal.
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --exclude memory-cli --exclude bench --exclude memory-py
fi
