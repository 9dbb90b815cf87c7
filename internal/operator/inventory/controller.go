package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/operator"
)

// FieldManager is the inventory operator's server-side apply field manager.
const FieldManager = "berth-inventory-operator"

// Resources the operator reads besides the core ones.
var (
	InventoryResource   = schema.GroupVersionResource{Group: berthv1.GroupVersion.Group, Version: berthv1.GroupVersion.Version, Resource: "inventories"}
	CephClusterResource = schema.GroupVersionResource{Group: "ceph.rook.io", Version: "v1", Resource: "cephclusters"}
)

// maxReportBytes bounds the report: etcd takes objects up to 1.5 MiB, and the stored
// object has metadata besides (about 2,000 nodes fit).
const maxReportBytes = 1400 << 10

// Controller keeps the Inventory resource, the nodes' capability labels and the bus
// topics in step with the cluster. One goroutine writes; informers only mark it dirty.
type Controller struct {
	cfg      Config
	cs       kubernetes.Interface
	dc       dynamic.Interface
	log      *slog.Logger
	m        *Metrics
	identity string

	nodes, pods, claims, namespaces, csi, ceph, own cache.SharedIndexInformer
	dirty                                           chan struct{}
	synced                                          atomic.Bool

	mu        sync.Mutex
	last      *berthv1.InventoryStatus // last written
	watchErrs map[string]*watchError   // by informer, while its list/watch fails
	// written are the resource versions of the operator's last writes: an event of
	// the Inventory with another is someone else's change (or its deletion), and the
	// report is written again.
	written  []string
	problems []string // of the run, not of one report (missing CRDs)

	// remote, with bus.redis, carries the topics to other processes.
	remote  *redisbus.Client
	cluster *bus.Bus[inventory.ClusterEvent]
	nodeBus *bus.Bus[inventory.NodeEvent]
	storage *bus.Bus[inventory.StorageEvent]
}

// New checks cfg and builds the controller; Run starts it. Its bus topics are
// registered with reg (nil: not registered).
func New(cfg Config, cs kubernetes.Interface, dc dynamic.Interface, m *Metrics, log *slog.Logger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	host, _ := os.Hostname()
	c := &Controller{cfg: cfg, cs: cs, dc: dc, log: log, m: m, identity: host + "_" + strconv.Itoa(os.Getpid())}
	var err error
	if c.cluster, err = bus.New[inventory.ClusterEvent](inventory.TopicCluster, m.reg); err != nil {
		return nil, err
	}
	if c.nodeBus, err = bus.New[inventory.NodeEvent](inventory.TopicNodes, m.reg); err != nil {
		return nil, err
	}
	if c.storage, err = bus.New[inventory.StorageEvent](inventory.TopicStorage, m.reg); err != nil {
		return nil, err
	}
	if cfg.Bus.Redis != "" {
		o := cfg.Bus.Options()
		o.Registerer, o.Log = m.reg, log
		if c.remote, err = redisbus.Connect(o); err != nil {
			return nil, err
		}
	}
	m.report = c.Report
	return c, nil
}

// ClusterEvents is the inventory.cluster topic.
func (c *Controller) ClusterEvents() *bus.Bus[inventory.ClusterEvent] { return c.cluster }

// NodeEvents is the inventory.nodes topic.
func (c *Controller) NodeEvents() *bus.Bus[inventory.NodeEvent] { return c.nodeBus }

// StorageEvents is the inventory.storage topic.
func (c *Controller) StorageEvents() *bus.Bus[inventory.StorageEvent] { return c.storage }

// Ready reports whether the caches are synced.
func (c *Controller) Ready() error {
	if !c.synced.Load() {
		return errors.New("the caches of nodes, pods, claims and storage capacity are not synced yet")
	}
	if c.watchFailing() {
		return fmt.Errorf("the cluster cannot be watched: %s", strings.Join(c.watchProblems(time.Now()), "; "))
	}
	return nil
}

// Report is the last report written (nil before the first).
func (c *Controller) Report() *berthv1.InventoryStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return nil
	}
	return c.last.DeepCopy()
}

// ReportHandler serves GET /inventory: the last report, as JSON.
func (c *Controller) ReportHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := c.Report()
		if r == nil {
			http.Error(w, "no report written yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r)
	})
}

// pod is what the operator keeps of a pod.
type pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	node     string
	requests corev1.ResourceList
	owner    *cluster.Owner
	finished bool
}

func (p *pod) DeepCopyObject() runtime.Object { c := *p; return &c }

// claim is what the operator keeps of a persistent volume claim.
type claim struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	class string
	size  int64
	bound bool
	owner *cluster.Owner
}

func (p *claim) DeepCopyObject() runtime.Object { c := *p; return &c }

// namespace is what the operator keeps of a namespace: whose lease's it is.
type namespace struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	owner *cluster.Owner
}

func (n *namespace) DeepCopyObject() runtime.Object { c := *n; return &c }

// ownerOf is the provider (and chain: "" for objects of a berth that did not record
// it, which their provider takes for its own) whose lease an object is, if it is one.
func ownerOf(l map[string]string) *cluster.Owner {
	if id, ok := cluster.LeaseFromLabels(l); ok {
		return &cluster.Owner{Provider: id.Provider, ChainID: l[cluster.LabelChainID]}
	}
	return nil
}

func slim(o any) (any, error) {
	switch v := o.(type) {
	case *corev1.Pod:
		return &pod{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace, ResourceVersion: v.ResourceVersion},
			node: v.Spec.NodeName, requests: inventory.PodRequests(v), owner: ownerOf(v.Labels), finished: inventory.Finished(v)}, nil
	case *corev1.PersistentVolumeClaim:
		c := &claim{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace, ResourceVersion: v.ResourceVersion},
			bound: v.Status.Phase == corev1.ClaimBound, owner: ownerOf(v.Labels)}
		if v.Spec.StorageClassName != nil {
			c.class = *v.Spec.StorageClassName
		}
		if q, ok := v.Status.Capacity[corev1.ResourceStorage]; ok {
			c.size = q.Value()
		} else if q, ok := v.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			c.size = q.Value()
		}
		return c, nil
	case *corev1.Node:
		// Kept whole but for what is large and unread: a node's images list alone is
		// often tens of kilobytes.
		v.ManagedFields, v.Annotations, v.Status.Images = nil, nil, nil
		return v, nil
	case *corev1.Namespace:
		return &namespace{ObjectMeta: metav1.ObjectMeta{Name: v.Name, ResourceVersion: v.ResourceVersion}, owner: ownerOf(v.Labels)}, nil
	}
	return o, nil
}

func (c *Controller) markDirty() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends; it fails at once without berth's Inventory CRD.
func (c *Controller) Run(ctx context.Context) error {
	if err := operator.CheckServed(c.cs.Discovery(), operator.Served{GroupVersion: berthv1.GroupVersion.String(), Resource: "inventories", Hint: "install berth's CRDs (config/crd)"}); err != nil {
		return err
	}
	c.synced.Store(false)
	c.dirty = make(chan struct{}, 1)
	c.mu.Lock()
	c.problems = nil
	c.mu.Unlock()

	f := informers.NewSharedInformerFactoryWithOptions(c.cs, c.cfg.Resync, informers.WithTransform(slim))
	c.nodes = f.Core().V1().Nodes().Informer()
	c.pods = f.Core().V1().Pods().Informer()
	c.claims = f.Core().V1().PersistentVolumeClaims().Informer()
	c.namespaces = f.Core().V1().Namespaces().Informer()
	waitFor := []cache.InformerSynced{c.nodes.HasSynced, c.pods.HasSynced, c.claims.HasSynced, c.namespaces.HasSynced}
	c.csi = nil
	if slices.ContainsFunc(c.cfg.Storage, func(s inventory.StorageClass) bool { return s.Source == inventory.SourceCSI }) {
		c.csi = f.Storage().V1().CSIStorageCapacities().Informer()
		waitFor = append(waitFor, c.csi.HasSynced)
	}
	own := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dc, c.cfg.Resync, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + c.cfg.Name
	})
	c.own = own.ForResource(InventoryResource).Informer()
	waitFor = append(waitFor, c.own.HasSynced)
	ceph := dynamicinformer.NewDynamicSharedInformerFactory(c.dc, c.cfg.Resync)
	c.ceph = nil
	if slices.ContainsFunc(c.cfg.Storage, func(s inventory.StorageClass) bool { return s.CephCluster != "" }) {
		if err := operator.CheckServed(c.cs.Discovery(), operator.Served{GroupVersion: CephClusterResource.GroupVersion().String(), Resource: CephClusterResource.Resource, Hint: "is Rook installed?"}); err != nil {
			// Reported with the classes it sizes, not fatal: the rest is still worth publishing.
			c.addProblem(fmt.Sprintf("Ceph classes cannot be sized: %v", err))
		} else {
			c.ceph = ceph.ForResource(CephClusterResource).Informer()
			waitFor = append(waitFor, c.ceph.HasSynced)
		}
	}
	defer f.Shutdown()
	defer own.Shutdown()
	defer ceph.Shutdown()
	c.mu.Lock()
	c.watchErrs = map[string]*watchError{}
	c.mu.Unlock()
	for name, inf := range map[string]cache.SharedIndexInformer{"nodes": c.nodes, "pods": c.pods, "claims": c.claims, "namespaces": c.namespaces,
		"CSIStorageCapacities": c.csi, "CephClusters": c.ceph, "the Inventory": c.own} {
		if inf != nil {
			if err := inf.SetWatchErrorHandlerWithContext(c.watchErrorHandler(name)); err != nil {
				return err
			}
		}
	}
	dirty := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.markDirty() },
		UpdateFunc: func(any, any) { c.markDirty() },
		DeleteFunc: func(any) { c.markDirty() },
	}
	for _, inf := range []cache.SharedIndexInformer{c.nodes, c.pods, c.claims, c.namespaces, c.csi, c.ceph} {
		if inf == nil {
			continue
		}
		if _, err := inf.AddEventHandler(dirty); err != nil {
			return err
		}
	}
	// The report itself: edited or deleted by anyone else, it is written again.
	if _, err := c.own.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.ownChanged(o) },
		UpdateFunc: func(_, o any) { c.ownChanged(o) },
		DeleteFunc: func(any) { c.forget(); c.markDirty() },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	own.Start(ctx.Done())
	ceph.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), waitFor...) {
		return nil // ctx ended
	}
	c.synced.Store(true)
	defer c.synced.Store(false)
	c.log.InfoContext(ctx, "inventory operator synced", slog.String("inventory", c.cfg.Name), slog.Int("nodes", len(c.nodes.GetStore().List())))
	if c.remote != nil {
		defer c.forwardToRedis(ctx)()
	}
	c.markDirty()
	return c.loop(ctx)
}

// forwardToRedis publishes the three topics on Redis (bus.redis) while Run runs;
// stop ends it.
func (c *Controller) forwardToRedis(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	forward := func(run func(context.Context), fwd func(context.Context)) {
		wg.Go(func() { run(ctx) })
		wg.Go(func() { fwd(ctx) })
	}
	pc := redisbus.NewPublisher[inventory.ClusterEvent](c.remote, inventory.TopicCluster)
	forward(pc.Run, func(ctx context.Context) { redisbus.Forward(ctx, c.cluster, pc) })
	pn := redisbus.NewPublisher[inventory.NodeEvent](c.remote, inventory.TopicNodes)
	forward(pn.Run, func(ctx context.Context) { redisbus.Forward(ctx, c.nodeBus, pn) })
	ps := redisbus.NewPublisher[inventory.StorageEvent](c.remote, inventory.TopicStorage)
	forward(ps.Run, func(ctx context.Context) { redisbus.Forward(ctx, c.storage, ps) })
	c.log.InfoContext(ctx, "publishing the inventory topics on Redis", slog.String("channels", c.remote.Channel("inventory.*")))
	return func() {
		cancel()
		wg.Wait()
	}
}

func (c *Controller) addProblem(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, p)
}

// watchError is a list/watch that fails: since when, the last error and when.
type watchError struct {
	since, last time.Time
	err         string
}

// watchErrorRecent: an informer whose list/watch failed within it is failing (client-go
// retries a failed list/watch within 30 s); one failing for two heartbeats stops the
// heartbeats and fails /readyz.
const watchErrorRecent = time.Minute

// watchErrorHandler records an informer's list/watch failures (client-go retries
// them with backoff; the caches stay as they were meanwhile).
func (c *Controller) watchErrorHandler(name string) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		w := c.watchErrs[name]
		if w == nil || now.Sub(w.last) > watchErrorRecent {
			w = &watchError{since: now}
			c.watchErrs[name] = w
		}
		w.last, w.err = now, err.Error()
		go c.markDirty() // the report says so (c.mu is held here)
	}
}

// watchProblems are the informers failing now, one sentence each.
func (c *Controller) watchProblems(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.watchErrs)) {
		if w := c.watchErrs[name]; now.Sub(w.last) <= watchErrorRecent {
			out = append(out, fmt.Sprintf("watching %s fails since %s (the report may be out of date): %s", name, w.since.UTC().Format(time.RFC3339), w.err))
		}
	}
	return out
}

// watchFailing reports whether some informer has failed for watchFailingAfter.
func (c *Controller) watchFailing() bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.watchErrs {
		if now.Sub(w.last) <= watchErrorRecent && now.Sub(w.since) >= 2*c.cfg.Heartbeat {
			return true
		}
	}
	return false
}

// forget drops what was last written, so that the next report is written whatever it
// holds.
func (c *Controller) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written = nil
}

// ownChanged: an event of the Inventory that none of the operator's writes made means
// someone else changed it; it is written again.
func (c *Controller) ownChanged(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c.mu.Lock()
	mine := slices.Contains(c.written, u.GetResourceVersion())
	if !mine {
		c.written = nil
	}
	c.mu.Unlock()
	if !mine {
		c.markDirty()
	}
}

// wroteVersion records the resource version of a write (the last few are kept: a
// write's event may come after the next write).
func (c *Controller) wroteVersionLocked(rv string) {
	c.written = append(c.written, rv)
	if len(c.written) > 8 {
		c.written = slices.Delete(c.written, 0, len(c.written)-8)
	}
}

// loop writes a report when something changed and at least every Heartbeat. Reports
// are built at most every MinInterval, however often the cluster changes; a failed
// publish is retried with backoff, a failed heartbeat until a report is written.
func (c *Controller) loop(ctx context.Context) error {
	heartbeat := time.NewTimer(c.cfg.Heartbeat)
	defer heartbeat.Stop()
	var lastBuild time.Time
	backoff := 100 * time.Millisecond
	pendingForce := false
	for {
		force, beat := pendingForce, false
		select {
		case <-ctx.Done():
			return nil
		case <-c.dirty:
		case <-heartbeat.C:
			force, beat = true, true
		}
		if wait := c.cfg.MinInterval - time.Since(lastBuild); wait > 0 && !force {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		lastBuild = time.Now()
		// A cluster the operator cannot watch is not reported as live: no heartbeat
		// while its watches fail, so providers see the report age.
		if force && c.watchFailing() {
			force, pendingForce = false, false
		}
		wrote, err := c.publish(ctx, force)
		c.m.ObserveSync(err, time.Since(lastBuild))
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case beat:
			heartbeat.Reset(c.cfg.Heartbeat) // it fired: the next beat
		case wrote:
			if !heartbeat.Stop() {
				select {
				case <-heartbeat.C:
				default:
				}
			}
			heartbeat.Reset(c.cfg.Heartbeat)
		}
		if wrote {
			pendingForce = false
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		pendingForce = force && !wrote
		c.log.ErrorContext(ctx, "publishing the inventory", slog.Any("error", err), slog.Bool("report_written", wrote), slog.Duration("retry_in", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, 30*time.Second)
		c.markDirty()
	}
}

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
	nsOwner := map[string]*cluster.Owner{}
	for _, o := range c.namespaces.GetStore().List() {
		if n, ok := o.(*namespace); ok && n.owner != nil {
			nsOwner[n.Name] = n.owner
		}
	}
	owner := func(own *cluster.Owner, ns string) *cluster.Owner {
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
	res := c.dc.Resource(InventoryResource)
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

// ownsLabel: the GPU capability labels are the operator's (the cluster's GPUs are one
// fact, whoever describes them), and the storage labels of the classes it offers;
// another operator's classes' labels are left alone.
func (c *Controller) ownsLabel(key string) bool {
	if inventory.IsGPULabel(key) {
		return true
	}
	return slices.ContainsFunc(c.cfg.Storage, func(s inventory.StorageClass) bool { return inventory.StorageLabel(s.Class) == key })
}

// labelNodes brings every node's capability labels to want; labelled are the nodes
// whose labels are now as wanted.
func (c *Controller) labelNodes(ctx context.Context, want map[string]map[string]string) (labelled map[string]bool, _ error) {
	labelled = map[string]bool{}
	var errs []error
	for _, o := range c.nodes.GetStore().List() {
		n, ok := o.(*corev1.Node)
		if !ok {
			continue
		}
		patch := inventory.LabelChanges(n.Labels, want[n.Name], c.ownsLabel)
		if len(patch) == 0 {
			labelled[n.Name] = true
			continue
		}
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
		if err != nil {
			return labelled, err
		}
		_, err = c.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: FieldManager})
		c.m.ObserveWrite("label", err)
		switch {
		case apierrors.IsNotFound(err):
			// Gone since the cache saw it: its event follows.
		case err != nil:
			errs = append(errs, fmt.Errorf("label node %s: %w", n.Name, err))
		default:
			labelled[n.Name] = true
			c.log.InfoContext(ctx, "node capability labels updated", slog.String("node", n.Name), slog.Int("changes", len(patch)))
		}
	}
	return labelled, errors.Join(errs...)
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
