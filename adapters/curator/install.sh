#!/bin/sh
# Curator adapter: Maven Central is out of reach, so the library comes from Debian, and
# scripts/install-deps.sh --adapters installs these packages:
#   default-jdk-headless      java + javac
#   libcurator-recipes-java   Apache Curator 5.4.0 (pulls libcurator-framework-java,
#                             libcurator-client-java, libzookeeper-java 3.8.0, libguava-java,
#                             libslf4j-java, libjackson2-databind-java)
# This script checks them and compiles CuratorAdapter.java once into .classes/ (git-ignored),
# so that five adapters starting at once (a run's workers) do not each compile it; `run` falls
# back to the source launcher when the classes are missing or older than the source.
# Idempotent.
set -e
dir=$(cd "$(dirname "$0")" && pwd)
command -v javac >/dev/null 2>&1 || { echo "curator adapter: javac missing (apt-get install default-jdk-headless)" >&2; exit 1; }
. "$dir/classpath.sh"
cp=$(curator_classpath) || { echo "curator adapter: $cp missing (apt-get install libcurator-recipes-java)" >&2; exit 1; }
if [ ! -f "$dir/.classes/CuratorAdapter.class" ] || [ "$dir/CuratorAdapter.java" -nt "$dir/.classes/CuratorAdapter.class" ]; then
    tmp=$(mktemp -d "$dir/.classes-XXXXXX")
    javac -nowarn -cp "$cp" -d "$tmp" "$dir/CuratorAdapter.java"
    rm -rf "$dir/.classes" && mv "$tmp" "$dir/.classes"
fi
echo "curator adapter: Debian packages present ($(dpkg-query -W -f='${Version}' libcurator-recipes-java 2>/dev/null || echo '?')), compiled into $dir/.classes"
