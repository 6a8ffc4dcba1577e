#!/bin/sh
# Installs what promptscore needs to build and to run its whole test suite on Debian 12
# (run as root): the libraries, the test tools, and the two Node test clients.
set -eu
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# build + libraries
apt-get install -y -q --no-install-recommends build-essential pkg-config \
    libpcre2-dev libmicrohttpd-dev libjansson-dev libopenblas-dev libcurl4-openssl-dev
# tests: numpy reference, clang fuzzing + sanitizer runtime, valgrind, the browser test
apt-get install -y -q --no-install-recommends python3-numpy clang-14 libclang-rt-14-dev \
    valgrind chromium
# the cluster tests: a one-node Slurm (tests/test_slurm.sh) and nginx in front of two servers
# (tests/test_nginx.sh); the tests start their own daemons (own key, sockets, ports, temp dirs)
apt-get install -y -q --no-install-recommends slurm-wlm munge nginx
command -v node >/dev/null 2>&1 || apt-get install -y -q --no-install-recommends nodejs npm
# the official openai SDK and playwright-core (drives Debian's chromium; downloads no browser)
for d in tests/openai tests/browser; do
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
done
