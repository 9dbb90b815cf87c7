package cluster

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

const gi = 1 << 30

func cpuNode(name string, cpu, mem int64) Node {
	return Node{Name: name, Schedulable: true, Allocatable: Amounts{CPU: cpu, Memory: mem, EphemeralStorage: 100 * gi, Pods: 110}}
}

func gpuNode(name string, gpus int64, model gpu.Model) Node {
	n := cpuNode(name, 32000, 256*gi)
	n.Allocatable.GPUs, n.GPU = gpus, model
	return n
}

func order(n uint64) market.OrderID {
	return market.OrderID{Owner: "akash1tenant", DSeq: n, GSeq: 1, OSeq: 1}
}

func unit(id, count uint32, cpu, mem int64) Unit {
	return Unit{ID: id, Count: count, Each: Amounts{CPU: cpu, Memory: mem, Pods: 1}}
}

func mustCheck(t *testing.T, c *Capacity) {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

var a100 = gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}

func TestReservePlacesEveryReplica(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("n1", 4000, 8*gi))
	c.SetNode(cpuNode("n2", 4000, 8*gi))
	// 3 replicas of 2 CPUs: two fit on one node, so they spread over both.
	if _, err := c.Reserve(order(1), Demand{Units: []Unit{unit(1, 3, 2000, gi)}}); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, c)
	tot := c.Totals()
	if tot.Reserved.CPU != 6000 || tot.Reserved.Pods != 3 {
		t.Fatalf("reserved %s", tot.Reserved)
	}
	// 2 more CPUs fit (one node has 2 left); 4 do not fit on any one node although 2+0
	// are free in total.
	_, err := c.Reserve(order(2), Demand{Units: []Unit{unit(1, 1, 4000, gi)}})
	var ins *Insufficient
	if !errors.As(err, &ins) || ins.Resource != "nodes" {
		t.Fatalf("want insufficient nodes, got %v", err)
	}
	if c.Reserved(order(2)) {
		t.Fatal("a refused reservation was kept")
	}
	if _, err := c.Reserve(order(3), Demand{Units: []Unit{unit(1, 1, 2000, gi)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve(order(3), Demand{Units: []Unit{unit(1, 1, 1, 1)}}); err == nil {
		t.Fatal("reserving an order twice succeeded")
	}
	if !c.Unreserve(order(1)) || c.Unreserve(order(1)) {
		t.Fatal("unreserve should report true once")
	}
	mustCheck(t, c)
	if got := c.Totals().Reserved; got.CPU != 2000 {
		t.Fatalf("after unreserve, reserved %s", got)
	}
}

func TestReserveIsAllOrNothingAcrossUnits(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("n1", 4000, 8*gi))
	_, err := c.Reserve(order(1), Demand{Units: []Unit{unit(1, 1, 3000, gi), unit(2, 1, 2000, gi)}})
	if err == nil {
		t.Fatal("5 CPUs fit on a 4-CPU node")
	}
	if tot := c.Totals(); tot.Reserved != (Amounts{}) || tot.Reservations != 0 {
		t.Fatalf("a failed reservation left %s in %d reservations", tot.Reserved, tot.Reservations)
	}
}

func TestGPUPlacement(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("cpu", 64000, 256*gi))
	c.SetNode(gpuNode("g-a100", 8, a100))
	c.SetNode(gpuNode("g-h100", 4, gpu.Model{Vendor: "nvidia", Model: "h100", RAM: "80Gi"}))
	gpuUnit := func(n int64, alts ...gpu.Model) Unit {
		u := unit(1, 1, 1000, gi)
		u.Each.GPUs, u.GPUs = n, alts
		return u
	}
	// Any model: the fewest free GPUs that fit (keep the big node whole) → h100.
	p, err := c.Reserve(order(1), Demand{Units: []Unit{gpuUnit(2, gpu.Model{Vendor: "nvidia", Model: "*"})}})
	if err != nil || p[0].GPU.Model != "h100" {
		t.Fatalf("placement %+v, %v", p, err)
	}
	// a100 with 40Gi: none. a100 with 80Gi: yes.
	if _, err := c.Reserve(order(2), Demand{Units: []Unit{gpuUnit(1, gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "40Gi"})}}); err == nil {
		t.Fatal("an a100 40Gi was found")
	}
	p, err = c.Reserve(order(3), Demand{Units: []Unit{gpuUnit(8, gpu.Model{Vendor: "nvidia", Model: "h100"}, gpu.Model{Vendor: "nvidia", Model: "a100"})}})
	if err != nil || p[0].GPU != a100 {
		t.Fatalf("placement %+v, %v", p, err)
	}
	// Now no GPU is free on the a100 node and 2 on the h100 node.
	_, err = c.Reserve(order(4), Demand{Units: []Unit{gpuUnit(3, gpu.Model{Vendor: "nvidia", Model: "*"})}})
	var ins *Insufficient
	if !errors.As(err, &ins) || ins.Resource != "gpu" {
		t.Fatalf("want insufficient gpu, got %v", err)
	}
	// CPU units avoid GPU nodes while CPU nodes have room.
	if _, err := c.Reserve(order(5), Demand{Units: []Unit{unit(1, 4, 8000, 8*gi)}}); err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[c.nodeIndex["cpu"]].planned.CPU; got != 32000 {
		t.Fatalf("cpu node planned %dm, want all 4 replicas there", got)
	}
	mustCheck(t, c)
}

func TestPools(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("n1", 8000, 16*gi))
	c.SetPoolCapacity(StoragePool("beta3"), 100*gi)
	c.SetPoolCapacity(PoolLeasedIPs, 2)
	c.SetPoolCapacity(PoolNodePorts, 3)
	c.SetPoolItem(StoragePool("beta3"), PoolItem{Key: "other/pvc", Amount: 60 * gi})
	d := Demand{Units: []Unit{unit(1, 2, 100, gi)}, Storage: map[string]int64{"beta3": 40 * gi}, LeasedIPs: 1, NodePorts: 2}
	if _, err := c.Reserve(order(1), d); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    Demand
		want string
	}{
		{Demand{Storage: map[string]int64{"beta3": 1}}, "storage"},
		{Demand{Storage: map[string]int64{"beta2": 1}}, "storage"},
		{Demand{LeasedIPs: 2}, "leased_ips"},
		{Demand{NodePorts: 2}, "node_ports"},
	} {
		_, err := c.Reserve(order(2), tc.d)
		var ins *Insufficient
		if !errors.As(err, &ins) || ins.Resource != tc.want {
			t.Fatalf("%+v: want insufficient %s, got %v", tc.d, tc.want, err)
		}
	}
	// The lease's own PVC is covered by its reservation, not counted twice.
	lease := order(1).Bid("akash1prov").Lease()
	c.SetPoolItem(StoragePool("beta3"), PoolItem{Key: "lease/pvc", Amount: 40 * gi, Lease: &lease})
	mustCheck(t, c)
	if free := c.poolFreeLocked(StoragePool("beta3")); free != 0 {
		t.Fatalf("free %d", free)
	}
	c.Unreserve(order(1))
	mustCheck(t, c)
	// Released: the PVC still exists, so it counts as used now.
	if free := c.poolFreeLocked(StoragePool("beta3")); free != 0 {
		t.Fatalf("free after unreserve %d", free)
	}
	c.DeletePoolItem(StoragePool("beta3"), "lease/pvc")
	if free := c.poolFreeLocked(StoragePool("beta3")); free != 40*gi {
		t.Fatalf("free after the PVC went %d", free)
	}
}

func TestPodsMaterializeReplicas(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("n1", 4000, 8*gi))
	c.SetNode(cpuNode("n2", 4000, 8*gi))
	lease := order(1).Bid("akash1prov").Lease()
	if _, err := c.Reserve(order(1), Demand{Units: []Unit{unit(1, 2, 2000, gi)}}); err != nil {
		t.Fatal(err)
	}
	// Both replicas run on n1, although the plan spread them: the accounting follows.
	for i := range 2 {
		c.SetPod(Pod{Key: fmt.Sprintf("ns/web-%d", i), Node: "n1", Requests: Amounts{CPU: 2000, Memory: gi, Pods: 1}, Lease: &lease})
	}
	mustCheck(t, c)
	if tot := c.Totals(); tot.Reserved != (Amounts{}) || tot.Used.CPU != 4000 {
		t.Fatalf("totals %+v", tot)
	}
	// n2 is entirely free again.
	if _, err := c.Reserve(order(2), Demand{Units: []Unit{unit(1, 1, 4000, gi)}}); err != nil {
		t.Fatal(err)
	}
	// A pod replaced (rolling update): while it is gone the replica is planned where
	// it ran, so nobody else takes the space.
	c.DeletePod("ns/web-0")
	mustCheck(t, c)
	if _, err := c.Reserve(order(3), Demand{Units: []Unit{unit(1, 1, 2000, gi)}}); err == nil {
		t.Fatal("the space of a replaced lease pod was given away")
	}
	c.SetPod(Pod{Key: "ns/web-2", Node: "n1", Requests: Amounts{CPU: 2000, Memory: gi, Pods: 1}, Lease: &lease})
	mustCheck(t, c)
	c.Unreserve(order(1))
	mustCheck(t, c)
	if tot := c.Totals(); tot.Used.CPU != 4000 || tot.Reserved.CPU != 4000 {
		t.Fatalf("after unreserve %+v", tot)
	}
}

func TestAdoptRunningLease(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("n1", 4000, 8*gi))
	lease := order(1).Bid("akash1prov").Lease()
	// After a restart the pods are seen before the lease is adopted.
	c.SetPod(Pod{Key: "ns/a", Node: "n1", Requests: Amounts{CPU: 3000, Memory: gi, Pods: 1}, Lease: &lease})
	// Adopting a 3-replica lease with one running: 2 more must be planned, 1 fits.
	if _, err := c.Adopt(order(1), Demand{Units: []Unit{unit(1, 3, 3000, gi)}}); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, c)
	if tot := c.Totals(); tot.Unplaced != 2 || tot.Used.CPU != 3000 {
		t.Fatalf("totals %+v", tot)
	}
}

func TestDeleteNodeUnplaces(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("a", 4000, 8*gi))
	c.SetNode(cpuNode("b", 4000, 8*gi))
	c.SetNode(cpuNode("c", 4000, 8*gi))
	if _, err := c.Reserve(order(1), Demand{Units: []Unit{unit(1, 3, 3000, gi)}}); err != nil {
		t.Fatal(err)
	}
	c.DeleteNode("a")
	mustCheck(t, c)
	if tot := c.Totals(); tot.Unplaced != 1 || tot.Reserved.CPU != 6000 {
		t.Fatalf("totals %+v", tot)
	}
	c.SetNode(cpuNode("0", 4000, 8*gi)) // sorts first: every index moves
	mustCheck(t, c)
	c.Unreserve(order(1))
	mustCheck(t, c)
	if tot := c.Totals(); tot.Reserved != (Amounts{}) {
		t.Fatalf("totals %+v", tot)
	}
}

// TestNodeGoingUnschedulableLosesItsPlans: a node that stops taking pods later (NotReady,
// cordoned, tainted) is treated as one that never took them: replicas planned there
// move to nodes that do, or become unplaced until one has room (the node coming back),
// and it offers nothing.
func TestNodeGoingUnschedulableLosesItsPlans(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("a", 8000, 16*gi))
	c.SetNode(cpuNode("b", 4000, 8*gi))
	// The most free CPU first: both replicas go to a.
	if _, err := c.Reserve(order(1), Demand{Units: []Unit{unit(1, 2, 2000, gi)}}); err != nil {
		t.Fatal(err)
	}
	if tot := c.Totals(); tot.Reserved.CPU != 4000 {
		t.Fatalf("totals %+v", tot)
	}
	down := cpuNode("a", 8000, 16*gi)
	down.Schedulable = false
	c.SetNode(down)
	mustCheck(t, c)
	s := c.Snapshot()
	if s.Nodes[0].Available != (Amounts{}) || s.Nodes[1].Available.CPU != 0 {
		t.Fatalf("after a went down: %+v, want nothing on a and both replicas on b", s.Nodes)
	}
	if tot := c.Totals(); tot.Reserved.CPU != 4000 || tot.Unplaced != 0 || tot.Nodes != 1 {
		t.Fatalf("after a went down: totals %+v", tot)
	}
	// Nothing more fits: a does not count.
	if _, err := c.Fit(Demand{Units: []Unit{unit(1, 1, 1000, gi)}}); err == nil {
		t.Fatal("an order fits on a node that takes no pods")
	}
	// b cordoned too: the replicas have nowhere to go; the bid stands.
	cordoned := cpuNode("b", 4000, 8*gi)
	cordoned.Schedulable = false
	c.SetNode(cordoned)
	mustCheck(t, c)
	if tot := c.Totals(); tot.Unplaced != 2 || tot.Nodes != 0 {
		t.Fatalf("with both down: totals %+v", tot)
	}
	// a comes back Ready: the replicas are planned there again.
	c.SetNode(cpuNode("a", 8000, 16*gi))
	mustCheck(t, c)
	if tot := c.Totals(); tot.Unplaced != 0 || tot.Reserved.CPU != 4000 {
		t.Fatalf("a back: totals %+v", tot)
	}
	if s := c.Snapshot(); s.Nodes[0].Available.CPU != 4000 {
		t.Fatalf("a back: %+v", s.Nodes[0])
	}
}

// TestReservationProperties runs random sequences of reservations, releases and lease
// pods coming and going and checks the invariants after every step: reserved + used ≤
// allocatable on every node; nothing is planned on a node that takes no pods; the
// bookkeeping adds up; every reservation belongs to an
// order that holds one; releasing everything restores the empty cluster exactly.
func TestReservationProperties(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			c := NewCapacity()
			for i := range 1 + rng.IntN(8) {
				if rng.IntN(3) == 0 {
					c.SetNode(gpuNode(fmt.Sprintf("g%d", i), int64(1+rng.IntN(8)), gpu.Model{Vendor: "nvidia", Model: []string{"a100", "h100"}[rng.IntN(2)]}))
				} else {
					c.SetNode(cpuNode(fmt.Sprintf("n%d", i), int64(1000*(1+rng.IntN(16))), int64(1+rng.IntN(32))*gi))
				}
			}
			c.SetPoolCapacity(StoragePool("beta3"), 50*gi)
			c.SetPoolCapacity(PoolNodePorts, 10)
			held := map[market.OrderID]Demand{}
			pods := map[string]Pod{}
			for step := range 300 {
				switch op := rng.IntN(12); {
				case op == 11:
					// A node stops taking pods (NotReady, cordoned) or takes them again.
					n := c.nodes[rng.IntN(len(c.nodes))].Node
					n.Schedulable = !n.Schedulable
					c.SetNode(n)
				case op == 10:
					// Reserving and releasing at once leaves every node and pool as it was.
					before := snapshot(c)
					o := order(1000 + uint64(step))
					if _, err := c.Reserve(o, randomDemand(rng)); err == nil {
						c.Unreserve(o)
					}
					if after := snapshot(c); after != before {
						t.Fatalf("step %d: reserve+unreserve changed the state:\n%s\n%s", step, before, after)
					}
				case op < 5:
					o := order(uint64(rng.IntN(30)))
					d := randomDemand(rng)
					_, err := c.Reserve(o, d)
					if _, dup := held[o]; dup && err == nil {
						t.Fatalf("step %d: order %s reserved twice", step, o)
					}
					if err == nil {
						held[o] = d
					}
				case op < 7:
					o := order(uint64(rng.IntN(30)))
					_, had := held[o]
					if c.Unreserve(o) != had {
						t.Fatalf("step %d: unreserve %s reported %v", step, o, !had)
					}
					delete(held, o)
				case op < 9 && len(held) > 0:
					// A pod of a held lease starts on a node with room for it.
					for o, d := range held {
						u := d.Units[rng.IntN(len(d.Units))]
						lease := o.Bid("akash1prov").Lease()
						key := fmt.Sprintf("%s/%d", o, step)
						node := c.nodes[rng.IntN(len(c.nodes))].Name
						p := Pod{Key: key, Node: node, Requests: u.Each, Lease: &lease}
						if running(pods, o, u) < int(u.Count) && u.Each.Fits(freeForPod(c, node, o)) {
							c.SetPod(p)
							pods[key] = p
						}
						break
					}
				default:
					for key := range pods {
						c.DeletePod(key)
						delete(pods, key)
						break
					}
				}
				mustCheck(t, c)
				for _, n := range c.nodes {
					if free := n.Allocatable.Sub(c.used[n.Name]).Sub(n.planned); free.Negative() {
						t.Fatalf("step %d: node %s overcommitted: %s", step, n.Name, free)
					}
					if !n.Schedulable && n.planned != (Amounts{}) {
						t.Fatalf("step %d: %s planned on unschedulable node %s", step, n.planned, n.Name)
					}
				}
				if got := len(c.Reservations()); got != len(held) {
					t.Fatalf("step %d: %d reservations, %d held", step, got, len(held))
				}
			}
			for o := range held {
				c.Unreserve(o)
			}
			for key := range pods {
				c.DeletePod(key)
			}
			if tot := c.Totals(); tot.Reserved != (Amounts{}) || tot.Used != (Amounts{}) {
				t.Fatalf("after releasing everything: %+v", tot)
			}
			for name, p := range c.pools {
				if p.reserved != 0 || p.used != 0 {
					t.Fatalf("pool %s: %+v", name, p)
				}
			}
		})
	}
}

func running(pods map[string]Pod, o market.OrderID, u Unit) int {
	n := 0
	for _, p := range pods {
		if p.Lease.Order() == o && matches(u, p.Requests) {
			n++
		}
	}
	return n
}

// freeForPod is where the scheduler may put a pod: it knows nothing of berth's plans.
func freeForPod(c *Capacity, node string, _ market.OrderID) Amounts {
	n := c.nodes[c.nodeIndex[node]]
	return n.Allocatable.Sub(c.used[node])
}

func randomDemand(rng *rand.Rand) Demand {
	d := Demand{Storage: map[string]int64{}}
	for i := range 1 + rng.IntN(3) {
		u := unit(uint32(i+1), uint32(1+rng.IntN(4)), int64(100*(1+rng.IntN(40))), int64(1+rng.IntN(4))*gi/2)
		if rng.IntN(4) == 0 {
			u.Each.GPUs = int64(1 + rng.IntN(4))
			u.GPUs = []gpu.Model{{Vendor: "nvidia", Model: []string{"a100", "h100", "*"}[rng.IntN(3)]}}
		}
		d.Units = append(d.Units, u)
	}
	if rng.IntN(3) == 0 {
		d.Storage["beta3"] = int64(1+rng.IntN(20)) * gi
	}
	d.NodePorts = rng.IntN(3)
	return d
}

// snapshot renders every node's free amounts and every pool's counters.
func snapshot(c *Capacity) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := ""
	for i, n := range c.nodes {
		out += fmt.Sprintf("%s:%s/%s;", n.Name, c.hot[i].free, n.planned)
	}
	for _, name := range []string{StoragePool("beta3"), PoolNodePorts, PoolLeasedIPs} {
		if p, ok := c.pools[name]; ok {
			out += fmt.Sprintf("%s:%d/%d/%d;", name, p.capacity, p.used, p.reserved)
		}
	}
	return out
}

func TestSnapshot(t *testing.T) {
	c := NewCapacity()
	c.SetNode(Node{Name: "n1", Allocatable: Amounts{CPU: 4000, Memory: 8 << 30, EphemeralStorage: 100 << 30, Pods: 110}, Schedulable: true})
	c.SetNode(Node{Name: "n2", Allocatable: Amounts{CPU: 2000, Memory: 4 << 30, EphemeralStorage: 50 << 30, Pods: 110}, Schedulable: false})
	c.SetPod(Pod{Key: "x/p", Node: "n1", Requests: Amounts{CPU: 500, Memory: 1 << 30, Pods: 1}})
	s := c.Snapshot()
	if len(s.Nodes) != 2 || s.Nodes[0].Name != "n1" || s.Nodes[1].Schedulable {
		t.Fatalf("nodes %+v", s.Nodes)
	}
	if got := s.Nodes[0].Available; got.CPU != 3500 || got.Memory != 7<<30 || got.Pods != 109 {
		t.Fatalf("n1 available %+v", got)
	}
	// A node that takes no pods has nothing available, whatever it has free.
	if got := s.Nodes[1]; got.Available != (Amounts{}) || got.Allocatable.CPU != 2000 {
		t.Fatalf("unschedulable n2: %+v, want nothing available", got)
	}
	if s.Active != 0 || s.Pending != 0 {
		t.Fatalf("reservations %d active %d pending", s.Active, s.Pending)
	}
	// A reservation is pending until one of its pods exists, and counts against the
	// node it is planned on.
	if _, err := c.Reserve(order(1), Demand{Units: []Unit{unit(1, 2, 1000, 1<<30)}}); err != nil {
		t.Fatal(err)
	}
	s = c.Snapshot()
	if s.Pending != 1 || s.Active != 0 || s.PendingTotal.CPU != 2000 || s.Nodes[0].Available.CPU != 1500 {
		t.Fatalf("after reserving: %+v", s)
	}
}

// TestSnapshotReservations: the snapshot lists each reservation, by order, with what
// all its replicas request and its persistent storage by class, active once a pod of
// its lease exists.
func TestSnapshotReservations(t *testing.T) {
	c := NewCapacity()
	c.SetNode(Node{Name: "n1", Allocatable: Amounts{CPU: 8000, Memory: 16 << 30, EphemeralStorage: 100 << 30, Pods: 110}, Schedulable: true})
	c.SetPoolCapacity(StoragePool("beta3"), 100*gi)
	if _, err := c.Reserve(order(10), Demand{Units: []Unit{unit(1, 2, 1000, gi)}, Storage: map[string]int64{"beta3": 20 * gi}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve(order(9), Demand{Units: []Unit{unit(1, 1, 500, gi), unit(2, 3, 100, gi)}}); err != nil {
		t.Fatal(err)
	}
	lease := order(10).Bid("akash1provider").Lease()
	c.SetPod(Pod{Key: "lease/web-0", Node: "n1", Requests: Amounts{CPU: 1000, Memory: gi, Pods: 1}, Lease: &lease})
	s := c.Snapshot()
	want := []ReservationSnapshot{
		{Order: order(9), Active: false, Total: Amounts{CPU: 800, Memory: 4 * gi, Pods: 4}},
		{Order: order(10), Active: true, Total: Amounts{CPU: 2000, Memory: 2 * gi, Pods: 2}, Storage: map[string]int64{"beta3": 20 * gi}},
	}
	if len(s.Reservations) != len(want) {
		t.Fatalf("reservations %+v, want %+v", s.Reservations, want)
	}
	for i, w := range want {
		g := s.Reservations[i]
		if g.Order != w.Order || g.Active != w.Active || g.Total != w.Total || !maps.Equal(g.Storage, w.Storage) {
			t.Errorf("reservation %d: %+v, want %+v", i, g, w)
		}
	}
	if s.Active != 1 || s.Pending != 1 {
		t.Errorf("counts: %d active, %d pending", s.Active, s.Pending)
	}
	// The snapshot is a copy: changing it changes nothing in the capacity.
	s.Reservations[1].Storage["beta3"] = 1
	if got := c.Snapshot().Reservations[1].Storage["beta3"]; got != 20*gi {
		t.Errorf("the capacity's storage changed to %d through a snapshot", got)
	}
}

func TestFitReservesNothing(t *testing.T) {
	c := NewCapacity()
	c.SetNode(Node{Name: "n1", Allocatable: Amounts{CPU: 4000, Memory: 8 << 30, EphemeralStorage: 100 << 30, Pods: 110}, Schedulable: true})
	before := c.Snapshot()
	d := Demand{Units: []Unit{unit(1, 3, 1000, 1<<30)}}
	if _, err := c.Fit(d); err != nil {
		t.Fatal(err)
	}
	if after := c.Snapshot(); after.Nodes[0].Available != before.Nodes[0].Available || after.Pending != 0 {
		t.Fatalf("Fit changed the capacity: %+v → %+v", before, after)
	}
	var ins *Insufficient
	if _, err := c.Fit(Demand{Units: []Unit{unit(1, 5, 1000, 1<<30)}}); !errors.As(err, &ins) {
		t.Fatalf("too big: %v", err)
	}
	if after := c.Snapshot(); after.Nodes[0].Available != before.Nodes[0].Available {
		t.Fatal("a failed Fit changed the capacity")
	}
	// What fits agrees with Reserve.
	if _, err := c.Reserve(order(1), d); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fit(Demand{Units: []Unit{unit(1, 2, 1000, 1<<30)}}); !errors.As(err, &ins) {
		t.Fatalf("after reserving 3 of 4 cores, 2 more fit: %v", err)
	}
	mustCheck(t, c)
}

// TestUnavailable: while the inventory is unavailable, Reserve and Fit refuse with
// resource "inventory" and the reason, Adopt still records a running lease, and the
// reservations made before are kept; once available again, reservations are taken.
func TestUnavailable(t *testing.T) {
	c := NewCapacity()
	c.SetNode(cpuNode("n1", 8000, 32*gi))
	d := Demand{Units: []Unit{unit(1, 1, 1000, gi)}}
	if _, err := c.Reserve(order(1), d); err != nil {
		t.Fatal(err)
	}
	c.SetUnavailable("the report is 3m old")
	var ins *Insufficient
	if _, err := c.Reserve(order(2), d); !errors.As(err, &ins) || ins.Resource != "inventory" || ins.Detail != "the report is 3m old" {
		t.Fatalf("Reserve: %v", err)
	}
	if _, err := c.Fit(d); !errors.As(err, &ins) || ins.Resource != "inventory" {
		t.Fatalf("Fit: %v", err)
	}
	if _, err := c.Adopt(order(3), d); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if !c.Reserved(order(1)) || !c.Reserved(order(3)) || c.Reserved(order(2)) || c.Unavailable() != "the report is 3m old" {
		t.Fatal("reservations changed")
	}
	c.SetUnavailable("")
	if _, err := c.Reserve(order(2), d); err != nil {
		t.Fatalf("Reserve once available: %v", err)
	}
	mustCheck(t, c)
}

// TestGPUOnlyNodes: a node tainted for GPU workloads takes GPU replicas only.
func TestGPUOnlyNodes(t *testing.T) {
	c := NewCapacity()
	g := gpuNode("pool-gpu", 8, a100)
	g.GPUOnly = true
	c.SetNode(g)
	c.SetNode(cpuNode("small", 4000, 16*gi))
	var ins *Insufficient
	if _, err := c.Fit(Demand{Units: []Unit{unit(1, 1, 8000, gi)}}); !errors.As(err, &ins) || ins.Resource != "nodes" {
		t.Fatalf("8 CPUs without GPUs: %v, want no room (only the GPU node has 8)", err)
	}
	gpuUnit := unit(1, 1, 8000, gi)
	gpuUnit.Each.GPUs, gpuUnit.GPUs = 1, []gpu.Model{{Vendor: "nvidia", Model: "a100"}}
	if _, err := c.Reserve(order(1), Demand{Units: []Unit{gpuUnit}}); err != nil {
		t.Fatalf("a GPU replica: %v", err)
	}
	if _, err := c.Reserve(order(2), Demand{Units: []Unit{unit(1, 1, 1000, gi)}}); err != nil {
		t.Fatalf("a small replica on the CPU node: %v", err)
	}
	mustCheck(t, c)
}
