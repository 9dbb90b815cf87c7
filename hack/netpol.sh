#!/usr/bin/env bash
# netpol.sh builds (or reuses) the NetworkPolicy enforcer of berth dev's real node and
# the real-node tests: kube-router's network policy controller (iptables and ipset),
# from the Go module proxy through the separate module in hack/netpol. It runs as a
# host process with kube-router's router and service proxy off (localenv.RealNode).
#
# The binary goes to a cache directory keyed by the kube-router version, a hash of the
# module, of this script and the Go version, so a change of any of them builds afresh
# and an unchanged checkout reuses it. The directory is printed on the last line of
# stdout.
#
#   BERTH_NETPOL_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/netpol)
#
# Usage: hack/netpol.sh          build what is missing, print the directory
#        hack/netpol.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/netpol"
pkg=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router

root=${BERTH_NETPOL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/netpol}
version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/cloudnativelabs/kube-router/v2)
gover=$(go env GOVERSION)
sum=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$root/kube-router-$version-$gover-$sum"

if [ "${1:-}" = "--print" ]; then
	[ -x "$dir/kube-router" ] || { echo "netpol: $dir is incomplete; run hack/netpol.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if [ -x "$dir/kube-router" ]; then
	echo "netpol: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
start=$(date +%s)
echo "netpol: building $pkg $version ..." >&2
# Build with the pinned module graph only; never let a build step edit go.mod.
(cd "$mod" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath" go build \
	-ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$version" \
	-o "$dir/.kube-router.tmp" "$pkg")
mv "$dir/.kube-router.tmp" "$dir/kube-router"
echo "netpol: built in $(($(date +%s) - start))s" >&2
echo "$dir"
