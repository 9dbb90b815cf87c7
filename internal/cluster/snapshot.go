package cluster

import (
	"cmp"
	"maps"
	"slices"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

// NodeSnapshot is one node's capacity: what it offers and what is left after running
// pods and reservations not yet running. A node that is not schedulable (not Ready,
// cordoned, or tainted NoSchedule/NoExecute) has nothing available: no new pod goes
// there, so bids do not count it and status must not show it as free.
type NodeSnapshot struct {
	Name        string
	Allocatable Amounts
	Available   Amounts
	GPU         gpu.Model
	Schedulable bool
}

// PoolSnapshot is a cluster-wide pool (a storage class, leased IPs): its capacity
// and what is in use or reserved.
type PoolSnapshot struct {
	Name     string
	Capacity int64
	Used     int64
}

// Snapshot is the inventory and reservations at one moment, for status reports.
type Snapshot struct {
	Nodes []NodeSnapshot
	Pools []PoolSnapshot
	// Active are reservations with pods on the cluster, Pending those without yet;
	// their totals are what all their replicas request.
	Active, Pending           int
	ActiveTotal, PendingTotal Amounts
	// Reservations are each reservation's requests, sorted by order.
	Reservations []ReservationSnapshot
}

// ReservationSnapshot is one reservation: what all its replicas request, and its
// persistent storage by class (bytes).
type ReservationSnapshot struct {
	Order   market.OrderID
	Active  bool // it has pods on the cluster
	Total   Amounts
	Storage map[string]int64
}

// Snapshot copies the capacity's state (O(nodes + reservations)).
func (c *Capacity) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{Nodes: make([]NodeSnapshot, len(c.nodes))}
	for i, n := range c.nodes {
		var available Amounts
		if n.Schedulable {
			available = c.hot[i].free.Max0()
		}
		s.Nodes[i] = NodeSnapshot{Name: n.Name, Allocatable: n.Allocatable, Available: available, GPU: n.GPU, Schedulable: n.Schedulable}
	}
	for name, p := range c.pools {
		s.Pools = append(s.Pools, PoolSnapshot{Name: name, Capacity: p.capacity, Used: p.used + p.reserved})
	}
	slices.SortFunc(s.Pools, func(a, b PoolSnapshot) int {
		return cmp.Compare(a.Name, b.Name)
	})
	for id, r := range c.res {
		var total Amounts
		for _, u := range r.demand.Units {
			total = total.Add(u.Each.Mul(int64(u.Count)))
		}
		active := len(c.podsOf[id]) > 0
		if active {
			s.Active++
			s.ActiveTotal = s.ActiveTotal.Add(total)
		} else {
			s.Pending++
			s.PendingTotal = s.PendingTotal.Add(total)
		}
		s.Reservations = append(s.Reservations, ReservationSnapshot{Order: r.order, Active: active, Total: total, Storage: maps.Clone(r.demand.Storage)})
	}
	slices.SortFunc(s.Reservations, func(a, b ReservationSnapshot) int {
		x, y := a.Order, b.Order
		return cmp.Or(cmp.Compare(x.Owner, y.Owner), cmp.Compare(x.DSeq, y.DSeq), cmp.Compare(x.GSeq, y.GSeq), cmp.Compare(x.OSeq, y.OSeq))
	})
	return s
}
