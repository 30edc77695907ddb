#!/usr/bin/env bash
# Build (or reuse) the pinned OpenTelemetry Collector test peer `otelcol-profcol`.
#
# Prints the absolute path of the binary on the last line of stdout; all build
# noise goes to stderr. The binary is cached outside the checkout, in
# $PROFCOL_OTELCOL_CACHE (default ~/.cache/profcol/otelcol)/<hash>/, so that
# a fresh clone, as CI makes, reuses it. <hash> covers builder-config.yaml
# and this script (minus comment lines) and stub/: changing any of them
# triggers a rebuild (~10 min on 2 cores); a warm call costs the hashing.
#
# Needs only `go` (1.26+) and the Go module proxy. Env knobs:
#   OTELCOL_BUILD_JOBS=N   pass -p=N to the go commands (e.g. 1 on a busy box)
#   OTELCOL_FORCE_REBUILD=1  ignore the cache
set -euo pipefail

BUILDER_VERSION=v0.161.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

config="$here/builder-config.yaml"
script="$here/build.sh"
cache="${PROFCOL_OTELCOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol/otelcol}"
name="otelcol-profcol"

# Comment lines do not count, so documenting costs no rebuild.
hash="$( { grep -v '^[[:space:]]*#' "$config"; grep -v '^[[:space:]]*#' "$script";
           find "$here/stub" -type f | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-16)"
out="$cache/$hash"
bin="$out/$name"

if [[ -x "$bin" && "${OTELCOL_FORCE_REBUILD:-0}" != "1" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: go is not on PATH" >&2; exit 1; }
mkdir -p "$cache"

# Serialise concurrent callers (parallel tests) on one lock.
if command -v flock >/dev/null; then
  exec 9>"$cache/.lock"
  flock 9
  if [[ -x "$bin" && "${OTELCOL_FORCE_REBUILD:-0}" != "1" ]]; then
    echo "$bin"
    exit 0
  fi
fi

if [[ -n "${OTELCOL_BUILD_JOBS:-}" ]]; then
  export GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)} -p=${OTELCOL_BUILD_JOBS}"
fi

gobin="$cache/bin/$BUILDER_VERSION"
builder="$gobin/builder"
if [[ ! -x "$builder" ]]; then
  echo "build.sh: installing builder $BUILDER_VERSION into $gobin" >&2
  mkdir -p "$gobin"
  GOBIN="$gobin" go install "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION" >&2
fi

# Build into a scratch dir, then move it into place, so a cancelled build
# never leaves a half-made cache entry behind.
work="$cache/$hash.partial"
rm -rf "$work"
mkdir -p "$work"
gen_config="$work.builder-config.yaml"
trap 'rm -f "$gen_config"' EXIT
# The cache lives outside the checkout: the stub's relative path becomes absolute.
sed -E -e "s#^([[:space:]]*output_path:).*#\1 $work#" \
  -e "s#=> \.\./\.\./\.\./tests/otelcol/stub/#=> $here/stub/#" "$config" >"$gen_config"
grep -q "output_path: $work\$" "$gen_config" && grep -q "=> $here/stub/" "$gen_config" || {
  echo "build.sh: could not rewrite output_path or the stub path of $config" >&2; exit 1; }

echo "build.sh: building $name (cache miss, $hash); this takes several minutes" >&2
start=$SECONDS
"$builder" --config "$gen_config" >&2
echo "build.sh: built in $((SECONDS - start))s" >&2

rm -rf "$out"
mv "$work" "$out"
echo "$bin"
