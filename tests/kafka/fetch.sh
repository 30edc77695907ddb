#!/usr/bin/env bash
# Fetch (or reuse) the Apache Kafka broker the integration tests start
# (tests/it/common/kafka.rs): the jars of pom.xml and their runtime
# dependencies, copied from Maven Central by Maven.
#
# Prints the absolute path of the directory holding the jars on the last
# line of stdout; Maven's noise goes to stderr. The jars are cached outside
# the checkout, in $PROFCOL_KAFKA_CACHE (default ~/.cache/profcol/kafka)/
# <version>-<hash>/, so that a fresh clone reuses them; <hash> covers
# pom.xml and this script (minus comment lines). A cold fetch takes ~20 s
# (about 60 MB); a warm call costs the hashing.
#
# Needs `mvn` and a JDK 17+ (the broker's own requirement).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="$here/pom.xml"
script="$here/fetch.sh"
cache="${PROFCOL_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol/kafka}"

version="$(sed -n 's#.*<kafka.version>\(.*\)</kafka.version>.*#\1#p' "$pom")"
hash="$( { grep -v '^[[:space:]]*#' "$script"; cat "$pom"; } | sha256sum | cut -c1-12)"
out="$cache/$version-$hash"

if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi

command -v mvn >/dev/null || { echo "fetch.sh: mvn is not on PATH" >&2; exit 1; }
command -v java >/dev/null || { echo "fetch.sh: java is not on PATH" >&2; exit 1; }
mkdir -p "$cache"

# Serialise concurrent callers (parallel tests) on one lock.
if command -v flock >/dev/null; then
  exec 9>"$cache/.lock"
  flock 9
  if [[ -f "$out/.complete" ]]; then
    echo "$out"
    exit 0
  fi
fi

# Into a scratch dir, then moved into place: a cancelled fetch never leaves
# a half-filled cache entry behind.
work="$out.partial"
rm -rf "$work"
mkdir -p "$work/libs"
echo "fetch.sh: fetching Apache Kafka $version from Maven Central" >&2
mvn -B -q -f "$pom" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$work/libs" >&2
ls "$work/libs"/kafka_2.13-"$version".jar >/dev/null
touch "$work/.complete"
rm -rf "$out"
mv "$work" "$out"
echo "$out"
