package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/operator/hostname"
)

// Config configures `berth dev`.
type Config struct {
	// Home is the ledger node's home (keyring, chain data, the provider's state),
	// resumed when it holds a chain; its cluster directory is recreated on every start.
	Home string
	// Reset removes the home first, for a new chain.
	Reset bool
	// Nodes is the number of simulated CPU nodes; GPUNodes the number of simulated GPU
	// nodes, each with GPUsPerNode devices of one of GPUModels (GPU feature discovery's
	// product names, the nodes taking them in turn) with GPUMemoryMiB each. The nodes
	// carry only the labels GPU feature discovery and node feature discovery publish:
	// the inventory operator names the models from them.
	Nodes, GPUNodes, GPUsPerNode int
	GPUModels                    []string
	GPUMemoryMiB                 int
	// NodeCPU and NodeMemory size every node (Kubernetes quantities).
	NodeCPU, NodeMemory string
	// Build describes the binary (the provider's GET /version).
	Build rest.BuildInfo
	// Command is how the banner names berth in the commands it suggests ("berth").
	Command string
	// WithdrawPeriod is how often the provider withdraws its leases' earnings (0:
	// only when a deployment's escrow runs low or the provider's balance does).
	// WithdrawPeriodSet says it was given (--withdraw-period): it then beats the
	// ProviderConfig file's balance.withdraw_period, as flags beat the file in
	// `berth provider run`.
	WithdrawPeriod    time.Duration
	WithdrawPeriodSet bool
	// Redis runs the provider and the three operators as processes of their own (this
	// berth binary, or Executable), their bus over a redis-server berth dev starts:
	// the layout of a real installation, on one machine. Default: one process.
	Redis      bool
	Executable string
	// RealNode runs tenants' workloads for real (--real-node): instead of kwok's
	// simulated nodes, this machine is the cluster's one node (containerd, runc, a
	// kubelet and kube-proxy, as root), with berth's own images imported
	// (EchoImageRef), and an ingress controller (Traefik) on a loopback port serves the
	// provider's HTTP routes.
	RealNode bool
	// Chart installs the provider and its operators with this Helm chart (--chart: the
	// source tree's charts/berth) as pods on the real node, instead of running them in
	// this process: an image of this berth binary (or Executable; it must be static)
	// pushed to the dev registry, the provider's key as a Secret, the dev provider's
	// settings. Needs RealNode; helm is $BERTH_HELM, hack/tool.sh's or the PATH's.
	Chart string
	// ProviderConfig is a provider.yaml (--config) whose keys override the dev
	// provider's defaults, read as `berth provider run` reads it; the keys berth dev
	// sets itself (devOwnedKeys) are refused. "": none.
	ProviderConfig string
}

// DefaultConfig returns the embedded defaults: three CPU nodes, one node with eight
// 80 GiB A100 SXM GPUs and one with eight 80 GiB H100s, in the default home.
func DefaultConfig() Config {
	return Config{
		Home:         app.DefaultHome(),
		Nodes:        3,
		GPUNodes:     2,
		GPUsPerNode:  8,
		GPUModels:    []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"},
		GPUMemoryMiB: 81920,
		NodeCPU:      "16",
		NodeMemory:   "64Gi",

		Command:        "berth",
		WithdrawPeriod: 10 * time.Minute,
	}
}

// Validate reports the first invalid field by its flag name.
func (c Config) Validate() error {
	switch {
	case c.Home == "":
		return errors.New("--home: empty (and no home directory to default to)")
	case c.Nodes < 0 || c.Nodes > 100:
		return fmt.Errorf("--nodes: %d is outside 0–100", c.Nodes)
	case c.GPUNodes < 0 || c.GPUNodes > 100:
		return fmt.Errorf("--gpu-nodes: %d is outside 0–100", c.GPUNodes)
	case c.Nodes+c.GPUNodes == 0 && !c.RealNode:
		return errors.New("--nodes, --gpu-nodes: the cluster needs at least one node")
	case c.GPUNodes > 0 && (c.GPUsPerNode < 1 || c.GPUsPerNode > 64):
		return fmt.Errorf("--gpus-per-node: %d is outside 1–64", c.GPUsPerNode)
	case c.GPUNodes > 0 && (len(c.GPUModels) == 0 || slices.ContainsFunc(c.GPUModels, func(m string) bool { return strings.TrimSpace(m) == "" })):
		return errors.New("--gpu-model: empty (GPU feature discovery's product names, such as NVIDIA-A100-SXM4-80GB)")
	case c.Chart != "" && !c.RealNode:
		return errors.New("--chart: the chart's pods need a real node (--real-node)")
	case c.Chart != "" && c.Redis:
		return errors.New("--chart, --redis: choose one: the chart's pods, or processes on this machine")
	case c.WithdrawPeriod < 0 || c.WithdrawPeriod > 0 && c.WithdrawPeriod < time.Second:
		return fmt.Errorf("--withdraw-period: %s is neither 0 nor at least 1s", c.WithdrawPeriod)
	}
	return nil
}

// EchoImageRef is the echo image berth dev's real node has (examples/echo.yaml runs it).
const EchoImageRef = "berth.local/echo:1"

// nodes are the simulated nodes: none with a real node.
func (c Config) nodes() []localenv.NodeSpec {
	if c.RealNode {
		return nil
	}
	var specs []localenv.NodeSpec
	for i := range c.Nodes {
		specs = append(specs, localenv.NodeSpec{Name: fmt.Sprintf("dev-node-%d", i+1), CPU: c.NodeCPU, Memory: c.NodeMemory})
	}
	for i := range c.GPUNodes {
		// GPU feature discovery's labels (product, memory, count) and node feature
		// discovery's PCI label of an NVIDIA 3D controller: nothing berth-specific.
		specs = append(specs, localenv.NodeSpec{
			Name: fmt.Sprintf("dev-gpu-node-%d", i+1), CPU: c.NodeCPU, Memory: c.NodeMemory,
			GPUs: c.GPUsPerNode, GPUProduct: strings.TrimSpace(c.GPUModels[i%len(c.GPUModels)]), GPUMemoryMiB: c.GPUMemoryMiB,
			Labels: map[string]string{"feature.node.kubernetes.io/pci-0302_10de.present": "true"},
		})
	}
	return specs
}

// Run starts the local marketplace — the ledger node (resumed from the home when it
// holds one), the Kubernetes control plane with its simulated nodes, and the provider
// registered on the ledger — prints what a tenant needs on out, and runs until ctx
// ends; then it stops everything it started, the provider first.
func Run(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) (retErr error) {
	if err := cfg.Validate(); err != nil {
		return config.Invalid(err)
	}
	// A bad --config file stops berth dev before it touches the home.
	pc, err := devProviderConfig(cfg)
	if err != nil {
		return config.Invalid(err)
	}
	attrs, err := pc.Registered()
	if err != nil {
		return config.Invalid(err)
	}
	if cfg.Redis && pc.Bus.Redis != "" {
		return config.Invalid(fmt.Errorf("--config %s sets bus.redis: with --redis, berth dev runs its own redis-server; leave bus.redis out", cfg.ProviderConfig))
	}
	start := time.Now()
	// Another berth dev (or chain start, or provider run) on this home is refused before
	// anything in the home changes: its config.toml names the running node's ports.
	locks, err := lockDevHome(cfg)
	if err != nil {
		return err
	}
	r := &devRun{ctx: ctx, cfg: cfg, log: log, locks: locks, helperFailed: make(chan error, 1)}
	r.onStop(func() error { locks.release(); return nil })
	defer func() {
		if err := r.stop(); err != nil && retErr == nil {
			retErr = err
		}
	}()
	if cfg.Reset {
		if err := resetDevHome(cfg.Home); err != nil {
			return err
		}
	}
	bin, err := devBinaries(ctx, out)
	if err != nil {
		return err
	}
	lbBin, err := devMetalLB(ctx, out)
	if err != nil {
		return err
	}
	var tools realTools
	if cfg.RealNode {
		if tools, err = devRealTools(ctx, out); err != nil {
			return err
		}
	}
	if cfg.Chart != "" {
		if err := checkChart(cfg.Chart); err != nil {
			return config.Invalid(err)
		}
		if r.helm, err = localenv.FindHelm(ctx, out); err != nil {
			return fmt.Errorf("--chart: %w", err)
		}
	}
	chainInfo, err := prepareDevChain(cfg, attrs, out)
	if err != nil {
		return err
	}
	if err := r.startLedger(); err != nil {
		return err
	}
	if err := r.startCluster(bin, lbBin, tools); err != nil {
		return err
	}
	banner := devBanner{cfg: cfg, cp: r.cp, kubeconfig: r.kubeconfig, specs: r.specs, realNode: r.realNode, ingress: r.ingress, registry: r.registry, pool: r.pool,
		chainID: r.node.ChainID(), rpc: r.rpc, resumed: chainInfo.resumed, denoms: chainInfo.denoms, defaultHome: app.DefaultHome()}
	startProvider := r.startInProcess
	switch {
	case cfg.Redis:
		startProvider = r.startProcesses
	case cfg.Chart != "":
		startProvider = r.startInCluster
	}
	if r.ingress != nil {
		pc.Cluster.IngressHTTPPort = r.ingress.HTTPPort
	}
	client, err := startProvider(pc, &banner)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if banner.leases, banner.tenant, err = devTenantView(ctx, client, banner.providerAddr, chainInfo.tenant); err != nil {
		return err
	}
	if banner.unrecorded, err = unrecordedLeases(ctx, r.kubeconfig, banner.leases); err != nil {
		return err
	}
	banner.took = time.Since(start)
	printDevBanner(out, banner)

	if err := r.watch(nil, ""); err != nil {
		return err
	}
	log.InfoContext(ctx, "stopping the local environment")
	return nil
}

// devRun is one run of berth dev: what it has started, stopped again in reverse order
// by stop, and what watch keeps an eye on.
type devRun struct {
	ctx   context.Context
	cfg   Config
	log   *slog.Logger
	locks devLocks
	stops []func() error

	node       *node.Node
	rpc        string
	nodeDone   chan error
	cp         *localenv.ControlPlane
	specs      []localenv.NodeSpec
	realNode   *localenv.RealNode          // with --real-node
	ingress    *localenv.IngressController // with --real-node
	registry   *localenv.Registry          // with --real-node
	pool       string                      // the leased-IP pool's range (devPoolRange)
	helm       string                      // the helm binary, with --chart
	kubeconfig string
	// provDone (in-process) or procs (--redis) is the provider.
	provDone    chan error
	procs       *devProcesses
	procsFailed <-chan struct{}
	// helperFailed says why a helper process (keep) is no longer restarted.
	helperFailed chan error
}

// onStop registers f to run at stop, before what was registered earlier.
func (r *devRun) onStop(f func() error) { r.stops = append(r.stops, f) }

// stop stops everything, last started first; the first error is returned.
func (r *devRun) stop() error {
	var first error
	for i := len(r.stops) - 1; i >= 0; i-- {
		if err := r.stops[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// startLedger starts the ledger node on free loopback ports.
func (r *devRun) startLedger() error {
	ports, err := localenv.FreePorts(r.ctx, 2)
	if err != nil {
		return err
	}
	r.rpc = fmt.Sprintf("tcp://127.0.0.1:%d", ports[0])
	if err := node.SetListenAddresses(r.cfg.Home, r.rpc, fmt.Sprintf("tcp://127.0.0.1:%d", ports[1])); err != nil {
		return err
	}
	r.log.InfoContext(r.ctx, "starting the ledger node", slog.String("home", r.cfg.Home), slog.String("rpc", r.rpc))
	if r.node, err = node.Start(node.Config{Home: r.cfg.Home, Logger: r.log.With(slog.String("component", "ledger")), Lock: r.locks.node}); err != nil {
		return fmt.Errorf("start the ledger node: %w", err)
	}
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(r.ctx))
	r.nodeDone = make(chan error, 1)
	go func() { r.nodeDone <- r.node.Run(nodeCtx) }()
	r.onStop(func() error {
		stopNode()
		if err := <-r.nodeDone; err != nil {
			return fmt.Errorf("ledger node: %w", err)
		}
		return nil
	})
	return nil
}

// startCluster starts the control plane with the simulated nodes (or the real one and
// its ingress controller), the volume provisioner, and MetalLB with its pool in a
// documentation range (devPoolRange; restarted should it exit).
func (r *devRun) startCluster(bin, lbBin string, tools realTools) error {
	ctx, log := r.ctx, r.log
	log.InfoContext(ctx, "starting the local Kubernetes control plane", slog.String("dir", filepath.Join(r.cfg.Home, "cluster")))
	// The cluster is kept from one run to the next, as the chain is: the leases of an
	// earlier run come back with their workloads, and etcd syncs what it acknowledges.
	cp, err := localenv.StartControlPlane(ctx, localenv.ControlPlaneOptions{
		Dir: filepath.Join(r.cfg.Home, "cluster"), BinDir: bin, Logger: log, Persistent: true,
	})
	if err != nil {
		return fmt.Errorf("start the local cluster: %w", err)
	}
	r.cp = cp
	r.onStop(func() error { cp.Stop(); return nil })
	r.specs = r.cfg.nodes()
	if err := cp.SetNodes(ctx, r.specs...); err != nil {
		return fmt.Errorf("add simulated nodes: %w", err)
	}
	r.kubeconfig = filepath.Join(cp.Dir, "berth.kubeconfig")
	if err := localenv.WriteFlatKubeconfig(cp.KubeconfigPath, r.kubeconfig); err != nil {
		return err
	}
	if r.cfg.RealNode {
		if err := r.startRealNode(tools); err != nil {
			return err
		}
	}
	stopProvisioner, err := startDevProvisioner(ctx, r.kubeconfig, filepath.Join(cp.Dir, "volumes"), log)
	if err != nil {
		return err
	}
	r.onStop(func() error { stopProvisioner(); return nil })
	lbDir := filepath.Join(cp.Dir, "metallb")
	if r.pool, err = devPoolRange(r.cfg.RealNode); err != nil {
		return err
	}
	lb, err := startDevMetalLB(ctx, lbBin, r.kubeconfig, lbDir, r.pool, r.log)
	if err != nil {
		return err
	}
	r.keep("MetalLB's controller", lb.Service)
	return nil
}

// keep takes on a helper process berth dev runs beside the cluster (MetalLB's
// controller, the ingress controller, the registry), which its Service restarts when
// it exits (logged with its last lines): it is stopped at stop, and one no longer
// restarted (too many exits) stops berth dev, saying why (watch).
func (r *devRun) keep(what string, svc *localenv.Service) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-svc.Failed():
			select {
			case r.helperFailed <- fmt.Errorf("%s: %w", what, svc.Err()):
			default: // another one's failure is already reported
			}
		case <-ctx.Done():
		}
	}()
	r.onStop(func() error {
		cancel()
		<-done
		svc.Stop()
		return nil
	})
}

// startProcesses runs the provider and the operators as processes of their own over
// a redis-server (--redis), and waits until they bid.
func (r *devRun) startProcesses(pc config.ProviderConfig, banner *devBanner) (*chain.Client, error) {
	// The provider's lock is the provider process's to take.
	r.locks.provider.Release()
	procs, err := startDevProcesses(r.ctx, r.cfg, pc, r.rpc, r.node.ChainID(), r.kubeconfig, r.cp.Dir, r.log)
	if err != nil {
		return nil, err
	}
	r.procs = procs
	r.onStop(func() error { procs.stop(); return nil })
	watchCtx, stopWatching := context.WithCancel(r.ctx)
	r.onStop(func() error { stopWatching(); return nil })
	r.procsFailed = procs.failed(watchCtx)
	// Bids wait for the inventory operator's first report: the banner comes after it.
	if err := procs.awaitBidding(r.ctx, 2*time.Minute); err != nil && r.ctx.Err() == nil {
		return nil, err
	}
	banner.provider, banner.providerAddr, banner.grpc, banner.metrics = procs.hostURI, procs.providerAddr, procs.grpc, procs.metrics
	banner.manifestTimeout = procs.manifestTimeout
	banner.hostnameOperator, banner.ipOperator, banner.inventoryOperator = procs.operatorAddrs[0], procs.operatorAddrs[1], procs.operatorAddrs[2]
	banner.processes = procs
	return procs.client, nil
}

// startInProcess runs the provider and, once it has installed the CRDs they watch,
// the operators, in this process; and waits until the provider can bid.
func (r *devRun) startInProcess(pc config.ProviderConfig, banner *devBanner) (*chain.Client, error) {
	ctx, log := r.ctx, r.log
	p, hostURI, err := startDevProvider(ctx, pc, r.rpc, r.kubeconfig, log)
	if err != nil {
		return nil, err
	}
	provCtx, stopProvider := context.WithCancel(ctx)
	r.provDone = make(chan error, 1)
	go func() { r.provDone <- p.Run(provCtx) }()
	r.onStop(func() error {
		stopProvider()
		if err := <-r.provDone; err != nil {
			return fmt.Errorf("provider: %w", err)
		}
		return nil
	})
	if err := r.watch(p.Ready(), " before it was ready"); err != nil || ctx.Err() != nil {
		return nil, err
	}
	ops, err := startDevOperators(ctx, pc, p.Address(), r.node.ChainID(), r.kubeconfig, log)
	if err != nil {
		return nil, err
	}
	opCtx, stopOperators := context.WithCancel(ctx)
	var opsDone sync.WaitGroup
	for _, o := range ops {
		opsDone.Go(func() { superviseOperator(opCtx, o.name, log, o.op.Run) })
	}
	r.onStop(func() error {
		stopOperators()
		opsDone.Wait()
		var errs []error
		for _, o := range ops {
			errs = append(errs, o.op.Close())
		}
		return errors.Join(errs...)
	})
	// Bids wait for the inventory operator's first report: the banner comes after it.
	if err := p.AwaitInventory(ctx, time.Minute); err != nil && ctx.Err() == nil {
		return nil, err
	}
	banner.provider, banner.providerAddr, banner.grpc, banner.metrics = hostURI, p.Address(), p.GRPCGateway(), p.MetricsAddr()
	banner.manifestTimeout = pc.Gateway.ManifestTimeout
	banner.hostnameOperator, banner.ipOperator, banner.inventoryOperator = ops[0].addr, ops[1].addr, ops[2].addr
	return p.Client(), nil
}

// watch returns nil once until is closed or the run's context ends, or says why the
// node, the provider (in-process), a process (--redis) or the cluster stopped first
// (the node's and the provider's error is put back for stop). A cluster process that
// dies is restarted by the control plane; the cluster stops when one cannot be (etcd,
// or too many restarts); so for berth dev's processes.
func (r *devRun) watch(until <-chan struct{}, when string) error {
	select {
	case <-until:
		return nil
	case <-r.ctx.Done():
		return nil
	case err := <-r.nodeDone:
		r.nodeDone <- err
		return stopped("the ledger node", when, err)
	case err := <-r.provDone:
		r.provDone <- err
		return stopped("the provider", when, err)
	case <-r.procsFailed:
		return stopped("a process of berth dev", when, r.procs.err())
	case err := <-r.helperFailed:
		r.helperFailed <- err
		return stopped("a helper process of berth dev", when, err)
	case <-r.cp.Failed():
		// The control plane logged the process's exit and its restarts.
		return stopped("the local cluster", when, r.cp.Err())
	}
}

// stopped says that a part of berth dev stopped (when), and why if it knows.
func stopped(what, when string, err error) error {
	if err == nil {
		return fmt.Errorf("%s stopped%s", what, when)
	}
	return fmt.Errorf("%s stopped%s: %w", what, when, err)
}

// realTools are the directories of what a real node runs: the images' programs, the
// ingress controller, the registry, the NetworkPolicy enforcer and the cluster DNS.
type realTools struct{ images, ingress, registry, netpol, dns string }

// devRealTools finds (or builds) what --real-node needs.
func devRealTools(ctx context.Context, out io.Writer) (realTools, error) {
	var t realTools
	var err error
	if t.images, err = devTool(ctx, out, localenv.FindImages, localenv.BuildImages, localenv.ImagesEnv, "the workload images' programs", "under a minute"); err != nil {
		return t, err
	}
	if t.ingress, err = devTool(ctx, out, localenv.FindIngressController, localenv.BuildIngressController, localenv.IngressDirEnv, "the ingress controller (Traefik)", "about 3 minutes"); err != nil {
		return t, err
	}
	if t.registry, err = devTool(ctx, out, localenv.FindRegistry, localenv.BuildRegistry, localenv.RegistryDirEnv, "the image registry", "about 2 minutes"); err != nil {
		return t, err
	}
	if t.netpol, err = devTool(ctx, out, localenv.FindNetworkPolicy, localenv.BuildNetworkPolicy, localenv.NetPolDirEnv, "the NetworkPolicy enforcer (kube-router)", "about a minute"); err != nil {
		return t, err
	}
	t.dns, err = devTool(ctx, out, localenv.FindDNS, localenv.BuildDNS, localenv.DNSDirEnv, "the cluster DNS (CoreDNS)", "about 2 minutes")
	return t, err
}

// startRealNode starts the real node, with berth's images, and the ingress controller
// serving the hostname operator's Ingresses on a loopback port. The control plane's
// Stop stops the node.
func (r *devRun) startRealNode(tools realTools) error {
	ctx := r.ctx
	n, err := r.cp.StartRealNode(ctx, localenv.RealNodeOptions{ImagesDir: tools.images, NetPolDir: tools.netpol, DNSDir: tools.dns,
		Images: []localenv.Image{localenv.EchoImage(EchoImageRef, tools.images), localenv.BusyboxImage(BusyboxImageRef, tools.images)}})
	if err != nil {
		return fmt.Errorf("start the real node: %w", err)
	}
	r.realNode = n
	dir := filepath.Join(r.cp.Dir, "ingress")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ingress controller: %w", err)
	}
	// Each is restarted, at the addresses the banner gave, when it exits.
	ing, err := localenv.StartIngressController(ctx, localenv.IngressControllerOptions{
		Kubeconfig: r.kubeconfig, Dir: dir, BinDir: tools.ingress,
		IngressClass: hostname.DefaultConfig().Ingress.Class, Log: r.log,
	})
	if err != nil {
		return fmt.Errorf("start the ingress controller: %w", err)
	}
	r.ingress = ing
	r.keep("the ingress controller", ing.Service)
	// A registry tenants' images can be pushed to and the node pulls from.
	reg, err := localenv.StartRegistry(ctx, localenv.RegistryOptions{Dir: filepath.Join(r.cp.Dir, "registry"), BinDir: tools.registry, Log: r.log})
	if err != nil {
		return fmt.Errorf("start the image registry: %w", err)
	}
	r.registry = reg
	r.keep("the image registry", reg.Service)
	return n.TrustRegistry(reg.Addr)
}

// BusyboxImageRef is the busybox image berth dev's real node has: a shell and the
// usual commands, for a tenant's own scripts.
const BusyboxImageRef = "berth.local/busybox:1"
