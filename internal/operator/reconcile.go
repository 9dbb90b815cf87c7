package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// NewQueue is an operator's workqueue: failed keys retried from 100 ms, doubling to a
// minute.
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// Enqueue is an event handler adding key(obj) of every added, changed or deleted
// object ("" for none) to q.
func Enqueue(q workqueue.TypedInterface[string], key func(any) string) cache.ResourceEventHandler {
	add := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if k := key(obj); k != "" {
			q.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(old, obj any) { add(old); add(obj) }, DeleteFunc: add}
}

// Work runs workers that take keys from q and sync them (a failure is logged and
// retried with backoff) until q shuts down; observe (may be nil) sees each sync.
// It returns once they have all stopped.
func Work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], workers int, log *slog.Logger,
	sync func(context.Context, string) error, observe func(error, time.Duration)) {
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				k, quit := q.Get()
				if quit {
					return
				}
				start := time.Now()
				err := sync(ctx, k)
				if observe != nil {
					observe(err, time.Since(start))
				}
				if err != nil {
					if ctx.Err() == nil {
						log.WarnContext(ctx, "sync failed; retrying", slog.String("key", k), slog.Any("error", err))
					}
					q.AddRateLimited(k)
				} else {
					q.Forget(k)
				}
				q.Done(k)
			}
		}()
	}
	for range workers {
		<-done
	}
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
// (that very one: its UID) as fieldManager. An object gone or replaced is not an
// error: its own events follow.
func ApplyStatus(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, kind, ns, name string, uid types.UID, status any, fieldManager string) error {
	b, err := json.Marshal(map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": string(uid)},
		"status":   status,
	})
	if err != nil {
		return err
	}
	_, err = dc.Resource(gvr).Namespace(ns).Patch(ctx, name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: fieldManager, Force: new(true)}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("status of %s %s/%s: %w", kind, ns, name, err)
	}
	return nil
}
