package ip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/operator"
)

// PoolResource is MetalLB's IPAddressPool.
var PoolResource = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// ConditionAssigned is the ProviderLeasedIP condition: MetalLB assigned an address.
const ConditionAssigned = "Assigned"

// reasonAllocationFailed is the reason of MetalLB's events when it cannot give a
// Service an address (an exhausted or unknown pool, a port clash on a shared address).
const reasonAllocationFailed = "AllocationFailed"

const (
	indexSharingKey = "sharing-key"
	indexInvolved   = "involved"
)

// Controller reconciles ProviderLeasedIPs, one at a time.
type Controller struct {
	cfg   Config
	owner cluster.Owner
	cs    kubernetes.Interface
	dc    dynamic.Interface
	log   *slog.Logger
	m     *Metrics

	leased, services, events, pools cache.SharedIndexInformer
	queue                           workqueue.TypedRateLimitingInterface[string]
	synced                          atomic.Bool

	// released are the addresses endpoints had when their last Service went, by
	// sharing key, for releaseMemory: a port of the endpoint created soon after (a
	// migration that deleted before it created) asks for the same address.
	mu       sync.Mutex
	released map[string]releasedIP
}

type releasedIP struct {
	ip string
	at time.Time
}

// releaseMemory is how long an endpoint's released address is asked for again.
const releaseMemory = 10 * time.Minute

// New checks cfg and builds the controller; Run starts it.
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
	c := &Controller{cfg: cfg, owner: cfg.Owner(), cs: cs, dc: dc, log: log, m: m, released: map[string]releasedIP{}}
	m.usage = c.Usage
	return c, nil
}

// Ready reports whether the caches are synced.
func (c *Controller) Ready() error {
	if !c.synced.Load() {
		return errors.New("the caches of ProviderLeasedIPs, Services and pools are not synced yet")
	}
	return nil
}

// Run reconciles until ctx ends; it fails at once without the ProviderLeasedIP CRD or
// MetalLB's IPAddressPool CRD.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.checkResources(); err != nil {
		return err
	}
	c.synced.Store(false)
	c.queue = operator.NewQueue("leased-ip")
	defer c.queue.ShutDown()

	owned := func(o *metav1.ListOptions) { o.LabelSelector = c.owner.Selector() }
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dc, c.cfg.Resync, metav1.NamespaceAll, owned)
	c.leased = df.ForResource(kube.ProviderLeasedIPResource).Informer()
	if err := c.leased.SetTransform(toLeasedIP); err != nil {
		return err
	}
	pf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dc, c.cfg.Resync, c.cfg.MetalLBNamespace, nil)
	c.pools = pf.ForResource(PoolResource).Informer()
	sf := informers.NewSharedInformerFactoryWithOptions(c.cs, c.cfg.Resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = c.owner.Selector() + "," + LabelComponent + "=" + componentName
	}))
	c.services = sf.Core().V1().Services().Informer()
	ef := informers.NewSharedInformerFactoryWithOptions(c.cs, c.cfg.Resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=" + reasonAllocationFailed + ",involvedObject.kind=Service"
	}))
	c.events = ef.Core().V1().Events().Informer()
	defer func() {
		for _, f := range []interface{ Shutdown() }{df, pf, sf, ef} {
			f.Shutdown()
		}
	}()
	if err := c.services.AddIndexers(cache.Indexers{indexSharingKey: func(obj any) ([]string, error) {
		if s, ok := obj.(*corev1.Service); ok && s.Annotations[AnnotationSharedIP] != "" {
			return []string{s.Annotations[AnnotationSharedIP]}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	if err := c.events.AddIndexers(cache.Indexers{indexInvolved: func(obj any) ([]string, error) {
		if e, ok := obj.(*corev1.Event); ok {
			return []string{e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		key func(any) string
	}{
		{c.leased, func(o any) string {
			if p, ok := o.(*berthv1.ProviderLeasedIP); ok {
				return p.Namespace + "/" + p.Name
			}
			return ""
		}},
		{c.services, func(o any) string {
			if s, ok := o.(*corev1.Service); ok && s.Annotations[AnnotationLeasedIP] != "" {
				return s.Namespace + "/" + s.Annotations[AnnotationLeasedIP]
			}
			return ""
		}},
		{c.events, func(o any) string {
			e, ok := o.(*corev1.Event)
			if !ok {
				return ""
			}
			obj, exists, _ := c.services.GetIndexer().GetByKey(e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name)
			if s, isSvc := obj.(*corev1.Service); exists && isSvc && s.Annotations[AnnotationLeasedIP] != "" {
				return s.Namespace + "/" + s.Annotations[AnnotationLeasedIP]
			}
			return ""
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(operator.Enqueue(c.queue, h.key)); err != nil {
			return err
		}
	}
	if _, err := c.services.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.rememberReleased}); err != nil {
		return err
	}
	for _, f := range []interface{ Start(<-chan struct{}) }{df, pf, sf, ef} {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.leased.HasSynced, c.services.HasSynced, c.events.HasSynced, c.pools.HasSynced) {
		return nil // ctx ended
	}
	c.synced.Store(true)
	defer c.synced.Store(false)
	c.log.InfoContext(ctx, "IP operator synced", slog.String("provider", c.owner.Provider), slog.String("chain_id", c.owner.ChainID), slog.String("pool", c.cfg.Pool))
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	operator.Work(ctx, c.queue, c.cfg.Workers, c.log, c.sync, c.m.ObserveSync)
	return nil
}

// checkResources fails clearly when a CRD the operator needs is missing.
func (c *Controller) checkResources() error {
	return operator.CheckServed(c.cs.Discovery(),
		operator.Served{GroupVersion: berthv1.GroupVersion.String(), Resource: "providerleasedips", Hint: "install berth's CRDs (config/crd)"},
		operator.Served{GroupVersion: PoolResource.GroupVersion().String(), Resource: PoolResource.Resource, Hint: "install MetalLB (its CRDs and controller)"})
}

// toLeasedIP stores ProviderLeasedIPs typed.
func toLeasedIP(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return asLeasedIP(u)
	}
	return obj, nil
}

func asLeasedIP(u *unstructured.Unstructured) (*berthv1.ProviderLeasedIP, error) {
	p := &berthv1.ProviderLeasedIP{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, fmt.Errorf("ProviderLeasedIP %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return p, nil
}

// sync converges one ProviderLeasedIP (key ns/name): its Service exists as it should
// (or is deleted with it), and its status reports the address or why there is none.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key cannot be retried into shape
	}
	obj, exists, _ := c.leased.GetIndexer().GetByKey(key)
	p, _ := obj.(*berthv1.ProviderLeasedIP)
	if !exists || p == nil || p.DeletionTimestamp != nil || !c.owner.Owns(p.Labels) {
		return c.deleteService(ctx, ns, serviceName(name))
	}
	st := berthv1.ProviderLeasedIPStatus{ServiceName: serviceName(p.Name), Conditions: slices.Clone(p.Status.Conditions)}
	svc, err := c.applyService(ctx, p)
	switch {
	case err != nil:
		st.Phase, st.Message = berthv1.LeasedIPFailed, fmt.Sprintf("could not write Service %s: %v", st.ServiceName, err)
		c.setCondition(&st, p, metav1.ConditionFalse, "WriteFailed", st.Message)
	case assignedIP(svc) != "":
		st.IP, st.Phase = assignedIP(svc), berthv1.LeasedIPAssigned
		st.Message = fmt.Sprintf("MetalLB assigned %s to Service %s", st.IP, svc.Name)
		c.setCondition(&st, p, metav1.ConditionTrue, "Assigned", st.Message)
	default:
		st.Phase = berthv1.LeasedIPPending
		pinned, sharing := svc.Annotations[AnnotationRequestIPs], SharingKey(c.owner, p.Spec.Lease.Owner, p.Spec.Name)
		if e := c.lastFailure(svc); e != nil {
			if wait := c.releasedSince(sharing, pinned); pinned != "" && wait < releaseGrace {
				// The endpoint's address was released moments ago (a migration: the old
				// lease's Service went). MetalLB gives it to the Services waiting for it;
				// its refusal may be from while the old Service held it.
				c.queue.AddAfter(key, releaseGrace-wait)
				st.Message = fmt.Sprintf("waiting for MetalLB to give the endpoint its address %s back", pinned)
				c.setCondition(&st, p, metav1.ConditionFalse, "Waiting", st.Message)
				break
			}
			// A recalled address someone else took: ask for any address instead.
			if pinned != "" && c.forget(sharing, pinned) {
				return fmt.Errorf("MetalLB refused the endpoint's former address %s: asking for another", pinned)
			}
			st.Message = "MetalLB cannot assign an address: " + e.Message
			c.setCondition(&st, p, metav1.ConditionFalse, reasonAllocationFailed, st.Message)
		} else {
			st.Message = "waiting for MetalLB to assign an address to Service " + svc.Name
			c.setCondition(&st, p, metav1.ConditionFalse, "Waiting", st.Message)
		}
	}
	werr := c.writeStatus(ctx, p, st)
	return errors.Join(err, werr)
}

func (c *Controller) setCondition(st *berthv1.ProviderLeasedIPStatus, p *berthv1.ProviderLeasedIP, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionAssigned, Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation})
}

// lastFailure is MetalLB's newest AllocationFailed event about this very Service.
func (c *Controller) lastFailure(svc *corev1.Service) *corev1.Event {
	objs, _ := c.events.GetIndexer().ByIndex(indexInvolved, svc.Namespace+"/"+svc.Name)
	var last *corev1.Event
	for _, o := range objs {
		e, ok := o.(*corev1.Event)
		if !ok || e.InvolvedObject.UID != svc.UID {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	return last
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// rememberReleased notes the address of a deleted Service when no other Service of
// its sharing key holds it any more.
func (c *Controller) rememberReleased(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*corev1.Service)
	if !ok || assignedIP(s) == "" || s.Annotations[AnnotationSharedIP] == "" {
		return
	}
	key := s.Annotations[AnnotationSharedIP]
	siblings, _ := c.services.GetIndexer().ByIndex(indexSharingKey, key)
	for _, o := range siblings {
		if other, ok := o.(*corev1.Service); ok && other.UID != s.UID && assignedIP(other) == assignedIP(s) {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for k, r := range c.released {
		if now.Sub(r.at) > releaseMemory {
			delete(c.released, k)
		}
	}
	c.released[key] = releasedIP{ip: assignedIP(s), at: now}
}

// recalled is the address an endpoint released lately ("": none).
func (c *Controller) recalled(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.released[key]; ok && time.Since(r.at) <= releaseMemory {
		return r.ip
	}
	return ""
}

// releaseGrace is how long after an endpoint's address was released MetalLB's refusal
// to give it back is not taken for someone else having it: MetalLB tries every waiting
// Service again when one is deleted, and its refusals from before linger as events.
const releaseGrace = 5 * time.Second

// releasedSince is how long ago the endpoint released ip (releaseGrace or more: not
// lately, or not this address).
func (c *Controller) releasedSince(key, ip string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.released[key]; ok && r.ip == ip {
		return min(time.Since(r.at), releaseGrace)
	}
	return releaseGrace
}

// forget drops an endpoint's released address that MetalLB will not give back (it
// is someone else's now).
func (c *Controller) forget(key, ip string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.released[key]; ok && r.ip == ip {
		delete(c.released, key)
		return true
	}
	return false
}

// applyService server-side applies p's Service. Its address is pinned once known: its
// own, or, for a new Service, the one another Service of the same tenant and endpoint
// holds (a migrated endpoint keeps its address).
func (c *Controller) applyService(ctx context.Context, p *berthv1.ProviderLeasedIP) (*corev1.Service, error) {
	key := SharingKey(c.owner, p.Spec.Lease.Owner, p.Spec.Name)
	request := ""
	if obj, ok, _ := c.services.GetIndexer().GetByKey(p.Namespace + "/" + serviceName(p.Name)); ok {
		if s, isSvc := obj.(*corev1.Service); isSvc {
			request = assignedIP(s)
		}
	}
	if request == "" {
		siblings, _ := c.services.GetIndexer().ByIndex(indexSharingKey, key)
		for _, o := range siblings {
			if s, ok := o.(*corev1.Service); ok && s.DeletionTimestamp == nil && assignedIP(s) != "" {
				request = assignedIP(s)
				break
			}
		}
	}
	if request == "" {
		request = c.recalled(key)
	}
	b, err := json.Marshal(c.cfg.buildService(p, c.owner, request))
	if err != nil {
		return nil, err
	}
	out, err := c.cs.CoreV1().Services(p.Namespace).Patch(ctx, serviceName(p.Name), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)})
	c.m.ObserveWrite("apply", err)
	return out, err
}

// deleteService deletes our Service of a ProviderLeasedIP that is gone; its address
// goes back to the pool.
func (c *Controller) deleteService(ctx context.Context, ns, name string) error {
	obj, ok, _ := c.services.GetIndexer().GetByKey(ns + "/" + name)
	s, isSvc := obj.(*corev1.Service)
	if !ok || !isSvc || !c.owner.Owns(s.Labels) || s.Labels[LabelComponent] != componentName {
		return nil
	}
	err := c.cs.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil
	}
	c.m.ObserveWrite("delete", err)
	if err != nil {
		return fmt.Errorf("delete Service %s/%s: %w", ns, name, err)
	}
	return nil
}

func sameStatus(a, b berthv1.ProviderLeasedIPStatus) bool {
	return a.IP == b.IP && a.Phase == b.Phase && a.Message == b.Message && a.ServiceName == b.ServiceName && operator.SameConditions(a.Conditions, b.Conditions)
}

// writeStatus applies st to p's status subresource when it changed.
func (c *Controller) writeStatus(ctx context.Context, p *berthv1.ProviderLeasedIP, st berthv1.ProviderLeasedIPStatus) error {
	if sameStatus(p.Status, st) {
		return nil
	}
	return operator.ApplyStatus(ctx, c.dc, kube.ProviderLeasedIPResource, "ProviderLeasedIP", p.Namespace, p.Name, p.UID, st, FieldManager)
}
