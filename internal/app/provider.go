package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/balance"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/bidengine/onchain"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/status/topics"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/kubeconfig"
	"berth.dev/berth/internal/leasefeed"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/wait"
)

// Provider is the provider daemon: the ledger client and broadcaster, the cluster
// inventory, and the bid engine, wired together.
type Provider struct {
	cfg     config.ProviderConfig
	log     *slog.Logger
	reg     *prometheus.Registry
	client  *chain.Client
	bcast   *chain.Broadcaster
	engine  *bidengine.Engine
	bids    *onchain.Service
	leases  *leasefeed.Feed
	cluster *clusterService
	sweeper *kube.Sweeper
	// unhealthy tracks leases not ready, for the optional close policy (closer, nil
	// when off).
	unhealthy *deploy.Unhealthy
	closer    *deploy.UnhealthyCloser
	metrics   net.Listener
	gw        *gatewayService
	// balance withdraws earnings and keeps the bid-deposit reserve; balanceEvents is
	// where it publishes.
	balance       *balance.Checker
	balanceEvents *bus.Bus[balance.Event]
	ready         chan struct{}
	// early answers on the gateway's address until the gateway takes its listener
	// (nil once it has); ledger checks the ledger node for /status.
	early  *startupServer
	ledger *chain.NodeWatch
	// readyClock measures berth_lease_ready_seconds.
	readyClock *leaseReadyClock
	// remote, with bus.redis, carries the status topics to other processes.
	remote *redisbus.Client
	// opened is what NewProvider opened, for Close.
	opened []func()
}

// NewProvider connects to the ledger and the cluster with a checked configuration; it
// starts nothing (Run does). metricsListen, when not empty, is where /metrics is
// served. On error, whatever it opened is closed again; a setting refused by the
// ledger's rules (the bid deposit) is a config.Error.
func NewProvider(ctx context.Context, checked config.Checked, metricsListen string, log *slog.Logger) (_ *Provider, retErr error) {
	cfg := checked.Config()
	p := &Provider{cfg: cfg, log: log, reg: prometheus.NewRegistry(), ready: make(chan struct{})}
	defer func() {
		if retErr != nil {
			p.Close()
		}
	}()
	// The gateway's address answers from the start: while the ledger node does not,
	// /status says so. Once the gateway has its listener, the startup server is gone.
	waiting := func(error) {}
	if cfg.Gateway.Listen != "" {
		early, err := newStartupServer(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		waiting, p.early = early.waiting, early
		p.opened = append(p.opened, func() {
			if p.early != nil {
				p.early.close(ctx)
			}
		})
	}
	c, err := dialLedger(ctx, cfg.Node, log, waiting)
	if err != nil {
		return nil, err
	}
	p.client = c
	p.opened = append(p.opened, c.Close)
	p.ledger = chain.NewNodeWatch(cfg.Node, c.Height, log)
	prefix := c.Params().AddressPrefix
	kr, err := keys.Open(node.KeyringDir(cfg.Home), prefix)
	if err != nil {
		return nil, err
	}
	signer, err := kr.Signer(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("from: key %q: %w", cfg.From, err)
	}
	if p.bcast, err = chain.NewBroadcaster(c, signer, chain.BroadcastOptions{Linger: onchain.ProviderLinger}); err != nil {
		return nil, err
	}
	for _, build := range []func() error{p.newCluster, func() error { return p.newBidding(prefix) }, p.newBalance} {
		if err := build(); err != nil {
			return nil, err
		}
	}
	if p.gw, err = p.newGateway(ctx, ledgerReader{c}, prefix); err != nil {
		return nil, err
	}
	p.opened = append(p.opened, p.gw.close)
	if cfg.Bus.Redis != "" {
		o := cfg.Bus.Options()
		o.Registerer, o.Log = p.reg, log.With(slog.String("component", "bus"))
		if p.remote, err = redisbus.Connect(o); err != nil {
			return nil, err
		}
		p.opened = append(p.opened, func() { _ = p.remote.Close() })
	}
	if err := p.registerProviderMetrics(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if metricsListen != "" {
		if p.metrics, err = (&net.ListenConfig{}).Listen(ctx, "tcp", metricsListen); err != nil {
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
		p.opened = append(p.opened, func() { _ = p.metrics.Close() })
	}
	return p, nil
}

// Close releases what NewProvider opened (listeners, connections), for a provider
// that is not Run after all; Run releases them itself.
func (p *Provider) Close() {
	for i := len(p.opened) - 1; i >= 0; i-- {
		p.opened[i]()
	}
	p.opened = nil
}

// Address is the provider's account on the ledger.
func (p *Provider) Address() string { return p.bcast.Address() }

// Client is the provider's ledger client.
func (p *Provider) Client() *chain.Client { return p.client }

// Broadcaster signs and sends the provider's transactions.
func (p *Provider) Broadcaster() *chain.Broadcaster { return p.bcast }

// newCluster builds the cluster side: inventory, deployments, monitor, and the
// unhealthy-lease policy and lease-ready clock fed by the monitor.
func (p *Provider) newCluster() error {
	cfg := p.cfg
	window := cfg.Cluster.UnhealthyCloseAfter
	p.unhealthy = deploy.NewUnhealthy(window)
	p.readyClock = newLeaseReadyClock(func(id market.LeaseID) (time.Time, bool) { return p.cluster.manager.FirstManifestAt(id) })
	rc, err := kubeConfig(cfg)
	if err != nil {
		return err
	}
	owner := ownership.Owner{Provider: p.bcast.Address(), ChainID: p.client.ChainID()}
	p.cluster, err = newClusterService(rc, cfg, owner, p.leaseActive, func(s deploy.LeaseStatus) {
		p.readyClock.observe(s)
		if len(s.Services) == 0 {
			p.unhealthy.Forget(s.Lease)
		} else {
			p.unhealthy.Observe(s.Lease, s.Ready, time.Now())
		}
	}, p.log, p.reg)
	if err != nil {
		return err
	}
	p.sweeper = &kube.Sweeper{Deployer: p.cluster.deploy, Active: p.leaseActive, Every: cfg.Cluster.OrphanInterval,
		FailedPodTTL: cfg.Cluster.FailedPodTTL, Log: p.log}
	if !cfg.Cluster.OrphanDryRun {
		p.sweeper.Close = p.closeOrphan
	}
	if window == 0 {
		return nil
	}
	p.closer = &deploy.UnhealthyCloser{Tracker: p.unhealthy, Every: time.Minute, Active: p.leaseActive, Log: p.log,
		Reachable: func(ctx context.Context) error {
			return p.cluster.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		},
		Close: func(ctx context.Context, id market.LeaseID) error {
			_, err := p.bcast.Submit(ctx, &ledger.MsgCloseBid{ID: id.Bid(), Reason: ledger.ReasonUnstable})
			return err
		}}
	return nil
}

// newBidding builds the bid engine (over the cluster's capacity) and its run loop on
// the ledger, which publishes the leases won and closed on p.leases.
func (p *Provider) newBidding(prefix string) error {
	cfg := p.cfg
	ec, err := cfg.EngineConfig(p.bcast.Address(), prefix, p.client.Params().BidMinDeposit)
	if err != nil {
		return config.Invalid(err)
	}
	ec.Log = p.log
	history, err := bidengine.NewHistory(cfg.Bidding.History, p.reg)
	if err != nil {
		return err
	}
	p.engine, err = bidengine.NewEngine(ec, p.cluster.capacity, history)
	if err != nil {
		return err
	}
	if p.leases, err = leasefeed.New(p.reg); err != nil {
		return err
	}
	cursor, err := onchain.NewCursor(filepath.Join(cfg.Home, "provider", "bidengine.cursor"))
	if err != nil {
		return err
	}
	p.bids, err = onchain.NewService(onchain.ServiceConfig{Cursor: cursor, Concurrency: cfg.Bidding.Concurrency}, p.engine, p.client, p.bcast,
		p.leases, p.log, p.reg)
	return err
}

// newBalance builds the balance checker and its events' bus.
func (p *Provider) newBalance() error {
	bcfg, err := p.cfg.CheckerConfig(p.bcast.Address())
	if err != nil {
		return err
	}
	if p.balanceEvents, err = bus.New[balance.Event]("balance", p.reg); err != nil {
		return err
	}
	p.balance, err = balance.New(bcfg, p.client, p.bcast, p.balanceEvents, p.log.With(slog.String("component", "balance")), p.reg)
	return err
}

// dialLedger connects to the ledger node, retrying with backoff (saying so in the
// log) until it answers or ctx ends: a provider started before its node, or while the
// node restarts, waits for it rather than exiting.
func dialLedger(ctx context.Context, addr string, log *slog.Logger, waiting func(error)) (*chain.Client, error) {
	var c *chain.Client
	err := wait.Retry(ctx, time.Second, 30*time.Second, func(ctx context.Context) (err error) {
		c, err = chain.Dial(ctx, addr)
		return err
	}, func(err error, pause time.Duration) {
		waiting(err)
		log.WarnContext(ctx, "the ledger node does not answer; retrying", slog.String("node", addr), slog.String("error", err.Error()), slog.Duration("in", pause))
	})
	if err != nil {
		return nil, fmt.Errorf("ledger node %s: %w", addr, err)
	}
	return c, nil
}

// kubeConfig loads the kubeconfig (or the in-cluster configuration) with berth's
// explicit rate limit.
func kubeConfig(cfg config.ProviderConfig) (*rest.Config, error) {
	rc, err := kubeconfig.Load(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = float32(cfg.KubeQPS), cfg.KubeBurst
	return rc, nil
}

// Engine is the bid engine's decision core (for status).
func (p *Provider) Engine() *bidengine.Engine { return p.engine }

// Balance is the balance checker (earnings, withdrawals).
func (p *Provider) Balance() *balance.Checker { return p.balance }

// BalanceEvents is the bus balance events are published on.
func (p *Provider) BalanceEvents() *bus.Bus[balance.Event] { return p.balanceEvents }

// Ready is closed once the bid engine has rebuilt its state and caught up, and the
// deployment manager has rebuilt from the cluster (so manifests are taken).
func (p *Provider) Ready() <-chan struct{} { return p.ready }

// MetricsAddr is where /metrics is served ("" when it is not).
func (p *Provider) MetricsAddr() string {
	if p.metrics == nil {
		return ""
	}
	return p.metrics.Addr().String()
}

// leaseActive asks the ledger whether one of our leases is active.
func (p *Provider) leaseActive(ctx context.Context, id market.LeaseID) (bool, error) {
	var l ledger.LeaseResponse
	err := ledger.QueryLease.Into(ctx, p.client, ledger.LeaseRequest{ID: id}, &l)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return l.Lease.State == ledger.LeaseActive, nil
}

// AwaitInventory waits until the inventory can be bid on, or says why not after
// timeout.
func (p *Provider) AwaitInventory(ctx context.Context, timeout time.Duration) error {
	return p.cluster.AwaitInventory(ctx, timeout)
}

// Manager is the deployment manager (manifests are handed to it).
func (p *Provider) Manager() *deploy.Manager { return p.cluster.manager }

// Monitor is the lease status monitor.
func (p *Provider) Monitor() *kube.Monitor { return p.cluster.monitor }

// Run runs every component until ctx ends or one fails; it returns after all stopped.
func (p *Provider) Run(ctx context.Context) error {
	// The lease feed's three consumers each follow it from before the bid engine
	// publishes (each on its own buffer: the balance checker's ledger reads do not hold
	// up teardowns).
	var followers [3]*leasefeed.Follower
	for i := range followers {
		f, err := p.leases.Follow(leasefeed.Buffer)
		if err != nil {
			for _, f := range followers[:i] {
				f.Close()
			}
			return err
		}
		followers[i] = f
	}
	teardowns, watchdogs, payouts := followers[0], followers[1], followers[2]
	g, ctx := errgroup.WithContext(ctx)
	p.cluster.start(ctx, g, p.cfg.Cluster.InstallCRDs, p.log)
	g.Go(func() error {
		return p.cluster.manager.FollowLeases(ctx, teardowns, func(err error) {
			p.log.WarnContext(ctx, "lease feed fell behind; checking every lease against the ledger", slog.String("error", err.Error()))
			select {
			case <-p.cluster.manager.Started():
				p.sweeper.Sweep(ctx)
			default: // the sweeper's first pass, once the manager has started, is the check
			}
		})
	})
	g.Go(func() error { return p.gw.manifests.FollowLeases(ctx, watchdogs) })
	g.Go(func() error { return p.balance.FollowLeases(ctx, payouts) })
	g.Go(func() error {
		for _, ch := range []<-chan struct{}{p.bids.Ready(), p.cluster.manager.Started()} {
			select {
			case <-ch:
			case <-ctx.Done():
				return nil
			}
		}
		close(p.ready)
		return nil
	})
	p.gw.run(ctx, g, p)
	g.Go(func() error { return p.sweeper.Run(ctx, p.cluster.manager.Started()) })
	if p.remote != nil {
		// Redis down or gone: the provider bids and serves all the same (topics.Publish
		// never waits for it).
		g.Go(func() error {
			defer func() { _ = p.remote.Close() }()
			return topics.Publish(ctx, p.gw.board, p.remote, p.gw.statusEvery)
		})
	}
	g.Go(func() error {
		// Withdrawals wait for the broadcaster's account to be known (the bid engine
		// is ready once it has caught up).
		select {
		case <-p.bids.Ready():
		case <-ctx.Done():
			return nil
		}
		return p.balance.Run(ctx)
	})
	if p.closer != nil {
		g.Go(func() error { return p.closer.Run(ctx) })
	}
	g.Go(func() error { return p.client.Run(ctx) })
	g.Go(func() error { return p.bcast.Run(ctx) })
	g.Go(func() error {
		select {
		case <-p.cluster.inv.Synced():
			return p.bids.Run(ctx)
		case <-ctx.Done(): // the inventory's own error, if any, is reported by its Run
			return nil
		}
	})
	if p.metrics != nil {
		srv := &http.Server{Handler: promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		g.Go(func() error {
			if err := srv.Serve(p.metrics); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		})
	}
	p.log.InfoContext(ctx, "provider running", slog.String("node", p.cfg.Node), slog.String("address", p.bcast.Address()))
	var stopping time.Time
	g.Go(func() error {
		<-ctx.Done()
		stopping = time.Now()
		p.log.InfoContext(ctx, "provider stopping")
		return nil
	})
	err := g.Wait()
	p.client.Close()
	p.log.InfoContext(context.WithoutCancel(ctx), "provider stopped", slog.Duration("took", time.Since(stopping)))
	p.leases.Close()
	p.balanceEvents.Close()
	return err
}

// GRPCGateway is the address the gRPC gateway serves on ("" when it does not).
func (p *Provider) GRPCGateway() string {
	if p.gw.rpcLn == nil {
		return ""
	}
	return p.gw.rpcLn.Addr().String()
}

// Gateway is the address the HTTPS gateway serves on ("" when it does not).
func (p *Provider) Gateway() string {
	if p.gw.ln == nil {
		return ""
	}
	return p.gw.ln.Addr().String()
}

// closeOrphan tears down a lease the ledger no longer shows active, through the
// deployment manager (which stops restoring it).
func (p *Provider) closeOrphan(_ context.Context, id market.LeaseID) error {
	p.gw.manifests.LeaseClosed(id)
	p.cluster.manager.LeaseClosed(id)
	return nil
}
