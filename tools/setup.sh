#!/bin/sh
# tools/setup.sh — installs what promptscore needs on Debian 12 (run as root), in two tiers:
#   sh tools/setup.sh           building and scoring: the C toolchain and the libraries the
#                               library and the binary link (make, make demo, make install)
#   sh tools/setup.sh --test    that, plus the test stack: the numpy reference, clang's fuzzer
#                               and sanitizer runtime, valgrind, Chromium, a one-node Slurm with
#                               MUNGE, nginx, OpenBLAS (bench_matmul's baseline), the Python
#                               package's tools, Node.js and the two Node test clients (npm ci)
#   sh tools/setup.sh [--test] --list    prints the tier's Debian packages and exits
# A package already installed is not fetched again; with nothing missing apt is not run.
set -eu
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
tier=base list=0
for a in "$@"; do
    case "$a" in
        --test) tier=test ;;
        --list) list=1 ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup: unknown option '$a' (use --test, --list or --help)" >&2; exit 2 ;;
    esac
done
# tier 1, build + score: gcc and make; PCRE2 (the core library); microhttpd, jansson, curl,
# zlib (the server, the JSON Lines reader, -hf downloads, the zlib ratio of --detect)
BASE_PKGS="build-essential pkg-config libpcre2-dev libmicrohttpd-dev libjansson-dev
    libcurl4-openssl-dev zlib1g-dev"
# tier 2, tests: numpy reference, clang fuzzing + sanitizer runtime, valgrind, the browser
# test, OpenBLAS (the sgemm baseline of bench/bench_matmul.c), the Python package's tools, and
# the command-line tools the script tests call (git clone in test_readme.sh, /usr/bin/time in
# test_cli_safe.sh, curl in test_special.sh)
TEST_PKGS="python3-numpy clang-14 libclang-rt-14-dev valgrind chromium libopenblas-dev
    python3-pytest python3-venv python3-tqdm mypy git time curl"
# the cluster tests: a one-node Slurm (tests/test_slurm.sh) and nginx in front of two servers
# (tests/test_nginx.sh); the tests start their own daemons (own key, sockets, ports, temp dirs)
CLUSTER_PKGS="slurm-wlm munge nginx"
# Node.js and npm: the openai SDK test and playwright-core (tests/openai, tests/browser)
NODE_PKGS="nodejs npm"
pkgs=$BASE_PKGS
[ "$tier" = test ] && pkgs="$pkgs $TEST_PKGS $CLUSTER_PKGS $NODE_PKGS"
if [ "$list" = 1 ]; then
    # shellcheck disable=SC2086
    printf '%s\n' $pkgs
    exit 0
fi
missing=""
for p in $pkgs; do
    # a Node.js from elsewhere (node on PATH) stands for the Debian packages
    case "$p" in nodejs|npm) command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && continue ;; esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing
else
    echo "setup: every Debian package of the $tier tier is installed already; nothing to fetch"
fi
if [ "$tier" = test ]; then
    # the official openai SDK and playwright-core (drives Debian's chromium; downloads no
    # browser); packages already in npm's cache are not fetched again
    for d in tests/openai tests/browser; do
        (cd "$d" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
    done
fi
echo "setup: done ($tier tier)"
