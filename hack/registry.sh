#!/usr/bin/env bash
# registry.sh builds (or reuses) the OCI image registry berth dev's real node and the
# real-node tests push to and pull from on 127.0.0.1: distribution's registry, from the
# Go module proxy through the separate module in hack/registry.
#
# The binary goes to a cache directory keyed by the distribution version, a hash of the
# module, of this script and the Go version, so a change of any of them builds afresh
# and an unchanged checkout reuses it. The directory is printed on the last line of
# stdout.
#
#   BERTH_REGISTRY_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/registry)
#
# Usage: hack/registry.sh          build what is missing, print the directory
#        hack/registry.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/registry"
pkg=github.com/distribution/distribution/v3/cmd/registry

root=${BERTH_REGISTRY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/registry}
version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/distribution/distribution/v3)
gover=$(go env GOVERSION)
sum=$(cat "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$root/registry-$version-$gover-$sum"

if [ "${1:-}" = "--print" ]; then
	[ -x "$dir/registry" ] || { echo "registry: $dir is incomplete; run hack/registry.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if [ -x "$dir/registry" ]; then
	echo "registry: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
start=$(date +%s)
echo "registry: building $pkg $version ..." >&2
# Build with the pinned module graph only; never let a build step edit go.mod.
(cd "$mod" && GOFLAGS="-mod=readonly -trimpath" go build -ldflags="-s -w" -o "$dir/.registry.tmp" "$pkg")
mv "$dir/.registry.tmp" "$dir/registry"
echo "registry: built in $(($(date +%s) - start))s" >&2
echo "$dir"
