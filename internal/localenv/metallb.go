package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/kubeconfig"
	"berth.dev/berth/internal/metallb"
)

// MetalLBDirEnv names the environment variable holding the directory hack/metallb.sh
// builds: MetalLB's controller and, under crds/, MetalLB's CustomResourceDefinitions.
// `make test` sets it.
const MetalLBDirEnv = "BERTH_METALLB"

const (
	// MetalLBAddressPoolAnnotation on a Service names the IPAddressPool MetalLB takes
	// its address from.
	MetalLBAddressPoolAnnotation = "metallb.io/address-pool"
	// MetalLBAllowSharedIPAnnotation on a Service is its sharing key: Services with the
	// same key (in any namespace) and no port in common may get the same address.
	MetalLBAllowSharedIPAnnotation = "metallb.io/allow-shared-ip"
	// MetalLBAllocatedFromPoolAnnotation is what MetalLB writes on a Service it gave an
	// address: the name of the pool the address came from.
	MetalLBAllocatedFromPoolAnnotation = "metallb.io/ip-allocated-from-pool"
)

// TestNets are the only ranges a pool made here may hand out addresses from (RFC 5737's
// documentation ranges, TEST-NET-1 to -3): the addresses are never announced (no
// speaker runs) and never contacted. A machine may use one of them itself (these
// machines' interface is on TEST-NET-1): with a real node, whose kube-proxy routes a
// LoadBalancer address to its pods, choose one the machine does not use
// (CheckRangeUnused).
var TestNets = []netip.Prefix{
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
}

// FindMetalLB returns the directory holding MetalLB's controller: $BERTH_METALLB when
// set, otherwise the cache directory hack/metallb.sh reports for the source tree
// containing the working directory (without building anything).
func FindMetalLB(ctx context.Context) (string, error) {
	return findBuilt(ctx, MetalLBDirEnv, "metallb.sh", "controller", "crds")
}

// MetalLBOptions configures StartMetalLB.
type MetalLBOptions struct {
	// Kubeconfig is the path of the kubeconfig the controller watches the cluster
	// with (required). Give one with its certificates inline (WriteFlatKubeconfig).
	Kubeconfig string
	// Dir holds the controller's log (required).
	Dir string
	// Namespace holds the controller's IPAddressPools (required): it reads pools from
	// this namespace only. StartMetalLB creates it when missing.
	Namespace string
	// LoadBalancerClass, when set, limits the controller to Services whose
	// spec.loadBalancerClass is this; empty: to Services without a class. Controllers
	// sharing a cluster must not see the same Services: one that has no pool for a
	// Service clears the address another gave it.
	LoadBalancerClass string
	// BinDir holds what hack/metallb.sh builds; empty: FindMetalLB.
	BinDir string
	// StartTimeout bounds the start-up (default 1 minute).
	StartTimeout time.Duration
	// Restart says how the controller is restarted, with the same arguments, when it
	// exits by itself (RestartPolicy's defaults; Max < 0: never, Failed is closed).
	Restart RestartPolicy
	// Log receives its exits and restarts (nil: discarded).
	Log *slog.Logger
}

// MetalLB is a running MetalLB controller: it gives Services of type LoadBalancer
// addresses from the IPAddressPools in its namespace, writing them to
// status.loadBalancer.ingress, and reports each pool's use in the pool's status. No
// speaker runs: nothing announces the addresses.
type MetalLB struct {
	// Namespace holds the controller's IPAddressPools.
	Namespace string
	// LoadBalancerClass is the class of the Services it serves; empty: those without.
	LoadBalancerClass string
	// MetricsURL is the controller's Prometheus endpoint.
	MetricsURL string
	dc         dynamic.Interface
	// The controller's process: Failed, Err, Stop (which leaves the CRDs and pools),
	// LogPath, Restarts.
	*Service
}

// StartMetalLB installs MetalLB's CRDs and the namespace of its pools, starts the
// controller (metrics on a free loopback port; no webhooks, no certificates, no
// memberlist secret) and returns once it has loaded its pools, which an empty
// namespace also is. Addresses appear on Services a moment after the Services and
// pools do: poll for them. The caller must call Stop.
func StartMetalLB(ctx context.Context, opts MetalLBOptions) (*MetalLB, error) {
	if opts.Kubeconfig == "" || opts.Dir == "" || opts.Namespace == "" {
		return nil, errors.New("metallb: Kubeconfig, Dir and Namespace are required")
	}
	ctx, cancel, err := startup(ctx, opts.StartTimeout, &opts.BinDir, FindMetalLB)
	if err != nil {
		return nil, err
	}
	defer cancel()
	cfg, err := kubeconfig.Load(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("metallb: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metallb: client: %w", err)
	}
	if err := installMetalLBResources(ctx, dc, opts); err != nil {
		return nil, err
	}
	return onFreePorts(func() (*MetalLB, error) { return startMetalLB(ctx, dc, opts) }, nil)
}

func startMetalLB(ctx context.Context, dc dynamic.Interface, opts MetalLBOptions) (*MetalLB, error) {
	ports, err := FreePorts(ctx, 1)
	if err != nil {
		return nil, err
	}
	m := &MetalLB{
		Namespace:         opts.Namespace,
		LoadBalancerClass: opts.LoadBalancerClass,
		MetricsURL:        "http://" + hostPort(ports[0]) + "/metrics",
		dc:                dc,
	}
	args := []string{
		"--namespace=" + opts.Namespace,
		// hack/metallb.sh makes the metrics server listen on 127.0.0.1.
		"--port=" + strconv.Itoa(ports[0]),
		// Out of cluster: no admission webhooks, hence no serving certificates.
		"--webhook-mode=disabled",
		"--disable-cert-rotation=true",
		"--log-level=info",
	}
	if opts.LoadBalancerClass != "" {
		args = append(args, "--lb-class="+opts.LoadBalancerClass)
	}
	m.Service, err = StartService(ServiceOptions{Name: "metallb-controller", Bin: filepath.Join(opts.BinDir, "controller"), Args: args,
		// Not in-cluster, whatever this environment says: the kubeconfig's cluster.
		Env:    []string{"KUBECONFIG=" + opts.Kubeconfig, "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="},
		LogDir: opts.Dir, Grace: 5 * time.Second, Restart: opts.Restart, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	// Ready once the pools of its namespace (none is fine) are loaded: the controller
	// then has its caches and serves Services.
	if err := waitFor(ctx, "metallb controller config loaded", 50*time.Millisecond, m.exited,
		metricIs(client, m.MetricsURL, "metallb_k8s_client_config_loaded_bool", "1")); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

// metricIs checks that the Prometheus text at url has a sample of metric (without
// labels) with value want.
func metricIs(c *http.Client, url, metric, want string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		resp, err := getOK(ctx, c, url)
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err != nil {
			return false, err
		}
		for line := range strings.Lines(string(b)) {
			if name, value, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == metric {
				return value == want, nil
			}
		}
		return false, nil
	}
}

// IPAddressPool is a MetalLB IPAddressPool in the controller's namespace.
type IPAddressPool struct {
	// Name of the pool (required).
	Name string
	// Addresses are CIDRs ("192.0.2.0/28") or ranges ("192.0.2.1-192.0.2.5"), every
	// one inside TEST-NET-1, 192.0.2.0/24 (at least one is required).
	Addresses []string
	// Manual sets spec.autoAssign false: only Services naming the pool
	// (MetalLBAddressPoolAnnotation) get its addresses.
	Manual bool
	// AvoidBuggyIPs sets spec.avoidBuggyIPs: MetalLB never hands out addresses ending
	// in .0 or .255.
	AvoidBuggyIPs bool
}

// IPAddressPoolStatus is what the controller reports in an IPAddressPool's status.
type IPAddressPoolStatus struct {
	AssignedIPv4, AvailableIPv4, AssignedIPv6, AvailableIPv6 int64
}

// ApplyPool creates or replaces (server-side apply) the pool in the controller's
// namespace. Addresses outside TestNets are refused.
func (m *MetalLB) ApplyPool(ctx context.Context, p IPAddressPool) error {
	if p.Name == "" || len(p.Addresses) == 0 {
		return errors.New("metallb pool: Name and Addresses are required")
	}
	addrs := make([]any, 0, len(p.Addresses))
	for _, a := range p.Addresses {
		if err := inTestNet(a); err != nil {
			return fmt.Errorf("metallb pool %s: %w", p.Name, err)
		}
		addrs = append(addrs, a)
	}
	pool := map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": p.Name, "namespace": m.Namespace},
		"spec": map[string]any{
			"addresses":     addrs,
			"autoAssign":    !p.Manual,
			"avoidBuggyIPs": p.AvoidBuggyIPs,
		},
	}
	return apply(ctx, m.dc, metallb.PoolResource, ingressFieldManager, pool)
}

// DeletePool deletes the pool; a pool that does not exist is not an error.
func (m *MetalLB) DeletePool(ctx context.Context, name string) error {
	err := m.dc.Resource(metallb.PoolResource).Namespace(m.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete IPAddressPool %s/%s: %w", m.Namespace, name, err)
	}
	return nil
}

// PoolStatus reads the pool's status as the controller last wrote it (zero before it
// has).
func (m *MetalLB) PoolStatus(ctx context.Context, name string) (IPAddressPoolStatus, error) {
	u, err := m.dc.Resource(metallb.PoolResource).Namespace(m.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return IPAddressPoolStatus{}, fmt.Errorf("get IPAddressPool %s/%s: %w", m.Namespace, name, err)
	}
	field := func(f string) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, "status", f)
		return v
	}
	return IPAddressPoolStatus{
		AssignedIPv4: field("assignedIPv4"), AvailableIPv4: field("availableIPv4"),
		AssignedIPv6: field("assignedIPv6"), AvailableIPv6: field("availableIPv6"),
	}, nil
}

// inTestNet checks that a MetalLB address entry (CIDR or from-to range) lies inside
// one of TestNets.
func inTestNet(entry string) error {
	within := func(in func(netip.Prefix) bool) bool { return slices.ContainsFunc(TestNets, in) }
	if from, to, ok := strings.Cut(entry, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(from))
		b, err2 := netip.ParseAddr(strings.TrimSpace(to))
		if err1 != nil || err2 != nil || !within(func(n netip.Prefix) bool { return n.Contains(a) && n.Contains(b) }) {
			return fmt.Errorf("address range %q is not inside one of %v", entry, TestNets)
		}
		return nil
	}
	p, err := netip.ParsePrefix(entry)
	if err != nil || !p.Addr().Is4() || !within(func(n netip.Prefix) bool { return p.Bits() >= n.Bits() && n.Contains(p.Addr()) }) {
		return fmt.Errorf("address %q is not a CIDR inside one of %v", entry, TestNets)
	}
	return nil
}

var namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// installMetalLBResources applies MetalLB's CRDs and the namespace of its pools.
func installMetalLBResources(ctx context.Context, dc dynamic.Interface, opts MetalLBOptions) error {
	crds, err := applyManifestDir(ctx, dc, filepath.Join(opts.BinDir, "crds"))
	if err != nil {
		return err
	}
	for _, name := range crds {
		if err := waitCRDEstablished(ctx, dc, name); err != nil {
			return err
		}
	}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": opts.Namespace}}
	return apply(ctx, dc, namespaceGVR, ingressFieldManager, ns)
}

// BuildMetalLB runs hack/metallb.sh, writing its progress to progress, and returns
// the directory FindMetalLB then finds.
func BuildMetalLB(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "metallb.sh", "MetalLB's controller", progress); err != nil {
		return "", err
	}
	return FindMetalLB(ctx)
}
