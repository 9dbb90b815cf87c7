#!/usr/bin/env bash
# tool.sh installs a pinned Go tool from the Go module proxy into a cache directory
# keyed by its version, and prints the binary's path. Reused when present.
#
#   hack/tool.sh golangci-lint
#   hack/tool.sh controller-gen
set -euo pipefail

case "${1:-}" in
golangci-lint)
	pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	version=v2.15.0
	;;
controller-gen)
	pkg=sigs.k8s.io/controller-tools/cmd/controller-gen
	version=v0.23.0
	;;
*)
	echo "usage: hack/tool.sh golangci-lint|controller-gen" >&2
	exit 2
	;;
esac
name=$1
root=${BERTH_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/tools}
dir="$root/$name-$version-$(go env GOVERSION)"
if [ ! -x "$dir/$name" ]; then
	echo "tool: installing $name $version ..." >&2
	start=$(date +%s)
	mkdir -p "$dir"
	GOBIN="$dir" GOFLAGS= go install "$pkg@$version"
	echo "tool: installed $name in $(($(date +%s) - start))s" >&2
fi
echo "$dir/$name"
