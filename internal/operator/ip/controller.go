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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/metallb"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/ownership"
)

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
	owner ownership.Owner
	log   *slog.Logger
	m     *Metrics

	// Set by Setup, from the manager: reads from its cache, writes through cs.
	client client.Client
	cs     kubernetes.Interface
	// leading is the context of the run that leads, once its cache has synced (nil
	// otherwise): Usage reads the cache only then.
	leading atomic.Pointer[context.Context]

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

// New checks cfg and builds the controller; operator.Run runs it.
func New(cfg Config, m *Metrics, log *slog.Logger) (*Controller, error) {
	m, log, err := operator.Prepare(&cfg, m, log, NewMetrics)
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, owner: cfg.Owner(), log: log, m: m, released: map[string]releasedIP{}}
	m.usage = func() Usage {
		if ctx := c.leading.Load(); ctx != nil {
			return c.Usage(*ctx)
		}
		return noUsage()
	}
	return c, nil
}

// poolKind is MetalLB's IPAddressPool, read as unstructured.
var poolKind = metallb.PoolResource.GroupVersion().WithKind("IPAddressPool")

// Cache keeps the ProviderLeasedIPs and Services of ours, MetalLB's refusals to give
// a Service an address, and the pools in MetalLB's namespace.
func (c *Controller) Cache(o *cache.Options) error {
	owned, err := labels.Parse(c.owner.Selector())
	if err != nil {
		return err
	}
	services, err := labels.Parse(c.owner.Selector() + "," + LabelComponent + "=" + componentName)
	if err != nil {
		return err
	}
	refusals, err := fields.ParseSelector("reason=" + reasonAllocationFailed + ",involvedObject.kind=Service")
	if err != nil {
		return err
	}
	o.ByObject = map[client.Object]cache.ByObject{
		&berthv1.ProviderLeasedIP{}: {Label: owned},
		&corev1.Service{}:           {Label: services},
		&corev1.Event{}:             {Field: refusals},
		operator.Object(poolKind):   {Namespaces: map[string]cache.Config{c.cfg.MetalLBNamespace: {}}},
	}
	return nil
}

// Setup fails at once without the ProviderLeasedIP CRD or MetalLB's IPAddressPool
// CRD; it registers the reconciler.
func (c *Controller) Setup(ctx context.Context, mgr manager.Manager) error {
	var err error
	if c.cs, _, err = operator.Clients(mgr); err != nil {
		return err
	}
	if err := c.checkResources(c.cs.Discovery()); err != nil {
		return err
	}
	c.client = mgr.GetClient()
	if err := operator.Index(ctx, mgr, &corev1.Service{}, indexSharingKey, func(s *corev1.Service) string { return s.Annotations[AnnotationSharedIP] }); err != nil {
		return err
	}
	if err := operator.Index(ctx, mgr, &corev1.Event{}, indexInvolved, func(e *corev1.Event) string {
		return e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
	}); err != nil {
		return err
	}
	// The pools are read by Usage: they are in the cache from the start.
	if _, err := mgr.GetCache().GetInformer(ctx, operator.Object(poolKind)); err != nil {
		return err
	}
	ofService := func(s *corev1.Service) []types.NamespacedName {
		if s.Annotations[AnnotationLeasedIP] == "" {
			return nil
		}
		return []types.NamespacedName{{Namespace: s.Namespace, Name: s.Annotations[AnnotationLeasedIP]}}
	}
	sources := []source.TypedSource[types.NamespacedName]{
		operator.Watch(mgr, &berthv1.ProviderLeasedIP{}, func(_ context.Context, p *berthv1.ProviderLeasedIP) []types.NamespacedName {
			return []types.NamespacedName{{Namespace: p.Namespace, Name: p.Name}}
		}),
		operator.Watch(mgr, &corev1.Service{}, func(_ context.Context, s *corev1.Service) []types.NamespacedName { return ofService(s) }),
		// A Service of ours that goes leaves its address to be asked for again.
		source.TypedKind(mgr.GetCache(), &corev1.Service{}, handler.TypedFuncs[*corev1.Service, types.NamespacedName]{
			DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Service], _ workqueue.TypedRateLimitingInterface[types.NamespacedName]) {
				c.rememberReleased(ctx, e.Object)
			},
		}),
		operator.Watch(mgr, &corev1.Event{}, func(ctx context.Context, e *corev1.Event) []types.NamespacedName {
			s := &corev1.Service{}
			if err := c.client.Get(ctx, types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}, s); err != nil {
				return nil
			}
			return ofService(s)
		}),
	}
	if err := operator.Runnable(mgr, func(ctx context.Context) error {
		c.leading.Store(&ctx)
		defer c.leading.Store(nil)
		c.log.InfoContext(ctx, "IP operator synced", slog.String("provider", c.owner.Provider), slog.String("chain_id", c.owner.ChainID), slog.String("pool", c.cfg.Pool))
		<-ctx.Done()
		return nil
	}); err != nil {
		return err
	}
	return operator.Reconcile(mgr, "leased-ip", c.cfg.Workers, c.m.ObserveSync, c.sync, sources...)
}

// checkResources fails clearly when a CRD the operator needs is missing.
func (c *Controller) checkResources(d discovery.DiscoveryInterface) error {
	return operator.CheckServed(d,
		operator.Served{GroupVersion: berthv1.GroupVersion.String(), Resource: "providerleasedips", Hint: "install berth's CRDs (config/crd)"},
		operator.Served{GroupVersion: metallb.PoolResource.GroupVersion().String(), Resource: metallb.PoolResource.Resource, Hint: "install MetalLB (its CRDs and controller)"})
}

// sync converges one ProviderLeasedIP: its Service exists as it should (or is
// deleted with it), and its status reports the address or why there is none. It may
// ask to be run again after a while.
func (c *Controller) sync(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	p := &berthv1.ProviderLeasedIP{}
	err := c.client.Get(ctx, key, p)
	switch {
	case apierrors.IsNotFound(err) || err == nil && (p.DeletionTimestamp != nil || !c.owner.Owns(p.Labels)):
		return 0, c.deleteService(ctx, key.Namespace, serviceName(key.Name))
	case err != nil:
		return 0, err
	}
	var after time.Duration
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
		if e := c.lastFailure(ctx, svc); e != nil {
			if wait := c.releasedSince(sharing, pinned); pinned != "" && wait < releaseGrace {
				// The endpoint's address was released moments ago (a migration: the old
				// lease's Service went). MetalLB gives it to the Services waiting for it;
				// its refusal may be from while the old Service held it.
				after = releaseGrace - wait
				st.Message = fmt.Sprintf("waiting for MetalLB to give the endpoint its address %s back", pinned)
				c.setCondition(&st, p, metav1.ConditionFalse, "Waiting", st.Message)
				break
			}
			// A recalled address someone else took: ask for any address instead.
			if pinned != "" && c.forget(sharing, pinned) {
				return 0, fmt.Errorf("MetalLB refused the endpoint's former address %s: asking for another", pinned)
			}
			st.Message = "MetalLB cannot assign an address: " + e.Message
			c.setCondition(&st, p, metav1.ConditionFalse, reasonAllocationFailed, st.Message)
		} else {
			st.Message = "waiting for MetalLB to assign an address to Service " + svc.Name
			c.setCondition(&st, p, metav1.ConditionFalse, "Waiting", st.Message)
		}
	}
	werr := c.writeStatus(ctx, p, st)
	return after, errors.Join(err, werr)
}

func (c *Controller) setCondition(st *berthv1.ProviderLeasedIPStatus, p *berthv1.ProviderLeasedIP, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionAssigned, Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation})
}

// lastFailure is MetalLB's newest AllocationFailed event about this very Service.
func (c *Controller) lastFailure(ctx context.Context, svc *corev1.Service) *corev1.Event {
	var l corev1.EventList
	if err := c.client.List(ctx, &l, client.MatchingFields{indexInvolved: svc.Namespace + "/" + svc.Name}); err != nil {
		return nil
	}
	var last *corev1.Event
	for i := range l.Items {
		e := &l.Items[i]
		if e.InvolvedObject.UID != svc.UID {
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
func (c *Controller) rememberReleased(ctx context.Context, s *corev1.Service) {
	if assignedIP(s) == "" || s.Annotations[AnnotationSharedIP] == "" {
		return
	}
	key := s.Annotations[AnnotationSharedIP]
	var siblings corev1.ServiceList
	if err := c.client.List(ctx, &siblings, client.MatchingFields{indexSharingKey: key}); err != nil {
		return
	}
	for i := range siblings.Items {
		if other := &siblings.Items[i]; other.UID != s.UID && assignedIP(other) == assignedIP(s) {
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
	own := &corev1.Service{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: serviceName(p.Name)}, own); err == nil {
		request = assignedIP(own)
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if request == "" {
		var siblings corev1.ServiceList
		if err := c.client.List(ctx, &siblings, client.MatchingFields{indexSharingKey: key}); err != nil {
			return nil, err
		}
		for i := range siblings.Items {
			if s := &siblings.Items[i]; s.DeletionTimestamp == nil && assignedIP(s) != "" {
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
	s := &corev1.Service{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if !c.owner.Owns(s.Labels) || s.Labels[LabelComponent] != componentName {
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
	return operator.ApplyStatus(ctx, c.client, berthv1.GroupVersion.WithKind("ProviderLeasedIP"), p.Namespace, p.Name, p.UID, st, FieldManager)
}
