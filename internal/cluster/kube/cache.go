package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// Cache is the provider process's one watch of each kind it reads: the inventory, the
// status monitor and the drift watcher share its informers, each registering its own
// handlers. Its stores keep views (views.go), not objects: each view holds what every
// reader of its kind needs (a Deployment's view its status counts for the monitor and
// the hash of its spec for the drift watcher).
//
// Nodes, services and events are watched whole (the inventory counts every
// provider's services' node ports; events carry no labels); pods and claims too,
// unless OwnPodsOnly (the inventory operator's report counts everyone else's); the
// rest only as far as they are the owner's (by label).
type Cache struct {
	owner ownership.Owner
	// all watches every object of its kinds, own the owner's, crds berth's resources
	// of the owner's.
	all, own informers.SharedInformerFactory
	crds     dynamicinformer.DynamicSharedInformerFactory

	mu      sync.Mutex
	ownPods bool
	noted   map[any]bool           // informers whose list errors are noted
	stop    <-chan struct{}        // Run's; nil before
	started chan struct{}          // closed by Run
	listErr atomic.Pointer[string] // the last list or watch error of an informer
}

// NewCache watches the cluster through cs and dc (nil: no berth resources), for
// owner, once Run runs.
func NewCache(cs kubernetes.Interface, dc dynamic.Interface, owner ownership.Owner) (*Cache, error) {
	if cs == nil {
		return nil, errors.New("cache: a client is required")
	}
	if err := owner.Validate(); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	mine := func(o *metav1.ListOptions) { o.LabelSelector = owner.Selector() }
	view := func(o any) (any, error) { return toView(o, owner) }
	c := &Cache{
		owner:   owner,
		all:     informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(view)),
		own:     informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(view), informers.WithTweakListOptions(mine)),
		noted:   map[any]bool{},
		started: make(chan struct{}),
	}
	if dc != nil {
		c.crds = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, metav1.NamespaceAll, mine)
	}
	return c, nil
}

// OwnPodsOnly watches only the owner's pods and claims. Call it before any reader asks
// for them.
func (c *Cache) OwnPodsOnly() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ownPods = true
}

// ListError is the last list or watch error of one of the cache's informers ("":
// none yet), naming the kind.
func (c *Cache) ListError() string {
	if s := c.listErr.Load(); s != nil {
		return *s
	}
	return ""
}

// namespaced are the kinds readers look up by namespace (the monitor: a lease's
// objects); the others' stores have no namespace index, which costs a set per
// namespace and kind, per lease, for nothing.
var namespaced = map[reflect.Type]bool{
	reflect.TypeFor[*corev1.Pod](): true, reflect.TypeFor[*corev1.Service](): true,
	reflect.TypeFor[*appsv1.Deployment](): true, reflect.TypeFor[*appsv1.StatefulSet](): true,
}

// Informer is the cache's informer of obj's kind; it runs from Run on (at once if
// Run runs already).
func (c *Cache) Informer(obj runtime.Object) cache.SharedIndexInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, tweak := c.all, func(*metav1.ListOptions) {}
	switch obj.(type) {
	case *corev1.Node, *corev1.Service, *corev1.Event:
	case *corev1.Pod, *corev1.PersistentVolumeClaim:
		if c.ownPods {
			f, tweak = c.own, func(o *metav1.ListOptions) { o.LabelSelector = c.owner.Selector() }
		}
	default:
		f, tweak = c.own, func(o *metav1.ListOptions) { o.LabelSelector = c.owner.Selector() }
	}
	indexers := cache.Indexers{}
	if namespaced[reflect.TypeOf(obj)] {
		indexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	}
	inf := f.InformerFor(obj, func(cs kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
		return newInformer(cs, obj, r, indexers, tweak)
	})
	c.noteLocked(inf, fmt.Sprintf("%T", obj))
	if c.stop != nil {
		f.Start(c.stop)
	}
	return inf
}

// Resource is the cache's informer of one of berth's resources (the owner's); its
// store keeps views: ProviderHosts' and ProviderLeasedIPs' for the monitor, with the
// hash the drift watcher compares, and Manifests' for the drift watcher.
func (c *Cache) Resource(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crds == nil {
		return nil, fmt.Errorf("cache: %s: no dynamic client", gvr.Resource)
	}
	inf := c.crds.ForResource(gvr).Informer()
	if !c.noted[inf] {
		var view func(any) (any, error)
		switch gvr {
		case berthv1.ProviderHostResource:
			view = func(o any) (any, error) { return newHostView(o, c.owner), nil }
		case berthv1.ProviderLeasedIPResource:
			view = func(o any) (any, error) { return newLeasedIPView(o, c.owner), nil }
		case berthv1.ManifestResource:
			view = func(o any) (any, error) { return toView(o, c.owner) }
		default:
			return nil, fmt.Errorf("cache: no view of %s", gvr.Resource)
		}
		if err := inf.SetTransform(view); err != nil {
			return nil, fmt.Errorf("cache: %s: %w", gvr.Resource, err)
		}
	}
	c.noteLocked(inf, gvr.Resource)
	if c.stop != nil {
		c.crds.Start(c.stop)
	}
	return inf, nil
}

// noteLocked records inf's list and watch errors for ListError (client-go logs them
// too), once per informer, before it starts.
func (c *Cache) noteLocked(inf cache.SharedIndexInformer, what string) {
	if c.noted[inf] {
		return
	}
	c.noted[inf] = true
	// An informer not yet started takes the handler; every one is new here.
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		s := "listing " + what + ": " + err.Error()
		c.listErr.Store(&s)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// Run runs the informers made before and after it is called until ctx ends, then
// stops them.
func (c *Cache) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.stop != nil {
		c.mu.Unlock()
		return fmt.Errorf("cache: Run called twice")
	}
	c.stop = ctx.Done()
	c.all.Start(c.stop)
	c.own.Start(c.stop)
	if c.crds != nil {
		c.crds.Start(c.stop)
	}
	close(c.started)
	c.mu.Unlock()
	<-ctx.Done()
	c.all.Shutdown()
	c.own.Shutdown()
	if c.crds != nil {
		c.crds.Shutdown()
	}
	return nil
}

// Handlers is one reader's handlers on the cache's informers.
type Handlers struct {
	regs []registration
}

type registration struct {
	inf cache.SharedIndexInformer
	reg cache.ResourceEventHandlerRegistration
}

// Add registers h on inf (each object the informer holds is handed to h as added).
func (hs *Handlers) Add(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return err
	}
	hs.regs = append(hs.regs, registration{inf, reg})
	return nil
}

// Wait returns true once the cache runs and every handler has been handed its
// informer's initial list; false when ctx ends first.
func (c *Cache) Wait(ctx context.Context, hs *Handlers) bool {
	select {
	case <-c.started:
	case <-ctx.Done():
		return false
	}
	// A registration has synced once its informer has and the handler got the list.
	synced := make([]cache.InformerSynced, 0, len(hs.regs))
	for _, r := range hs.regs {
		synced = append(synced, r.reg.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Remove unregisters the handlers (the reader stops; the informers run on).
func (hs *Handlers) Remove() {
	for _, r := range hs.regs {
		_ = r.inf.RemoveEventHandler(r.reg)
	}
	hs.regs = nil
}

// newInformer is an informer of obj's kind, in every namespace, listing with tweak,
// with indexers. The kinds are those berth watches; another is a programming error (a
// panic at the informer's creation, which every caller's tests reach).
func newInformer(cs kubernetes.Interface, obj runtime.Object, r time.Duration, idx cache.Indexers, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	all := metav1.NamespaceAll
	switch obj.(type) {
	case *corev1.Namespace:
		return coreinformers.NewFilteredNamespaceInformer(cs, r, idx, tweak)
	case *corev1.Node:
		return coreinformers.NewFilteredNodeInformer(cs, r, idx, tweak)
	case *corev1.Pod:
		return coreinformers.NewFilteredPodInformer(cs, all, r, idx, tweak)
	case *corev1.PersistentVolumeClaim:
		return coreinformers.NewFilteredPersistentVolumeClaimInformer(cs, all, r, idx, tweak)
	case *corev1.Service:
		return coreinformers.NewFilteredServiceInformer(cs, all, r, idx, tweak)
	case *corev1.ServiceAccount:
		return coreinformers.NewFilteredServiceAccountInformer(cs, all, r, idx, tweak)
	case *corev1.Secret:
		return coreinformers.NewFilteredSecretInformer(cs, all, r, idx, tweak)
	case *corev1.Event:
		return coreinformers.NewFilteredEventInformer(cs, all, r, idx, tweak)
	case *networkingv1.NetworkPolicy:
		return networkinginformers.NewFilteredNetworkPolicyInformer(cs, all, r, idx, tweak)
	case *appsv1.Deployment:
		return appsinformers.NewFilteredDeploymentInformer(cs, all, r, idx, tweak)
	case *appsv1.StatefulSet:
		return appsinformers.NewFilteredStatefulSetInformer(cs, all, r, idx, tweak)
	}
	panic(fmt.Sprintf("cache: no informer of %T", obj))
}
