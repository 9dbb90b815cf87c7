package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

// newEvent is what berth reports of a Kubernetes event. Events recorded through
// events.k8s.io carry their time and count in their series, or only an event time.
func newEvent(e *corev1.Event) deploy.Event {
	at, count := e.LastTimestamp.Time, e.Count
	if s := e.Series; s != nil {
		at, count = s.LastObservedTime.Time, s.Count
	}
	for _, t := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if at.IsZero() {
			at = t
		}
	}
	return deploy.Event{Time: at, Type: e.Type, Reason: e.Reason, Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
		Message: e.Message, Count: max(count, 1), Namespace: e.InvolvedObject.Namespace}
}

// Events delivers the Kubernetes events of the lease's namespace to fn, oldest first,
// one call at a time from the caller's goroutine. Without Follow it returns after the
// current events; with Follow it then watches the namespace (an informer) and delivers
// each event created or updated, until ctx ends (nil) or fn returns an error (that
// error). What waits for a slow fn is at most one entry per event of the namespace:
// an event updated meanwhile is delivered once, as it is then. An unknown lease is
// ErrNoSuchLease.
func (s *Streams) Events(ctx context.Context, id market.LeaseID, opts deploy.EventOptions, fn func(deploy.Event) error) error {
	ns, err := s.leaseNamespace(ctx, id)
	if err != nil {
		return err
	}
	if !opts.Follow {
		list, err := s.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("lease %s: list events: %w", id, err)
		}
		events := make([]*corev1.Event, len(list.Items))
		for i := range list.Items {
			events[i] = &list.Items[i]
		}
		for _, e := range oldestFirst(events) {
			if err := fn(newEvent(e)); err != nil {
				return err
			}
		}
		return nil
	}
	return s.followEvents(ctx, id, ns, fn)
}

// followEvents runs an informer on the namespace's events: its handlers only queue the
// event's key, and this goroutine delivers the event as the informer's store has it,
// unless that version was delivered already.
func (s *Streams) followEvents(ctx context.Context, id market.LeaseID, ns string, fn func(deploy.Event) error) error {
	// An informer retries a failing list forever: a list that cannot be made is an
	// error here rather than a stream that never starts.
	if _, err := s.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("lease %s: list events: %w", id, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{})
	defer queue.ShutDown()
	stopQueue := context.AfterFunc(ctx, queue.ShutDown)
	defer stopQueue()
	f := informers.NewSharedInformerFactoryWithOptions(s.cs, 0, informers.WithNamespace(ns), informers.WithTransform(stripManagedFields))
	inf := f.Core().V1().Events().Informer()
	enqueue := func(o any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
			queue.Add(key)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue})
	if err != nil {
		return fmt.Errorf("lease %s: watch events: %w", id, err)
	}
	informerDone := make(chan error, 1)
	go func() {
		informerDone <- runInformers(ctx, f, "lease "+id.String()+" events", []cache.ResourceEventHandlerRegistration{reg}, func() {})
	}()
	err = s.deliverEvents(ctx, inf.GetStore(), reg.HasSynced, queue, fn)
	cancel()
	if ierr := <-informerDone; err == nil {
		err = ierr
	}
	return err
}

// deliverEvents waits for the informer's first list, delivers it oldest first, then
// what the queue names, until the queue shuts down (ctx ended) or fn fails.
func (s *Streams) deliverEvents(ctx context.Context, store cache.Store, synced cache.InformerSynced, queue workqueue.TypedInterface[string], fn func(deploy.Event) error) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return nil // ctx ended; runInformers reports a failure to list
	}
	delivered := map[string]string{} // key → resource version
	var current []*corev1.Event
	for _, o := range store.List() {
		if e, ok := o.(*corev1.Event); ok {
			current = append(current, e)
		}
	}
	for _, e := range oldestFirst(current) {
		delivered[e.Namespace+"/"+e.Name] = e.ResourceVersion
		if err := fn(newEvent(e)); err != nil {
			return err
		}
	}
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return nil
		}
		err := s.deliverEvent(store, key, delivered, fn)
		queue.Done(key)
		if err != nil {
			return err
		}
	}
}

func (s *Streams) deliverEvent(store cache.Store, key string, delivered map[string]string, fn func(deploy.Event) error) error {
	o, exists, err := store.GetByKey(key)
	if err != nil {
		return fmt.Errorf("event %s: %w", key, err)
	}
	if !exists { // deleted (expired)
		delete(delivered, key)
		return nil
	}
	e, ok := o.(*corev1.Event)
	if !ok || delivered[key] == e.ResourceVersion {
		return nil
	}
	delivered[key] = e.ResourceVersion
	return fn(newEvent(e))
}

// oldestFirst sorts events by time, then name.
func oldestFirst(events []*corev1.Event) []*corev1.Event {
	type timed struct {
		e  *corev1.Event
		at deploy.Event
	}
	ts := make([]timed, len(events))
	for i, e := range events {
		ts[i] = timed{e, newEvent(e)}
	}
	slices.SortStableFunc(ts, func(a, b timed) int {
		if c := a.at.Time.Compare(b.at.Time); c != 0 {
			return c
		}
		return strings.Compare(a.e.Name, b.e.Name)
	})
	out := make([]*corev1.Event, len(ts))
	for i := range ts {
		out[i] = ts[i].e
	}
	return out
}
