package app

import (
	"context"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
)

// clusterService is the provider's side of the cluster: the inventory the bid engine
// reserves in, the deployer and deployment manager that run leases, and the monitor
// that watches them. The provider and the lease-ready benchmark build it the same way.
type clusterService struct {
	rc       *rest.Config
	cs       kubernetes.Interface
	dc       dynamic.Interface
	capacity *cluster.Capacity
	inv      *kube.Inventory
	deploy   *kube.Deployer
	manager  *cluster.Manager
	monitor  *kube.Monitor
}

// newClusterService builds the cluster side from the provider configuration. active
// asks the ledger about a lease; onStatus (may be nil) receives each lease status
// change and must not block.
func newClusterService(rc *rest.Config, cfg ProviderConfig, active cluster.LeaseActive, onStatus func(kube.LeaseStatus), log *slog.Logger) (*clusterService, error) {
	s := &clusterService{capacity: cluster.NewCapacity(), rc: rc}
	var err error
	if s.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if s.dc, err = dynamic.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	pools, err := cfg.inventoryPools()
	if err != nil {
		return nil, err
	}
	if s.inv, err = kube.NewInventory(s.cs, s.capacity, kube.InventoryConfig{Storage: pools, LeasedIPs: cfg.Inventory.LeasedIPs, NodePorts: cfg.Inventory.NodePorts, StorageClasses: cfg.Cluster.StorageClasses}, log); err != nil {
		return nil, err
	}
	if s.deploy, err = kube.NewDeployer(s.cs, s.dc, cfg.Cluster.settings(), log); err != nil {
		return nil, err
	}
	if s.manager, err = cluster.NewManager(cluster.ManagerConfig{Concurrency: cfg.Cluster.DeployConcurrency}, s.deploy, active, log); err != nil {
		return nil, err
	}
	if s.monitor, err = kube.NewMonitor(s.cs, log, onStatus); err != nil {
		return nil, err
	}
	return s, nil
}

// start installs the CRDs when configured to and runs the inventory, the manager and
// the monitor in g until ctx ends.
func (s *clusterService) start(ctx context.Context, g *errgroup.Group, installCRDs bool) error {
	if installCRDs {
		if err := kube.InstallCRDs(ctx, s.dc); err != nil {
			return fmt.Errorf("%w (set cluster.install_crds: false and install config/crd yourself if berth may not)", err)
		}
	}
	g.Go(func() error { return s.inv.Run(ctx) })
	g.Go(func() error { return s.manager.Run(ctx) })
	g.Go(func() error { return s.monitor.Run(ctx) })
	return nil
}
