package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/wait"
)

// clusterService is the provider's side of the cluster: the inventory the bid engine
// reserves in, the deployer and deployment manager that run leases, and the monitor
// that watches them. The provider and the lease-ready benchmark build it the same way.
type clusterService struct {
	rc       *rest.Config
	cs       kubernetes.Interface
	dc       dynamic.Interface
	capacity *cluster.Capacity
	cache    *kube.Cache
	inv      *kube.Inventory
	deploy   *kube.Deployer
	manager  *deploy.Manager
	monitor  *kube.Monitor
	drift    *kube.Drift
}

// newClusterService builds the cluster side from the provider configuration, for
// owner's leases only (the provider and its chain: others may share the cluster).
// active asks the ledger about a lease; onStatus (may be nil) receives each lease
// status change and must not block.
func newClusterService(rc *rest.Config, cfg config.ProviderConfig, owner ownership.Owner, active deploy.LeaseActive, onStatus func(deploy.LeaseStatus), log *slog.Logger, reg prometheus.Registerer) (*clusterService, error) {
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	s := &clusterService{capacity: cluster.NewCapacity(), rc: rc}
	var err error
	if s.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if s.dc, err = dynamic.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	// One watch of each kind for the inventory, the monitor and the drift watcher.
	if s.cache, err = kube.NewCache(s.cs, s.dc, owner); err != nil {
		return nil, err
	}
	if s.inv, err = kube.NewInventory(s.cache, s.cs, s.capacity, kube.InventoryConfig{Storage: cfg.InventoryPools(), LeasedIPs: cfg.Inventory.LeasedIPs, NodePorts: cfg.Inventory.NodePorts, StorageClasses: cfg.Cluster.StorageClasses}, log); err != nil {
		return nil, err
	}
	if cfg.Inventory.Operator != "" {
		s.inv.FromOperator(s.dc, cfg.Inventory.Operator, cfg.Inventory.MaxAge)
	}
	if pool, ok, err := cfg.LeasedIPPool(); err != nil {
		return nil, err
	} else if ok {
		s.inv.WithMetalLBPool(s.dc, pool)
	}
	settings := cfg.KubeSettings()
	settings.Owner = owner
	if s.deploy, err = kube.NewDeployer(s.cs, s.dc, settings, log); err != nil {
		return nil, err
	}
	if s.manager, err = deploy.NewManager(deploy.ManagerConfig{Concurrency: cfg.Cluster.DeployConcurrency}, s.deploy, active, log); err != nil {
		return nil, err
	}
	if s.monitor, err = kube.NewMonitor(s.cache, s.cs, log, onStatus); err != nil {
		return nil, err
	}
	s.monitor.WithHosts()
	if s.drift, err = kube.NewDrift(s.cache, s.manager.Drifted, log, reg); err != nil {
		return nil, err
	}
	return s, nil
}

// start runs, in g until ctx ends, the CRD install when configured to (retried while
// the API server does not answer: a provider started during an outage waits for it),
// then the cache, the inventory, the manager, the monitor and the drift watcher. None
// of those starts before the CRDs it watches are established, so a clean start logs no
// failed watch. They wait for the cluster on their own; the manager takes manifests once
// it has read the Manifest resources.
func (s *clusterService) start(ctx context.Context, g *errgroup.Group, installCRDs bool, log *slog.Logger) {
	g.Go(func() error {
		if installCRDs {
			if err := installCRDsWithRetry(ctx, s.dc, log); err != nil || ctx.Err() != nil {
				return err
			}
		}
		g.Go(func() error { return s.cache.Run(ctx) })
		g.Go(func() error { return s.inv.Run(ctx) })
		g.Go(func() error { return s.manager.Run(ctx) })
		g.Go(func() error { return s.monitor.Run(ctx) })
		g.Go(func() error { return s.drift.Run(ctx) })
		return nil
	})
}

// installCRDsWithRetry installs berth's CRDs, retrying with backoff (logged) while the
// API server cannot be reached; a refusal (RBAC, an invalid object) stops the provider
// with the reason.
func installCRDsWithRetry(ctx context.Context, dc dynamic.Interface, log *slog.Logger) error {
	err := wait.Retry(ctx, time.Second, 30*time.Second, func(ctx context.Context) error {
		err := kube.InstallCRDs(ctx, dc)
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || errors.Is(err, kube.ErrCRDRefused) {
			return wait.Abort(fmt.Errorf("%w (set cluster.install_crds: false and install config/crd yourself if berth may not)", err))
		}
		return err
	}, func(err error, pause time.Duration) {
		log.WarnContext(ctx, "installing berth's CRDs: the API server does not answer; retrying", slog.String("error", err.Error()), slog.Duration("in", pause))
	})
	if err != nil && ctx.Err() == nil { // not stopping
		return err
	}
	return nil
}

// AwaitInventory waits until the inventory can be bid on (with the inventory operator:
// its first report has arrived), or says why not after timeout.
func (s *clusterService) AwaitInventory(ctx context.Context, timeout time.Duration) error {
	err := wait.Within(ctx, timeout, 100*time.Millisecond, func(context.Context) error {
		if why := s.capacity.Unavailable(); why != "" {
			return errors.New(why)
		}
		return nil
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("the provider cannot bid after %s: %w", timeout, err)
}

// ClusterSide is the provider's cluster side, built as the provider builds it, for
// drivers other than the provider (the lease-ready benchmark): they reserve in its
// Capacity what Demand says, hand manifests to its Manager, and run it with Start.
type ClusterSide struct {
	s          *clusterService
	overcommit cluster.Overcommit
}

// NewClusterSide builds the cluster side from cfg for owner's leases (see
// newClusterService).
func NewClusterSide(rc *rest.Config, cfg config.ProviderConfig, owner ownership.Owner, active deploy.LeaseActive, onStatus func(deploy.LeaseStatus), log *slog.Logger) (*ClusterSide, error) {
	s, err := newClusterService(rc, cfg, owner, active, onStatus, log, nil)
	if err != nil {
		return nil, err
	}
	return &ClusterSide{s: s, overcommit: cfg.Cluster.CapacityOvercommit()}, nil
}

// Start runs it in g until ctx ends (the CRDs installed first when installCRDs).
func (c *ClusterSide) Start(ctx context.Context, g *errgroup.Group, installCRDs bool, log *slog.Logger) {
	c.s.start(ctx, g, installCRDs, log)
}

// WaitStarted waits until the inventory and the monitor have synced and the manager
// has read the cluster's leases, or ctx ends (its error).
func (c *ClusterSide) WaitStarted(ctx context.Context) error {
	for _, ch := range []<-chan struct{}{c.s.inv.Synced(), c.s.monitor.Synced(), c.s.manager.Started()} {
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// Demand is what a group reserves, with the configured overcommit.
func (c *ClusterSide) Demand(g market.GroupSpec) (cluster.Demand, error) {
	return cluster.DemandOf(g, c.overcommit)
}

// Capacity is the inventory the cluster side reserves in.
func (c *ClusterSide) Capacity() *cluster.Capacity { return c.s.capacity }

// Manager is the deployment manager that runs the leases.
func (c *ClusterSide) Manager() *deploy.Manager { return c.s.manager }
