package localenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// This file: what a real node changes in this machine's network, and puts back.
//
// Pods reach each other and their Services through the node's bridge; kube-proxy's
// DNAT to a Service's pod is routed by this machine, so forwarding is on while the
// node runs. One iptables rule, first in FORWARD, drops whatever a pod sends that
// would leave through anything but the bridge: no pod traffic leaves this machine.

// Pods reach a few of this machine's loopback servers (the API server, and those
// ExposeToPods names) through DNAT rules first in nat PREROUTING, for TCP from the
// bridge only; route_localnet lets the kernel route what they rewrite to 127.0.0.1
// (kube-proxy sets it too, for node ports on loopback, and drops any packet to
// 127.0.0.0/8 from elsewhere that no DNAT rule made).

// sysctl files a real node sets, or whose processes do.
const (
	sysctlForward       = "/proc/sys/net/ipv4/ip_forward"
	sysctlBridgeNF      = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	sysctlRouteLocalnet = "/proc/sys/net/ipv4/conf/all/route_localnet"
)

// kubeletChains are the iptables chains the kubelet makes (in IPv4 and IPv6, in these
// tables) to notice a flush of the rules; kube-proxy --cleanup leaves them.
var kubeletChains = map[string][]string{
	"filter": {"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"},
	"nat":    {"KUBE-KUBELET-CANARY"},
	"mangle": {"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"},
}

// hostNetwork is what setUpHostNetwork changed, and what was there before.
type hostNetwork struct {
	podCIDR, bridge string
	rule            []string          // the FORWARD rule, as iptables arguments after the chain
	saved           map[string]string // sysctl file → its value before
	// existing are the kubeletChains present before the node ran ("iptables nat
	// KUBE-KUBELET-CANARY") while another kubelet runs: its, left alone. With no
	// kubelet running they are a killed node's, removed like this node's own.
	existing map[string]bool
}

func setUpHostNetwork(ctx context.Context, podCIDR, bridge string) (*hostNetwork, error) {
	h := &hostNetwork{
		podCIDR: podCIDR, bridge: bridge,
		rule: []string{"-s", podCIDR, "!", "-o", bridge, "-m", "comment", "--comment",
			"berth real node: pods reach nothing off this machine", "-j", "DROP"},
		saved:    map[string]string{},
		existing: map[string]bool{},
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for table, chains := range kubeletChains {
			for _, chain := range chains {
				if _, err := xtables(ctx, cmd, "-t", table, "-S", chain); err == nil && kubeletRunning() {
					h.existing[cmd+" "+table+" "+chain] = true
				}
			}
		}
	}
	if err := iptables(ctx, "-C", h.rule...); err != nil {
		if err := iptables(ctx, "-I", h.rule...); err != nil {
			return nil, fmt.Errorf("real node: %w", err)
		}
	}
	for _, f := range []string{sysctlForward, sysctlBridgeNF, sysctlRouteLocalnet} {
		old, err := os.ReadFile(f)
		if err != nil {
			h.restore(ctx)
			return nil, fmt.Errorf("real node: %s: %w (bridged pod traffic must pass iptables for Services to work: load br_netfilter)", f, err)
		}
		h.saved[f] = strings.TrimSpace(string(old))
		if err := os.WriteFile(f, []byte("1\n"), 0o644); err != nil { //nolint:gosec // G306: a sysctl file, not data
			h.restore(ctx)
			return nil, fmt.Errorf("real node: set %s: %w", f, err)
		}
	}
	// Rules of a node that ended without its teardown (killed); the lock says no node
	// runs now.
	h.removeExposures(ctx)
	return h, nil
}

// exposureComment starts the comment of every rule exposeToPods adds.
const exposureComment = "berth real node: pods reach 127.0.0.1:"

// exposeToPods makes the pods' TCP connections to dst reach 127.0.0.1:port instead.
func (h *hostNetwork) exposeToPods(ctx context.Context, dst netip.AddrPort, port int) error {
	args := []string{"-t", "nat", "-I", "PREROUTING", "1", "-i", h.bridge, "-s", h.podCIDR,
		"-d", dst.Addr().String(), "-p", "tcp", "--dport", strconv.Itoa(int(dst.Port())),
		"-m", "comment", "--comment", exposureComment + strconv.Itoa(port),
		"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(port)}
	if _, err := xtables(ctx, "iptables", args...); err != nil {
		return fmt.Errorf("real node: pods reaching 127.0.0.1:%d at %s: %w", port, dst, err)
	}
	return nil
}

// removeExposures deletes the rules exposeToPods added (found by their comment).
func (h *hostNetwork) removeExposures(ctx context.Context) {
	deleteCommented(ctx, "nat", "PREROUTING", exposureComment)
}

// deleteCommented deletes the rules of table's chain whose comment starts with
// comment, last first so that the numbers of the others hold.
func deleteCommented(ctx context.Context, table, chain, comment string) {
	out, err := xtables(ctx, "iptables", "-t", table, "-L", chain, "-n", "--line-numbers")
	if err != nil {
		slog.WarnContext(ctx, "real node: list iptables rules", slog.String("chain", table+"/"+chain), slog.String("error", err.Error()))
		return
	}
	var nums []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(line, "/* "+comment) {
			nums = append(nums, f[0])
		}
	}
	for _, n := range slices.Backward(nums) {
		if _, err := xtables(ctx, "iptables", "-t", table, "-D", chain, n); err != nil {
			slog.WarnContext(ctx, "real node: remove an iptables rule", slog.String("chain", table+"/"+chain), slog.String("rule", n), slog.String("error", err.Error()))
		}
	}
}

// restore puts the sysctls back, removes the FORWARD rule (every copy of it), the
// exposures' rules and the kubelet's chains that were not there before.
func (h *hostNetwork) restore(ctx context.Context) {
	h.removeKubeletChains(ctx)
	h.removeExposures(ctx)
	for f, v := range h.saved {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil { //nolint:gosec // G306: a sysctl file, not data
			slog.WarnContext(ctx, "real node teardown: restore sysctl", slog.String("file", f), slog.String("error", err.Error()))
		}
	}
	for range 10 {
		if iptables(ctx, "-C", h.rule...) != nil {
			return
		}
		if err := iptables(ctx, "-D", h.rule...); err != nil {
			slog.WarnContext(ctx, "real node teardown: remove the forwarding rule", slog.String("error", err.Error()))
			return
		}
	}
}

// iptables runs `iptables -w OP FORWARD rule...`.
func iptables(ctx context.Context, op string, rule ...string) error {
	args := append([]string{op, "FORWARD"}, rule...)
	if _, err := xtables(ctx, "iptables", args...); err != nil {
		return fmt.Errorf("iptables %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// xtables runs cmd (iptables or ip6tables) with -w and args, and returns its output;
// a failure says what it printed on stderr.
func xtables(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	//nolint:gosec // G204: iptables or ip6tables, with arguments built in this file
	out, err := exec.CommandContext(ctx, cmd, append([]string{"-w"}, args...)...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return out, fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return out, err
}

// removeKubeletChains deletes the kubelet's chains this node's kubelet made: first the
// rules of other chains that jump to them, then their rules, then the chains.
func (h *hostNetwork) removeKubeletChains(ctx context.Context) {
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for table, chains := range kubeletChains {
			for _, chain := range chains {
				if h.existing[cmd+" "+table+" "+chain] {
					continue
				}
				rules, err := xtables(ctx, cmd, "-t", table, "-S")
				if err != nil {
					continue
				}
				for line := range strings.SplitSeq(string(rules), "\n") {
					f := strings.Fields(line)
					if len(f) > 2 && f[0] == "-A" && f[1] != chain && strings.HasSuffix(line, " -j "+chain) {
						_, _ = xtables(ctx, cmd, append([]string{"-t", table, "-D"}, f[1:]...)...)
					}
				}
				_, _ = xtables(ctx, cmd, "-t", table, "-F", chain)
				_, _ = xtables(ctx, cmd, "-t", table, "-X", chain)
			}
		}
	}
}

// kubeletRunning reports whether a kubelet runs on this machine (called before the
// node starts its own).
func kubeletRunning() bool {
	for _, args := range Processes() {
		if filepath.Base(args[0]) == "kubelet" {
			return true
		}
	}
	return false
}
