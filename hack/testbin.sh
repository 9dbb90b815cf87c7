#!/usr/bin/env bash
# testbin.sh builds (or reuses) the binaries berth's tests and `berth dev` run as a real
# Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kwok, and the kubelet and kube-proxy of a real node (localenv's RealNode), all from
# the Go module proxy through the separate module in hack/tools.
#
# The binaries go to a cache directory keyed by the pinned versions, a hash of the tools
# module and the Go version, so a change of any of them builds afresh and an unchanged
# checkout reuses them. The directory is printed on the last line of stdout.
#
#   BERTH_TESTBIN_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/testbin)
#
# Usage: hack/testbin.sh          build what is missing, print the directory
#        hack/testbin.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools="$here/tools"

binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubelet kube-proxy)
declare -A pkg=(
	[etcd]=berth.dev/testbin/cmd/etcd
	[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
	[kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
	[kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
	[kwok]=sigs.k8s.io/kwok/cmd/kwok
	[kubelet]=k8s.io/kubernetes/cmd/kubelet
	[kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
)

modversion() { (cd "$tools" && go list -m -f '{{.Version}}' "$1"); }

root=${BERTH_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/testbin}
k8s=$(modversion k8s.io/kubernetes)
etcd=$(modversion go.etcd.io/etcd/server/v3)
kwok=$(modversion sigs.k8s.io/kwok)
gover=$(go env GOVERSION)
sum=$(cat "$tools/go.mod" "$tools/go.sum" "$tools/cmd/etcd/main.go" | sha256sum | cut -c1-12)
dir="$root/k8s-$k8s-etcd-$etcd-kwok-$kwok-$gover-$sum"

complete() {
	local b
	for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
	[ -d "$dir/kwok-stages" ] || return 1
}

if [ "${1:-}" = "--print" ]; then
	complete || { echo "testbin: $dir is incomplete; run hack/testbin.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if complete; then
	echo "testbin: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
# Build with the pinned module graph only; never let a build step edit go.mod.
export GOFLAGS="-mod=readonly -trimpath"
start_all=$(date +%s)
for b in "${binaries[@]}"; do
	if [ -x "$dir/$b" ]; then
		echo "testbin: $b present" >&2
		continue
	fi
	echo "testbin: building $b (${pkg[$b]}) ..." >&2
	start=$(date +%s)
	(cd "$tools" && go build -ldflags="-s -w" -o "$dir/.$b.tmp" "${pkg[$b]}")
	mv "$dir/.$b.tmp" "$dir/$b"
	echo "testbin: built $b in $(($(date +%s) - start))s" >&2
done

# kwok's stage definitions (node initialize and heartbeat, pod ready/complete/delete,
# volumes) ship in the kwok module; copy them next to the binary.
if [ ! -d "$dir/kwok-stages" ]; then
	src=$(cd "$tools" && go mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$src/kustomize/stage" ] || { echo "testbin: kwok stages not found in $src" >&2; exit 1; }
	rm -rf "$dir/.kwok-stages.tmp"
	mkdir -p "$dir/.kwok-stages.tmp"
	(cd "$src/kustomize/stage" && find . -name '*.yaml' ! -path '*/testdata/*' ! -name kustomization.yaml -exec cp --parents {} "$dir/.kwok-stages.tmp/" \;)
	chmod -R u+w "$dir/.kwok-stages.tmp"
	mv "$dir/.kwok-stages.tmp" "$dir/kwok-stages"
fi
echo "testbin: all binaries ready in $(($(date +%s) - start_all))s" >&2
echo "$dir"
