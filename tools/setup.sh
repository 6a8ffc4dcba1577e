#!/bin/sh
# Installs what promptscore needs to build and to run its whole test suite on Debian 12
# (run as root): the libraries, the test tools, and the two Node test clients.
set -eu
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
# build + libraries
BUILD_PKGS="build-essential pkg-config libpcre2-dev libmicrohttpd-dev libjansson-dev
    libopenblas-dev libcurl4-openssl-dev"
# tests: numpy reference, clang fuzzing + sanitizer runtime, valgrind, the browser test, the
# Python package (a venv, pip install --no-build-isolation, pytest, the examples' tqdm bar)
TEST_PKGS="python3-numpy clang-14 libclang-rt-14-dev valgrind chromium
    python3-pip python3-setuptools python3-venv python3-pytest python3-tqdm"
# the cluster tests: a one-node Slurm (tests/test_slurm.sh) and nginx in front of two servers
# (tests/test_nginx.sh); the tests start their own daemons (own key, sockets, ports, temp dirs)
CLUSTER_PKGS="slurm-wlm munge nginx"
missing=""
for p in $BUILD_PKGS $TEST_PKGS $CLUSTER_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
command -v node >/dev/null 2>&1 || missing="$missing nodejs npm"
if [ -n "$missing" ]; then
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing
else
    echo "setup: every Debian package is installed already; nothing to fetch"
fi
# the official openai SDK and playwright-core (drives Debian's chromium; downloads no browser);
# packages already in npm's cache are not fetched again
for d in tests/openai tests/browser; do
    (cd "$d" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
done
echo "setup: done"
