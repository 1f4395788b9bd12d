#!/bin/sh
# Curator adapter: nothing to install project-locally. Maven Central is out of reach, so the
# library comes from Debian and scripts/install-deps.sh installs these packages:
#   openjdk-17-jdk-headless   java + javac (the source launcher compiles CuratorAdapter.java)
#   libcurator-recipes-java   Apache Curator 5.4.0 (pulls libcurator-framework-java,
#                             libcurator-client-java, libzookeeper-java 3.8.0, libguava-java,
#                             libslf4j-java, libjackson2-databind-java)
# libslf4j-java gives slf4j-simple (logs to stderr); Jackson is curator-framework's own dependency.
# This script only checks that they are there (idempotent, changes nothing).
set -e
missing=
for p in openjdk-17-jdk-headless libcurator-recipes-java libslf4j-java libjackson2-databind-java; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "curator adapter: Debian packages missing:$missing (apt-get install -y --no-install-recommends$missing)" >&2
    exit 1
fi
echo "curator adapter: Debian packages present ($(dpkg-query -W -f='${Version}' libcurator-recipes-java))"
