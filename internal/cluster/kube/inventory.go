// Package kube is berth's Kubernetes adapter. This part feeds cluster.Capacity from
// informers on nodes, pods, persistent volume claims and services, so the bid engine
// reserves against what the cluster really has. Inventory.Run owns its informers and
// returns when they have stopped.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/metallb"
	"berth.dev/berth/internal/ownership"
)

// ResourceGPU is the extended resource NVIDIA's device plugin advertises.
const ResourceGPU = inventory.ResourceGPU

// InventoryConfig sizes what nodes do not tell: the pools.
type InventoryConfig struct {
	// Storage is the capacity in bytes of each persistent storage class offered.
	Storage map[string]int64
	// LeasedIPs is the size of the leased IP pool.
	LeasedIPs int64
	// NodePorts is how many node ports leases may use (the service node port range).
	NodePorts int64
	// StorageClasses maps SDL storage classes to the cluster's (Settings.StorageClasses):
	// a claim of cluster class C counts against the pool of the SDL class mapped to C.
	StorageClasses map[string]string
}

// Inventory keeps a cluster.Capacity in step with the cluster.
type Inventory struct {
	cache  *Cache
	client kubernetes.Interface
	cap    *cluster.Capacity
	log    *slog.Logger
	owner  ownership.Owner
	synced chan struct{}
	// listErr is the last list or watch error of an informer (a string; NotSynced).
	listErr atomic.Value
	// sdlClass maps a cluster storage class to the SDL class whose pool it fills;
	// storageClasses is the configured mapping (SDL class to cluster class).
	sdlClass, storageClasses map[string]string
	// dc and ips, when set, size the leased-IP pool from a MetalLB IPAddressPool.
	dc  dynamic.Interface
	ips *leasedIPPool
	// op, when set, is the inventory operator's report the nodes and storage come from.
	op *fromOperator
}

// WithMetalLBPool has the leased-IP pool follow a MetalLB IPAddressPool instead of
// InventoryConfig.LeasedIPs: its size, less the addresses LoadBalancer Services of
// others hold. Call it before Run.
func (inv *Inventory) WithMetalLBPool(dc dynamic.Interface, pool MetalLBPool) *Inventory {
	inv.dc, inv.ips = dc, newLeasedIPPool(inv.cap, pool, inv.log)
	return inv
}

// NewInventory returns an inventory feeding capacity from c (the leases' pods and
// volumes of c's owner count against their reservations, not as others' usage); it
// sets the pool sizes now.
func NewInventory(c *Cache, client kubernetes.Interface, capacity *cluster.Capacity, cfg InventoryConfig, log *slog.Logger) (*Inventory, error) {
	if c == nil || client == nil || capacity == nil || log == nil {
		return nil, errors.New("inventory: cache, client, capacity and logger are required")
	}
	for class, n := range cfg.Storage {
		if n < 0 {
			return nil, fmt.Errorf("inventory: storage class %q: negative capacity", class)
		}
		capacity.SetPoolCapacity(cluster.StoragePool(class), n)
	}
	sdlClass := map[string]string{}
	for sdl, k8s := range cfg.StorageClasses {
		if other, ok := sdlClass[k8s]; ok {
			a, b := min(sdl, other), max(sdl, other)
			return nil, fmt.Errorf("inventory: storage classes %q and %q both map to the cluster's %q: their pools would count the same claims; map each to its own class", a, b, k8s)
		}
		sdlClass[k8s] = sdl
	}
	capacity.SetPoolCapacity(cluster.PoolLeasedIPs, cfg.LeasedIPs)
	capacity.SetPoolCapacity(cluster.PoolNodePorts, cfg.NodePorts)
	return &Inventory{cache: c, client: client, cap: capacity, log: log, owner: c.owner, synced: make(chan struct{}), sdlClass: sdlClass, storageClasses: maps.Clone(cfg.StorageClasses)}, nil
}

// Synced is closed once the informers have listed everything.
func (inv *Inventory) Synced() <-chan struct{} { return inv.synced }

// NotSynced says why nothing is bid yet when the informers have not listed everything
// (the last list or watch error, such as a role that does not allow it); "" once they
// have.
func (inv *Inventory) NotSynced() string {
	select {
	case <-inv.synced:
		return ""
	default:
	}
	if why, _ := inv.listErr.Load().(string); why != "" {
		return "the cluster's inventory has not been read: " + why
	}
	if why := inv.cache.ListError(); why != "" {
		return "the cluster's inventory has not been read: " + why
	}
	return "the cluster's inventory has not been read yet"
}

// noteListErrors records an informer's list and watch errors for NotSynced (client-go
// logs them too). Call it before the informer starts.
func (inv *Inventory) noteListErrors(i cache.SharedIndexInformer, what string) error {
	return i.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		inv.listErr.Store(what + ": " + err.Error())
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// WaitSynced waits until the informers have listed everything or ctx ends.
func (inv *Inventory) WaitSynced(ctx context.Context) error {
	select {
	case <-inv.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("inventory: waiting for the cluster's nodes and pods: %w", ctx.Err())
	}
}

// Run watches the cluster until ctx ends.
func (inv *Inventory) Run(ctx context.Context) error {
	// What Run starts stops when it returns, whichever way: a factory's Shutdown waits
	// for its stop channel, so the context is cancelled first.
	ctx, cancel := context.WithCancel(ctx)
	var started []interface {
		Start(stopCh <-chan struct{})
		Shutdown()
	}
	defer func() {
		cancel()
		for _, f := range started {
			f.Shutdown()
		}
	}()
	type handler struct {
		informer cache.SharedIndexInformer
		set      func(any)
		del      func(any)
	}
	// The report has the nodes and everyone else's usage (with an operator); our own
	// leases' pods and claims are watched in any case, so that they count the moment
	// they exist (the cache watches only those then: OwnPodsOnly).
	handlers := []handler{{inv.cache.Informer(&corev1.Service{}), inv.setService, inv.deleteService},
		{inv.cache.Informer(&corev1.Pod{}), inv.setPod, inv.deletePod},
		{inv.cache.Informer(&corev1.PersistentVolumeClaim{}), inv.setPVC, inv.deletePVC}}
	if inv.op == nil {
		handlers = append(handlers, handler{inv.cache.Informer(&corev1.Node{}), inv.setNode, inv.deleteNode})
	}
	var hs Handlers
	defer hs.Remove()
	for _, h := range handlers {
		if err := hs.Add(h.informer, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { h.set(o) },
			UpdateFunc: func(_, o any) { h.set(o) },
			DeleteFunc: func(o any) { h.del(o) },
		}); err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
	}
	// The operator's report and MetalLB's pool: kinds only the inventory reads.
	var regs []cache.InformerSynced
	if inv.op != nil {
		reg, rf, err := inv.watchReport(ctx)
		if err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
		rf.Start(ctx.Done())
		started, regs = append(started, rf), append(regs, reg.HasSynced)
	}
	if inv.ips != nil {
		// A cluster without MetalLB is a mistake of the configuration, said at once;
		// an API server that does not answer yet is waited for, as for everything.
		list, err := inv.client.Discovery().ServerResourcesForGroupVersion(metallb.PoolResource.GroupVersion().String())
		if (err == nil || apierrors.IsNotFound(err)) && (list == nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == metallb.PoolResource.Resource })) {
			return fmt.Errorf("inventory: leased IPs come from MetalLB pool %s, but the cluster does not serve %s (install MetalLB, or set inventory.leased_ips instead)", inv.ips.pool, metallb.PoolResource.GroupResource())
		}
		reg, pf, err := inv.ips.informer(ctx, inv.dc)
		if err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
		if err := inv.noteListErrors(pf.ForResource(metallb.PoolResource).Informer(), "reading MetalLB pool "+inv.ips.pool.String()); err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
		pf.Start(ctx.Done())
		started, regs = append(started, pf), append(regs, reg.HasSynced)
	}
	if !inv.cache.Wait(ctx, &hs) || !cache.WaitForCacheSync(ctx.Done(), regs...) {
		return nil // ctx ended
	}
	close(inv.synced)
	t := inv.cap.Totals()
	inv.log.InfoContext(ctx, "inventory synced", slog.Int("nodes", t.Nodes), slog.Int64("cpu_millis", t.Allocatable.CPU),
		slog.Int64("memory_bytes", t.Allocatable.Memory), slog.Int64("gpus", t.Allocatable.GPUs))
	<-ctx.Done()
	return nil
}

// runInformers starts a factory's informers, calls synced once their caches are full
// and regs' handlers have been handed every object of the initial lists (a cache fills
// before its handlers run), and returns when ctx ends, after the informers stopped.
// what names the caller in errors.
func runInformers(ctx context.Context, f informers.SharedInformerFactory, what string, regs []cache.ResourceEventHandlerRegistration, synced func()) error {
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %v informer did not sync", what, typ)
		}
	}
	handled := make([]cache.InformerSynced, len(regs))
	for i, r := range regs {
		handled[i] = r.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), handled...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: handlers did not receive the initial lists", what)
	}
	synced()
	<-ctx.Done()
	return nil
}

// tombstone unwraps a deleted object the informer only knew as a tombstone.
func tombstone(o any) any {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return o
}

func (inv *Inventory) setNode(o any) {
	if v, ok := o.(*nodeView); ok {
		inv.cap.SetNode(v.node)
	}
}

func (inv *Inventory) deleteNode(o any) {
	if v, ok := tombstone(o).(*nodeView); ok {
		inv.cap.DeleteNode(v.Name)
	}
}

func amounts(l corev1.ResourceList) cluster.Amounts {
	q := func(name corev1.ResourceName) int64 {
		v, ok := l[name]
		if !ok {
			return 0
		}
		return v.Value()
	}
	cpu := l[corev1.ResourceCPU]
	return cluster.Amounts{
		CPU:              cpu.MilliValue(),
		Memory:           q(corev1.ResourceMemory),
		EphemeralStorage: q(corev1.ResourceEphemeralStorage),
		GPUs:             q(ResourceGPU),
		Pods:             q(corev1.ResourcePods),
	}
}

func (inv *Inventory) setPod(o any) {
	v, ok := o.(*podView)
	if !ok {
		return
	}
	// Fed by the report, only our leases' pods are ours to count (the selector also
	// takes our provider's on other chains: the report has them among others').
	if v.finished || inv.op != nil && v.lease == nil { // finished pods hold nothing
		inv.cap.DeletePod(v.key())
		return
	}
	inv.cap.SetPod(cluster.Pod{Key: v.key(), Node: v.node, Requests: v.requests, Lease: v.lease})
}

func (inv *Inventory) deletePod(o any) {
	if v, ok := tombstone(o).(*podView); ok {
		inv.cap.DeletePod(v.key())
	}
}

// podRequests is what the scheduler accounts a pod for (inventory.PodRequests), as
// one pod.
func podRequests(p *corev1.Pod) cluster.Amounts {
	sum := amounts(inventory.PodRequests(p))
	sum.Pods = 1
	return sum
}

// pool is the pool a claim of cluster storage class class counts against: its SDL
// class's. A cluster class named like an SDL class that is mapped to another cluster
// class fills no pool ("": its claims are not on the storage that pool offers).
func (inv *Inventory) pool(class string) string {
	if sdl, ok := inv.sdlClass[class]; ok {
		return cluster.StoragePool(sdl)
	}
	if k8s, mapped := inv.storageClasses[class]; mapped && k8s != class {
		return ""
	}
	return cluster.StoragePool(class)
}

func (inv *Inventory) setPVC(o any) {
	if v, ok := o.(*pvcView); ok && inv.op != nil && v.lease == nil {
		inv.deletePVC(o) // the report has it among others' (as setPod)
		return
	}
	if v, ok := o.(*pvcView); ok && v.class != "" && inv.pool(v.class) != "" {
		inv.cap.SetPoolItem(inv.pool(v.class), cluster.PoolItem{Key: v.key(), Amount: v.size, Lease: v.lease})
	}
}

func (inv *Inventory) deletePVC(o any) {
	if v, ok := tombstone(o).(*pvcView); ok && v.class != "" && inv.pool(v.class) != "" {
		inv.cap.DeletePoolItem(inv.pool(v.class), v.key())
	}
}

func (inv *Inventory) setService(o any) {
	v, ok := o.(*serviceView)
	if !ok {
		return
	}
	if inv.ips != nil {
		inv.ips.setService(v)
	}
	var ports int64
	if v.nodePorts {
		for _, p := range v.ports {
			if p.nodePort != 0 {
				ports++
			}
		}
	}
	if ports == 0 {
		inv.cap.DeletePoolItem(cluster.PoolNodePorts, v.key())
		return
	}
	inv.cap.SetPoolItem(cluster.PoolNodePorts, cluster.PoolItem{Key: v.key(), Amount: ports, Lease: v.lease})
}

func (inv *Inventory) deleteService(o any) {
	if v, ok := tombstone(o).(*serviceView); ok {
		inv.cap.DeletePoolItem(cluster.PoolNodePorts, v.key())
		if inv.ips != nil {
			inv.ips.deleteService(v)
		}
	}
}
