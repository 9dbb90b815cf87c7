package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/ownership"
)

// build computes the report from the caches (UpdatedAt unset).
func (c *Controller) build() (berthv1.InventoryStatus, map[string]map[string]string) {
	var st berthv1.InventoryStatus
	nodes := make([]*corev1.Node, 0)
	for _, o := range c.nodes.GetStore().List() {
		if n, ok := o.(*corev1.Node); ok {
			nodes = append(nodes, n)
		}
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	var schedulable []string
	for _, n := range nodes {
		if ok, _ := inventory.Schedulable(n); ok {
			schedulable = append(schedulable, n.Name)
		}
	}
	// Whose an object is: its own lease labels, else its namespace's (a lease's claims
	// made before berth labelled claim templates carry none, and must not count as
	// anyone else's).
	nsOwner := map[string]*ownership.Owner{}
	for _, o := range c.namespaces.GetStore().List() {
		if n, ok := o.(*namespace); ok && n.owner != nil {
			nsOwner[n.Name] = n.owner
		}
	}
	owner := func(own *ownership.Owner, ns string) *ownership.Owner {
		if own != nil {
			return own
		}
		return nsOwner[ns]
	}
	in := inventory.StorageInput{Schedulable: schedulable, Ceph: map[string]inventory.CephCapacity{}}
	for _, o := range c.claims.GetStore().List() {
		if p, ok := o.(*claim); ok && p.bound && p.class != "" {
			in.Claims = append(in.Claims, inventory.Claim{Class: p.class, Size: p.size, Owner: owner(p.owner, p.Namespace)})
		}
	}
	if c.csi != nil {
		for _, o := range c.csi.GetStore().List() {
			// No topology: reachable from no node (an empty one: from every node).
			if sc, ok := o.(*storagev1.CSIStorageCapacity); ok && sc.NodeTopology != nil {
				in.CSI = append(in.CSI, inventory.CSICapacity{Class: sc.StorageClassName, Capacity: quantityValue(sc.Capacity), Nodes: topologyNodes(sc.NodeTopology, nodes)})
			}
		}
	}
	if c.ceph != nil {
		for _, o := range c.ceph.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				avail, found, err := unstructured.NestedInt64(u.Object, "status", "ceph", "capacity", "bytesAvailable")
				in.Ceph[u.GetNamespace()+"/"+u.GetName()] = inventory.CephCapacity{Available: avail, Reported: found && err == nil}
			}
		}
	}
	classesOf := map[string][]string{}
	for _, sc := range c.cfg.Storage {
		s, usable := inventory.Storage(sc, in)
		st.Storage = append(st.Storage, s)
		if s.Message != "" {
			st.Problems = append(st.Problems, "storage class "+s.Class+": "+s.Message)
		}
		for _, n := range usable {
			classesOf[n] = append(classesOf[n], sc.Class)
		}
	}
	slices.SortFunc(st.Storage, func(a, b berthv1.InventoryStorage) int { return strings.Compare(a.Class, b.Class) })
	podsOn := map[string][]inventory.PodUse{}
	for _, o := range c.pods.GetStore().List() {
		if p, ok := o.(*pod); ok && p.node != "" && !p.finished {
			podsOn[p.node] = append(podsOn[p.node], inventory.PodUse{Node: p.node, Requests: p.requests, Owner: owner(p.owner, p.Namespace)})
		}
	}
	opts := c.cfg.GPUOptions()
	wantLabels := map[string]map[string]string{}
	nodesWith := map[string][]string{} // problem → the nodes that have it
	for _, n := range nodes {
		classes := classesOf[n.Name]
		slices.Sort(classes)
		r := inventory.NodeReport(n, podsOn[n.Name], opts, classes)
		if r.GPU != nil {
			r.GPU.Labelled = inventory.GPULabelled(n.Labels, r.GPU)
		}
		if r.GPU != nil && r.GPU.Message != "" {
			nodesWith[r.GPU.Message] = append(nodesWith[r.GPU.Message], n.Name)
		}
		want, invalid := inventory.Capabilities(r.GPU, classes)
		for _, k := range invalid {
			p := fmt.Sprintf("%q cannot be a label key: not labelled", k)
			nodesWith[p] = append(nodesWith[p], n.Name)
		}
		wantLabels[n.Name] = want
		st.Nodes = append(st.Nodes, r)
	}
	// One line per problem, however many nodes have it (a thousand nodes of a card
	// nothing names are one problem).
	for _, p := range slices.Sorted(maps.Keys(nodesWith)) {
		names := nodesWith[p]
		which := strings.Join(names[:min(len(names), 5)], ", ")
		if len(names) > 5 {
			which += fmt.Sprintf(" and %d more", len(names)-5)
		}
		word := "node"
		if len(names) > 1 {
			word = "nodes"
		}
		st.Problems = append(st.Problems, word+" "+which+": "+p)
	}
	watch := c.watchProblems(time.Now())
	c.mu.Lock()
	st.Problems = append(append(slices.Clone(c.problems), watch...), st.Problems...)
	c.mu.Unlock()
	return st, wantLabels
}

// publish brings the nodes' capability labels to what it finds, then writes the report
// when it differs from the last one written (or force is set) and publishes the
// changes on the bus. A GPU node is reported labelled once its labels are written; a
// failed label write does not keep the report from being written (the error is
// returned, for a retry): providers bid on the report.
func (c *Controller) publish(ctx context.Context, force bool) (bool, error) {
	st, wantLabels := c.build()
	st.Operator = c.identity
	var labelErr error
	if c.cfg.LabelNodes {
		var labelled map[string]bool
		labelled, labelErr = c.labelNodes(ctx, wantLabels)
		for i := range st.Nodes {
			if g := st.Nodes[i].GPU; g != nil && labelled[st.Nodes[i].Name] && g.Offered > 0 && g.Model != "" {
				g.Labelled = true
			}
		}
	}
	c.mu.Lock()
	prev, known := c.last, len(c.written) > 0
	c.mu.Unlock()
	if !force && prev != nil && known && sameReport(prev, &st) {
		return false, labelErr
	}
	st.UpdatedAt = metav1.Now()
	newRV, err := c.write(ctx, &st)
	if err != nil {
		return false, errors.Join(err, labelErr)
	}
	c.mu.Lock()
	c.last = st.DeepCopy()
	c.wroteVersionLocked(newRV)
	c.mu.Unlock()
	c.m.published(&st)
	c.events(prev, &st)
	return true, labelErr
}

func sameReport(a, b *berthv1.InventoryStatus) bool {
	x, y := *a, *b
	x.UpdatedAt, y.UpdatedAt = metav1.Time{}, metav1.Time{}
	return reflect.DeepEqual(x, y)
}

// write server-side applies the report to the Inventory's status, creating the
// Inventory when it is missing; it returns the resource version written.
func (c *Controller) write(ctx context.Context, st *berthv1.InventoryStatus) (string, error) {
	body, err := json.Marshal(map[string]any{
		"apiVersion": berthv1.GroupVersion.String(), "kind": "Inventory",
		"metadata": map[string]any{"name": c.cfg.Name},
		"status":   st,
	})
	if err != nil {
		return "", err
	}
	if len(body) > maxReportBytes {
		return "", fmt.Errorf("the report is %d KiB, more than the %d KiB an object may hold: the cluster has too many nodes (%d) for one Inventory", len(body)>>10, maxReportBytes>>10, len(st.Nodes))
	}
	res := c.dc.Resource(berthv1.InventoryResource)
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)}
	u, err := res.Patch(ctx, c.cfg.Name, types.ApplyPatchType, body, opts, "status")
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": berthv1.GroupVersion.String(), "kind": "Inventory",
			"metadata": map[string]any{"name": c.cfg.Name, "labels": map[string]any{"app.kubernetes.io/managed-by": FieldManager}},
			"spec":     map[string]any{},
		}}
		if _, err = res.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create Inventory %s: %w", c.cfg.Name, err)
		}
		u, err = res.Patch(ctx, c.cfg.Name, types.ApplyPatchType, body, opts, "status")
	}
	c.m.ObserveWrite("report", err)
	if err != nil {
		return "", fmt.Errorf("status of Inventory %s: %w", c.cfg.Name, err)
	}
	return u.GetResourceVersion(), nil
}

// events publishes what changed from prev to st on the bus topics.
func (c *Controller) events(prev, st *berthv1.InventoryStatus) {
	at := st.UpdatedAt.Time
	c.cluster.Publish(inventory.Summary(c.cfg.Name, st))
	var before berthv1.InventoryStatus
	if prev != nil {
		before = *prev
	}
	diff(before.Nodes, st.Nodes, func(n *berthv1.InventoryNode) string { return n.Name },
		func(n *berthv1.InventoryNode) { c.nodeBus.Publish(inventory.NodeEvent{At: at, Node: *n.DeepCopy()}) },
		func(name string) {
			c.nodeBus.Publish(inventory.NodeEvent{At: at, Node: berthv1.InventoryNode{Name: name}, Deleted: true})
		})
	diff(before.Storage, st.Storage, func(s *berthv1.InventoryStorage) string { return s.Class },
		func(s *berthv1.InventoryStorage) {
			c.storage.Publish(inventory.StorageEvent{At: at, Storage: *s.DeepCopy()})
		},
		func(class string) {
			c.storage.Publish(inventory.StorageEvent{At: at, Storage: berthv1.InventoryStorage{Class: class}, Removed: true})
		})
}

// diff calls changed with each entry of after that is new or differs from before's
// entry of the same key, in after's order, then gone with the keys only before has.
func diff[T any](before, after []T, key func(*T) string, changed func(*T), gone func(string)) {
	old := make(map[string]*T, len(before))
	for i := range before {
		old[key(&before[i])] = &before[i]
	}
	for i := range after {
		k := key(&after[i])
		if o, ok := old[k]; !ok || !reflect.DeepEqual(o, &after[i]) {
			changed(&after[i])
		}
		delete(old, k)
	}
	keys := make([]string, 0, len(old))
	for k := range old {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		gone(k)
	}
}

// topologyNodes are the nodes a CSIStorageCapacity's topology selects.
func topologyNodes(sel *metav1.LabelSelector, nodes []*corev1.Node) []string {
	var out []string
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	for _, n := range nodes {
		if s.Matches(labels.Set(n.Labels)) {
			out = append(out, n.Name)
		}
	}
	return out
}

func quantityValue(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}
