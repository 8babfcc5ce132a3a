#!/usr/bin/env bash
# A local Debian 12 (bookworm) base image for building and testing the Containerfile where no image
# registry is reachable: debootstrap (minbase) from Debian's mirror, imported into podman as
# localhost/memgym-base:bookworm. Idempotent: does nothing when the image exists. Needs root, podman and
# debootstrap (Debian's packages).
set -euo pipefail
IMAGE=${1:-localhost/memgym-base:bookworm}
if podman image exists "$IMAGE"; then echo "$IMAGE"; exit 0; fi
root=$(mktemp -d -t memgym-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >&2
tar -C "$root" -c . | podman import --quiet - "$IMAGE" >&2
echo "$IMAGE"
