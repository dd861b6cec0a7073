#!/usr/bin/env bash
# Install what duomq needs on a fresh Debian machine, skipping what is there:
# Java and kubectl (checked), Debian's ZooKeeper server, and a virtualenv (.venv) holding
# duomq with the extras named in $DUOMQ_EXTRAS (default: test).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
EXTRAS=${DUOMQ_EXTRAS:-test}
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi

need=()
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)   # the metrics tests' server and promtool
command -v tmux >/dev/null 2>&1 || need+=(tmux)               # `duomq top`'s test reads its screen
command -v iptables >/dev/null 2>&1 || need+=(iptables)       # the network-fault tests and drills
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [ -z "$java_major" ] || [ "$java_major" -lt 11 ]; then
  echo "Java 11 or newer is needed for ZooKeeper (found: ${java_major:-none})" >&2
  exit 1
fi
# deploy/k8s is rendered by the real kustomize, the one built into kubectl
# 1.27+ (Debian's kubernetes-client is 1.20, too old; install kubectl from
# https://kubernetes.io/docs/tasks/tools/).
kubectl_version=$( (kubectl version --client 2>/dev/null || true) | sed -n 's/^Client Version: v\([0-9]*\.[0-9]*\).*/\1/p')
if [ -z "$kubectl_version" ] || [ "${kubectl_version%%.*}" -lt 1 ] || \
   { [ "${kubectl_version%%.*}" -eq 1 ] && [ "${kubectl_version#*.}" -lt 27 ]; }; then
  echo "kubectl 1.27 or newer is needed to render deploy/k8s with its built-in kustomize" \
       "(found: ${kubectl_version:-none}); install it from https://kubernetes.io/docs/tasks/tools/" >&2
  exit 1
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "Python 3.11 or newer is needed (found $(python3 --version))" >&2; exit 1; }

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
stamp="$VENV/.duomq-installed"
# reinstalled when pyproject.toml or the C loops (their sources and headers in format/, proto/ and
# transport/) change (pip builds format/_native, proto/_wire and transport/_zmtp in place);
# the stamp names the build the venv holds now, not every build it ever held (a checkout back to
# an earlier source must build it again)
want="$(cat pyproject.toml $(find format proto transport -name '*.[ch]' | LC_ALL=C sort) | sha256sum | cut -c1-16) $EXTRAS"
if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi

# Debian's docker-registry (Distribution 2.8), for the test of `make image
# REGISTRY=...`: unpacked into the venv, not installed, so that no registry
# service is set up on this machine
if ! command -v docker-registry >/dev/null 2>&1 && [ ! -x "$VENV/bin/docker-registry" ]; then
  echo "unpacking Debian's docker-registry into $VENV/opt"
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download -qq docker-registry 2>/dev/null || \
     { $SUDO apt-get update -qq && apt-get download -qq docker-registry; }; })
  mkdir -p "$VENV/opt/docker-registry"
  dpkg -x "$tmp"/docker-registry_*.deb "$VENV/opt/docker-registry"
  ln -sf "$(cd "$VENV" && pwd)/opt/docker-registry/usr/bin/docker-registry" "$VENV/bin/docker-registry"
  rm -rf "$tmp"
fi
