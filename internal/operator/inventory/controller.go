package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/httpjson"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/wait"
)

// FieldManager is the inventory operator's server-side apply field manager.
const FieldManager = "berth-inventory-operator"

// inventoryKind is berth's Inventory, read as unstructured.
var inventoryKind = berthv1.GroupVersion.WithKind("Inventory")

// CephClusterResource is Rook's CephCluster, which sizes Ceph storage classes.
var CephClusterResource = schema.GroupVersionResource{Group: "ceph.rook.io", Version: "v1", Resource: "cephclusters"}

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

	// Set by Setup: the manager's informers, whose stores hold slim copies.
	nodes, pods, claims, namespaces, csi, ceph, own toolscache.SharedIndexInformer
	dirty                                           chan struct{}

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

// New checks cfg and builds the controller; operator.Run runs it. Its bus topics are
// registered with reg (nil: not registered).
func New(cfg Config, m *Metrics, log *slog.Logger) (*Controller, error) {
	m, log, err := operator.Prepare(&cfg, m, log, NewMetrics)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	c := &Controller{cfg: cfg, log: log, m: m, identity: host + "_" + strconv.Itoa(os.Getpid())}
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

// Close closes the Redis client (bus.redis), once the controller will not run again.
func (c *Controller) Close() error {
	if c.remote == nil {
		return nil
	}
	return c.remote.Close()
}

// ClusterEvents is the inventory.cluster topic.
func (c *Controller) ClusterEvents() *bus.Bus[inventory.ClusterEvent] { return c.cluster }

// NodeEvents is the inventory.nodes topic.
func (c *Controller) NodeEvents() *bus.Bus[inventory.NodeEvent] { return c.nodeBus }

// StorageEvents is the inventory.storage topic.
func (c *Controller) StorageEvents() *bus.Bus[inventory.StorageEvent] { return c.storage }

// Ready fails while the cluster cannot be watched.
func (c *Controller) Ready() error {
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
			httpjson.Error(w, http.StatusServiceUnavailable, "no report written yet")
			return
		}
		httpjson.Write(w, http.StatusOK, r)
	})
}

// pod is what the operator keeps of a pod.
type pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	node     string
	requests corev1.ResourceList
	owner    *ownership.Owner
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
	owner *ownership.Owner
}

func (p *claim) DeepCopyObject() runtime.Object { c := *p; return &c }

// namespace is what the operator keeps of a namespace: whose lease's it is.
type namespace struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	owner *ownership.Owner
}

func (n *namespace) DeepCopyObject() runtime.Object { c := *n; return &c }

// ownerOf is the provider (and chain: "" for objects of a berth that did not record
// it, which their provider takes for its own) whose lease an object is, if it is one.
func ownerOf(l map[string]string) *ownership.Owner {
	if id, ok := ownership.LeaseFromLabels(l); ok {
		return &ownership.Owner{Provider: id.Provider, ChainID: l[ownership.LabelChainID]}
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

// Cache keeps slim copies of nodes, pods, claims and namespaces, and only this
// operator's Inventory.
func (c *Controller) Cache(o *cache.Options) error {
	o.ByObject = map[client.Object]cache.ByObject{
		&corev1.Node{}:                  {Transform: slim},
		&corev1.Pod{}:                   {Transform: slim},
		&corev1.PersistentVolumeClaim{}: {Transform: slim},
		&corev1.Namespace{}:             {Transform: slim},
		operator.Object(inventoryKind):  {Field: fields.OneTermEqualSelector("metadata.name", c.cfg.Name)},
	}
	return nil
}

// Setup fails at once without berth's Inventory CRD; it registers the informers'
// handlers and the loop that publishes, while leading, until ctx ends.
func (c *Controller) Setup(ctx context.Context, mgr manager.Manager) error {
	var err error
	if c.cs, c.dc, err = operator.Clients(mgr); err != nil {
		return err
	}
	if err := operator.CheckServed(c.cs.Discovery(), operator.Served{GroupVersion: berthv1.GroupVersion.String(), Resource: "inventories", Hint: "install berth's CRDs (config/crd)"}); err != nil {
		return err
	}
	c.dirty = make(chan struct{}, 1)
	// A run starts afresh: the last run's problems and watch failures are gone.
	c.mu.Lock()
	c.problems, c.watchErrs = nil, map[string]*watchError{}
	c.mu.Unlock()

	informer := func(name string, obj client.Object) (toolscache.SharedIndexInformer, error) {
		inf, err := operator.Informer(ctx, mgr, obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(c.watchErrorHandler(name)); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return inf, nil
	}
	for _, i := range []struct {
		name string
		obj  client.Object
		to   *toolscache.SharedIndexInformer
	}{{"nodes", &corev1.Node{}, &c.nodes}, {"pods", &corev1.Pod{}, &c.pods}, {"claims", &corev1.PersistentVolumeClaim{}, &c.claims}, {"namespaces", &corev1.Namespace{}, &c.namespaces}} {
		if *i.to, err = informer(i.name, i.obj); err != nil {
			return err
		}
	}
	c.csi = nil
	if slices.ContainsFunc(c.cfg.Storage, func(s inventory.StorageClass) bool { return s.Source == inventory.SourceCSI }) {
		if c.csi, err = informer("CSIStorageCapacities", &storagev1.CSIStorageCapacity{}); err != nil {
			return err
		}
	}
	if c.own, err = informer("the Inventory", operator.Object(inventoryKind)); err != nil {
		return err
	}
	c.ceph = nil
	if slices.ContainsFunc(c.cfg.Storage, func(s inventory.StorageClass) bool { return s.CephCluster != "" }) {
		if err := operator.CheckServed(c.cs.Discovery(), operator.Served{GroupVersion: CephClusterResource.GroupVersion().String(), Resource: CephClusterResource.Resource, Hint: "is Rook installed?"}); err != nil {
			// Reported with the classes it sizes, not fatal: the rest is still worth publishing.
			c.addProblem(fmt.Sprintf("Ceph classes cannot be sized: %v", err))
		} else {
			if c.ceph, err = informer("CephClusters", operator.Object(CephClusterResource.GroupVersion().WithKind("CephCluster"))); err != nil {
				return err
			}
		}
	}
	dirty := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.markDirty() },
		UpdateFunc: func(any, any) { c.markDirty() },
		DeleteFunc: func(any) { c.markDirty() },
	}
	for _, inf := range []toolscache.SharedIndexInformer{c.nodes, c.pods, c.claims, c.namespaces, c.csi, c.ceph} {
		if inf == nil {
			continue
		}
		if _, err := inf.AddEventHandler(dirty); err != nil {
			return err
		}
	}
	// The report itself: edited or deleted by anyone else, it is written again.
	if _, err := c.own.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.ownChanged(o) },
		UpdateFunc: func(_, o any) { c.ownChanged(o) },
		DeleteFunc: func(any) { c.forget(); c.markDirty() },
	}); err != nil {
		return err
	}
	return operator.Runnable(mgr, func(ctx context.Context) error {
		c.log.InfoContext(ctx, "inventory operator synced", slog.String("inventory", c.cfg.Name), slog.Int("nodes", len(c.nodes.GetStore().List())))
		if c.remote != nil {
			defer c.forwardToRedis(ctx)()
		}
		c.markDirty()
		return c.loop(ctx)
	})
}

func (c *Controller) addProblem(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, p)
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
	backoff := wait.Backoff{First: 100 * time.Millisecond, Longest: 30 * time.Second}
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
		if pause := c.cfg.MinInterval - time.Since(lastBuild); pause > 0 && !force && !wait.Sleep(ctx, pause) {
			return nil
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
			backoff.Reset()
			continue
		}
		pendingForce = force && !wrote
		pause := backoff.Next()
		c.log.ErrorContext(ctx, "publishing the inventory", slog.Any("error", err), slog.Bool("report_written", wrote), slog.Duration("retry_in", pause))
		if !wait.Sleep(ctx, pause) {
			return nil
		}
		c.markDirty()
	}
}
