#!/usr/bin/env bash
# ctest entry for the dashboard browser test: needs Debian's chromium (scripts/test installs it;
# without it the test is skipped with exit code 77) and playwright-core from package-lock.json
# (installed here with `npm ci --ignore-scripts` when missing: no browser download).
# Usage: run.sh <xtrain binary> <artifacts dir> [--plain-config]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x /usr/bin/chromium ]; then
  echo "SKIP: /usr/bin/chromium is not installed (Debian package 'chromium'; scripts/test installs it)"
  exit 77
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (scripts/test installs nodejs)"
  exit 77
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  echo "installing playwright-core into $here/node_modules (npm ci --ignore-scripts)"
  (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --silent) || {
    echo "FAIL: npm ci could not install playwright-core from tests/e2e/dashboard/package-lock.json"
    exit 1
  }
fi
[ -x "$1" ] || { echo "FAIL: $1 is not built (ninja xtrain)"; exit 1; }
exec node "$here/dashboard.test.mjs" "$@"
