#!/usr/bin/env bash
# Every benchmark, one after another; each prints its figures and rewrites its own section of
# docs/benchmarks.md. `make bench` runs this; `make bench-quick` (and CI, through
# tests/integration/test_benchmarks_quick.py) runs `--quick`: each script once, small, docs untouched.
#
#   bash benchmarks/run_all.sh            # full: about 30 minutes on 2 CPU cores
#   bash benchmarks/run_all.sh --quick    # a few minutes: checks that every script executes
#   bash benchmarks/run_all.sh --only trace_speed,perturbation
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

quick=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick="--quick" ;;
    --only) only="$2"; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

# figure order = docs/benchmarks.md order
scripts=(fix_speedup fix_gains trace_speed perturbation fix_cost retrace gpu)
failed=()
for name in "${scripts[@]}"; do
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  echo "=== benchmarks/$name.py $quick"
  start=$(date +%s)
  if python "benchmarks/$name.py" $quick; then
    echo "=== $name: ok ($(( $(date +%s) - start )) s)"
  else
    echo "=== $name: FAILED" >&2
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
