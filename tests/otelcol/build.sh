#!/usr/bin/env bash
# Build (or reuse) an OpenTelemetry Collector test peer: by default the pinned
# `otelcol-profcol` (builder-config.yaml); `build.sh latest.yaml` builds
# `otelcol-latest`, the newest core Collector the proxy serves (latest.yaml).
#
# Prints the absolute path of the binary on the last line of stdout; all build
# noise goes to stderr. The binary is cached outside the checkout, in
# $PROFCOL_OTELCOL_CACHE (default ~/.cache/profcol/otelcol)/<hash>/, so that
# a fresh clone, as CI makes, reuses it. <hash> covers the builder config
# and this script (minus comment lines) and stub/: changing any of them
# triggers a rebuild (~10 min on 2 cores for the pinned one, 1-2 min for
# latest.yaml); a warm call costs the hashing. The builder's version is the
# config's otlpreceiver's, the binary's name its `dist: name`.
#
# Needs only `go` (1.26+) and the Go module proxy. Env knobs:
#   OTELCOL_BUILD_JOBS=N   pass -p=N to the go commands (e.g. 1 on a busy box)
#   OTELCOL_FORCE_REBUILD=1  ignore the cache
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

config="$here/${1:-builder-config.yaml}"
script="$here/build.sh"
cache="${PROFCOL_OTELCOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol/otelcol}"
name="$(sed -n 's/^  name: *//p' "$config" | head -n 1)"
BUILDER_VERSION="$(sed -n 's#.*go\.opentelemetry\.io/collector/receiver/otlpreceiver \(v[0-9.]*\).*#\1#p' "$config")"
[[ -n "$name" && -n "$BUILDER_VERSION" ]] || {
  echo "build.sh: $config names no dist name or otlpreceiver version" >&2; exit 1; }

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
grep -q "output_path: $work\$" "$gen_config" || {
  echo "build.sh: could not rewrite output_path of $config" >&2; exit 1; }
if grep -q "tests/otelcol/stub/" "$config" && ! grep -q "=> $here/stub/" "$gen_config"; then
  echo "build.sh: could not rewrite the stub path of $config" >&2; exit 1
fi

echo "build.sh: building $name (cache miss, $hash); this takes several minutes" >&2
start=$SECONDS
"$builder" --config "$gen_config" >&2
echo "build.sh: built in $((SECONDS - start))s" >&2

rm -rf "$out"
mv "$work" "$out"
echo "$bin"
