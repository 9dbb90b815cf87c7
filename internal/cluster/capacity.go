package cluster

import (
	"cmp"
	"slices"
	"sync"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

// Node is a node as the inventory sees it.
type Node struct {
	Name        string
	Allocatable Amounts
	// GPU is the model of the node's GPUs (one model per node), when it has any.
	GPU gpu.Model
	// Schedulable is false for nodes that are not Ready, are cordoned, or carry a
	// NoSchedule or NoExecute taint: no replica is planned there, and they offer
	// nothing in Totals and Snapshot.
	Schedulable bool
	// GPUOnly marks a node tainted for GPU workloads (the nvidia.com/gpu taint of
	// managed Kubernetes' GPU node pools): only replicas with GPUs are planned there
	// (their pods tolerate the taint).
	GPUOnly bool
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
	// Resource is one of "nodes", "gpu", "storage", "leased_ips", "node_ports", or
	// "inventory" when the inventory itself cannot be trusted (a fixed set, usable as
	// a metric label).
	Resource string
	Detail   string
}

func (e *Insufficient) Error() string { return "insufficient " + e.Resource + ": " + e.Detail }

// Placement is where a reservation put a unit's replicas and which GPU model they got.
type Placement struct {
	UnitID uint32
	GPU    gpu.Model
}

// reservation is one order's claim. planned holds, per unit, the node of each replica
// not yet running as a pod; once a lease pod appears, one planned replica becomes
// materialized (the pod's requests count instead).
type reservation struct {
	order    market.OrderID
	demand   Demand
	gpus     []gpu.Model // per unit
	planned  [][]int     // per unit: node indexes
	unplaced []int       // per unit: replicas that found no node (adopted leases only)
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
	gpuOnly     bool
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
	// unavailable, when not empty, is why nothing can be reserved (SetUnavailable).
	unavailable string
}

// SetUnavailable refuses every Reserve and Fit with an *Insufficient of resource
// "inventory" and the reason why, until called with ""; the inventory is kept (Adopt
// still records running leases). The provider sets it when what it knows of the
// cluster is too old to bid on.
func (c *Capacity) SetUnavailable(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unavailable = why
}

// Unavailable is the reason SetUnavailable gave ("" when reservations are taken).
func (c *Capacity) Unavailable() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unavailable
}

// refreshLocked recomputes the free amounts of the named node, if it exists.
func (c *Capacity) refreshLocked(name string) {
	if i, ok := c.nodeIndex[name]; ok {
		n := c.nodes[i]
		c.hot[i] = hotNode{free: n.Allocatable.Sub(c.used[name]).Sub(n.planned), gpus: n.Allocatable.GPUs, schedulable: n.Schedulable, gpuOnly: n.GPUOnly}
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
// for them, or is no longer schedulable, move to other nodes, or become unplaced.
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
		// The replica is planned again where the pod was, the space it just freed, when
		// that node still takes pods; otherwise it looks for a place anew.
		if ni, ok := c.nodeIndex[ps.Node]; ok && c.nodes[ni].Schedulable {
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
