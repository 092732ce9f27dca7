#!/usr/bin/env bash
# Resolve the Java programs the tests run (each tests/java/<dir>/pom.xml pins one, e.g. Apache
# Kafka for tests/kafka_cluster.py) from Maven Central into the user's Maven repository, and
# write each one's runtime classpath to .tools/java/<dir>.classpath. Nothing is built and no
# jar enters the repository: the poms only pin versions.
#
# Checked: every jar of a classpath must be listed, with its SHA-256, in the committed
# tests/java/<dir>/artifacts.sha256 (and every listed jar must be on the classpath), so a
# changed transitive version or a tampered download fails here instead of in a test.
# Maven itself runs with strict checksums (-C) against Central's published ones.
#
#   scripts/resolve-java.sh                 resolve and check (idempotent; no Maven run when done)
#   scripts/resolve-java.sh --lock [DIR…]   after changing a pom: resolve, then rewrite the
#                                           artifacts.sha256 of DIR (default: every tests/java/*)
#                                           from what resolved (review the diff, commit it)
# A directory without artifacts.sha256 is resolved with Maven's checksums only, with a warning.
#
# Needs Maven 3.8+ (mvn) and Java 17 the first time; later runs only check the jars.
# HUDI_SINK_MAVEN_REPO overrides the Maven repository (default ~/.m2/repository).
# HUDI_SINK_JAVA_DIRS (space-separated directories, default tests/java/*) names other poms to
# resolve the same way: `hudi-sink bench --anchors` resolves bench/java/* one at a time with it,
# so a connector Maven cannot fetch costs only that anchor and never the tests' Kafka.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="${HUDI_SINK_MAVEN_REPO:-$HOME/.m2/repository}"
relock=0
relock_dirs=()
case "${1:-}" in
  "") ;;
  --lock) relock=1; shift; relock_dirs=("${@%/}") ;;
  *) echo "usage: $0 [--lock [tests/java/DIR…]]" >&2; exit 2 ;;
esac

# Whether the lock of directory $1 is to be rewritten in this run.
relocking() {
  local wanted
  [ "$relock" = 1 ] || return 1
  [ "${#relock_dirs[@]}" = 0 ] && return 0
  for wanted in "${relock_dirs[@]}"; do
    [ "$wanted" = "$1" ] && return 0
  done
  return 1
}

# The entries of classpath file $1, one a line (the file has no final newline).
entries() {
  tr ':' '\n' <"$1" | awk 'NF'
}

# The classpath's jars as paths relative to the Maven repository, one a line, sorted.
relative_jars() {
  entries "$1" | sed -n "s#^$repo/##p" | sort
}

# Whether every jar named by classpath file $1 is still on disk.
all_present() {
  local jar
  [ -s "$1" ] || return 1
  while IFS= read -r jar; do
    [ -f "$jar" ] || return 1
  done < <(entries "$1")
}

# Check classpath file $1 against lock $2: the same jars, each with its locked SHA-256.
verify() {
  local classpath=$1 lock=$2 lock_abs
  lock_abs="$(cd "$(dirname "$lock")" && pwd)/$(basename "$lock")"
  if [ "$(entries "$classpath" | wc -l)" != "$(relative_jars "$classpath" | wc -l)" ]; then
    echo "resolve-java: $classpath has jars outside $repo" >&2
    return 1
  fi
  if ! diff <(relative_jars "$classpath") <(awk '{print $2}' "$lock" | sort) >&2; then
    echo "resolve-java: the jars resolved for $classpath differ from $lock (< resolved, > locked);" \
      "if the pom changed on purpose, run scripts/resolve-java.sh --lock and review the diff" >&2
    return 1
  fi
  if ! (cd "$repo" && sha256sum --quiet --strict -c "$lock_abs" >&2); then
    echo "resolve-java: a jar in $repo does not match its SHA-256 in $lock;" \
      "delete that jar's directory so it is downloaded again" >&2
    return 1
  fi
}

mkdir -p .tools/java
shopt -s nullglob
for dir in ${HUDI_SINK_JAVA_DIRS:-tests/java/*}; do
  dir=${dir%/}
  pom=$dir/pom.xml
  [ -f "$pom" ] || continue
  name=$(basename "$dir")
  classpath=.tools/java/$name.classpath
  lock=$dir/artifacts.sha256
  if relocking "$dir" || [ "$pom" -nt "$classpath" ] || { [ -f "$lock" ] && [ "$lock" -nt "$classpath" ]; } \
      || ! all_present "$classpath"; then
    if ! command -v mvn >/dev/null 2>&1; then
      echo "resolve-java: mvn not found; install Maven 3.8+ (e.g. apt-get install -y maven)" >&2
      exit 2
    fi
    echo "resolve-java: resolving $pom from Maven Central into $repo" >&2
    partial=$(mktemp ".tools/java/$name.classpath.XXXXXX")
    trap 'rm -f "$partial"' EXIT
    if ! output=$(mvn -B -q -C -f "$pom" -Dmaven.repo.local="$repo" dependency:build-classpath \
        -Dmdep.includeScope=runtime -Dmdep.outputFile="$PWD/$partial" 2>&1); then
      echo "$output" >&2
      echo "resolve-java: Maven could not resolve $pom (is Maven Central reachable?)" >&2
      exit 1
    fi
    if relocking "$dir"; then
      relative_jars "$partial" | (cd "$repo" && xargs sha256sum) >"$lock"
      echo "resolve-java: wrote $lock ($(wc -l <"$lock") jars)" >&2
    fi
    checked=$partial
  else
    checked=$classpath
  fi
  if [ -f "$lock" ]; then
    verify "$checked" "$lock" || exit 1
  else
    echo "resolve-java: warning: $lock is missing, so $pom's jars are checked by Maven's" \
      "checksums only; run scripts/resolve-java.sh --lock $dir and commit it" >&2
  fi
  if [ "$checked" != "$classpath" ]; then
    chmod 644 "$partial"
    mv "$partial" "$classpath"
    trap - EXIT
  fi
done
