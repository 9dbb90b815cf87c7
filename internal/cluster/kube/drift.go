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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/market"
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
// The informers keep a small view per object (its lease and a hash), not the object.
type Drift struct {
	cs      kubernetes.Interface
	dc      dynamic.Interface
	owner   ownership.Owner
	onDrift func(market.LeaseID) bool
	log     *slog.Logger
	drifted *prometheus.CounterVec
	synced  chan struct{}
	once    sync.Once
}

// NewDrift returns a drift watcher calling onDrift (which must not block) with each
// lease whose objects drifted, which reports whether that queued a sync; it starts
// nothing.
func NewDrift(cs kubernetes.Interface, dc dynamic.Interface, owner ownership.Owner, onDrift func(market.LeaseID) bool, log *slog.Logger, reg prometheus.Registerer) (*Drift, error) {
	if cs == nil || dc == nil || onDrift == nil || log == nil {
		return nil, errors.New("drift: clients, handler and logger are required")
	}
	if err := owner.Validate(); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	d := &Drift{cs: cs, dc: dc, owner: owner, onDrift: onDrift, log: log, synced: make(chan struct{}),
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

// driftView is what the drift informers keep of an object: its lease (nil when the
// object is not one of the owner's leases') and a hash of what berth sets in it.
type driftView struct {
	view
	kind string
	hash uint64
}

func (v *driftView) DeepCopyObject() runtime.Object { c := *v; return &c }

// driftTransform turns objects into driftViews.
func (d *Drift) driftTransform(o any) (any, error) {
	var (
		meta    *metav1.ObjectMeta
		kind    string
		content any
	)
	switch v := o.(type) {
	case *driftView:
		return v, nil
	case *corev1.Namespace:
		return d.namespaceView(&v.ObjectMeta, v.DeletionTimestamp != nil), nil
	case *corev1.ServiceAccount:
		meta, kind, content = &v.ObjectMeta, "service account", []any{v.AutomountServiceAccountToken, v.ImagePullSecrets}
	case *networkingv1.NetworkPolicy:
		meta, kind, content = &v.ObjectMeta, "network policy", v.Spec
	case *corev1.Secret:
		meta, kind, content = &v.ObjectMeta, "secret", []any{v.Type, v.Data}
	case *appsv1.Deployment:
		meta, kind, content = &v.ObjectMeta, "deployment", v.Spec
	case *appsv1.StatefulSet:
		meta, kind, content = &v.ObjectMeta, "statefulset", v.Spec
	case *corev1.Service:
		meta, kind, content = &v.ObjectMeta, "service", v.Spec
	case *unstructured.Unstructured:
		m := metav1.ObjectMeta{Name: v.GetName(), Namespace: v.GetNamespace(), ResourceVersion: v.GetResourceVersion(), Labels: v.GetLabels()}
		meta, kind, content = &m, v.GetKind(), v.Object["spec"]
	default:
		return o, nil
	}
	return &driftView{view: newView(meta, d.owner), kind: kind, hash: hashOf(meta.Labels, content)}, nil
}

// namespaceView: a lease's namespace is its own object (newView only knows objects in
// it).
func (d *Drift) namespaceView(m *metav1.ObjectMeta, deleting any) *driftView {
	v := &driftView{view: view{objectMeta: objectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}, kind: "namespace", hash: hashOf(m.Labels, deleting)}
	if id, ok := d.owner.LeaseOf(m.Labels); ok && m.Name == LeaseNamespace(id) {
		v.lease = &id
	}
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
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = d.owner.Selector() }
	f := informers.NewSharedInformerFactoryWithOptions(d.cs, 0, informers.WithTransform(d.driftTransform), informers.WithTweakListOptions(tweak))
	// Nothing reads these stores by namespace: they have no namespace index (the
	// factory's informers have one, a set per namespace and kind, per lease).
	var typed []cache.SharedIndexInformer
	for _, obj := range []runtime.Object{&corev1.Namespace{}, &corev1.ServiceAccount{}, &networkingv1.NetworkPolicy{},
		&corev1.Secret{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &corev1.Service{}} {
		typed = append(typed, unindexedInformer(f, obj, tweak))
	}
	var crds []cache.SharedIndexInformer
	for _, r := range []schema.GroupVersionResource{berthv1.ManifestResource, berthv1.ProviderHostResource, berthv1.ProviderLeasedIPResource} {
		inf := dynamicinformer.NewFilteredDynamicInformer(d.dc, r, metav1.NamespaceAll, 0, cache.Indexers{}, tweak).Informer()
		if err := inf.SetTransform(d.driftTransform); err != nil {
			return fmt.Errorf("drift: %w", err)
		}
		crds = append(crds, inf)
	}
	handler := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*driftView)
			c, ok2 := cur.(*driftView)
			if ok1 && ok2 && o.hash != c.hash {
				if c.lease == nil { // its labels were edited away: it was the lease's
					c = &driftView{view: o.view, kind: c.kind}
				}
				d.report(c, "edited")
			}
		},
		DeleteFunc: func(o any) {
			if v, ok := tombstone(o).(*driftView); ok {
				d.report(v, "deleted")
			}
		},
	}
	var regs []cache.ResourceEventHandlerRegistration
	for _, inf := range append(typed, crds...) {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return fmt.Errorf("drift: %w", err)
		}
		regs = append(regs, reg)
	}
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, inf := range crds {
		wg.Go(func() { inf.RunWithContext(dctx) })
	}
	for _, inf := range crds {
		if !cache.WaitForCacheSync(dctx.Done(), inf.HasSynced) {
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("drift: an informer of berth's resources did not sync")
		}
	}
	return runInformers(ctx, f, "drift", regs, func() { d.once.Do(func() { close(d.synced) }) })
}

// report hands a drifted object's lease to the manager.
func (d *Drift) report(v *driftView, what string) {
	if v.lease == nil || !d.onDrift(*v.lease) {
		return
	}
	d.drifted.WithLabelValues(v.kind, what).Inc()
	d.log.Debug("lease object changed; syncing the lease", slog.String("lease", v.lease.String()), slog.String("kind", v.kind),
		slog.String("object", v.Namespace+"/"+v.Name), slog.String("change", what))
}
