package status

import (
	"cmp"
	"maps"
	"strings"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/balance"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/deploy"
)

// Sources are the parts of a running provider its status is read from, each by what
// it already holds in memory (nothing here calls Kubernetes or the ledger).
type Sources struct {
	// Address is the provider's account; Hostname its cluster_public_hostname;
	// Version berth's.
	Address, Hostname, Version string

	Engine interface {
		// Tracked counts the orders the bid engine tracks, by state.
		Tracked() map[string]int
	}
	Deployments interface {
		// States are the deployment manager's leases.
		States() []deploy.DeploymentState
	}
	Manifests interface {
		// Waiting counts the leases the manifest watchdog waits on.
		Waiting() int
	}
	Ledger interface {
		// State is whether the ledger node answers.
		State() chain.NodeState
	}
	Leases interface {
		// Counts are the leases ready and not; HostPhases the hostnames by phase.
		Counts() (ready, notReady int)
		HostPhases() map[string]int
	}
	Balance interface {
		// Status is the balance checker's last check.
		Status() balance.Status
	}
	Capacity interface {
		// Snapshot is what is reserved and left; Unavailable why nothing can be bid.
		Snapshot() cluster.Snapshot
		Unavailable() string
	}
	Inventory interface {
		// NotSynced says why the cluster's inventory is not read yet ("": it is).
		NotSynced() string
	}
}

// Collect is the provider's status at now, read from src.
func Collect(src Sources, now time.Time) Status {
	s := Status{Address: src.Address, ClusterPublicHostname: src.Hostname, Timestamp: now}
	s.Berth.Version = src.Version
	s.Berth.Orders = src.Engine.Tracked()
	for state, n := range s.Berth.Orders {
		if state != "won" {
			s.BidEngine.Orders += uint32(n) //nolint:gosec // counts of tracked orders
		}
	}
	s.Berth.Deployments = map[string]int{}
	for _, d := range src.Deployments.States() {
		s.Berth.Deployments[d.Phase]++
		if d.Phase != deploy.PhaseClosing {
			s.Cluster.Leases++
			s.Manifest.Deployments++
		}
	}
	s.Berth.ManifestsWaiting = src.Manifests.Waiting()
	l := src.Ledger.State()
	s.Berth.Ledger = &Ledger{Node: l.Node, Reachable: l.Reachable, Error: l.Error, Since: l.Since}
	s.Berth.LeasesReady, s.Berth.LeasesNotReady = src.Leases.Counts()
	if h := src.Leases.HostPhases(); len(h) > 0 {
		s.Berth.Hostnames = h
	}
	if b := src.Balance.Status(); !b.LastCheck.IsZero() {
		s.Berth.Balance = &Balance{
			Account: coinStrings(b.Balance), MinBalance: b.MinBalance.String(), Low: b.Low, Earnings: coinStrings(b.Earnings),
			Leases: b.Leases, LowFundsLeases: b.LowFundsLeases, LastWithdrawalHeight: b.LastWithdrawalHeight, LastError: b.LastError,
		}
	}
	snap := src.Capacity.Snapshot()
	s.Berth.ReservationsActive, s.Berth.ReservationsPending = snap.Active, snap.Pending
	// Nothing is bid until the inventory has been read (a role that may not list what
	// it watches holds it there for good: said here).
	s.Berth.NotBidding = cmp.Or(src.Inventory.NotSynced(), src.Capacity.Unavailable())
	s.Cluster.Inventory = inventoryOf(snap)
	return s
}

// inventoryOf is the capacity's snapshot as /status reports it: each reservation with
// and without pods, one entry each as Akash lists them (its persistent storage by
// class), and what every node and storage class has left.
func inventoryOf(snap cluster.Snapshot) Inventory {
	var inv Inventory
	for _, r := range snap.Reservations {
		m := metricsOf(r.Total)
		if len(r.Storage) > 0 {
			m.Storage = maps.Clone(r.Storage)
		}
		if r.Active {
			inv.Active = append(inv.Active, m)
		} else {
			inv.Pending = append(inv.Pending, m)
		}
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		node := Node{Name: n.Name, Allocatable: metricsOf(n.Allocatable), Available: metricsOf(n.Available), Unschedulable: !n.Schedulable}
		if n.Allocatable.GPUs > 0 && n.GPU.Model != "" {
			node.GPU = &GPUModel{Vendor: n.GPU.Vendor, Model: n.GPU.Model, RAM: n.GPU.RAM, Interface: n.GPU.Interface}
		}
		inv.Available.Nodes = append(inv.Available.Nodes, node)
	}
	for _, pool := range snap.Pools {
		free := max(pool.Capacity-pool.Used, 0)
		if class, ok := strings.CutPrefix(pool.Name, cluster.StoragePool("")); ok {
			inv.Available.Storage = append(inv.Available.Storage, Storage{Class: class, Size: free, Allocatable: max(pool.Capacity, 0)})
		}
		if pool.Name == cluster.PoolLeasedIPs && pool.Capacity > 0 {
			inv.Available.LeasedIPs = &Pool{Total: pool.Capacity, Available: free}
		}
	}
	return inv
}

func coinStrings(cs []market.Coin) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

func metricsOf(a cluster.Amounts) Metrics {
	return Metrics{CPU: a.CPU, GPU: a.GPUs, Memory: a.Memory, StorageEphemeral: a.EphemeralStorage}
}
