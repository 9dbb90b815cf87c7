package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// Drift watches every kind of object berth writes for its owner's leases and reports a
// lease whose objects someone edited or deleted (OnDrift), so that the deployment
// manager syncs it again and restores them within seconds rather than at the next
// restart. An object counts as edited when what berth sets in it changed (its labels
// and spec, a Secret's data, a namespace's deletion): status updates by controllers
// are not drift. Objects being created are not drift either (berth creates them);
// after a watch reconnects, the relist reports what changed or went away meanwhile.
//
// It reads the process's Cache, whose views carry a hash of what berth sets in each of
// the owner's objects (drift).
type Drift struct {
	cache   *Cache
	onDrift func(market.LeaseID) bool
	log     *slog.Logger
	drifted *prometheus.CounterVec
	synced  chan struct{}
	once    sync.Once
}

// NewDrift returns a drift watcher reading c, calling onDrift (which must not block)
// with each lease whose objects drifted, which reports whether that queued a sync; it
// starts nothing.
func NewDrift(c *Cache, onDrift func(market.LeaseID) bool, log *slog.Logger, reg prometheus.Registerer) (*Drift, error) {
	if c == nil || onDrift == nil || log == nil {
		return nil, errors.New("drift: cache, handler and logger are required")
	}
	d := &Drift{cache: c, onDrift: onDrift, log: log, synced: make(chan struct{}),
		drifted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lease_object_changes_total",
			Help: "Edits and deletions of lease objects that queued a sync of a lease berth runs, by kind and change (edited, deleted); berth's own updates and teardowns count too.",
		}, []string{"kind", "change"})}
	if reg != nil {
		if err := reg.Register(d.drifted); err != nil {
			return nil, fmt.Errorf("drift metrics: %w", err)
		}
	}
	return d, nil
}

// Synced is closed once every informer has listed its objects.
func (d *Drift) Synced() <-chan struct{} { return d.synced }

// drift is what the drift watcher compares of one of the owner's lease objects: its
// kind and a hash of what berth sets in it (zero for objects not the owner's leases').
type drift struct {
	kind string
	hash uint64
}

func (d *drift) driftOf() *drift { return d }

// drifting is a view the drift watcher compares.
type drifting interface {
	base() *view
	driftOf() *drift
}

// driftOfObject is the drift of an object of v's (its lease known) with labels and
// the content berth sets.
func driftOfObject(v *view, kind string, labels map[string]string, content any) drift {
	if v.lease == nil {
		return drift{kind: kind}
	}
	return drift{kind: kind, hash: hashOf(labels, content)}
}

// driftView is the view of a kind only the drift watcher reads.
type driftView struct {
	view
	drift
}

func (v *driftView) DeepCopyObject() runtime.Object { c := *v; return &c }

// newDriftView is the view of a namespace, service account, network policy, secret or
// Manifest; nil for other objects.
func newDriftView(o any, owner ownership.Owner) *driftView {
	var (
		meta    *metav1.ObjectMeta
		kind    string
		content any
	)
	switch v := o.(type) {
	case *corev1.Namespace:
		return namespaceView(&v.ObjectMeta, v.DeletionTimestamp != nil, owner)
	case *corev1.ServiceAccount:
		meta, kind, content = &v.ObjectMeta, "service account", []any{v.AutomountServiceAccountToken, v.ImagePullSecrets}
	case *networkingv1.NetworkPolicy:
		meta, kind, content = &v.ObjectMeta, "network policy", v.Spec
	case *corev1.Secret:
		meta, kind, content = &v.ObjectMeta, "secret", []any{v.Type, v.Data}
	case *unstructured.Unstructured:
		m := metav1.ObjectMeta{Name: v.GetName(), Namespace: v.GetNamespace(), ResourceVersion: v.GetResourceVersion(), Labels: v.GetLabels()}
		meta, kind, content = &m, v.GetKind(), v.Object["spec"]
	default:
		return nil
	}
	dv := &driftView{view: newView(meta, owner)}
	dv.drift = driftOfObject(&dv.view, kind, meta.Labels, content)
	return dv
}

// namespaceView: a lease's namespace is its own object (newView only knows objects in
// it).
func namespaceView(m *metav1.ObjectMeta, deleting bool, owner ownership.Owner) *driftView {
	v := &driftView{view: view{objectMeta: objectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}}
	if id, ok := owner.LeaseOf(m.Labels); ok && m.Name == LeaseNamespace(id) {
		v.lease = &id
	}
	v.drift = driftOfObject(&v.view, "namespace", m.Labels, deleting)
	return v
}

func hashOf(labels map[string]string, content any) uint64 {
	h := fnv.New64a()
	// Maps marshal with sorted keys: equal contents hash equally.
	_ = json.NewEncoder(h).Encode([]any{labels, content})
	return h.Sum64()
}

// Run watches until ctx ends.
func (d *Drift) Run(ctx context.Context) error {
	var infs []cache.SharedIndexInformer
	for _, obj := range []runtime.Object{&corev1.Namespace{}, &corev1.ServiceAccount{}, &networkingv1.NetworkPolicy{},
		&corev1.Secret{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &corev1.Service{}} {
		infs = append(infs, d.cache.Informer(obj))
	}
	for _, r := range []schema.GroupVersionResource{berthv1.ManifestResource, berthv1.ProviderHostResource, berthv1.ProviderLeasedIPResource} {
		inf, err := d.cache.Resource(r)
		if err != nil {
			return fmt.Errorf("drift: %w", err)
		}
		infs = append(infs, inf)
	}
	handler := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(drifting)
			c, ok2 := cur.(drifting)
			if !ok1 || !ok2 || o.driftOf().hash == c.driftOf().hash {
				return
			}
			if c.base().lease == nil { // its labels were edited away: it was the lease's
				d.report(o.base(), c.driftOf().kind, "edited")
				return
			}
			d.report(c.base(), c.driftOf().kind, "edited")
		},
		DeleteFunc: func(o any) {
			if v, ok := tombstone(o).(drifting); ok {
				d.report(v.base(), v.driftOf().kind, "deleted")
			}
		},
	}
	var hs Handlers
	defer hs.Remove()
	for _, inf := range infs {
		if err := hs.Add(inf, handler); err != nil {
			return fmt.Errorf("drift: %w", err)
		}
	}
	if !d.cache.Wait(ctx, &hs) {
		return nil // ctx ended
	}
	d.once.Do(func() { close(d.synced) })
	<-ctx.Done()
	return nil
}

// report hands a drifted object's lease to the manager.
func (d *Drift) report(v *view, kind, what string) {
	if v.lease == nil || !d.onDrift(*v.lease) {
		return
	}
	d.drifted.WithLabelValues(kind, what).Inc()
	d.log.Debug("lease object changed; syncing the lease", slog.String("lease", v.lease.String()), slog.String("kind", kind),
		slog.String("object", v.Namespace+"/"+v.Name), slog.String("change", what))
}
