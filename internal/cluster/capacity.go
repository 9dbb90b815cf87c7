package cluster

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"berth.dev/berth/internal/market"
)

// Node is a node as the inventory sees it.
type Node struct {
	Name        string
	Allocatable Amounts
	// GPU is the model of the node's GPUs (one model per node), when it has any.
	GPU GPUModel
	// Schedulable is false for nodes that are not Ready or are cordoned.
	Schedulable bool
}

// Pod is a pod's claim on a node. Pods not yet scheduled (Node "") claim nothing.
type Pod struct {
	Key      string // namespace/name
	Node     string
	Requests Amounts
	// Lease is the lease the pod runs for, when it is one of ours.
	Lease *market.LeaseID
}

// PoolItem is one use of a cluster-wide pool (a PVC of a storage class, a leased IP,
// a node port), possibly by one of our leases.
type PoolItem struct {
	Key    string
	Amount int64
	Lease  *market.LeaseID
}

// Pool names.
const (
	PoolLeasedIPs = "leased-ips"
	PoolNodePorts = "node-ports"
)

// StoragePool is the pool name of a persistent storage class.
func StoragePool(class string) string { return "storage/" + class }

// Insufficient is why a demand cannot be placed: which resource ran out, and a sentence.
type Insufficient struct {
	// Resource is one of "nodes", "gpu", "storage", "leased_ips", "node_ports" (a fixed
	// set, usable as a metric label).
	Resource string
	Detail   string
}

func (e *Insufficient) Error() string { return "insufficient " + e.Resource + ": " + e.Detail }

// Placement is where a reservation put a unit's replicas and which GPU model they got.
type Placement struct {
	UnitID uint32
	GPU    GPUModel
}

// reservation is one order's claim. planned holds, per unit, the node of each replica
// not yet running as a pod; once a lease pod appears, one planned replica becomes
// materialized (the pod's requests count instead).
type reservation struct {
	order    market.OrderID
	demand   Demand
	gpus     []GPUModel // per unit
	planned  [][]int    // per unit: node indexes
	unplaced []int      // per unit: replicas that found no node (adopted leases only)
}

type nodeState struct {
	Node
	planned Amounts // unmaterialized replicas of reservations
}

// hotNode is what placement scans, one per node, index-aligned with Capacity.nodes and
// kept compact so that a scan over a thousand nodes stays in cache.
type hotNode struct {
	free        Amounts // Allocatable − used − planned, kept up to date
	gpus        int64   // allocatable GPUs
	schedulable bool
}

type podState struct {
	Pod
	mat  bool // materializes one planned replica of its lease's reservation
	unit int
}

type pool struct {
	capacity int64
	used     int64 // items not covered by a reservation
	reserved int64
	items    map[string]PoolItem
}

// Capacity is the cluster's inventory (nodes, pods, pools) and the reservations held
// against it. It is safe for concurrent use. Its invariants: a reservation is only
// made where it fits at that moment (planned + used ≤ allocatable on every node it
// touches, reserved + used ≤ capacity for every pool); Unreserve gives back exactly
// what Reserve took.
type Capacity struct {
	mu        sync.Mutex
	nodes     []*nodeState // sorted by name
	hot       []hotNode
	nodeIndex map[string]int
	used      map[string]Amounts // by node name: requests of every scheduled pod
	pods      map[string]*podState
	podsOf    map[market.OrderID]map[string]bool
	pools     map[string]*pool
	res       map[market.OrderID]*reservation
	unplaced  int // replicas of all reservations that have no node
}

// refreshLocked recomputes the free amounts of the named node, if it exists.
func (c *Capacity) refreshLocked(name string) {
	if i, ok := c.nodeIndex[name]; ok {
		n := c.nodes[i]
		c.hot[i] = hotNode{free: n.Allocatable.Sub(c.used[name]).Sub(n.planned), gpus: n.Allocatable.GPUs, schedulable: n.Schedulable}
	}
}

func (c *Capacity) planAddLocked(ni int, a Amounts) {
	n := c.nodes[ni]
	n.planned = n.planned.Add(a)
	c.hot[ni].free = c.hot[ni].free.Sub(a)
}

func (c *Capacity) planSubLocked(ni int, a Amounts) {
	n := c.nodes[ni]
	n.planned = n.planned.Sub(a)
	c.hot[ni].free = c.hot[ni].free.Add(a)
}

// NewCapacity returns an empty inventory.
func NewCapacity() *Capacity {
	return &Capacity{
		nodeIndex: map[string]int{},
		used:      map[string]Amounts{},
		pods:      map[string]*podState{},
		podsOf:    map[market.OrderID]map[string]bool{},
		pools:     map[string]*pool{},
		res:       map[market.OrderID]*reservation{},
	}
}

// SetNode adds or replaces a node. Replicas planned on a node that no longer has room
// for them move to other nodes, or become unplaced.
func (c *Capacity) SetNode(n Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.nodeIndex[n.Name]; ok {
		c.nodes[i].Node = n
		c.refreshLocked(n.Name)
		c.rebalanceLocked(i)
	} else {
		i, _ := slices.BinarySearchFunc(c.nodes, n.Name, func(s *nodeState, name string) int { return cmp.Compare(s.Name, name) })
		c.nodes = slices.Insert(c.nodes, i, &nodeState{Node: n})
		c.hot = slices.Insert(c.hot, i, hotNode{})
		c.reindexLocked(i)
		c.refreshLocked(n.Name)
	}
	c.placeUnplacedLocked()
}

// DeleteNode removes a node. Replicas planned on it become unplaced: their reservation
// keeps them (the bid stands) but they no longer hold capacity anywhere.
func (c *Capacity) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.nodeIndex[name]
	if !ok {
		return
	}
	for _, r := range c.res {
		for u := range r.planned {
			kept := r.planned[u][:0]
			for _, ni := range r.planned[u] {
				if ni == i {
					r.unplaced[u]++
					c.unplaced++
				} else {
					kept = append(kept, ni)
				}
			}
			r.planned[u] = kept
		}
	}
	c.nodes = slices.Delete(c.nodes, i, i+1)
	c.hot = slices.Delete(c.hot, i, i+1)
	delete(c.nodeIndex, name)
	c.reindexLocked(i)
	c.placeUnplacedLocked()
}

// reindexLocked renumbers nodes from i on, in the index and in every plan.
func (c *Capacity) reindexLocked(from int) {
	old := make(map[int]int, len(c.nodes)-from)
	for j := from; j < len(c.nodes); j++ {
		if prev, ok := c.nodeIndex[c.nodes[j].Name]; ok {
			old[prev] = j
		}
		c.nodeIndex[c.nodes[j].Name] = j
	}
	for _, r := range c.res {
		for u := range r.planned {
			for k, ni := range r.planned[u] {
				if nj, ok := old[ni]; ok {
					r.planned[u][k] = nj
				}
			}
		}
	}
}

// SetPod adds or replaces a pod.
func (c *Capacity) SetPod(p Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deletePodLocked(p.Key)
	ps := &podState{Pod: p}
	c.pods[p.Key] = ps
	if p.Node != "" {
		c.used[p.Node] = c.used[p.Node].Add(p.Requests)
		c.refreshLocked(p.Node)
	}
	if p.Lease != nil {
		o := p.Lease.Order()
		if c.podsOf[o] == nil {
			c.podsOf[o] = map[string]bool{}
		}
		c.podsOf[o][p.Key] = true
		if r := c.res[o]; r != nil {
			c.materializeLocked(r, ps)
		}
	}
	if ni, ok := c.nodeIndex[p.Node]; ok {
		c.rebalanceLocked(ni)
	}
	// A replaced pod, or a replica materialized elsewhere, may have freed room.
	c.placeUnplacedLocked()
}

// DeletePod removes a pod.
func (c *Capacity) DeletePod(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deletePodLocked(key)
	c.placeUnplacedLocked()
}

func (c *Capacity) deletePodLocked(key string) {
	ps, ok := c.pods[key]
	if !ok {
		return
	}
	delete(c.pods, key)
	if ps.Node != "" {
		u := c.used[ps.Node].Sub(ps.Requests)
		if u == (Amounts{}) {
			delete(c.used, ps.Node)
		} else {
			c.used[ps.Node] = u
		}
		c.refreshLocked(ps.Node)
	}
	if ps.Lease == nil {
		return
	}
	o := ps.Lease.Order()
	delete(c.podsOf[o], key)
	if len(c.podsOf[o]) == 0 {
		delete(c.podsOf, o)
	}
	if r := c.res[o]; r != nil && ps.mat {
		// The replica is planned again where the pod was: the space it just freed.
		if ni, ok := c.nodeIndex[ps.Node]; ok {
			r.planned[ps.unit] = append(r.planned[ps.unit], ni)
			c.planAddLocked(ni, r.demand.Units[ps.unit].Each)
		} else {
			r.unplaced[ps.unit]++
			c.unplaced++
		}
	}
}

// materializeLocked turns one planned replica of r into the running pod ps, when ps
// is scheduled and its requests are those of one of r's units with a replica left.
func (c *Capacity) materializeLocked(r *reservation, ps *podState) {
	if ps.Node == "" || ps.mat {
		return
	}
	for u, unit := range r.demand.Units {
		e := unit.Each
		if !matches(unit, ps.Requests) {
			continue
		}
		if r.unplaced[u] > 0 {
			r.unplaced[u]--
			c.unplaced--
			ps.mat, ps.unit = true, u
			return
		}
		if len(r.planned[u]) == 0 {
			continue
		}
		k := 0
		if ni, ok := c.nodeIndex[ps.Node]; ok {
			if j := slices.Index(r.planned[u], ni); j >= 0 {
				k = j
			}
		}
		ni := r.planned[u][k]
		r.planned[u] = slices.Delete(r.planned[u], k, k+1)
		c.planSubLocked(ni, e)
		ps.mat, ps.unit = true, u
		return
	}
}

// SetPoolCapacity sets the size of a pool (storage bytes of a class, leased IPs, node
// ports).
func (c *Capacity) SetPoolCapacity(name string, capacity int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poolLocked(name).capacity = capacity
}

// SetPoolItem adds or replaces a use of a pool.
func (c *Capacity) SetPoolItem(name string, it PoolItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.poolLocked(name)
	c.unusePoolLocked(p, it.Key)
	p.items[it.Key] = it
	if !c.coveredLocked(it) {
		p.used += it.Amount
	}
}

// DeletePoolItem removes a use of a pool.
func (c *Capacity) DeletePoolItem(name, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pools[name]; ok {
		c.unusePoolLocked(p, key)
	}
}

func (c *Capacity) unusePoolLocked(p *pool, key string) {
	if old, ok := p.items[key]; ok {
		if !c.coveredLocked(old) {
			p.used -= old.Amount
		}
		delete(p.items, key)
	}
}

// coveredLocked: a lease's own use of a pool is covered by its reservation.
func (c *Capacity) coveredLocked(it PoolItem) bool {
	return it.Lease != nil && c.res[it.Lease.Order()] != nil
}

func (c *Capacity) poolLocked(name string) *pool {
	p, ok := c.pools[name]
	if !ok {
		p = &pool{items: map[string]PoolItem{}}
		c.pools[name] = p
	}
	return p
}

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
	if !adopt {
		if err := c.checkPoolsLocked(d); err != nil {
			return nil, err
		}
	}
	r := &reservation{order: order, demand: d, gpus: make([]GPUModel, len(d.Units)), planned: make([][]int, len(d.Units)), unplaced: make([]int, len(d.Units))}
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
		nodes, gpu, err := c.placeLocked(unit, want)
		if err != nil && !adopt {
			for pu, planned := range r.planned {
				for _, ni := range planned {
					c.planSubLocked(ni, d.Units[pu].Each)
				}
			}
			return nil, err
		}
		r.planned[u], r.gpus[u] = nodes, gpu
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
func (c *Capacity) placeLocked(unit Unit, want int) ([]int, GPUModel, error) {
	if want <= 0 {
		return nil, GPUModel{}, nil
	}
	if unit.Each.GPUs == 0 {
		nodes, ok := c.fillLocked(unit, want, -1, nil)
		if !ok {
			return nodes, GPUModel{}, &Insufficient{Resource: "nodes", Detail: fmt.Sprintf(
				"resource unit %d: %d of %d replicas (%s each) fit on the cluster's nodes", unit.ID, len(nodes), want, unit.Each)}
		}
		return nodes, GPUModel{}, nil
	}
	var best []int
	var bestGPU GPUModel
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

func gpuList(gs []GPUModel) string {
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
func (c *Capacity) fillLocked(unit Unit, want, skip int, alt *GPUModel) ([]int, bool) {
	var nodes []int
	defer func() {
		for _, ni := range nodes {
			c.hot[ni].free = c.hot[ni].free.Add(unit.Each)
		}
	}()
	var model *GPUModel
	for range want {
		best := -1
		for i := range c.hot {
			h := &c.hot[i]
			if !h.schedulable || (alt != nil && h.gpus == 0) || i == skip || !unit.Each.Fits(h.free) {
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

// checkPoolsLocked reports the first pool d needs more of than is free.
func (c *Capacity) checkPoolsLocked(d Demand) error {
	for _, class := range sortedKeys(d.Storage) {
		if need := d.Storage[class]; need > 0 {
			if free := c.poolFreeLocked(StoragePool(class)); need > free {
				return &Insufficient{Resource: "storage", Detail: fmt.Sprintf("storage class %q: %s needed, %s free", class, bytesString(need), bytesString(max(free, 0)))}
			}
		}
	}
	if need := int64(d.LeasedIPs); need > 0 {
		if free := c.poolFreeLocked(PoolLeasedIPs); need > free {
			return &Insufficient{Resource: "leased_ips", Detail: fmt.Sprintf("%d leased IPs needed, %d free", need, max(free, 0))}
		}
	}
	if need := int64(d.NodePorts); need > 0 {
		if free := c.poolFreeLocked(PoolNodePorts); need > free {
			return &Insufficient{Resource: "node_ports", Detail: fmt.Sprintf("%d node ports needed, %d free", need, max(free, 0))}
		}
	}
	return nil
}

func (c *Capacity) poolFreeLocked(name string) int64 {
	p, ok := c.pools[name]
	if !ok {
		return 0
	}
	return p.capacity - p.used - p.reserved
}

// claimPoolsLocked adds (sign +1) or removes (−1) r's pool claims, and moves the
// lease's own pool items between used and covered.
func (c *Capacity) claimPoolsLocked(r *reservation, sign int64) {
	claim := func(name string, n int64) {
		if n != 0 {
			c.poolLocked(name).reserved += sign * n
		}
	}
	for class, n := range r.demand.Storage {
		claim(StoragePool(class), n)
	}
	claim(PoolLeasedIPs, int64(r.demand.LeasedIPs))
	claim(PoolNodePorts, int64(r.demand.NodePorts))
	for _, p := range c.pools {
		for _, it := range p.items {
			if it.Lease != nil && it.Lease.Order() == r.order {
				p.used -= sign * it.Amount
			}
		}
	}
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
// exceed it: the scheduler put a pod where berth had planned another order's replica,
// or the node shrank. A replica that fits nowhere else becomes unplaced.
func (c *Capacity) rebalanceLocked(ni int) {
	n := c.nodes[ni]
	for c.hot[ni].free.Negative() && n.planned != (Amounts{}) {
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
	var alt *GPUModel
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
