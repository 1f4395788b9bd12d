# Sourced by run and install.sh: prints the classpath of Debian's jars, or the first jar missing
# (and fails).
curator_classpath() {
    jars=/usr/share/java
    cp=
    # The jar manifests name their own dependencies (ZooKeeper's, Guava, Jackson's core);
    # slf4j-simple is the one logging binding, and it writes to stderr.
    for j in curator-recipes curator-framework curator-client zookeeper zookeeper-jute guava \
             slf4j-api slf4j-simple jackson-databind jackson-core jackson-annotations; do
        [ -r "$jars/$j.jar" ] || { echo "$jars/$j.jar"; return 1; }
        cp="$cp${cp:+:}$jars/$j.jar"
    done
    echo "$cp"
}
