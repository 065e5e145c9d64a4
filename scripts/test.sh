#!/usr/bin/env bash
# The whole test suite. Works on a fresh machine: installs tfdoctor with every extra the tests need
# (TensorFlow CPU, web, notebook, dev tools) and Debian's chromium for the browser tests, then runs
# lint, the main pytest pass and the notebook pass (InteractiveShell tests run in their own process).
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q --disable-pip-version-check -e '.[tensorflow,dev]'
if [ -f scripts/install-browser.sh ]; then bash scripts/install-browser.sh; fi

ruff check .
ruff format --check .
mypy  # configured in pyproject.toml: the tfdoctor package, rules/ and web/ included (symlinked)

export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
mkdir -p test-artifacts

run_pytest() {
  set +e
  python -m pytest "$@"
  rc=$?
  set -e
  # exit 5 = no tests collected for this pass: not a failure of the suite
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
}

# The main pass runs in two pytest-xdist workers, a test file each at a time (--dist loadfile: a file's
# module fixtures are built once): 33 min against 54 in one process on a 2-core host (2026-11-29).
# TEST_WORKERS=0 runs it in one process (TEST_WORKERS=N in N workers).
run_pytest -m "not notebook" -p no:cacheprovider -q -ra --durations=60 -n "${TEST_WORKERS:-2}" --dist loadfile tests
run_pytest -m notebook -p no:cacheprovider -q -ra tests
