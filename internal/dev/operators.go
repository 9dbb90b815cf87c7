package dev

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
	"berth.dev/berth/internal/wait"
)

// superviseOperator runs an in-process operator (berth dev) and starts it again
// after it fails, with a growing pause, until ctx ends; each failure is logged.
func superviseOperator(ctx context.Context, name string, log *slog.Logger, run func(context.Context) error) {
	wait.Keep(ctx, restartBackoff, time.Minute, run, func(err error, pause time.Duration) {
		log.ErrorContext(ctx, "operator stopped; restarting it", slog.String("operator", name), slog.Any("error", err), slog.Duration("in", pause))
	})
}

// restartBackoff is the pause before berth dev restarts what stopped: 1 s, doubling
// to 30 s, from 1 s again after a minute's run.
var restartBackoff = wait.Backoff{First: time.Second, Longest: 30 * time.Second}

// devHostnameConfig is the hostname operator of berth dev's provider: Ingresses for
// an nginx class, not checked (the dev cluster runs no ingress controller, and its
// pods are simulated), leader election in berth-system as on a real cluster.
func devHostnameConfig(pc config.ProviderConfig, provider, chainID, kubeconfig string) hostname.Config {
	c := hostname.DefaultConfig()
	c.Provider, c.ChainID, c.Kubeconfig = provider, chainID, kubeconfig
	c.Listen = "127.0.0.1:0"
	c.IngressDomain = pc.Cluster.IngressDomain
	c.Health.Mode = hostname.HealthNone
	c.LeaderElection.LeaseDuration, c.LeaderElection.RenewDeadline, c.LeaderElection.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	return c
}

// devOperator is an operator berth dev runs in-process.
type devOperator struct {
	name string
	op   *app.Operator
	addr string // its probes, metrics (and more)
}

// InventoryName is the Inventory berth dev's inventory operator writes.
const InventoryName = "berth-dev"

// devInventoryConfig is berth dev's inventory operator: the dev storage classes,
// node-local (simulated volumes), 1Ti each, and GPUs named from the nodes' GPU
// feature discovery labels.
func devInventoryConfig(kubeconfig, listen string) inventoryop.Config {
	c := inventoryop.DefaultConfig()
	c.Name, c.Kubeconfig, c.Listen = InventoryName, kubeconfig, listen
	for _, class := range localenv.DevStorageClasses {
		c.Storage = append(c.Storage, inventory.StorageClass{Class: class, Source: inventory.SourceLocal, Size: "1Ti"})
	}
	c.LeaderElection.LeaseDuration, c.LeaderElection.RenewDeadline, c.LeaderElection.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	return c
}

// startDevOperators builds berth dev's operators for its provider, on ports chosen
// free now, and makes their Leases' namespace.
func startDevOperators(ctx context.Context, pc config.ProviderConfig, provider, chainID, kubeconfig string, log *slog.Logger) ([]devOperator, error) {
	ports, err := localenv.FreePorts(ctx, 3)
	if err != nil {
		return nil, err
	}
	listen := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	hc := devHostnameConfig(pc, provider, chainID, kubeconfig)
	hc.Listen = listen(0)
	hostOp, err := app.NewHostnameOperator(hc, log.With(slog.String("component", "hostname-operator")), nil)
	if err != nil {
		return nil, err
	}
	ipOp, err := app.NewIPOperator(devIPConfig(provider, chainID, kubeconfig, listen(1)), log.With(slog.String("component", "ip-operator")), nil)
	if err != nil {
		return nil, err
	}
	invOp, _, err := app.NewInventoryOperator(devInventoryConfig(kubeconfig, listen(2)), log.With(slog.String("component", "inventory-operator")), nil)
	if err != nil {
		return nil, err
	}
	rc, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := ensureOperatorNamespace(ctx, rc); err != nil {
		return nil, err
	}
	return []devOperator{{"hostname", hostOp, listen(0)}, {"ip", ipOp, listen(1)}, {"inventory", invOp, listen(2)}}, nil
}

// ensureOperatorNamespace makes the namespace of berth dev's operators' Leases when
// it does not exist.
func ensureOperatorNamespace(ctx context.Context, rc *rest.Config) error {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.DefaultNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", operator.DefaultNamespace, err)
	}
	return nil
}

// Berth dev's leased IPs: a MetalLB controller, its pool in a documentation range
// (addresses for show, never reachable), and the IP operator.
const (
	MetalLBNamespace = "metallb-system"
	MetalLBPool      = "berth-dev"
	// MetalLBAddresses is the pool on simulated nodes: TEST-NET-1. A real node's
	// kube-proxy routes a leased address to its pods, so with --real-node the pool is
	// the first documentation range this machine does not use (devPoolRange).
	MetalLBAddresses = "192.0.2.0/24"
)

// devPoolRange is the MetalLB pool's range: MetalLBAddresses on simulated nodes; with a
// real node the first of localenv.TestNets this machine has no address or route in.
func devPoolRange(realNode bool) (string, error) {
	if !realNode {
		return MetalLBAddresses, nil
	}
	var whys []string
	for _, p := range localenv.TestNets {
		err := localenv.CheckRangeUnused(p, "")
		if err == nil {
			return p.String(), nil
		}
		whys = append(whys, err.Error())
	}
	return "", fmt.Errorf("no documentation range is free for the leased-IP pool on this machine: %s", strings.Join(whys, "; "))
}

// devMetalLB finds MetalLB's controller, building it with hack/metallb.sh when missing
// (unless $BERTH_METALLB names a directory).
func devMetalLB(ctx context.Context, out io.Writer) (string, error) {
	return devTool(ctx, out, localenv.FindMetalLB, localenv.BuildMetalLB, localenv.MetalLBDirEnv, "MetalLB's controller", "about 2 minutes")
}

// startDevMetalLB starts MetalLB's controller on the dev cluster with its pool of pool.
func startDevMetalLB(ctx context.Context, binDir, kubeconfig, dir, pool string, log *slog.Logger) (*localenv.MetalLB, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("MetalLB: %w", err)
	}
	m, err := localenv.StartMetalLB(ctx, localenv.MetalLBOptions{Kubeconfig: kubeconfig, Dir: dir, Namespace: MetalLBNamespace, BinDir: binDir, Log: log})
	if err != nil {
		return nil, fmt.Errorf("MetalLB: %w", err)
	}
	if err := m.ApplyPool(ctx, localenv.IPAddressPool{Name: MetalLBPool, Addresses: []string{pool}, AvoidBuggyIPs: true}); err != nil {
		m.Stop()
		return nil, fmt.Errorf("MetalLB pool: %w", err)
	}
	return m, nil
}

// devIPConfig is the IP operator of berth dev's provider: the dev MetalLB pool.
func devIPConfig(provider, chainID, kubeconfig, listen string) ip.Config {
	c := ip.DefaultConfig()
	c.Provider, c.ChainID, c.Kubeconfig, c.Listen = provider, chainID, kubeconfig, listen
	c.Pool, c.MetalLBNamespace = MetalLBPool, MetalLBNamespace
	c.LeaderElection.LeaseDuration, c.LeaderElection.RenewDeadline, c.LeaderElection.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	return c
}
