package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Reconcile registers a controller named name with mgr: keys of type K come from
// the sources, and workers sync them at a time. A failed key is retried from 100 ms,
// doubling to a minute; a sync may ask to be run again after a while (a positive
// duration). observe (may be nil) sees each sync.
func Reconcile[K comparable](mgr manager.Manager, name string, workers int, observe func(error, time.Duration),
	sync func(context.Context, K) (time.Duration, error), sources ...source.TypedSource[K]) error {
	b := builder.TypedControllerManagedBy[K](mgr).Named(name).WithOptions(controller.TypedOptions[K]{
		MaxConcurrentReconciles: workers,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[K](100*time.Millisecond, time.Minute),
	})
	for _, s := range sources {
		b = b.WatchesRawSource(s)
	}
	return b.Complete(reconcile.TypedFunc[K](func(ctx context.Context, k K) (reconcile.Result, error) {
		start := time.Now()
		after, err := sync(ctx, k)
		if observe != nil {
			observe(err, time.Since(start))
		}
		return reconcile.Result{RequeueAfter: after}, err
	}))
}

// Watch is a source of mgr's cache: every added, changed (old and new) or deleted
// object of obj's kind enqueues keys(object).
func Watch[O client.Object, K comparable](mgr manager.Manager, obj O, keys func(context.Context, O) []K) source.TypedSource[K] {
	return source.TypedKind(mgr.GetCache(), obj, handler.TypedEnqueueRequestsFromMapFunc(keys))
}

// Keys is what Watch takes for a key that may be absent ("": none).
func Keys(k string) []string {
	if k == "" {
		return nil
	}
	return []string{k}
}

// Index registers a field index of obj's kind in mgr's cache, read with
// client.MatchingFields{name: value}; value returns "" for objects it does not index.
func Index[O client.Object](ctx context.Context, mgr manager.Manager, obj O, name string, value func(O) string) error {
	return mgr.GetFieldIndexer().IndexField(ctx, obj, name, func(o client.Object) []string {
		if t, ok := o.(O); ok {
			return Keys(value(t))
		}
		return nil
	})
}

// Object is an empty object of kind gvk, read as unstructured: a kind of another
// project (Gateway API, MetalLB, Rook) or one whose copies are kept slim.
func Object(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Informer is the manager cache's informer of obj's kind, for a controller that reads
// its store itself: one whose transform keeps slim copies, not the kind's type, which
// the cache's reader cannot list.
func Informer(ctx context.Context, mgr manager.Manager, obj client.Object) (toolscache.SharedIndexInformer, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	si, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the cache's informer of %T is a %T, not a shared index informer", obj, inf)
	}
	return si, nil
}

// Clients are a typed and a dynamic client on mgr's configuration and connections,
// for writes the manager's client does not make (server-side applies of typed
// objects, discovery).
func Clients(mgr manager.Manager) (kubernetes.Interface, dynamic.Interface, error) {
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, err
	}
	dc, err := dynamic.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, err
	}
	return cs, dc, nil
}

// Runnable adds f to mgr to run, while leading, once the cache has synced.
func Runnable(mgr manager.Manager, f func(context.Context) error) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // ctx ended
		}
		return f(ctx)
	}))
}

// Served is a resource an operator needs, and what to do when it is missing.
type Served struct {
	GroupVersion, Resource, Hint string
}

// CheckServed fails, saying what to install, when the API server does not serve one
// of the resources.
func CheckServed(d discovery.DiscoveryInterface, need ...Served) error {
	for _, n := range need {
		list, err := d.ServerResourcesForGroupVersion(n.GroupVersion)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("discover %s: %w", n.GroupVersion, err)
		}
		if list == nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == n.Resource }) {
			return fmt.Errorf("the cluster does not serve %s %s: %s", n.GroupVersion, n.Resource, n.Hint)
		}
	}
	return nil
}

// SameConditions compares conditions but for their transition times.
func SameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message && x.ObservedGeneration == y.ObservedGeneration
	})
}

// ApplyStatus server-side applies status to the status subresource of the object
// of kind gvk (that very one: its UID) as fieldManager. An object gone or replaced is
// not an error: its own events follow.
func ApplyStatus(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns, name string, uid types.UID, status any, fieldManager string) error {
	b, err := json.Marshal(status)
	if err != nil {
		return err
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": string(uid)},
		"status":   st,
	}}
	u.SetGroupVersionKind(gvk)
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("status of %s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	return nil
}
