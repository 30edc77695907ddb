#!/usr/bin/env bash
# Fetch (or reuse) the Pyroscope Java agent (io.pyroscope:agent, a
# self-contained jar with async-profiler inside) that tests/it/pyroscope_jfr.rs
# attaches with -javaagent, copied from Maven Central by Maven.
#
# Prints the absolute path of the agent jar on the last line of stdout;
# Maven's noise goes to stderr. Cached outside the checkout, in
# $PROFCOL_PYROSCOPE_JAVA_CACHE (default ~/.cache/profcol/pyroscope-java)/
# <version>-<hash>/, <hash> covering pom.xml and this script (minus comment
# lines), so a fresh clone reuses it. A cold fetch takes a few seconds (6 MB).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="$here/pom.xml"
script="$here/fetch.sh"
cache="${PROFCOL_PYROSCOPE_JAVA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol/pyroscope-java}"

version="$(sed -n 's#.*<agent.version>\(.*\)</agent.version>.*#\1#p' "$pom")"
hash="$( { grep -v '^[[:space:]]*#' "$script"; cat "$pom"; } | sha256sum | cut -c1-12)"
out="$cache/$version-$hash"
jar="$out/agent-$version.jar"

if [[ -f "$out/.complete" ]]; then
  echo "$jar"
  exit 0
fi

command -v mvn >/dev/null || { echo "fetch.sh: mvn is not on PATH" >&2; exit 1; }
mkdir -p "$cache"
if command -v flock >/dev/null; then
  exec 9>"$cache/.lock"
  flock 9
  if [[ -f "$out/.complete" ]]; then
    echo "$jar"
    exit 0
  fi
fi

# Into a scratch dir, then moved into place: a cancelled fetch never leaves
# a half-filled cache entry behind.
work="$out.partial"
rm -rf "$work"
mkdir -p "$work"
echo "fetch.sh: fetching io.pyroscope:agent $version from Maven Central" >&2
mvn -B -q -f "$pom" dependency:copy-dependencies \
  -DexcludeTransitive=true -DincludeScope=runtime -DoutputDirectory="$work" >&2
ls "$work/agent-$version.jar" >/dev/null
touch "$work/.complete"
rm -rf "$out"
mv "$work" "$out"
echo "$jar"
