#!/usr/bin/env bash
# dns.sh builds (or reuses) the cluster DNS of berth dev's real node and the real-node
# tests: CoreDNS with its kubernetes plugin and no forwarding, from the Go module proxy
# through the separate module in hack/dns (its main.go picks the plugins). It runs as a
# pod in kube-system (localenv.RealNode), the kube-dns Service in front of it.
#
# The binary goes to a cache directory keyed by the CoreDNS version, a hash of the
# module, of this script and the Go version, so a change of any of them builds afresh
# and an unchanged checkout reuses it. The directory is printed on the last line of
# stdout.
#
#   BERTH_DNS_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/dns)
#
# Usage: hack/dns.sh          build what is missing, print the directory
#        hack/dns.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/dns"

root=${BERTH_DNS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/dns}
version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/coredns/coredns)
gover=$(go env GOVERSION)
sum=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/main.go" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$root/coredns-$version-$gover-$sum"

if [ "${1:-}" = "--print" ]; then
	[ -x "$dir/coredns" ] || { echo "dns: $dir is incomplete; run hack/dns.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if [ -x "$dir/coredns" ]; then
	echo "dns: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
start=$(date +%s)
echo "dns: building CoreDNS $version ..." >&2
# Build with the pinned module graph only; never let a build step edit go.mod. Static:
# the image it runs in has nothing else.
(cd "$mod" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath" go build \
	-ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=berth-$version" \
	-o "$dir/.coredns.tmp" .)
mv "$dir/.coredns.tmp" "$dir/coredns"
echo "dns: built in $(($(date +%s) - start))s" >&2
echo "$dir"
