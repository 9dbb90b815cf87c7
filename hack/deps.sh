#!/usr/bin/env bash
# deps.sh installs the system packages berth's tests need when they are missing:
# redis-server, and jq and bc for the pricing-script tests (Debian packages). As root
# it uses apt-get; otherwise it says what to install and fails.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v bc >/dev/null 2>&1 || missing+=(bc)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${missing[*]}; install with: sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
	exit 1
fi
echo "deps: installing ${missing[*]} with apt-get ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's package may start a system redis on the default port; the tests start their
# own on free ports and need none running.
echo "deps: installed ${missing[*]}" >&2
