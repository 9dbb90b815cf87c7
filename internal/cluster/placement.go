package cluster

// This file: reserving and releasing, and where replicas are placed.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

// Reserved reports whether order holds a reservation.
func (c *Capacity) Reserved(order market.OrderID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res[order] != nil
}

// Reserve places every replica of d and claims its pool usage for order, or changes
// nothing and returns an *Insufficient error. It returns the GPU model each unit got.
// Reserving an order twice is an error.
func (c *Capacity) Reserve(order market.OrderID, d Demand) ([]Placement, error) {
	return c.reserve(order, d, false)
}

// Adopt records the reservation of a lease that already runs (or is being deployed):
// its existing pods materialize replicas first, the rest are placed where they fit,
// and whatever does not fit is kept unplaced rather than refused. Pool usage is
// claimed even beyond capacity: the lease is ours already.
func (c *Capacity) Adopt(order market.OrderID, d Demand) ([]Placement, error) {
	return c.reserve(order, d, true)
}

func (c *Capacity) reserve(order market.OrderID, d Demand, adopt bool) ([]Placement, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res[order] != nil {
		return nil, fmt.Errorf("order %s is already reserved", order)
	}
	if c.unavailable != "" && !adopt {
		return nil, &Insufficient{Resource: "inventory", Detail: c.unavailable}
	}
	if !adopt {
		if err := c.checkPoolsLocked(d); err != nil {
			return nil, err
		}
	}
	r := &reservation{order: order, demand: d, gpus: make([]gpu.Model, len(d.Units)), planned: make([][]int, len(d.Units)), unplaced: make([]int, len(d.Units))}
	// Adopted leases: replicas already running are not placed again.
	running := make([]int, len(d.Units))
	if adopt {
		running = c.runningLocked(order, d)
	}
	// Each unit's replicas are planned as soon as they are placed, so the next unit
	// sees them; a failure takes back what was planned.
	for _, u := range placementOrder(d.Units) {
		unit := d.Units[u]
		want := int(unit.Count) - running[u]
		nodes, model, err := c.placeLocked(unit, want)
		if err != nil && !adopt {
			for pu, planned := range r.planned {
				for _, ni := range planned {
					c.planSubLocked(ni, d.Units[pu].Each)
				}
			}
			return nil, err
		}
		r.planned[u], r.gpus[u] = nodes, model
		r.unplaced[u] = max(want, 0) - len(nodes)
		c.unplaced += r.unplaced[u]
		for _, ni := range nodes {
			c.planAddLocked(ni, unit.Each)
		}
	}
	c.res[order] = r
	c.claimPoolsLocked(r, +1)
	for _, key := range sortedKeys(c.podsOf[order]) {
		c.materializeLocked(r, c.pods[key])
	}
	out := make([]Placement, len(d.Units))
	for u, unit := range d.Units {
		out[u] = Placement{UnitID: unit.ID, GPU: r.gpus[u]}
	}
	return out, nil
}

// Fit reports where d would be placed now (the GPU model each unit would get), or
// the *Insufficient error Reserve would return, without reserving anything.
func (c *Capacity) Fit(d Demand) ([]Placement, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unavailable != "" {
		return nil, &Insufficient{Resource: "inventory", Detail: c.unavailable}
	}
	if err := c.checkPoolsLocked(d); err != nil {
		return nil, err
	}
	planned := make([][]int, len(d.Units))
	defer func() {
		for u, nodes := range planned {
			for _, ni := range nodes {
				c.planSubLocked(ni, d.Units[u].Each)
			}
		}
	}()
	out := make([]Placement, len(d.Units))
	for _, u := range placementOrder(d.Units) {
		unit := d.Units[u]
		nodes, model, err := c.placeLocked(unit, int(unit.Count))
		if err != nil {
			return nil, err
		}
		planned[u] = nodes
		for _, ni := range nodes {
			c.planAddLocked(ni, unit.Each)
		}
		out[u] = Placement{UnitID: unit.ID, GPU: model}
	}
	return out, nil
}

// runningLocked materializes, per unit, the order's scheduled pods that match it, and
// counts them. (Only for adoption, which cannot fail after this.)
func (c *Capacity) runningLocked(order market.OrderID, d Demand) []int {
	n := make([]int, len(d.Units))
	for _, key := range sortedKeys(c.podsOf[order]) {
		ps := c.pods[key]
		if ps.Node == "" || ps.mat {
			continue
		}
		for u, unit := range d.Units {
			if matches(unit, ps.Requests) && n[u] < int(unit.Count) {
				n[u]++
				ps.mat, ps.unit = true, u
				break
			}
		}
	}
	return n
}

// sortedKeys lists a map's keys in order (deterministic iteration).
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// matches: a pod runs a replica of unit when it requests the unit's CPU, memory and
// GPUs (ephemeral storage may be requested differently).
func matches(unit Unit, req Amounts) bool {
	e := unit.Each
	return e.CPU == req.CPU && e.Memory == req.Memory && e.GPUs == req.GPUs
}

// placementOrder places GPU units first, then the largest.
func placementOrder(units []Unit) []int {
	idx := make([]int, len(units))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ua, ub := units[a].Each, units[b].Each
		if c := cmp.Compare(ub.GPUs, ua.GPUs); c != 0 {
			return c
		}
		if c := cmp.Compare(ub.CPU, ua.CPU); c != 0 {
			return c
		}
		return cmp.Compare(ub.Memory, ua.Memory)
	})
	return idx
}

// placeLocked finds a node for each of want replicas of unit, given the tentative
// GPU units try each accepted model in turn and take
// the first under which every replica fits. On failure it returns the nodes it could
// fill (for adoption) and an *Insufficient error.
func (c *Capacity) placeLocked(unit Unit, want int) ([]int, gpu.Model, error) {
	if want <= 0 {
		return nil, gpu.Model{}, nil
	}
	if unit.Each.GPUs == 0 {
		nodes, ok := c.fillLocked(unit, want, -1, nil)
		if !ok {
			return nodes, gpu.Model{}, &Insufficient{Resource: "nodes", Detail: fmt.Sprintf(
				"resource unit %d: %d of %d replicas (%s each) fit on the cluster's nodes", unit.ID, len(nodes), want, unit.Each)}
		}
		return nodes, gpu.Model{}, nil
	}
	var best []int
	var bestGPU gpu.Model
	for _, alt := range unit.GPUs {
		nodes, ok := c.fillLocked(unit, want, -1, &alt)
		if ok {
			return nodes, c.nodes[nodes[0]].GPU, nil
		}
		if len(nodes) > len(best) {
			best, bestGPU = nodes, c.nodes[nodes[0]].GPU
		}
	}
	return best, bestGPU, &Insufficient{Resource: "gpu", Detail: fmt.Sprintf(
		"resource unit %d: %d of %d replicas (%d GPUs each of %s) fit on the cluster's GPU nodes", unit.ID, len(best), want, unit.Each.GPUs, gpuList(unit.GPUs))}
}

func gpuList(gs []gpu.Model) string {
	s := ""
	for i, g := range gs {
		if i > 0 {
			s += " or "
		}
		s += g.String()
	}
	return s
}

// fillLocked places want replicas one by one on the best node for each, never on node
// skip (−1: none). GPU replicas of one unit share one model (the first node chosen
// fixes it). Best: for GPU units the fitting node with the fewest free GPUs (keep big
// GPU nodes whole); for others, nodes without GPUs first, then the most free CPU
// (spread, like the scheduler's default). The free amounts are claimed tentatively
// while placing and restored before returning: fillLocked changes nothing.
func (c *Capacity) fillLocked(unit Unit, want, skip int, alt *gpu.Model) ([]int, bool) {
	var nodes []int
	defer func() {
		for _, ni := range nodes {
			c.hot[ni].free = c.hot[ni].free.Add(unit.Each)
		}
	}()
	var model *gpu.Model
	for range want {
		best := -1
		for i := range c.hot {
			h := &c.hot[i]
			if !h.schedulable || (alt != nil && h.gpus == 0) || (h.gpuOnly && unit.Each.GPUs == 0) || i == skip || !unit.Each.Fits(h.free) {
				continue
			}
			if alt != nil {
				n := c.nodes[i]
				if !alt.Accepts(n.GPU) || (model != nil && n.GPU != *model) {
					continue
				}
			}
			if best < 0 || better(unit, h, &c.hot[best]) {
				best = i
			}
		}
		if best < 0 {
			return nodes, false
		}
		if alt != nil && model == nil {
			m := c.nodes[best].GPU
			model = &m
		}
		c.hot[best].free = c.hot[best].free.Sub(unit.Each)
		nodes = append(nodes, best)
	}
	return nodes, true
}

func better(unit Unit, n, b *hotNode) bool {
	if unit.Each.GPUs > 0 {
		return n.free.GPUs < b.free.GPUs
	}
	if (n.gpus == 0) != (b.gpus == 0) {
		return n.gpus == 0
	}
	return n.free.CPU > b.free.CPU
}

// Unreserve releases order's reservation, reporting whether there was one. Its lease's
// pods and pool items, if any still exist, count as ordinary usage from then on.
func (c *Capacity) Unreserve(order market.OrderID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.res[order]
	if r == nil {
		return false
	}
	for u, nodes := range r.planned {
		for _, ni := range nodes {
			c.planSubLocked(ni, r.demand.Units[u].Each)
		}
	}
	for key := range c.podsOf[order] {
		c.pods[key].mat = false
	}
	c.claimPoolsLocked(r, -1)
	delete(c.res, order)
	for _, n := range r.unplaced {
		c.unplaced -= n
	}
	c.placeUnplacedLocked()
	return true
}

// rebalanceLocked moves planned replicas off node ni while pods and plans together
// exceed it (the scheduler put a pod where berth had planned another order's replica,
// or the node shrank), and all of them when it no longer takes pods (it went NotReady,
// was cordoned or tainted: a node that is unschedulable later holds no plans, as one
// unschedulable from the start never gets any). A replica that fits nowhere else
// becomes unplaced, and is planned again where room appears (the node coming back).
func (c *Capacity) rebalanceLocked(ni int) {
	n := c.nodes[ni]
	for (c.hot[ni].free.Negative() || !n.Schedulable) && n.planned != (Amounts{}) {
		r, u, k := c.plannedOnLocked(ni)
		if r == nil {
			return
		}
		each := r.demand.Units[u].Each
		r.planned[u] = slices.Delete(r.planned[u], k, k+1)
		c.planSubLocked(ni, each)
		r.unplaced[u]++
		c.unplaced++
		c.placeOneLocked(r, u, ni)
	}
}

// plannedOnLocked finds a replica planned on node ni: the reservation, unit and index
// in its plan, taking orders in a fixed order so the outcome does not depend on map
// iteration.
func (c *Capacity) plannedOnLocked(ni int) (*reservation, int, int) {
	var best *reservation
	bu, bk := 0, 0
	for _, r := range c.res {
		if best != nil && r.order.String() > best.order.String() {
			continue
		}
		for u, nodes := range r.planned {
			if k := slices.Index(nodes, ni); k >= 0 {
				best, bu, bk = r, u, k
				break
			}
		}
	}
	return best, bu, bk
}

// placeOneLocked tries to plan one unplaced replica of unit u of r on a node other
// than skip (−1: any), with the GPU model the unit already has.
func (c *Capacity) placeOneLocked(r *reservation, u, skip int) bool {
	unit := r.demand.Units[u]
	var alt *gpu.Model
	if unit.Each.GPUs > 0 {
		g := r.gpus[u]
		alt = &g
	}
	nodes, ok := c.fillLocked(unit, 1, skip, alt)
	if !ok {
		return false
	}
	r.planned[u] = append(r.planned[u], nodes[0])
	c.planAddLocked(nodes[0], unit.Each)
	r.unplaced[u]--
	c.unplaced--
	return true
}

// placeUnplacedLocked plans unplaced replicas where room appeared.
func (c *Capacity) placeUnplacedLocked() {
	if c.unplaced == 0 {
		return
	}
	for _, o := range c.sortedOrdersLocked() {
		r := c.res[o]
		for u := range r.unplaced {
			placed := true
			for r.unplaced[u] > 0 && placed {
				placed = c.placeOneLocked(r, u, -1)
			}
		}
	}
}

func (c *Capacity) sortedOrdersLocked() []market.OrderID {
	out := make([]market.OrderID, 0, len(c.res))
	for o, r := range c.res {
		if slices.ContainsFunc(r.unplaced, func(n int) bool { return n > 0 }) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b market.OrderID) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// Reservations lists the orders holding reservations.
func (c *Capacity) Reservations() []market.OrderID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]market.OrderID, 0, len(c.res))
	for o := range c.res {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b market.OrderID) int { return cmp.Compare(a.String(), b.String()) })
	return out
}
