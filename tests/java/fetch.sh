#!/usr/bin/env bash
# Fetch (or reuse) the jars a Java test program needs: the dependencies of
# <pom-dir>/pom.xml and theirs, copied from Maven Central by Maven.
#
#   tests/java/fetch.sh <pom-dir> <cache-name>
#
# Used for the Pyroscope Java agent (tests/pyroscope_java, tests/it/pyroscope_jfr.rs),
# async-profiler (tests/async_profiler, tests/it/async_profiler.rs)
# and the Sentry Java SDK (tests/sentry_java, tests/it/sentry_java.rs).
#
# Prints the absolute path of the directory holding the jars on the last
# line of stdout; Maven's noise goes to stderr. Cached outside the checkout,
# in $PROFCOL_JAVA_CACHE (default ~/.cache/profcol)/<cache-name>/<version>-<hash>/,
# <version> being the pom's first `<name.version>` property and <hash>
# covering pom.xml and this script (minus comment lines), so a fresh clone
# reuses it.
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: fetch.sh <pom-dir> <cache-name>" >&2; exit 2; }
pom="$(cd "$1" && pwd)/pom.xml"
name="$2"
script="${BASH_SOURCE[0]}"
cache="${PROFCOL_JAVA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol}/$name"

version="$(sed -n 's#.*<[a-z-]*\.version>\(.*\)</[a-z-]*\.version>.*#\1#p' "$pom" | head -n1)"
hash="$( { grep -v '^[[:space:]]*#' "$script"; cat "$pom"; } | sha256sum | cut -c1-12)"
out="$cache/${version:-any}-$hash"

if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi

command -v mvn >/dev/null || { echo "fetch.sh: mvn is not on PATH" >&2; exit 1; }
mkdir -p "$cache"
# Serialise concurrent callers (parallel tests, CI's prefetch) on one lock.
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
mkdir -p "$work"
echo "fetch.sh: fetching the dependencies of $pom from Maven Central" >&2
mvn -B -q -f "$pom" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$work" >&2
ls "$work"/*.jar >/dev/null
touch "$work/.complete"
rm -rf "$out"
mv "$work" "$out"
echo "$out"
