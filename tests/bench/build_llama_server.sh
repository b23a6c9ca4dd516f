#!/usr/bin/env bash
# tests/bench/build_llama_server.sh -- build llama.cpp's own `llama-server`,
# test-only, for tests/bench/bench_serving.py: from the llama.cpp sources
# vendored in the pinned llama-cpp-python sdist (the version in
# deploy/requirements-test.txt, so the peer is the llama.cpp the reference
# tests run), with deploy/setup.sh's llama_cmake_args (no AMX: see there).
#
#   tests/bench/build_llama_server.sh [DEST]
#
# DEST defaults to ${PARLEY_DEPS:-~/.cache/parley}/llama-server; the binary
# ends up in DEST/bin/llama-server.  Never commit it.  Needs pip (the sdist
# comes from PyPI with `pip download --no-binary :all:`), cmake and a C++
# compiler; builds with -j2.  Skips the build when DEST/bin/llama-server was
# built from the same version and flags.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS=${PARLEY_DEPS:-$HOME/.cache/parley}
DEST=${1:-$DEPS/llama-server}
ver=$(sed -n 's/^llama-cpp-python==//p' "$ROOT/deploy/requirements-test.txt")
[ -n "$ver" ] || { echo "build_llama_server: no llama-cpp-python pin" >&2; exit 1; }
# deploy/setup.sh's own flag function, not a copy of it
eval "$(sed -n '/^llama_cmake_args() {/,/^}/p' "$ROOT/deploy/setup.sh")"
args=$(llama_cmake_args)
stamp="$ver $args"
if [ -x "$DEST/bin/llama-server" ] && [ "$(cat "$DEST/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "build_llama_server: $DEST/bin/llama-server is current ($ver)"
    exit 0
fi
src=$DEST/src
mkdir -p "$src"
sdist=$src/llama_cpp_python-$ver.tar.gz
if [ ! -f "$sdist" ]; then
    py=python3
    [ -x "$DEPS/venv/bin/python" ] && py=$DEPS/venv/bin/python
    "$py" -m pip download -q --no-binary :all: --no-deps -d "$src" "llama-cpp-python==$ver"
fi
rm -rf "$src/llama_cpp_python-$ver"
tar -xzf "$sdist" -C "$src"
llama=$src/llama_cpp_python-$ver/vendor/llama.cpp
# shellcheck disable=SC2086  # args is a list of -D flags
cmake -S "$llama" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON $args >"$DEST/configure.log" 2>&1 ||
    { tail -40 "$DEST/configure.log" >&2; exit 1; }
cmake --build "$DEST/build" -j2 --target llama-server
mkdir -p "$DEST/bin"
cp "$DEST/build/bin/llama-server" "$DEST/bin/llama-server"
echo "$stamp" >"$DEST/.stamp"
echo "build_llama_server: built $DEST/bin/llama-server (llama.cpp of llama-cpp-python $ver; $args)"
