package cluster

// This file: totals and the bookkeeping checks.

import "fmt"

// Totals sums the cluster: what schedulable nodes offer, what pods use on them, and
// what reservations hold on them but pods do not use yet.
type Totals struct {
	Allocatable, Used, Reserved Amounts
	Nodes, Reservations         int
	// Unplaced counts replicas of adopted leases that fit nowhere.
	Unplaced int
}

// Totals reports the cluster's totals.
func (c *Capacity) Totals() Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := Totals{Reservations: len(c.res)}
	for _, n := range c.nodes {
		if !n.Schedulable {
			continue
		}
		t.Nodes++
		t.Allocatable = t.Allocatable.Add(n.Allocatable)
		t.Used = t.Used.Add(c.used[n.Name])
		t.Reserved = t.Reserved.Add(n.planned)
	}
	for _, r := range c.res {
		for _, n := range r.unplaced {
			t.Unplaced += n
		}
	}
	return t
}

// Check verifies the bookkeeping: every node's planned amounts are the sum of the
// replicas reservations plan on it, every pool's reserved amount the sum of its claims,
// and no planned amount is negative. It is for tests and a periodic self-check.
func (c *Capacity) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	planned := make([]Amounts, len(c.nodes))
	reserved := map[string]int64{}
	for _, r := range c.res {
		for u, nodes := range r.planned {
			for _, ni := range nodes {
				if ni < 0 || ni >= len(c.nodes) {
					return fmt.Errorf("order %s: replica planned on node index %d of %d", r.order, ni, len(c.nodes))
				}
				planned[ni] = planned[ni].Add(r.demand.Units[u].Each)
			}
			if r.unplaced[u] < 0 {
				return fmt.Errorf("order %s unit %d: %d unplaced replicas", r.order, r.demand.Units[u].ID, r.unplaced[u])
			}
		}
		for class, n := range r.demand.Storage {
			reserved[StoragePool(class)] += n
		}
		reserved[PoolLeasedIPs] += int64(r.demand.LeasedIPs)
		reserved[PoolNodePorts] += int64(r.demand.NodePorts)
	}
	unplaced := 0
	for _, r := range c.res {
		for _, n := range r.unplaced {
			unplaced += n
		}
	}
	if unplaced != c.unplaced {
		return fmt.Errorf("%d unplaced replicas counted, reservations have %d", c.unplaced, unplaced)
	}
	for i, n := range c.nodes {
		if n.planned != planned[i] {
			return fmt.Errorf("node %s: planned %s, reservations add up to %s", n.Name, n.planned, planned[i])
		}
		if n.planned.Negative() {
			return fmt.Errorf("node %s: planned %s is negative", n.Name, n.planned)
		}
		if want := n.Allocatable.Sub(c.used[n.Name]).Sub(n.planned); c.hot[i].free != want {
			return fmt.Errorf("node %s: free %s, should be %s", n.Name, c.hot[i].free, want)
		}
	}
	for name, p := range c.pools {
		if p.reserved != reserved[name] {
			return fmt.Errorf("pool %s: reserved %d, reservations add up to %d", name, p.reserved, reserved[name])
		}
		var used int64
		for _, it := range p.items {
			if !c.coveredLocked(it) {
				used += it.Amount
			}
		}
		if p.used != used {
			return fmt.Errorf("pool %s: used %d, items add up to %d", name, p.used, used)
		}
	}
	return nil
}

// Overcommitted lists the nodes where pods and reservations together exceed what the
// node offers: the cluster changed under a plan (a node shrank, pods outside berth
// grew). Reservations never cause it on their own.
func (c *Capacity) Overcommitted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if n.Allocatable.Sub(c.used[n.Name]).Sub(n.planned).Negative() && n.planned != (Amounts{}) {
			out = append(out, n.Name)
		}
	}
	return out
}
