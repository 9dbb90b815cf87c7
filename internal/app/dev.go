package app

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

	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
)

// DevConfig configures `berth dev`.
type DevConfig struct {
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
	// ProviderConfig is a provider.yaml (--config) whose keys override the dev
	// provider's defaults, read as `berth provider run` reads it; the keys berth dev
	// sets itself (devOwnedKeys) are refused. "": none.
	ProviderConfig string
}

// DefaultHome is berth's home unless told otherwise: $BERTH_HOME, else ~/.berth (what
// every berth command reads its keyring and node address from).
func DefaultHome() string {
	if h := os.Getenv("BERTH_HOME"); h != "" {
		return h
	}
	if d, err := os.UserHomeDir(); err == nil {
		return filepath.Join(d, ".berth")
	}
	return ".berth"
}

// DefaultDevConfig returns the embedded defaults: three CPU nodes, one node with eight
// 80 GiB A100 SXM GPUs and one with eight 80 GiB H100s, in the default home.
func DefaultDevConfig() DevConfig {
	return DevConfig{
		Home:         DefaultHome(),
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
func (c DevConfig) Validate() error {
	switch {
	case c.Home == "":
		return errors.New("--home: empty (and no home directory to default to)")
	case c.Nodes < 0 || c.Nodes > 100:
		return fmt.Errorf("--nodes: %d is outside 0–100", c.Nodes)
	case c.GPUNodes < 0 || c.GPUNodes > 100:
		return fmt.Errorf("--gpu-nodes: %d is outside 0–100", c.GPUNodes)
	case c.Nodes+c.GPUNodes == 0:
		return errors.New("--nodes, --gpu-nodes: the cluster needs at least one node")
	case c.GPUNodes > 0 && (c.GPUsPerNode < 1 || c.GPUsPerNode > 64):
		return fmt.Errorf("--gpus-per-node: %d is outside 1–64", c.GPUsPerNode)
	case c.GPUNodes > 0 && (len(c.GPUModels) == 0 || slices.ContainsFunc(c.GPUModels, func(m string) bool { return strings.TrimSpace(m) == "" })):
		return errors.New("--gpu-model: empty (GPU feature discovery's product names, such as NVIDIA-A100-SXM4-80GB)")
	case c.WithdrawPeriod < 0 || c.WithdrawPeriod > 0 && c.WithdrawPeriod < time.Second:
		return fmt.Errorf("--withdraw-period: %s is neither 0 nor at least 1s", c.WithdrawPeriod)
	}
	return nil
}

func (c DevConfig) nodes() []localenv.NodeSpec {
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

// RunDev starts the local marketplace — the ledger node (resumed from the home when it
// holds one), the Kubernetes control plane with its simulated nodes, and the provider
// registered on the ledger — prints what a tenant needs on out, and runs until ctx
// ends; then it stops everything it started, the provider first.
func RunDev(ctx context.Context, cfg DevConfig, log *slog.Logger, out io.Writer) (retErr error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// A bad --config file stops berth dev before it touches the home.
	pc, err := devProviderConfig(cfg)
	if err != nil {
		return err
	}
	attrs, err := attributes("attributes", pc.Attributes)
	if err != nil {
		return err
	}
	if cfg.Redis && pc.Bus.Redis != "" {
		return fmt.Errorf("--config %s sets bus.redis: with --redis, berth dev runs its own redis-server; leave bus.redis out", cfg.ProviderConfig)
	}
	start := time.Now()
	// Another berth dev (or chain start, or provider run) on this home is refused before
	// anything in the home changes: its config.toml names the running node's ports.
	locks, err := lockDevHome(cfg)
	if err != nil {
		return err
	}
	defer locks.release()
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

	// The ledger.
	chainInfo, err := prepareDevChain(cfg, attrs, out)
	if err != nil {
		return err
	}
	ports, err := localenv.FreePorts(ctx, 2)
	if err != nil {
		return err
	}
	rpc := fmt.Sprintf("tcp://127.0.0.1:%d", ports[0])
	if err := node.SetListenAddresses(cfg.Home, rpc, fmt.Sprintf("tcp://127.0.0.1:%d", ports[1])); err != nil {
		return err
	}
	log.InfoContext(ctx, "starting the ledger node", slog.String("home", cfg.Home), slog.String("rpc", rpc))
	n, err := node.Start(node.Config{Home: cfg.Home, Logger: log.With(slog.String("component", "ledger")), Lock: locks.node})
	if err != nil {
		return fmt.Errorf("start the ledger node: %w", err)
	}
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	nodeDone := make(chan error, 1)
	go func() { nodeDone <- n.Run(nodeCtx) }()
	defer func() {
		stopNode()
		if err := <-nodeDone; err != nil && retErr == nil {
			retErr = fmt.Errorf("ledger node: %w", err)
		}
	}()

	// The cluster.
	log.InfoContext(ctx, "starting the local Kubernetes control plane", slog.String("dir", filepath.Join(cfg.Home, "cluster")))
	cp, err := localenv.StartControlPlane(ctx, localenv.ControlPlaneOptions{
		Dir: filepath.Join(cfg.Home, "cluster"), BinDir: bin, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("start the local cluster: %w", err)
	}
	defer cp.Stop()
	specs := cfg.nodes()
	if err := cp.AddNodes(ctx, specs...); err != nil {
		return fmt.Errorf("add simulated nodes: %w", err)
	}
	kubeconfig := filepath.Join(cp.Dir, "berth.kubeconfig")
	if err := localenv.WriteFlatKubeconfig(cp.KubeconfigPath, kubeconfig); err != nil {
		return err
	}
	stopProvisioner, err := startDevProvisioner(ctx, kubeconfig, filepath.Join(cp.Dir, "volumes"), log)
	if err != nil {
		return err
	}
	defer stopProvisioner()
	// Leased IPs: MetalLB with a TEST-NET-1 pool, restarted should it exit.
	lbDir := filepath.Join(cp.Dir, "metallb")
	lb, err := startDevMetalLB(ctx, lbBin, kubeconfig, lbDir)
	if err != nil {
		return err
	}
	lbCtx, stopLB := context.WithCancel(context.WithoutCancel(ctx))
	lbDone := make(chan struct{})
	go func() {
		defer close(lbDone)
		superviseMetalLB(lbCtx, lb, lbBin, kubeconfig, lbDir, log)
	}()
	defer func() {
		stopLB()
		<-lbDone
	}()

	// watch returns nil once until is closed or ctx ends, or says why the node, the
	// provider (in-process), a process (--redis) or the cluster stopped first (the
	// node's and the provider's error is put back for the deferred waits). A cluster
	// process that dies is restarted by the control plane; the cluster stops when one
	// cannot be (etcd, or too many restarts); so for berth dev's processes.
	var provDone chan error
	var procs *devProcesses
	var procsFailed <-chan struct{}
	watch := func(until <-chan struct{}, when string) error {
		select {
		case <-until:
			return nil
		case <-ctx.Done():
			return nil
		case err := <-nodeDone:
			nodeDone <- err
			return stopped("the ledger node", when, err)
		case err := <-provDone:
			provDone <- err
			return stopped("the provider", when, err)
		case <-procsFailed:
			return stopped("a process of berth dev", when, procs.err())
		case <-cp.Failed():
			// The control plane logged the process's exit and its restarts.
			return stopped("the local cluster", when, cp.Err())
		}
	}
	banner := devBanner{cfg: cfg, cp: cp, kubeconfig: kubeconfig, specs: specs, chainID: n.ChainID(), rpc: rpc, resumed: chainInfo.resumed, denoms: chainInfo.denoms, defaultHome: DefaultHome()}
	var client *chain.Client
	if cfg.Redis {
		// The provider's lock is the provider process's to take.
		locks.provider.Release()
		if procs, err = startDevProcesses(ctx, cfg, pc, rpc, n.ChainID(), kubeconfig, cp.Dir, log); err != nil {
			return err
		}
		defer procs.stop()
		watchCtx, stopWatching := context.WithCancel(ctx)
		defer stopWatching()
		procsFailed = procs.failed(watchCtx)
		// Bids wait for the inventory operator's first report: the banner comes after it.
		err := procs.awaitBidding(ctx, 2*time.Minute)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		client = procs.client
		banner.provider, banner.providerAddr, banner.grpc, banner.metrics = procs.hostURI, procs.providerAddr, procs.grpc, procs.metrics
		banner.manifestTimeout = procs.manifestTimeout
		banner.hostnameOperator, banner.ipOperator, banner.inventoryOperator = procs.operatorAddrs[0], procs.operatorAddrs[1], procs.operatorAddrs[2]
		banner.processes = procs
	} else {
		// The provider.
		p, hostURI, err := startDevProvider(ctx, pc, rpc, kubeconfig, log)
		if err != nil {
			return err
		}
		provCtx, stopProvider := context.WithCancel(ctx)
		provDone = make(chan error, 1)
		go func() { provDone <- p.Run(provCtx) }()
		defer func() {
			stopProvider()
			if err := <-provDone; err != nil && retErr == nil {
				retErr = fmt.Errorf("provider: %w", err)
			}
		}()
		if err := watch(p.Ready(), " before it was ready"); err != nil || ctx.Err() != nil {
			return err
		}
		// The operators, once the provider has installed the CRDs they watch.
		ops, err := startDevOperators(ctx, pc, p.bcast.Address(), n.ChainID(), kubeconfig, log)
		if err != nil {
			return err
		}
		opCtx, stopOperators := context.WithCancel(ctx)
		var opsDone sync.WaitGroup
		for _, o := range ops {
			opsDone.Go(func() { superviseOperator(opCtx, o.name, log, o.op.Run) })
		}
		defer func() {
			stopOperators()
			opsDone.Wait()
		}()
		// Bids wait for the inventory operator's first report: the banner comes after it.
		if err := p.awaitInventory(ctx, time.Minute); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		client = p.client
		banner.provider, banner.providerAddr, banner.grpc, banner.metrics = hostURI, p.bcast.Address(), p.GRPCGateway(), p.MetricsAddr()
		banner.manifestTimeout = p.cfg.Gateway.ManifestTimeout
		banner.hostnameOperator, banner.ipOperator, banner.inventoryOperator = ops[0].addr, ops[1].addr, ops[2].addr
	}
	if banner.leases, banner.tenant, err = devTenantView(ctx, client, banner.providerAddr, chainInfo.tenant); err != nil {
		return err
	}
	banner.took = time.Since(start)
	printDevBanner(out, banner)

	if err := watch(nil, ""); err != nil {
		return err
	}
	log.InfoContext(ctx, "stopping the local environment")
	return nil
}

// stopped says that a part of berth dev stopped (when), and why if it knows.
func stopped(what, when string, err error) error {
	if err == nil {
		return fmt.Errorf("%s stopped%s", what, when)
	}
	return fmt.Errorf("%s stopped%s: %w", what, when, err)
}
