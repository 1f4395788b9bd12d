# Sourced by run and install.sh.
#
# curator_classpath [BUILD]: prints the class path of Curator BUILD, or the first jar missing
# (and fails). BUILD is `5.4` (the default: Debian bookworm's libcurator-*-java 5.4.0 and
# libzookeeper-java 3.8.0 in /usr/share/java) or `5.7` (Debian trixie's 5.7.1 jars and its
# ZooKeeper 3.9.3 client, from the private prefix of scripts/install-servers.sh:
# $LOCKBENCH_SERVERS, else /var/lib/lockbench/servers, folders curator-5.7 and zookeeper-3.9).
# The jar manifests name their own dependencies by absolute path, and the JVM puts a
# manifest's entries right after its jar: trixie's recipes and framework jars name bookworm's
# curator-client.jar and curator-framework.jar (5.4.0), and every Curator jar names bookworm's
# zookeeper.jar (3.8.0). So 5.7's jars come client, framework, recipes, after ZooKeeper 3.9's
# jute and server jars: each class is found in a 5.7 (or 3.9) jar before any 5.4 (3.8) one.
# slf4j-simple is the one logging binding, and it writes to stderr.
curator_classpath() {
    build=${1:-5.4}
    jars=/usr/share/java
    case "$build" in
        5.4) first="$jars/curator-recipes.jar $jars/curator-framework.jar $jars/curator-client.jar \
                    $jars/zookeeper.jar $jars/zookeeper-jute.jar" ;;
        5.7) p=${LOCKBENCH_SERVERS:-/var/lib/lockbench/servers}
             first="$p/zookeeper-3.9/lib/zookeeper-jute.jar $p/zookeeper-3.9/lib/zookeeper.jar \
                    $p/curator-5.7/lib/curator-client.jar $p/curator-5.7/lib/curator-framework.jar \
                    $p/curator-5.7/lib/curator-recipes.jar" ;;
        *) echo "no Curator build $build (expected 5.4 or 5.7)"; return 1 ;;
    esac
    cp=
    for j in $first $jars/guava.jar $jars/slf4j-api.jar $jars/slf4j-simple.jar \
             $jars/jackson-databind.jar $jars/jackson-core.jar $jars/jackson-annotations.jar; do
        [ -r "$j" ] || { echo "$j"; return 1; }
        cp="$cp${cp:+:}$j"
    done
    echo "$cp"
}

# curator_install [BUILD]: what installs BUILD's jars.
curator_install() {
    case "${1:-5.4}" in
        5.7) echo "bash scripts/install-deps.sh --servers curator=5.7,zookeeper=3.9" ;;
        *) echo "apt-get install libcurator-recipes-java" ;;
    esac
}

# curator_classes [BUILD]: the folder (under the adapter's) CuratorAdapter.java is compiled
# into for BUILD: .classes for 5.4, .classes-5.7 for 5.7.
curator_classes() {
    case "${1:-5.4}" in
        5.4) echo .classes ;;
        *) echo ".classes-$1" ;;
    esac
}
