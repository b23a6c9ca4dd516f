#!/usr/bin/env bash
# deploy/container.sh -- builds deploy/Containerfile into an image with
# Debian's buildah, without a registry, and smoke-tests it.
#
#   deploy/container.sh build [TAG]    base image + `buildah bud` (default tag parley:test)
#   deploy/container.sh smoke [TAG]    `parley --version` inside, as the image's user
#   deploy/container.sh rm [TAG]       removes the image (the base stays cached)
#
# Why this shape: the machines parley is developed and tested on reach
# Debian's mirror but no container registry, so `FROM debian:bookworm`
# cannot be pulled.  The base is made instead with mmdebstrap from Debian's
# packages (--variant=minbase, cached as a tarball under
# $PARLEY_DEPS/container/, default ~/.cache/parley) and committed locally under both names the
# Containerfile uses, debian:bookworm and debian:bookworm-slim (the slim
# image is the same minbase: close to Debian's own slim).  buildah runs
# with the vfs storage driver and chroot isolation, which need no kernel
# overlay or user-namespace support, only root.  `--format docker` keeps
# HEALTHCHECK (the OCI image format has no field for it).  When the host
# trusts a TLS-intercepting proxy's CA, its bundle is mounted for the
# build stage's downloads (curl; see the Containerfile).
#
# Needs: buildah and mmdebstrap (deploy/setup.sh apt installs them), root.
# Exit status: 0 done, 1 a step failed (named on stderr), 2 usage.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PARLEY_DEPS:-$HOME/.cache/parley}/container
MIRROR=${PARLEY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
export STORAGE_DRIVER=vfs
BASE=docker.io/library/debian

log() { printf '[container] %s\n' "$*" >&2; }
die() { printf '[container] ERROR: %s\n' "$*" >&2; exit 1; }

need() {
    local t
    for t in buildah mmdebstrap; do
        command -v "$t" >/dev/null || die "$t is not installed (deploy/setup.sh apt)"
    done
    [ "$(id -u)" = 0 ] || die "buildah with chroot isolation and vfs needs root here"
}

# The base image, made once from Debian's packages and kept as a tarball.
base_image() {
    if buildah inspect --type image "$BASE:bookworm" >/dev/null 2>&1 &&
        buildah inspect --type image "$BASE:bookworm-slim" >/dev/null 2>&1; then
        return 0
    fi
    mkdir -p "$CACHE"
    if [ ! -s "$CACHE/bookworm.tar" ]; then
        log "making the bookworm base with mmdebstrap ($MIRROR)"
        rm -rf "$CACHE/bookworm-part.tar"
        mmdebstrap --variant=minbase --format=tar --quiet bookworm "$CACHE/bookworm-part.tar" \
            "$MIRROR" || die "mmdebstrap failed"
        mv "$CACHE/bookworm-part.tar" "$CACHE/bookworm.tar"
    fi
    local c
    c=$(buildah from scratch) || die "buildah from scratch failed"
    buildah add "$c" "$CACHE/bookworm.tar" / >/dev/null || { buildah rm "$c" >/dev/null; die "buildah add failed"; }
    buildah commit -q "$c" "$BASE:bookworm" >/dev/null || { buildah rm "$c" >/dev/null; die "buildah commit failed"; }
    buildah rm "$c" >/dev/null
    buildah tag "$BASE:bookworm" "$BASE:bookworm-slim"
    log "base images $BASE:bookworm and :bookworm-slim ready"
}

cmd_build() {
    local tag=$1 ca=() t0=$SECONDS
    need
    base_image
    [ -f /etc/ssl/certs/ca-certificates.crt ] &&
        ca=(-v /etc/ssl/certs/ca-certificates.crt:/run/build-ca.crt:ro)
    log "building $tag from deploy/Containerfile"
    buildah bud --pull-never --format docker --isolation chroot "${ca[@]}" \
        -f "$ROOT/deploy/Containerfile" -t "$tag" "$ROOT" || die "buildah bud failed"
    log "built $tag in $((SECONDS - t0)) s"
}

cmd_smoke() {
    local tag=$1 c user
    need
    user=$(buildah inspect --type image --format '{{.Docker.Config.User}}' "$tag") ||
        die "image $tag not found"
    c=$(buildah from --pull-never "$tag") || die "buildah from $tag failed"
    buildah run --isolation chroot --user "$user" "$c" -- /usr/local/bin/parley --version ||
        { buildah rm "$c" >/dev/null; die "parley --version failed inside $tag"; }
    buildah run --isolation chroot --user "$user" "$c" -- id -u ||
        { buildah rm "$c" >/dev/null; die "id -u failed inside $tag"; }
    buildah rm "$c" >/dev/null
}

cmd_rm() { need; buildah rmi "$1" >/dev/null; }

case ${1:-} in
    build) cmd_build "${2:-parley:test}" ;;
    smoke) cmd_smoke "${2:-parley:test}" ;;
    rm) cmd_rm "${2:-parley:test}" ;;
    *) echo "usage: deploy/container.sh build|smoke|rm [TAG]" >&2; exit 2 ;;
esac
