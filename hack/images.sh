#!/usr/bin/env bash
# images.sh builds (or reuses) the programs of the workload images berth dev's real node
# imports (internal/localenv/image.go assembles the images from them): echo, the test
# workload in examples/images/echo, built statically, and a copy of Debian's statically
# linked busybox (package busybox-static) for a shell, coreutils and the pod sandbox.
#
# The files go to a cache directory keyed by a hash of echo's main.go and the Go
# version, so a change of either builds afresh and an unchanged checkout reuses them.
# The directory is printed on the last line of stdout.
#
#   BERTH_IMAGES_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/berth/images)
#
# Usage: hack/images.sh          build what is missing, print the directory
#        hack/images.sh --print  print the directory only (exit 1 if incomplete)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/../examples/images/echo"

root=${BERTH_IMAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/images}
sum=$({ cat "$src/main.go"; go env GOVERSION; } | sha256sum | cut -c1-12)
dir="$root/echo-$sum"

complete() {
	[ -x "$dir/echo" ] && [ -x "$dir/busybox" ]
}

if [ "${1:-}" = "--print" ]; then
	complete || { echo "images: $dir is incomplete; run hack/images.sh" >&2; exit 1; }
	echo "$dir"
	exit 0
fi

if complete; then
	echo "images: reusing $dir" >&2
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
if [ ! -x "$dir/echo" ]; then
	echo "images: building echo ..." >&2
	start=$(date +%s)
	# Build with the pinned module graph only; never let a build step edit go.mod.
	(cd "$src" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-mod=readonly \
		go build -trimpath -ldflags='-s -w' -o "$dir/.echo.tmp" .)
	mv "$dir/.echo.tmp" "$dir/echo"
	echo "images: built echo in $(($(date +%s) - start))s" >&2
fi

# Debian's package busybox (not -static) also installs /bin/busybox, linked dynamically,
# which cannot run in an image without a libc; so ask dpkg for the static package.
busybox_static() {
	dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' &&
		[ -x /bin/busybox ]
}
if [ ! -x "$dir/busybox" ]; then
	if ! busybox_static; then
		if [ "$(id -u)" != 0 ]; then
			echo "images: /bin/busybox from Debian's busybox-static is missing; install it: sudo apt-get install busybox-static" >&2
			exit 1
		fi
		echo "images: installing busybox-static ..." >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static >&2
	fi
	cp /bin/busybox "$dir/.busybox.tmp"
	mv "$dir/.busybox.tmp" "$dir/busybox"
	echo "images: copied busybox ($(dpkg-query -W -f='${Version}' busybox-static))" >&2
fi
echo "$dir"
