#!/usr/bin/env bash
# `zkServer.sh start-foreground`, as the official image runs it: the real
# ZooKeeper server (QuorumPeerMain) in the foreground, here from the
# ZooKeeper jars the pyspark wheel carries in the duomq-spark image.
set -e
[ "$1" = start-foreground ] || { echo "only start-foreground is supported here" >&2; exit 2; }
# pyspark's jars hold no zookeeper-prometheus-metrics (the official image's
# lib/ does): the manifests' metricsProvider lines are left out here
sed -i '/^metricsProvider\./d' "$ZOO_CONF_DIR/zoo.cfg"
jars=$(python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
# shellcheck disable=SC2086  # JVMFLAGS is a list of flags
exec java $JVMFLAGS -Dzookeeper.log.dir=/tmp -cp "$jars/*" \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOO_CONF_DIR/zoo.cfg"
