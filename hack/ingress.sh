#!/usr/bin/env bash
# ingress.sh builds (or reuses) the ingress controller berth's routing tests run against
# the test API server: Traefik (its Kubernetes Ingress, Gateway API and CRD providers),
# from the Go module proxy through the separate module in hack/ingress. Next to the
# binary it copies the CustomResourceDefinitions those providers watch: the Gateway API's
# standard channel (crds/gateway-api) and Traefik's own (crds/traefik), both taken from
# the pinned modules.
#
# The files go to a cache directory keyed by the Traefik version, a hash of the module
# and the Go version, so a change of any of them builds afresh and an unchanged checkout
# reuses them. The directory is printed on the last line of stdout.
#
#   BERTH_INGRESSCTL_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/ingressctl)
#
# Usage: hack/ingress.sh          build what is missing, print the directory
#        hack/ingress.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/ingress"
pkg=github.com/traefik/traefik/v3/cmd/traefik

modversion() { (cd "$mod" && go list -m -f '{{.Version}}' "$1"); }
moddir() { (cd "$mod" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'); }

root=${BERTH_INGRESSCTL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/ingressctl}
traefik=$(modversion github.com/traefik/traefik/v3)
gateway=$(modversion sigs.k8s.io/gateway-api)
gover=$(go env GOVERSION)
sum=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
dir="$root/traefik-$traefik-gateway-api-$gateway-$gover-$sum"

complete() {
	[ -x "$dir/traefik" ] && [ -d "$dir/crds/gateway-api" ] && [ -d "$dir/crds/traefik" ]
}

if [ "${1:-}" = "--print" ]; then
	complete || { echo "ingress: $dir is incomplete; run hack/ingress.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if complete; then
	echo "ingress: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
# Build with the pinned module graph only; never let a build step edit go.mod.
export GOFLAGS="-mod=readonly -trimpath"
if [ ! -x "$dir/traefik" ]; then
	echo "ingress: building traefik $traefik ($pkg) ..." >&2
	start=$(date +%s)
	(cd "$mod" && go build -ldflags="-s -w" -o "$dir/.traefik.tmp" "$pkg")
	mv "$dir/.traefik.tmp" "$dir/traefik"
	echo "ingress: built traefik in $(($(date +%s) - start))s" >&2
fi

# The CRDs, each set copied whole into a temporary directory and renamed into place.
copy_crds() { # name, source files...
	local name=$1
	shift
	rm -rf "$dir/crds/.$name.tmp"
	mkdir -p "$dir/crds/.$name.tmp"
	cp "$@" "$dir/crds/.$name.tmp/"
	chmod -R u+w "$dir/crds/.$name.tmp"
	mv "$dir/crds/.$name.tmp" "$dir/crds/$name"
}
if [ ! -d "$dir/crds/gateway-api" ]; then
	src=$(moddir sigs.k8s.io/gateway-api)/config/crd/standard
	[ -d "$src" ] || { echo "ingress: Gateway API CRDs not found in $src" >&2; exit 1; }
	copy_crds gateway-api "$src"/*.yaml
fi
if [ ! -d "$dir/crds/traefik" ]; then
	src=$(moddir github.com/traefik/traefik/v3)/docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml
	[ -f "$src" ] || { echo "ingress: Traefik CRDs not found at $src" >&2; exit 1; }
	copy_crds traefik "$src"
fi
echo "$dir"
