package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/inventory"
)

// Keys of what the operator's report contributes to the capacity: per node, what
// everything but our leases uses; per storage class, what everything but our leases'
// claims holds.
const (
	reportNodeKey    = "inventory-operator/node/"
	reportStorageKey = "inventory-operator/storage/"
)

// fromOperator is the state of an inventory fed by the inventory operator.
type fromOperator struct {
	dc     dynamic.Interface
	name   string
	maxAge time.Duration

	mu        sync.Mutex
	exists    bool
	updatedAt time.Time
	seen      time.Time // on our clock, when a new report last arrived
	nodes     map[string]bool
	pools     map[string]string // storage pools the report sized: their class
	stale     string            // why reservations are refused ("": they are not)
	state     string            // "missing", "old" or "": what was last logged
}

// FromOperator has the inventory take the cluster's nodes, their GPUs, what others run
// on them, and the storage classes' sizes from the inventory operator's Inventory
// resource name, instead of watching every node, pod and claim itself; it still
// watches its own leases' pods and claims (so that a replica counts the moment it is
// scheduled) and the Services (node ports, leased IPs). It keeps bidding on the last
// report while the operator is briefly gone; once no new report has come for maxAge,
// Reserve and Fit refuse with the reason until one does. Call it before Run; the
// InventoryConfig's Storage sizes are not used.
func (inv *Inventory) FromOperator(dc dynamic.Interface, name string, maxAge time.Duration) *Inventory {
	// Until the report is first read (Run), nothing is bid on and /status says why.
	why := fmt.Sprintf("the inventory operator's report (Inventory %s) is not read yet", name)
	inv.op = &fromOperator{dc: dc, name: name, maxAge: maxAge, nodes: map[string]bool{}, pools: map[string]string{}, stale: why}
	inv.cache.OwnPodsOnly()
	inv.cap.SetUnavailable(why)
	return inv
}

// watchReport watches the report until ctx ends and checks its age; reg is the
// registration of its handler (for Run's sync).
func (inv *Inventory) watchReport(ctx context.Context) (cache.ResourceEventHandlerRegistration, dynamicinformer.DynamicSharedInformerFactory, error) {
	o := inv.op
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.dc, 0, metav1.NamespaceAll, func(l *metav1.ListOptions) {
		l.FieldSelector = "metadata.name=" + o.name
	})
	informer := f.ForResource(berthv1.InventoryResource).Informer()
	if err := informer.SetTransform(func(o any) (any, error) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return o, nil
	}); err != nil {
		return nil, nil, err
	}
	if err := inv.noteListErrors(informer, "reading Inventory "+o.name); err != nil {
		return nil, nil, err
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { inv.setReport(obj) },
		UpdateFunc: func(_, obj any) { inv.setReport(obj) },
		DeleteFunc: func(any) { inv.reportGone() },
	})
	if err != nil {
		return nil, nil, err
	}
	inv.checkAge(time.Now())
	go func() {
		t := time.NewTicker(min(max(o.maxAge/4, 100*time.Millisecond), 5*time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				inv.checkAge(now)
			}
		}
	}()
	return reg, f, nil
}

func (inv *Inventory) setReport(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var r berthv1.Inventory
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		inv.log.Error("the inventory operator's report cannot be read", slog.String("inventory", inv.op.name), slog.Any("error", err))
		return
	}
	o := inv.op
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if at := r.Status.UpdatedAt.Time; !at.Equal(o.updatedAt) {
		// The first report seen counts from when it was written (an operator gone
		// for long is not taken for a live one); later ones from their arrival, so
		// that the two clocks need not agree.
		o.seen = now
		if o.updatedAt.IsZero() && at.Before(now) {
			o.seen = at
		}
		o.updatedAt = at
	}
	// An Inventory without a report yet (the operator creates it, then writes its
	// status) is as good as none.
	o.exists = !r.Status.UpdatedAt.IsZero()
	if !o.exists {
		inv.checkAgeLocked(now)
		return
	}
	inv.applyReportLocked(&r.Status)
	inv.checkAgeLocked(now)
}

func (inv *Inventory) reportGone() {
	o := inv.op
	o.mu.Lock()
	defer o.mu.Unlock()
	o.exists = false
	inv.checkAgeLocked(time.Now())
}

// applyReportLocked brings the capacity to the report: its nodes (what others use on
// them as one pod each) and the sizes of the storage pools of its classes.
func (inv *Inventory) applyReportLocked(st *berthv1.InventoryStatus) {
	o := inv.op
	seen := map[string]bool{}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		seen[n.Name] = true
		node := cluster.Node{Name: n.Name, Schedulable: n.Schedulable, GPUOnly: n.GPUOnly, Allocatable: amounts(n.Allocatable)}
		// GPUs count where a lease's GPU pods can be placed: on nodes with the labels
		// their affinity selects on.
		if node.Allocatable.GPUs > 0 && n.GPU != nil && n.GPU.Labelled {
			node.GPU = inventory.Model(n.GPU)
		} else {
			node.Allocatable.GPUs = 0
		}
		inv.cap.SetNode(node)
		others := amounts(inventory.Others(*n, inv.owner))
		if others == (cluster.Amounts{}) {
			inv.cap.DeletePod(reportNodeKey + n.Name)
		} else {
			inv.cap.SetPod(cluster.Pod{Key: reportNodeKey + n.Name, Node: n.Name, Requests: others})
		}
	}
	for name := range o.nodes {
		if !seen[name] {
			inv.cap.DeletePod(reportNodeKey + name)
			inv.cap.DeleteNode(name)
		}
	}
	o.nodes = seen
	pools := map[string]string{}
	for i := range st.Storage {
		s := &st.Storage[i]
		pool := inv.pool(s.Class)
		if pool == "" {
			continue
		}
		pools[pool] = s.Class
		inv.cap.SetPoolCapacity(pool, s.Capacity.Value())
		inv.cap.SetPoolItem(pool, cluster.PoolItem{Key: reportStorageKey + s.Class, Amount: inventory.OthersStorage(*s, inv.owner)})
	}
	for pool, class := range o.pools {
		if _, ok := pools[pool]; !ok {
			inv.cap.SetPoolCapacity(pool, 0)
			inv.cap.DeletePoolItem(pool, reportStorageKey+class)
		}
	}
	o.pools = pools
}

func (inv *Inventory) checkAge(now time.Time) {
	inv.op.mu.Lock()
	defer inv.op.mu.Unlock()
	inv.checkAgeLocked(now)
}

// checkAgeLocked stops reservations when the report is missing or too old, and lets
// them go on when it is fresh again; each change is logged once.
func (inv *Inventory) checkAgeLocked(now time.Time) {
	o := inv.op
	why, state := "", ""
	switch age := now.Sub(o.seen).Truncate(time.Second); {
	case !o.exists:
		why, state = fmt.Sprintf("no report in Inventory %s on the cluster: is the inventory operator running (berth operator inventory, name: %s)?", o.name, o.name), "missing"
	case age > o.maxAge:
		why, state = fmt.Sprintf("the inventory operator's last report (Inventory %s, written %s) is %s old, more than inventory.max_age %s: not bidding until it reports again",
			o.name, o.updatedAt.UTC().Format(time.RFC3339), age, o.maxAge), "old"
	}
	if why != o.stale {
		o.stale = why
		inv.cap.SetUnavailable(why) // the age in it grows
	}
	if state == o.state {
		return
	}
	o.state = state
	if why != "" {
		inv.log.Warn("not bidding: the cluster's inventory is not known", slog.String("reason", why))
	} else {
		inv.log.Info("bidding again: the inventory operator reports", slog.String("inventory", o.name))
	}
}

// Stale is why the inventory is not bid on ("" when it is).
func (inv *Inventory) Stale() string {
	if inv.op == nil {
		return ""
	}
	inv.op.mu.Lock()
	defer inv.op.mu.Unlock()
	return inv.op.stale
}
