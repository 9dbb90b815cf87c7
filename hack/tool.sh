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
#
# promtool is the exception: Debian builds it (package prometheus), so it is taken from
# that package's .deb (apt-get download and unpack, no install: installing would also set
# up a Prometheus server) instead of compiled, which took 7 minutes on 2 cores. Without
# apt-get it is built from the Go module proxy like the others.
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

# debian_tool NAME PACKAGE: NAME from Debian's PACKAGE, unpacked into the cache directory
# keyed by the package's version; prints the binary's path.
debian_tool() {
	local name=$1 package=$2 version dir tmp start
	version=$(apt-cache policy "$package" | sed -n 's/^ *Candidate: //p')
	if { [ -z "$version" ] || [ "$version" = "(none)" ]; } && [ "$(id -u)" = 0 ]; then
		# A fresh machine may not have read the package lists yet.
		apt-get update -qq >&2
		version=$(apt-cache policy "$package" | sed -n 's/^ *Candidate: //p')
	fi
	if [ -z "$version" ] || [ "$version" = "(none)" ]; then
		echo "tool: Debian has no candidate for package $package (apt-get update?)" >&2
		return 1
	fi
	dir="$root/$name-debian-${version//[^A-Za-z0-9.+-]/_}"
	if [ ! -x "$dir/$name" ]; then
		echo "tool: unpacking $name from Debian's $package $version ..." >&2
		start=$(date +%s)
		tmp=$(mktemp -d)
		# apt-get download writes to the working directory; as root it warns that the
		# download is unsandboxed (the directory is not the _apt user's), which is harmless.
		(cd "$tmp" && apt-get download -qq "$package=$version" 2>&1 | grep -v 'unsandboxed' >&2 || true)
		local deb
		deb=$(ls "$tmp"/*.deb 2>/dev/null | head -1)
		[ -n "$deb" ] || { echo "tool: apt-get download $package=$version fetched nothing" >&2; rm -rf "$tmp"; return 1; }
		dpkg-deb -x "$deb" "$tmp/root"
		mkdir -p "$dir"
		mv "$tmp/root/usr/bin/$name" "$dir/.$name.tmp"
		mv "$dir/.$name.tmp" "$dir/$name"
		rm -rf "$tmp"
		echo "tool: unpacked $name in $(($(date +%s) - start))s" >&2
	fi
	echo "$dir/$name"
}
if [ "$name" = promtool ] && command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
	debian_tool promtool prometheus
	exit
fi

dir="$root/$name-$version-$(go env GOVERSION)"
if [ ! -x "$dir/$name" ]; then
	echo "tool: installing $name $version ..." >&2
	start=$(date +%s)
	mkdir -p "$dir"
	GOBIN="$dir" GOFLAGS= go install "$pkg@$version"
	echo "tool: installed $name in $(($(date +%s) - start))s" >&2
fi
echo "$dir/$name"
