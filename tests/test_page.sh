#!/bin/sh
# tests/test_page.sh — the page test (tests/browser/page.test.mjs): headless Chromium, driven by
# playwright-core, against a real `promptscore serve` ($BUILD/promptscore) with
# ../shared/models/stories260K.gguf. Prints "page: N passed, N failed, N skipped"; skips (a failure under
# CI=true) when node, Debian's chromium or tests/browser/node_modules is missing
# (apt-get install chromium nodejs npm; cd tests/browser && npm ci).
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.." || exit 1
NAME=page; FILE=test_page.sh
. tests/check.sh
note() { skip "$1"; done_; }
command -v node >/dev/null 2>&1 || note "node not found: the page test needs Node.js (apt-get install nodejs npm)"
[ -x "${PS_CHROMIUM:-/usr/bin/chromium}" ] || note "chromium not found at ${PS_CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)"
[ -d tests/browser/node_modules/playwright-core ] || note "tests/browser/node_modules missing (cd tests/browser && npm ci)"
exec timeout 120 node tests/browser/page.test.mjs "$@"
