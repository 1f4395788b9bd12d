#!/bin/sh
# Curator adapter: Maven Central is out of reach, so the library comes from Debian, and
# scripts/install-deps.sh --adapters installs these packages:
#   default-jdk-headless      java + javac
#   libcurator-recipes-java   Apache Curator 5.4.0 (pulls libcurator-framework-java,
#                             libcurator-client-java, libzookeeper-java 3.8.0, libguava-java,
#                             libslf4j-java, libjackson2-databind-java)
# and, for `lib:curator-5.7` (run --curator=5.7), `--servers curator=5.7,zookeeper=3.9` unpacks
# Debian trixie's Curator 5.7.1 and ZooKeeper 3.9.3 jars into the private prefix
# (classpath.sh). This script checks them and compiles CuratorAdapter.java once per Curator
# build, against that build's jars, into .classes/ (5.4) or .classes-5.7/ (git-ignored), so
# that five adapters starting at once (a run's workers) do not each compile it; `run` falls
# back to the source launcher when the classes are missing or older than the source. 5.7 is
# skipped, with a note, while its jars are not there. Idempotent.
set -e
dir=$(cd "$(dirname "$0")" && pwd)
command -v javac >/dev/null 2>&1 || { echo "curator adapter: javac missing (apt-get install default-jdk-headless)" >&2; exit 1; }
. "$dir/classpath.sh"
for build in 5.4 5.7; do
    if ! cp=$(curator_classpath "$build"); then
        [ "$build" = 5.4 ] || { echo "curator adapter: Curator $build not compiled: $cp missing ($(curator_install "$build"))" >&2; continue; }
        echo "curator adapter: $cp missing ($(curator_install "$build"))" >&2
        exit 1
    fi
    classes="$dir/$(curator_classes "$build")"
    if [ ! -f "$classes/CuratorAdapter.class" ] || [ "$dir/CuratorAdapter.java" -nt "$classes/CuratorAdapter.class" ]; then
        tmp=$(mktemp -d "$dir/.classes-tmp-XXXXXX")
        javac -nowarn -cp "$cp" -d "$tmp" "$dir/CuratorAdapter.java"
        rm -rf "$classes" && mv "$tmp" "$classes"
    fi
    echo "curator adapter: Curator $build present, compiled into $classes" >&2
done
echo "curator adapter: Debian packages present ($(dpkg-query -W -f='${Version}' libcurator-recipes-java 2>/dev/null || echo '?'))"
