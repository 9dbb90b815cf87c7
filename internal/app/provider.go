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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/node"
)

// Provider is the provider daemon: the ledger client and broadcaster, the cluster
// inventory, and the bid engine, wired together.
type Provider struct {
	cfg     ProviderConfig
	log     *slog.Logger
	reg     *prometheus.Registry
	client  *chain.Client
	bcast   *chain.Broadcaster
	inv     *kube.Inventory
	engine  *bidengine.Engine
	bids    *bidengine.Service
	won     *bus.Bus[bidengine.LeaseWon]
	metrics net.Listener
}

// NewProvider validates cfg and connects to the ledger and the cluster; it starts
// nothing (Run does). metricsListen, when not empty, is where /metrics is served.
func NewProvider(ctx context.Context, cfg ProviderConfig, metricsListen string, log *slog.Logger) (_ *Provider, retErr error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	c, err := chain.Dial(ctx, cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("ledger node %s: %w", cfg.Node, err)
	}
	p.client = c
	prefix := c.Params().AddressPrefix
	kr, err := keys.Open(node.KeyringDir(cfg.Home), prefix)
	if err != nil {
		return nil, err
	}
	signer, err := kr.Signer(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("from: key %q: %w", cfg.From, err)
	}
	if p.bcast, err = chain.NewBroadcaster(c, signer, chain.BroadcastOptions{Linger: bidengine.ProviderLinger}); err != nil {
		return nil, err
	}
	policy, err := cfg.policy(prefix)
	if err != nil {
		return nil, err
	}
	pricer, err := cfg.pricer()
	if err != nil {
		return nil, err
	}
	timeout, err := cfg.bidTimeout()
	if err != nil {
		return nil, err
	}
	deposit := c.Params().BidMinDeposit
	if cfg.Bidding.Deposit != "" {
		d, err := market.ParseCoin(cfg.Bidding.Deposit)
		if err != nil || d.Denom != deposit.Denom || d.Amount < deposit.Amount {
			return nil, fmt.Errorf("bidding.deposit %q: must be at least the ledger's bid_min_deposit %s", cfg.Bidding.Deposit, deposit)
		}
		deposit = d
	}

	rc, err := kubeConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	capacity := cluster.NewCapacity()
	pools, err := cfg.inventoryPools()
	if err != nil {
		return nil, err
	}
	if p.inv, err = kube.NewInventory(cs, capacity, kube.InventoryConfig{Storage: pools, LeasedIPs: cfg.Inventory.LeasedIPs, NodePorts: cfg.Inventory.NodePorts}, log); err != nil {
		return nil, err
	}
	history, err := bidengine.NewHistory(cfg.Bidding.History, p.reg)
	if err != nil {
		return nil, err
	}
	p.engine, err = bidengine.NewEngine(bidengine.EngineConfig{
		Provider: p.bcast.Address(), Policy: policy, Pricer: pricer, Deposit: deposit, BidTimeout: timeout,
		BidsPerHour: cfg.Bidding.Budget.BidsPerHour, TenantBidsPerHour: cfg.Bidding.Budget.TenantBidsPerHour,
	}, capacity, history)
	if err != nil {
		return nil, err
	}
	if p.won, err = bus.New[bidengine.LeaseWon]("lease_won", p.reg); err != nil {
		return nil, err
	}
	cursor, err := bidengine.NewCursor(filepath.Join(cfg.Home, "provider", "bidengine.cursor"))
	if err != nil {
		return nil, err
	}
	if p.bids, err = bidengine.NewService(bidengine.ServiceConfig{Cursor: cursor, Concurrency: cfg.Bidding.Concurrency}, p.engine, c, p.bcast, p.won, log, p.reg); err != nil {
		return nil, err
	}
	if metricsListen != "" {
		if p.metrics, err = (&net.ListenConfig{}).Listen(ctx, "tcp", metricsListen); err != nil {
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
	}
	return p, nil
}

// kubeConfig loads the kubeconfig (or the in-cluster configuration) with berth's
// explicit rate limit.
func kubeConfig(cfg ProviderConfig) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: empty, and not running in a cluster: %w", err)
		}
	} else if rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = float32(cfg.KubeQPS), cfg.KubeBurst
	return rc, nil
}

// Engine is the bid engine's decision core (for status).
func (p *Provider) Engine() *bidengine.Engine { return p.engine }

// LeaseWon is the bus LeaseWon events are published on.
func (p *Provider) LeaseWon() *bus.Bus[bidengine.LeaseWon] { return p.won }

// Ready is closed once the bid engine has rebuilt its state and caught up.
func (p *Provider) Ready() <-chan struct{} { return p.bids.Ready() }

// MetricsAddr is where /metrics is served ("" when it is not).
func (p *Provider) MetricsAddr() string {
	if p.metrics == nil {
		return ""
	}
	return p.metrics.Addr().String()
}

// Run runs every component until ctx ends or one fails; it returns after all stopped.
func (p *Provider) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.client.Run(ctx) })
	g.Go(func() error { return p.bcast.Run(ctx) })
	g.Go(func() error { return p.inv.Run(ctx) })
	g.Go(func() error {
		select {
		case <-p.inv.Synced():
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
	err := g.Wait()
	p.won.Close()
	return err
}
