package dev

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/yaml"
)

// IngressDomain is where the dev provider names services' HTTP ports (names under
// localhost resolve to this machine; nothing answers there: kwok runs no containers).
const IngressDomain = "ingress.localhost"

// Dev key names: the funded accounts of a new dev chain.
const (
	DevTenantKey   = "tenant"
	DevProviderKey = "provider"
)

// devAttributes are what the dev provider registers without a --config file (and so
// what SDL placement requirements can ask for): where it is, and the capabilities of
// its cluster.
func devAttributes(cfg Config) (market.Attributes, error) {
	cfg.ProviderConfig = ""
	pc, err := devProviderConfig(cfg)
	if err != nil {
		return nil, err
	}
	return pc.Registered()
}

// ScaleRates are berth dev's prices: a tenth of the defaults, so that every file of
// the SDL corpus, the cheapest asking 2 uact a block for a CPU and 1.5 GiB, gets a bid
// as written. ACT and USDC at par with AKT (a dev chain has no market).
func ScaleRates() config.ScaleConfig {
	dec := market.MustParseDec
	s := config.ScaleConfig{
		Denom: ledger.DefaultDenom, CPU: dec("0.001"), Memory: dec("0.0002"), Endpoint: dec("0.1"), LeasedIP: dec("1"),
		Exchange: map[string]market.Dec{ledger.DenomACT: dec("1"), ledger.DenomUSDC: dec("1")},
		Storage:  map[string]market.Dec{bidengine.ClassEphemeral: dec("0.00002"), bidengine.ClassRAM: dec("0.0002"), market.StorageClassDefault: dec("0.00003")},
		GPU:      map[string]market.Dec{"*": dec("10")},
	}
	for _, class := range localenv.DevStorageClasses {
		s.Storage[class] = dec("0.00003")
	}
	return s
}

// Auditors are the auditors whose signature on the dev provider's attributes a new
// dev chain's genesis carries, so that tenants' files asking for them (nearly every
// published SDL names Akash's auditor in signed_by) get bids as written: Akash's
// auditor, and the two other auditors the SDL corpus names. Nobody holds their keys on
// a dev chain; genesis simply says they signed.
var Auditors = []string{
	"akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63",
	"akash18qa2a2ltfyvkyj0ggj3hkvuj6twzyumuaru9s4",
	"akash1vz375dkt0c60annyp6mkzeejfq0qpyevhseu05",
}

// devLocks are the home's locks berth dev holds while it runs: the ledger node's and
// the provider's.
type devLocks struct{ node, provider *node.HomeLock }

func (l devLocks) release() {
	l.provider.Release()
	l.node.Release()
}

// lockDevHome takes the home's locks before berth dev writes anything into it (a
// --reset of a directory that is not a berth home is refused before that too), making
// the home when it does not exist.
func lockDevHome(cfg Config) (devLocks, error) {
	var l devLocks
	if cfg.Reset {
		if _, err := checkResettable(cfg.Home); err != nil {
			return l, err
		}
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return l, fmt.Errorf("--home: %w", err)
	}
	var err error
	if l.node, err = node.LockHome(cfg.Home, node.PartNode); err != nil {
		return l, err
	}
	if l.provider, err = node.LockHome(cfg.Home, node.PartProvider); err != nil {
		l.node.Release()
		return devLocks{}, err
	}
	return l, nil
}

// checkResettable refuses to reset a directory that does not look like a dev home (a
// berth node home, or empty but for the home's lock files) so that a mistyped --home
// cannot delete unrelated files. It returns what the home holds (nothing when it does
// not exist).
func checkResettable(home string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(home)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("--reset: %w", err)
	}
	for _, e := range entries {
		if !node.IsLockFile(e.Name()) && !node.HasGenesis(home) {
			return nil, fmt.Errorf("--reset: %s is not a berth home (no config/genesis.json); not removing it", home)
		}
	}
	return entries, nil
}

// resetDevHome empties a dev home, whose locks the caller holds: everything goes but
// the lock files (removing them would let another process lock the home while this
// one runs it).
func resetDevHome(home string) error {
	entries, err := checkResettable(home)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if node.IsLockFile(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(home, e.Name())); err != nil {
			return fmt.Errorf("--reset: %w", err)
		}
	}
	return nil
}

// devBinaries finds the control-plane binaries, building them (with the build's
// progress on out) when they are missing and $BERTH_TESTBIN does not name them.
func devBinaries(ctx context.Context, out io.Writer) (string, error) {
	return devTool(ctx, out, localenv.FindBinaries, localenv.BuildBinaries, localenv.BinDirEnv, "the Kubernetes binaries", "about 10 minutes")
}

// devTool finds what berth dev runs (find), or builds it from the Go module proxy with
// its progress on out (build) when it is missing and $env does not name its directory.
func devTool(ctx context.Context, out io.Writer, find func(context.Context) (string, error), build func(context.Context, io.Writer) (string, error), env, what, takes string) (string, error) {
	dir, err := find(ctx)
	if err == nil || !errors.Is(err, localenv.ErrMissingDependency) || os.Getenv(env) != "" {
		return dir, err
	}
	if _, werr := fmt.Fprintf(out, "berth dev: building %s from the Go module proxy (%s, once)\n", what, takes); werr != nil {
		return "", werr
	}
	return build(ctx, out)
}

type devChain struct {
	resumed bool
	tenant  keys.Info
	denoms  []string // what the chain's deployments may be paid in
}

// prepareDevChain makes the home's chain when it has none: 1 s blocks, the tenant and
// provider accounts funded, and the provider's attributes attrs signed by Auditors
// (a resumed chain keeps the signatures of its genesis).
func prepareDevChain(cfg Config, attrs market.Attributes, out io.Writer) (devChain, error) {
	var c devChain
	if node.HasGenesis(cfg.Home) {
		c.resumed = true
	} else {
		audits := make([]node.DevAudit, 0, len(Auditors))
		for _, a := range Auditors {
			audits = append(audits, node.DevAudit{Account: DevProviderKey, Auditor: a, Attributes: attrs})
		}
		res, err := node.Init(cfg.Home, node.InitOptions{
			ChainID: node.DefaultChainID, BlockInterval: time.Second, DevAccounts: []string{DevTenantKey, DevProviderKey},
			DevAudits: audits,
		})
		if err != nil {
			return c, fmt.Errorf("create the dev chain: %w", err)
		}
		if _, err := fmt.Fprintf(out, "berth dev: new chain %s in %s\n", res.ChainID, cfg.Home); err != nil {
			return c, err
		}
	}
	gen, err := node.LoadGenesisParams(cfg.Home)
	if err != nil {
		return c, err
	}
	c.denoms = gen.Denoms
	kr, err := keys.Open(node.KeyringDir(cfg.Home), gen.AddressPrefix)
	if err != nil {
		return c, err
	}
	for _, name := range []string{DevTenantKey, DevProviderKey} {
		info, err := kr.Show(name)
		if err != nil {
			return c, fmt.Errorf("%s: the chain has no %q key in %s (berth dev needs the dev accounts %q and %q; --reset makes a new chain): %w",
				cfg.Home, name, kr.Dir(), DevTenantKey, DevProviderKey, err)
		}
		if name == DevTenantKey {
			c.tenant = info
		}
	}
	return c, nil
}

// startDevProvider registers the provider configured by pc (devProviderConfig) on
// the ledger at rpc, or updates its registration with this run's gateway address and
// pc's attributes, and returns it, not yet running.
func startDevProvider(ctx context.Context, pc config.ProviderConfig, rpc, kubeconfig string, log *slog.Logger) (*app.Provider, string, error) {
	pc.Node, pc.Kubeconfig = rpc, kubeconfig
	attrs, err := pc.Registered()
	if err != nil {
		return nil, "", err
	}
	// The file was checked before anything started (devProviderConfig); this is the
	// configuration the provider runs with, its ledger node and cluster set.
	checked, err := pc.Check()
	if err != nil {
		return nil, "", err
	}
	p, err := app.NewProvider(ctx, checked, "127.0.0.1:0", log.With(slog.String("component", "provider")))
	if err != nil {
		return nil, "", fmt.Errorf("provider: %w", err)
	}
	hostURI := "https://" + p.Gateway()
	if err := registerDevProvider(ctx, p.Client(), p.Broadcaster(), hostURI, attrs); err != nil {
		p.Close()
		return nil, "", err
	}
	return p, hostURI, nil
}

// registerDevProvider creates the provider's registration or updates its host URI and
// attributes.
func registerDevProvider(ctx context.Context, c *chain.Client, bcast *chain.Broadcaster, hostURI string, attrs market.Attributes) error {
	if err := waitForBlock(ctx, c); err != nil {
		return err
	}
	m := ledger.MsgCreateProvider{Owner: bcast.Address(), HostURI: hostURI, Attributes: attrs,
		Info: ledger.ProviderInfo{Website: "https://berth.dev"}}
	var existing ledger.Provider
	err := ledger.QueryProvider.Into(ctx, c, ledger.ProviderRequest{Owner: m.Owner}, &existing)
	var msg ledger.Msg = &m
	switch {
	case err == nil:
		u := ledger.MsgUpdateProvider(m)
		msg = &u
	case !errors.Is(err, ledger.ErrNotFound):
		return fmt.Errorf("read the provider's registration: %w", err)
	}
	if _, err := bcast.Broadcast(ctx, msg); err != nil {
		return fmt.Errorf("register the provider on the ledger: %w", err)
	}
	return nil
}

// waitForBlock waits until the node has made a block since it started, so that
// queries and transactions see its state.
func waitForBlock(ctx context.Context, c *chain.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	h, err := c.Height(ctx)
	if err != nil {
		return fmt.Errorf("ledger node: %w", err)
	}
	if _, err := c.WaitHeight(ctx, h+1); err != nil {
		return fmt.Errorf("ledger node makes no blocks: %w", err)
	}
	return nil
}

// devTenant is what the banner says of the tenant.
type devTenant struct {
	keys.Info
	balance []market.Coin
}

// unrecordedLeases are the leases (active on the ledger) whose manifest the cluster
// does not hold: with a cluster kept from the last run, those that never got one, or
// whose cluster was lost (berth dev's cluster directory deleted).
func unrecordedLeases(ctx context.Context, kubeconfigPath string, leases []ledger.LeaseResponse) ([]market.LeaseID, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	rc, err := restConfig(kubeconfigPath)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	var missing []market.LeaseID
	for i := range leases {
		id := leases[i].Lease.ID
		_, err := dc.Resource(berthv1.ManifestResource).Namespace(kube.LeaseNamespace(id)).Get(ctx, kube.ManifestName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, id)
		case err != nil:
			return nil, fmt.Errorf("the manifest of lease %s: %w", id, err)
		}
	}
	return missing, nil
}

// devTenantView reads the tenant's balance and the provider's active leases.
func devTenantView(ctx context.Context, c *chain.Client, provider string, tenant keys.Info) ([]ledger.LeaseResponse, devTenant, error) {
	t := devTenant{Info: tenant}
	var acct ledger.AccountResponse
	if err := ledger.QueryAccount.Into(ctx, c, ledger.AccountRequest{Address: tenant.Address}, &acct); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return nil, t, fmt.Errorf("tenant account: %w", err)
	}
	t.balance = acct.Balances
	var leases []ledger.LeaseResponse
	req := ledger.LeasesRequest{Provider: provider, State: ledger.LeaseActive}
	err := ledger.List(ctx, c, ledger.QueryLeases, req, func(r ledger.LeasesResponse) error {
		leases = append(leases, r.Leases...)
		return nil
	})
	if err != nil {
		return nil, t, fmt.Errorf("provider leases: %w", err)
	}
	return leases, t, nil
}

// startDevProvisioner provisions the simulated cluster's persistent volumes.
func startDevProvisioner(ctx context.Context, kubeconfig, dir string, log *slog.Logger) (func(), error) {
	cs, err := kubeClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	pr, err := localenv.StartProvisioner(ctx, cs, localenv.DevStorageClasses, dir, log.With(slog.String("component", "storage")))
	if err != nil {
		return nil, err
	}
	return pr.Stop, nil
}

type devBanner struct {
	cfg                                             Config
	cp                                              *localenv.ControlPlane
	kubeconfig                                      string
	specs                                           []localenv.NodeSpec
	realNode                                        *localenv.RealNode
	ingress                                         *localenv.IngressController
	registry                                        *localenv.Registry
	pool                                            string
	took                                            time.Duration
	chainID, rpc                                    string
	resumed                                         bool
	denoms                                          []string
	provider                                        string
	providerAddr                                    string
	grpc, metrics                                   string
	tenant                                          devTenant
	leases                                          []ledger.LeaseResponse
	unrecorded                                      []market.LeaseID // of leases: those the cluster holds no manifest of
	defaultHome                                     string
	manifestTimeout                                 time.Duration
	hostnameOperator, ipOperator, inventoryOperator string
	// processes, with --redis: the provider's and the operators' processes.
	processes *devProcesses
	// inCluster, with --chart: the chart's release.
	inCluster *devInCluster
}

func printDevBanner(out io.Writer, d devBanner) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nberth dev: the marketplace is ready (%s)\n\n", d.took.Round(100*time.Millisecond))
	state := "new"
	if d.resumed {
		state = "resumed"
	}
	fmt.Fprintf(&b, "  ledger        chain %s (%s), RPC %s, 1 block/s\n", d.chainID, state, d.rpc)
	if missing := slices.DeleteFunc(ledger.DefaultDenoms(), func(x string) bool { return slices.Contains(d.denoms, x) }); len(missing) > 0 {
		fmt.Fprintf(&b, "                made by an older berth: it takes %s only, not %s (--reset makes a new chain)\n",
			strings.Join(d.denoms, ", "), strings.Join(missing, ", "))
	}
	fmt.Fprintf(&b, "  home          %s (keyring in %s)\n", d.cfg.Home, node.KeyringDir(d.cfg.Home))
	fmt.Fprintf(&b, "  Kubernetes    %s, kubeconfig %s\n", d.cp.APIServerURL, d.kubeconfig)
	if n := d.realNode; n != nil {
		fmt.Fprintf(&b, "  node (real)   %s: this machine (containerd, runc, kubelet, kube-proxy), pods in %s\n", n.Name, n.PodCIDR)
		b.WriteString("                NetworkPolicy enforced (kube-router's policy controller): leases are isolated\n")
		fmt.Fprintf(&b, "                cluster DNS %s (CoreDNS): services by name, nothing outside the cluster\n", localenv.ClusterDNSIP())
		fmt.Fprintf(&b, "                images %s, %s (imported: nothing is pulled)\n", EchoImageRef, BusyboxImageRef)
		fmt.Fprintf(&b, "  HTTP routes   http://%s (Traefik): curl -H 'Host: <uri>' http://%s/\n", d.ingress.HTTPAddr, d.ingress.HTTPAddr)
		fmt.Fprintf(&b, "  registry      http://%s (plain HTTP, no password): name images %s/NAME:TAG in the SDL\n", d.registry.Addr, d.registry.Addr)
	} else {
		fmt.Fprintf(&b, "  nodes (kwok)  ")
		for i, s := range d.specs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.Name)
			if s.GPUs > 0 {
				fmt.Fprintf(&b, " (%d× %s)", s.GPUs, s.GPUProduct)
			}
		}
		b.WriteString("\n")
	}
	if d.realNode != nil {
		fmt.Fprintf(&b, "  storage       classes %s (directories in %s, kept across pod restarts)\n",
			strings.Join(localenv.DevStorageClasses, ", "), filepath.Join(d.cp.Dir, "volumes"))
	} else {
		fmt.Fprintf(&b, "  storage       classes %s (simulated volumes)\n", strings.Join(localenv.DevStorageClasses, ", "))
	}
	fmt.Fprintf(&b, "  provider      %s at %s\n", d.providerAddr, d.provider)
	if ic := d.inCluster; ic != nil {
		fmt.Fprintf(&b, "                gRPC %s; pods of Helm release %s (namespace %s, chart %s),\n", d.grpc, ChartRelease, ChartNamespace, ic.chart)
		fmt.Fprintf(&b, "                image %s, values %s\n", ic.image, filepath.Join(ic.dir, "values.yaml"))
		fmt.Fprintf(&b, "                pods reach the ledger at %s (only they: DNAT from the node's bridge)\n", ic.ledger)
	} else {
		fmt.Fprintf(&b, "                gRPC %s, metrics http://%s/metrics\n", d.grpc, d.metrics)
	}
	if d.cfg.ProviderConfig != "" {
		fmt.Fprintf(&b, "                configured by %s over the dev defaults\n", d.cfg.ProviderConfig)
	}
	if d.inCluster != nil {
		fmt.Fprintf(&b, "  operators     hostname (Ingresses, class nginx), ip (MetalLB pool %s), inventory (Inventory %s):\n", d.pool, InventoryName)
		fmt.Fprintf(&b, "                pods of the release; kubectl --kubeconfig %s -n %s get pods\n", d.kubeconfig, ChartNamespace)
	} else {
		fmt.Fprintf(&b, "  operators     hostname (Ingresses, class nginx), http://%s/metrics\n", d.hostnameOperator)
		fmt.Fprintf(&b, "                ip (MetalLB pool %s, a documentation range: shown, never reachable), http://%s/usage\n", d.pool, d.ipOperator)
		fmt.Fprintf(&b, "                inventory (Inventory %s: GPUs from GPU feature discovery labels), http://%s/inventory\n", InventoryName, d.inventoryOperator)
	}
	if pr := d.processes; pr != nil {
		fmt.Fprintf(&b, "  processes     the provider and each operator run as processes of their own (restarted if they exit),\n")
		fmt.Fprintf(&b, "                their files and logs in %s\n", pr.dir)
		fmt.Fprintf(&b, "  bus           redis-server at redis://%s; watch a topic live:\n", pr.redisAddr)
		fmt.Fprintf(&b, "                %s bus watch akash.provider.bidengine.status --redis redis://%s\n", cmp.Or(d.cfg.Command, "berth"), pr.redisAddr)
	}
	// In genesis order (uakt, uact, then IBC USDC), not the ledger's sorted one.
	coins := slices.Clone(d.tenant.balance)
	rank := func(denom string) int {
		if i := slices.Index(ledger.DefaultDenoms(), denom); i >= 0 {
			return i
		}
		return len(ledger.DefaultDenoms())
	}
	slices.SortStableFunc(coins, func(a, b market.Coin) int { return rank(a.Denom) - rank(b.Denom) })
	bal := make([]string, 0, len(coins))
	for _, c := range coins {
		bal = append(bal, c.String())
	}
	fmt.Fprintf(&b, "  tenant key    %q %s, balance %s\n", d.tenant.Name, d.tenant.Address, strings.Join(bal, ", "))
	if n := len(d.leases) - len(d.unrecorded); n > 0 {
		fmt.Fprintf(&b, "\n  %d lease(s) from the last run resumed: the cluster kept their manifests and workloads.\n", n)
	}
	if n := len(d.unrecorded); n > 0 {
		dseqs := make([]string, 0, n)
		for _, id := range d.unrecorded {
			dseqs = append(dseqs, strconv.FormatUint(id.DSeq, 10))
		}
		fmt.Fprintf(&b, "\n  %d lease(s) active on the ledger have no manifest on this cluster (dseq %s).\n", n, strings.Join(dseqs, ", "))
		fmt.Fprintf(&b, "  Send each manifest (%s tenant send-manifest FILE DSEQ)\n", cmp.Or(d.cfg.Command, "berth"))
		if d.manifestTimeout > 0 {
			fmt.Fprintf(&b, "  within %s, or the provider closes the lease (manifest_timeout).\n", yaml.FormatDuration(d.manifestTimeout))
		} else {
			b.WriteString("  whenever you like: the provider waits for them (manifest_timeout 0s).\n")
		}
	}
	b.WriteString("\n  Deploy an example as the tenant (in another terminal, in the berth source tree):\n\n")
	if d.cfg.Home != d.defaultHome {
		fmt.Fprintf(&b, "    export BERTH_HOME=%s\n", d.cfg.Home)
	}
	if d.realNode != nil {
		fmt.Fprintf(&b, "    %s tenant deploy examples/echo.yaml\n\n", cmp.Or(d.cfg.Command, "berth"))
		b.WriteString("  Containers really run here: logs are their output, a shell runs inside them. Pods reach\n")
		b.WriteString("  each other and nothing off this machine. Your own image, from a docker-archive tarball:\n")
		fmt.Fprintf(&b, "    skopeo copy --dest-tls-verify=false docker-archive:IMAGE.tar docker://%s/NAME:TAG\n", d.registry.Addr)
		b.WriteString("  (Debian's skopeo; any OCI client that pushes to a plain-HTTP registry will do), or imported\n")
		fmt.Fprintf(&b, "  straight into the node: ctr --address %s -n k8s.io images import IMAGE.tar\n", d.realNode.ContainerdSocket)
		b.WriteString("  (then name it as in the tarball, with a tag other than latest: nothing is pulled).\n")
	} else {
		fmt.Fprintf(&b, "    %s tenant deploy examples/web.yaml\n\n", cmp.Or(d.cfg.Command, "berth"))
		b.WriteString("  kwok simulates the nodes and runs no containers: pods report Running, logs come from\n")
		fmt.Fprintf(&b, "  %s, and a shell command runs on THIS machine in\n", d.cp.ContainerLogFile)
		fmt.Fprintf(&b, "  %s: it is not a sandbox.\n", d.cp.ExecDir)
	}
	b.WriteString("  The ledger is kept in the home (--reset starts a new one); the cluster is new each start.\n")
	b.WriteString("  Press Ctrl-C to stop; nothing is left running.\n")
	_, _ = io.WriteString(out, b.String())
}
