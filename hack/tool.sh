#!/usr/bin/env bash
# tool.sh installs a pinned Go tool from the Go module proxy into a cache directory
# keyed by its version, and prints the binary's path. Reused when present.
#
#   hack/tool.sh golangci-lint
#   hack/tool.sh controller-gen
#   hack/tool.sh protoc-gen-go
#   hack/tool.sh protoc-gen-go-grpc
#   hack/tool.sh helm
#   hack/tool.sh promtool
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
protoc-gen-go)
	pkg=google.golang.org/protobuf/cmd/protoc-gen-go
	version=v1.36.12
	;;
protoc-gen-go-grpc)
	pkg=google.golang.org/grpc/cmd/protoc-gen-go-grpc
	version=v1.5.1
	;;
helm)
	pkg=helm.sh/helm/v3/cmd/helm
	version=v3.22.0
	;;
promtool)
	pkg=github.com/prometheus/prometheus/cmd/promtool
	version=v0.316.0
	;;
*)
	echo "usage: hack/tool.sh golangci-lint|controller-gen|protoc-gen-go|protoc-gen-go-grpc|helm|promtool" >&2
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
