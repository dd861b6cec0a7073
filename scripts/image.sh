#!/usr/bin/env bash
# `make image`: build both targets of the Dockerfile with podman,
#   duomq:<version>        (also tagged localhost/duomq/duomq:<version>)
#   duomq-spark:<version>  (also tagged localhost/duomq/duomq-spark:<version>)
# with <version> from duomq.__version__. Installs podman, buildah, runc and
# debootstrap from Debian when they are missing.
#
# `make image REGISTRY=registry.example.com/team` (here: `--push
# registry.example.com/team`) then tags both as <registry>/duomq:<version>
# and <registry>/duomq-spark:<version>, pushes them, and prints the
# kustomize `images:` lines that pin them by digest in an overlay
# (deploy/k8s/README.md, Images). Log in first (`podman login`);
# REGISTRY_TLS_VERIFY=false for a registry without TLS.
#
# It works with no registry: when the Dockerfile's public base
# (python:3.11.10-slim-bookworm) cannot be pulled, it makes the bases
# locally, once, with debootstrap (Debian 12, python3.11; the spark one adds
# openjdk-17-jre-headless) and imports them (localhost/duomq-base:bookworm,
# localhost/duomq-base-java:bookworm). Every wheel the images need is built
# here first and mounted into the build, which then runs with no network.
#
# Settings (environment): PYTHON_IMAGE (use this base, pulled or local),
# DEBIAN_MIRROR (http://deb.debian.org/debian), IMAGE_WORK (scratch space,
# /var/tmp/duomq-image), REBUILD_BASE=1 (make the local bases again).
set -euo pipefail
cd "$(dirname "$0")/.."
REGISTRY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --push) REGISTRY=${2:?--push needs a registry, as registry.example.com/team}; shift 2 ;;
    *) echo "usage: scripts/image.sh [--push REGISTRY]" >&2; exit 2 ;;
  esac
done
REGISTRY=${REGISTRY%/}
VENV=${VENV:-.venv}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=${IMAGE_WORK:-/var/tmp/duomq-image}
PUBLIC_BASE=python:3.11.10-slim-bookworm
LOCAL_BASE=localhost/duomq-base:bookworm
LOCAL_JAVA_BASE=localhost/duomq-base-java:bookworm
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 && SUDO=sudo || {
    echo "make image runs podman as root (rootful) and debootstrap: run it as root or with sudo" >&2
    exit 1; }
fi
# podman 4.3 on this kind of host: crun fails (setrlimit RLIMIT_NPROC), runc works
PODMAN=($SUDO podman --runtime runc)

need=()
for tool in podman buildah runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' __init__.py)
[ -n "$version" ] || { echo "no __version__ in __init__.py" >&2; exit 1; }

have_image() { "${PODMAN[@]}" image exists "$1"; }

import_root() {  # ROOT IMAGE: a root file system, cleaned of apt's caches, as an image
  $SUDO chroot "$1" sh -c 'apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin'
  $SUDO tar -C "$1" -c . | "${PODMAN[@]}" import -q \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' - "$2" >/dev/null
}

# One Debian 12 root with python3.11, imported as the base, then with Java
# added (in a chroot, from the same mirror) as the spark base.
make_bases() {
  local root="$WORK/rootfs"
  echo "making $base and $java_base locally (debootstrap of Debian 12 from $MIRROR)"
  $SUDO rm -rf "$root"
  mkdir -p "$WORK"
  $SUDO debootstrap --variant=minbase \
    --include=python3,python3-venv,python-is-python3,passwd,ca-certificates \
    bookworm "$root" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  import_root "$root" "$base"
  $SUDO mount --bind /proc "$root/proc"      # the JVM finds its libraries through /proc
  trap '$SUDO umount "$WORK/rootfs/proc" 2>/dev/null || true' EXIT
  $SUDO chroot "$root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null \
    && java -version'
  $SUDO umount "$root/proc"
  trap - EXIT
  import_root "$root" "$java_base"
  $SUDO rm -rf "$root"
}

offline=0
if [ -n "${PYTHON_IMAGE:-}" ]; then
  base=$PYTHON_IMAGE; java_base=$PYTHON_IMAGE
  have_image "$base" || "${PODMAN[@]}" pull -q "$base" >/dev/null
elif have_image "$PUBLIC_BASE" || "${PODMAN[@]}" pull -q "$PUBLIC_BASE" >/dev/null 2>&1; then
  base=$PUBLIC_BASE; java_base=$PUBLIC_BASE
else
  echo "$PUBLIC_BASE cannot be pulled here: building from local bases, offline"
  offline=1
  base=$LOCAL_BASE; java_base=$LOCAL_JAVA_BASE
  if [ "${REBUILD_BASE:-0}" = 1 ] || ! have_image "$base" || ! have_image "$java_base"; then
    make_bases
  fi
fi

build=(build --layers --format docker)   # docker format keeps HEALTHCHECK
if [ "$offline" = 1 ]; then
  # every wheel the images install, duomq's own among them (built here, where
  # there is a compiler for its C loops), with what pip needs to build it
  wheels="$WORK/wheels"
  mkdir -p "$wheels"
  [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
  rm -f "$wheels"/duomq-*.whl   # duomq's own wheel, with its C loops: built anew each time
  "$VENV/bin/pip" wheel -q -w "$wheels" ".[spark]" "setuptools>=77" wheel 2>&1 \
    | grep -v "^WARNING: Location" >&2 || true
  rm -rf build                  # setuptools' leftovers from building duomq's wheel
  build+=(--network none --volume "$wheels:/wheels:ro" --build-arg WHEELS=/wheels)
fi

t0=$(date +%s)
"${PODMAN[@]}" "${build[@]}" --build-arg "PYTHON_IMAGE=$base" --target broker \
  -t "duomq:$version" -t "localhost/duomq/duomq:$version" .
"${PODMAN[@]}" "${build[@]}" --build-arg "PYTHON_IMAGE=$java_base" --target spark \
  -t "duomq-spark:$version" -t "localhost/duomq/duomq-spark:$version" .
echo "built duomq:$version and duomq-spark:$version in $(( $(date +%s) - t0 )) s" \
     "(from $base$([ "$offline" = 1 ] && echo ", offline"))"
"${PODMAN[@]}" images --filter "reference=*duomq*" \
  --format '{{.Repository}}:{{.Tag}} {{.Size}}'

[ -n "$REGISTRY" ] || exit 0
# push both, then print what pins them: the digest podman pushed
tls=(--tls-verify="${REGISTRY_TLS_VERIFY:-true}")
mkdir -p "$WORK"
declare -A digest
for name in duomq duomq-spark; do
  "${PODMAN[@]}" tag "$name:$version" "$REGISTRY/$name:$version"
  "${PODMAN[@]}" push -q "${tls[@]}" --digestfile "$WORK/$name.digest" "$REGISTRY/$name:$version"
  digest[$name]=$(cat "$WORK/$name.digest")
  echo "pushed $REGISTRY/$name:$version (${digest[$name]})"
done
cat <<STANZA
# for your overlay's kustomization.yaml (deploy/k8s/README.md, Images):
images:
  - name: registry.invalid/duomq/duomq
    newName: $REGISTRY/duomq
    digest: ${digest[duomq]}
  - name: registry.invalid/duomq/duomq-spark
    newName: $REGISTRY/duomq-spark
    digest: ${digest[duomq-spark]}
STANZA
