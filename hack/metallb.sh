#!/usr/bin/env bash
# metallb.sh builds (or reuses) the load-balancer IP allocator berth's IP operator tests
# run against the test API server: MetalLB's controller (not its speaker: nothing
# announces the addresses), from the Go module proxy through the separate module in
# hack/metallb. Next to the binary it copies MetalLB's CustomResourceDefinitions
# (crds/: IPAddressPool, L2Advertisement, ConfigurationState, ...) from the pinned module,
# without the conversion webhook MetalLB patches into BGPPeer's.
#
# One line of the controller is changed: its metrics server listens on 127.0.0.1 instead
# of on every interface (upstream binds ":PORT", --port, and has no flag for the host).
#
# The files go to a cache directory keyed by the MetalLB version, a hash of the module,
# of this script and the Go version, so a change of any of them builds afresh and an
# unchanged checkout reuses them. The directory is printed on the last line of stdout.
#
#   BERTH_METALLB_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/metallb)
#
# Usage: hack/metallb.sh          build what is missing, print the directory
#        hack/metallb.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/metallb"
pkg=go.universe.tf/metallb/controller

modversion() { (cd "$mod" && go list -m -f '{{.Version}}' "$1"); }
moddir() { (cd "$mod" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'); }

root=${BERTH_METALLB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/metallb}
metallb=$(modversion go.universe.tf/metallb)
gover=$(go env GOVERSION)
sum=$(cat "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$root/metallb-$metallb-$gover-$sum"

complete() {
	[ -x "$dir/controller" ] && [ -d "$dir/crds" ]
}

if [ "${1:-}" = "--print" ]; then
	complete || { echo "metallb: $dir is incomplete; run hack/metallb.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if complete; then
	echo "metallb: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
src=$(moddir go.universe.tf/metallb)
[ -d "$src/controller" ] || { echo "metallb: module source not found in $src" >&2; exit 1; }

# Build with the pinned module graph only; never let a build step edit go.mod.
export GOFLAGS="-mod=readonly -trimpath"
if [ ! -x "$dir/controller" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# The module cache is read-only to overlays, so the build uses a copy of MetalLB's
	# source (what the controller compiles from), patched, through a replace directive
	# in a copy of hack/metallb's go.mod (-modfile): the pinned go.mod stays untouched.
	mkdir "$tmp/metallb"
	cp -r "$src/go.mod" "$src/go.sum" "$src/api" "$src/internal" "$src/controller" "$tmp/metallb/"
	chmod -R u+w "$tmp/metallb"
	main="$tmp/metallb/controller/main.go"
	grep -qF 'MetricsPort: *port,' "$main" || { echo "metallb: $main no longer sets the metrics port as expected; update hack/metallb.sh" >&2; exit 1; }
	sed -i 's|MetricsPort: \*port,|MetricsHost: "127.0.0.1", MetricsPort: *port,|' "$main"
	grep -qF 'MetricsHost: "127.0.0.1"' "$main" || { echo "metallb: patching $main failed" >&2; exit 1; }
	cp "$mod/go.mod" "$mod/go.sum" "$tmp/"
	go mod edit -modfile="$tmp/go.mod" -replace go.universe.tf/metallb="$tmp/metallb"
	echo "metallb: building the MetalLB $metallb controller ($pkg) ..." >&2
	start=$(date +%s)
	(cd "$mod" && go build -modfile="$tmp/go.mod" -ldflags="-s -w" -o "$dir/.controller.tmp" "$pkg")
	mv "$dir/.controller.tmp" "$dir/controller"
	echo "metallb: built the controller in $(($(date +%s) - start))s" >&2
fi

# The CRDs, copied whole into a temporary directory and renamed into place.
if [ ! -d "$dir/crds" ]; then
	crds="$src/config/crd/bases"
	[ -f "$crds/metallb.io_ipaddresspools.yaml" ] || { echo "metallb: CRDs not found in $crds" >&2; exit 1; }
	rm -rf "$dir/.crds.tmp"
	mkdir -p "$dir/.crds.tmp"
	cp "$crds"/*.yaml "$dir/.crds.tmp/"
	chmod -R u+w "$dir/.crds.tmp"
	mv "$dir/.crds.tmp" "$dir/crds"
fi
echo "$dir"
