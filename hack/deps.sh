#!/usr/bin/env bash
# deps.sh installs the system packages berth's tests need when they are missing:
# redis-server, jq and bc for the pricing-script tests, and what a real node runs
# (containerd, runc, the CNI plugins, iptables, iproute2, and ipset for its
# NetworkPolicy enforcer; localenv's RealNode) and the static busybox its images use, all
# Debian packages. As root it uses apt-get; otherwise it says what to install and fails.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v bc >/dev/null 2>&1 || missing+=(bc)
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v ipset >/dev/null 2>&1 || missing+=(ipset)
# The images' shell (hack/images.sh): the static busybox, not the dynamic one.
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' || missing+=(busybox-static)
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
# Debian's packages may start a system redis on the default port, or a system
# containerd; the tests start their own, on free ports and private sockets.
echo "deps: installed ${missing[*]}" >&2
