package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// This file: NetworkPolicy on a real node. kube-router's network policy controller
// (v2.1.0, hack/netpol.sh; its router and service proxy off, and with them the code of
// its published advisories) runs as a host process: it keeps iptables chains and ipsets
// for the node's pods from the cluster's NetworkPolicies, and REJECTs what they do not
// allow, pod to pod on the bridge too (bridge-nf-call-iptables). What it does not do
// itself, the node does: it leaves its rules behind on exit (its --cleanup-config is
// broken in v2.1.0), so Stop removes them by their names.

// NetPolDirEnv names the environment variable holding hack/netpol.sh's directory.
const NetPolDirEnv = "BERTH_NETPOL"

// FindNetworkPolicy returns the directory with kube-router: $BERTH_NETPOL when set,
// otherwise the cache directory hack/netpol.sh reports (without building anything).
func FindNetworkPolicy(ctx context.Context) (string, error) {
	return findBuilt(ctx, NetPolDirEnv, "netpol.sh", "kube-router")
}

// BuildNetworkPolicy builds (or reuses) kube-router with hack/netpol.sh, its progress
// to progress, and returns the directory FindNetworkPolicy then finds.
func BuildNetworkPolicy(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "netpol.sh", "the NetworkPolicy enforcer", progress); err != nil {
		return "", err
	}
	return FindNetworkPolicy(ctx)
}

// kube-router's names: the chains and ipsets it makes, and the comment of its jumps
// from the built-in chains.
var (
	netpolChainPrefixes = []string{"KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-"}
	netpolSetPrefixes   = []string{"KUBE-SRC-", "KUBE-DST-"}
)

const netpolJumpComment = "kube-router netpol"

// startNetworkPolicy starts kube-router's policy controller for the node, as the
// admin (its reads: nodes, pods, namespaces, NetworkPolicies, Services, endpoints).
func (n *RealNode) startNetworkPolicy(ctx context.Context) error {
	n.log.InfoContext(ctx, "starting the NetworkPolicy controller (kube-router)")
	p, err := startProcessEnv("kube-router", n.files.logs, filepath.Join(n.opts.NetPolDir, "kube-router"),
		[]string{"NODE_NAME=" + n.Name},
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--run-loadbalancer=false",
		"--enable-cni=false", "--enable-pod-egress=false",
		"--kubeconfig="+n.cp.KubeconfigPath, "--hostname-override="+n.Name,
		"--service-cluster-ip-range="+ServiceCIDR,
		// No listener: its health port would be on every address, metrics are off.
		"--health-port=0", "--metrics-port=0",
		"--v=1")
	if err != nil {
		return err
	}
	n.adopt(p)
	// Ready once it has made its chains: until then pods are not policed.
	return waitFor(ctx, "kube-router's chains", 200*time.Millisecond, anyExited(p), func(ctx context.Context) (bool, error) {
		out, err := xtables(ctx, "iptables", "-S", "FORWARD")
		return err == nil && strings.Contains(string(out), "KUBE-ROUTER-FORWARD"), nil
	})
}

// removeNetworkPolicy deletes what kube-router made: the jumps to its chains from the
// built-in ones, its chains, then its ipsets.
func removeNetworkPolicy(ctx context.Context) {
	rules, err := xtables(ctx, "iptables", "-S")
	if err != nil {
		slog.WarnContext(ctx, "real node teardown: list iptables rules", slog.String("error", err.Error()))
		return
	}
	var chains []string
	for line := range strings.SplitSeq(string(rules), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "-N" && hasPrefix(f[1], netpolChainPrefixes):
			chains = append(chains, f[1])
		case len(f) > 2 && f[0] == "-A" && !hasPrefix(f[1], netpolChainPrefixes) && strings.Contains(line, netpolJumpComment):
			// A jump from a built-in chain.
			deleteCommented(ctx, "filter", f[1], netpolJumpComment)
		}
	}
	for _, c := range chains {
		_, _ = xtables(ctx, "iptables", "-F", c)
	}
	for _, c := range chains {
		if _, err := xtables(ctx, "iptables", "-X", c); err != nil {
			slog.WarnContext(ctx, "real node teardown: delete kube-router's chain", slog.String("chain", c), slog.String("error", err.Error()))
		}
	}
	out, err := runOutput(ctx, "ipset", "list", "-n")
	if err != nil {
		return
	}
	for name := range strings.FieldsSeq(out) {
		if hasPrefix(name, netpolSetPrefixes) {
			if _, err := runOutput(ctx, "ipset", "destroy", name); err != nil {
				slog.WarnContext(ctx, "real node teardown: destroy kube-router's ipset", slog.String("set", name), slog.String("error", err.Error()))
			}
		}
	}
}

func hasPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// runOutput runs ipset with args and returns its output; a failure says what it
// printed on stderr.
func runOutput(ctx context.Context, name string, args ...string) (string, error) {
	//nolint:gosec // G204: ipset, with arguments built in this file
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}
