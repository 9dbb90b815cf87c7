package hostname

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/ownership"
)

// Conditions of a ProviderHost's status.
const (
	// ConditionRouted: the hostname's route is written (False: conflict or failure).
	ConditionRouted = "Routed"
	// ConditionReady: the route's check passed (absent with health mode none).
	ConditionReady = "Ready"
)

const indexHostname = "hostname"

// httpRouteKind is the Gateway API's HTTPRoute, read as unstructured.
var httpRouteKind = HTTPRouteResource.GroupVersion().WithKind("HTTPRoute")

// Controller reconciles ProviderHosts, one hostname at a time.
type Controller struct {
	cfg   Config
	owner ownership.Owner
	log   *slog.Logger
	m     *Metrics

	// Set by Setup, from the manager: reads from its cache, writes through cs and dc.
	client client.Client
	cs     kubernetes.Interface
	dc     dynamic.Interface
	probe  *prober
}

// New checks cfg and builds the controller; operator.Run runs it.
func New(cfg Config, m *Metrics, log *slog.Logger) (*Controller, error) {
	m, log, err := operator.Prepare(&cfg, m, log, NewMetrics)
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, owner: cfg.Owner(), log: log, m: m}, nil
}

// routeSelector selects the routes of ours.
func (c *Controller) routeSelector() string {
	return c.owner.Selector() + "," + LabelComponent + "=" + componentName
}

// routeObject is an empty route of the mode's kind.
func (c *Controller) routeObject() client.Object {
	if c.cfg.Mode == ModeGateway {
		return operator.Object(httpRouteKind)
	}
	return &networkingv1.Ingress{}
}

// Cache keeps every provider's ProviderHosts (a hostname is held cluster-wide) and
// the routes of ours.
func (c *Controller) Cache(o *cache.Options) error {
	sel, err := labels.Parse(c.routeSelector())
	if err != nil {
		return err
	}
	o.ByObject = map[client.Object]cache.ByObject{c.routeObject(): {Label: sel}}
	return nil
}

// Setup fails at once when the ProviderHost CRD, or in gateway mode the HTTPRoute
// CRD, is not installed; it registers the reconciler, and the removal of the other
// mode's routes once synced.
func (c *Controller) Setup(ctx context.Context, mgr manager.Manager) error {
	var err error
	if c.cs, c.dc, err = operator.Clients(mgr); err != nil {
		return err
	}
	if err := c.checkResources(c.cs.Discovery()); err != nil {
		return err
	}
	c.client = mgr.GetClient()
	if err := operator.Index(ctx, mgr, &berthv1.ProviderHost{}, indexHostname, func(h *berthv1.ProviderHost) string { return h.Spec.Hostname }); err != nil {
		return err
	}
	route := c.routeObject()
	if err := operator.Index(ctx, mgr, route, indexHostname, func(o client.Object) string { return o.GetAnnotations()[AnnotationHostname] }); err != nil {
		return err
	}
	sources := []source.TypedSource[string]{
		operator.Watch(mgr, &berthv1.ProviderHost{}, func(_ context.Context, h *berthv1.ProviderHost) []string { return operator.Keys(h.Spec.Hostname) }),
		operator.Watch(mgr, route, func(_ context.Context, o client.Object) []string {
			return operator.Keys(o.GetAnnotations()[AnnotationHostname])
		}),
	}
	c.probe = nil
	if c.cfg.Health.Mode == HealthProbe {
		// A probe result that changed reconciles its hostname.
		changed, stopped := make(chan event.TypedGenericEvent[string]), make(chan struct{})
		sources = append(sources, source.TypedChannel(changed, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, h string) []string { return []string{h} })))
		c.probe = newProber(c.cfg.Health, c.m, func(h string) {
			select {
			case changed <- event.TypedGenericEvent[string]{Object: h}:
			case <-stopped:
			}
		})
		if err := operator.Runnable(mgr, func(ctx context.Context) error {
			defer close(stopped)
			c.probe.run(ctx, func() []string { return c.probeTargets(ctx) })
			return nil
		}); err != nil {
			return err
		}
	}
	if err := operator.Runnable(mgr, func(ctx context.Context) error {
		c.removeOtherKind(ctx)
		c.log.InfoContext(ctx, "hostname operator synced", slog.String("mode", c.cfg.Mode), slog.String("provider", c.owner.Provider), slog.String("chain_id", c.owner.ChainID))
		return nil
	}); err != nil {
		return err
	}
	return operator.Reconcile(mgr, "hostname", c.cfg.Workers, c.m.ObserveSync, func(ctx context.Context, h string) (time.Duration, error) {
		return 0, c.sync(ctx, h)
	}, sources...)
}

// removeOtherKind deletes the routes of ours of the kind the mode does not write
// (Ingresses in gateway mode, HTTPRoutes in ingress mode): what a switch of mode left.
// A failure is logged; the next start tries again.
func (c *Controller) removeOtherKind(ctx context.Context) {
	sel := metav1.ListOptions{LabelSelector: c.owner.Selector() + "," + LabelComponent + "=" + componentName}
	del := metav1.DeleteOptions{}
	var err error
	var n int
	if c.cfg.Mode == ModeGateway {
		var l *networkingv1.IngressList
		if l, err = c.cs.NetworkingV1().Ingresses(metav1.NamespaceAll).List(ctx, sel); err == nil {
			for i := range l.Items {
				if r := &l.Items[i]; ownedBy(c.owner, r.Labels) {
					del.Preconditions = &metav1.Preconditions{UID: &r.UID}
					if e := c.cs.NetworkingV1().Ingresses(r.Namespace).Delete(ctx, r.Name, del); e != nil && !apierrors.IsNotFound(e) {
						err = errors.Join(err, e)
					} else {
						n++
					}
				}
			}
		}
	} else {
		var l *unstructured.UnstructuredList
		l, err = c.dc.Resource(HTTPRouteResource).Namespace(metav1.NamespaceAll).List(ctx, sel)
		if apierrors.IsNotFound(err) {
			return // no Gateway API on this cluster: no HTTPRoutes either
		}
		if err == nil {
			for i := range l.Items {
				if r := &l.Items[i]; ownedBy(c.owner, r.GetLabels()) {
					uid := r.GetUID()
					del.Preconditions = &metav1.Preconditions{UID: &uid}
					if e := c.dc.Resource(HTTPRouteResource).Namespace(r.GetNamespace()).Delete(ctx, r.GetName(), del); e != nil && !apierrors.IsNotFound(e) {
						err = errors.Join(err, e)
					} else {
						n++
					}
				}
			}
		}
	}
	if err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "removing the routes of the other mode", slog.String("mode", c.cfg.Mode), slog.Any("error", err))
	}
	if n > 0 {
		c.log.InfoContext(ctx, "removed the routes of the other mode", slog.String("mode", c.cfg.Mode), slog.Int("routes", n))
	}
}

// checkResources fails clearly when a CRD the mode needs is missing.
func (c *Controller) checkResources(d discovery.DiscoveryInterface) error {
	need := []operator.Served{{GroupVersion: berthv1.GroupVersion.String(), Resource: "providerhosts", Hint: "install berth's CRDs (config/crd)"}}
	if c.cfg.Mode == ModeGateway {
		need = append(need, operator.Served{GroupVersion: "gateway.networking.k8s.io/v1", Resource: "httproutes", Hint: "install the Gateway API CRDs (standard channel)"})
	}
	if c.cfg.Mode == ModeIngress && c.cfg.Ingress.Annotations == AnnotationsTraefik {
		need = append(need, operator.Served{GroupVersion: "traefik.io/v1alpha1", Resource: "middlewares", Hint: "install Traefik's CRDs (ingress.annotations: traefik writes Middlewares)"})
	}
	return operator.CheckServed(d, need...)
}

// claimants are the ProviderHosts of hostname h on the whole cluster (every
// provider's), oldest first: the first holds it. Every provider's operator sees the
// same order, so they agree on the holder.
func (c *Controller) claimants(ctx context.Context, h string) ([]*berthv1.ProviderHost, error) {
	var l berthv1.ProviderHostList
	if err := c.client.List(ctx, &l, client.MatchingFields{indexHostname: h}); err != nil {
		return nil, err
	}
	out := make([]*berthv1.ProviderHost, 0, len(l.Items))
	for i := range l.Items {
		if p := &l.Items[i]; p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	// Creation times have whole seconds: within one, the claimant that holds the
	// hostname already keeps it, so a tie never moves a route.
	holds := func(p *berthv1.ProviderHost) int {
		if p.Status.Phase == "" || p.Status.Phase == berthv1.HostConflict {
			return 1
		}
		return 0
	}
	slices.SortFunc(out, func(a, b *berthv1.ProviderHost) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(holds(a), holds(b)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// routes are the routes of ours for hostname h.
func (c *Controller) routes(ctx context.Context, h string) ([]client.Object, error) {
	var out []client.Object
	if c.cfg.Mode == ModeGateway {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(httpRouteKind.GroupVersion().WithKind("HTTPRouteList"))
		if err := c.client.List(ctx, l, client.MatchingFields{indexHostname: h}); err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return out, nil
	}
	var l networkingv1.IngressList
	if err := c.client.List(ctx, &l, client.MatchingFields{indexHostname: h}); err != nil {
		return nil, err
	}
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

// sync converges hostname h: the oldest claimant holds it; if it is ours, its route
// is applied; every other route of ours for h is deleted; each of our claimants'
// status says how it stands.
func (c *Controller) sync(ctx context.Context, h string) error {
	all, err := c.claimants(ctx, h)
	if err != nil {
		return err
	}
	routes, err := c.routes(ctx, h)
	if err != nil {
		return err
	}
	var holder *berthv1.ProviderHost
	if len(all) > 0 && c.owner.Owns(all[0].Labels) {
		holder = all[0]
	}
	var errs []error
	// Routes first: a route of a hostname this lease no longer holds goes before the
	// holder's is written, so two never serve one name.
	for _, r := range routes {
		if !ownedBy(c.owner, r.GetLabels()) {
			continue
		}
		if holder != nil && r.GetNamespace() == holder.Namespace && r.GetName() == holder.Name {
			continue
		}
		if err := c.deleteRoute(ctx, r.GetNamespace(), r.GetName(), r.GetUID()); err != nil {
			errs = append(errs, err)
		}
	}
	for i, p := range all {
		if !c.owner.Owns(p.Labels) {
			continue
		}
		var st berthv1.ProviderHostStatus
		if i == 0 {
			st = c.route(ctx, p)
			if st.Phase == berthv1.HostFailed {
				errs = append(errs, errors.New(st.Message))
			}
		} else {
			st = conflictStatus(p, all[0].CreationTimestamp)
		}
		if err := c.writeStatus(ctx, p, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// conflictStatus is the status of a ProviderHost whose hostname another lease holds;
// it names no other tenant's lease.
func conflictStatus(p *berthv1.ProviderHost, since metav1.Time) berthv1.ProviderHostStatus {
	st := berthv1.ProviderHostStatus{Phase: berthv1.HostConflict, Conditions: slices.Clone(p.Status.Conditions),
		Message: fmt.Sprintf("hostname %s is held by another lease (since %s); it is routed there, not here", p.Spec.Hostname, since.UTC().Format(time.RFC3339))}
	setCondition(&st, p, ConditionRouted, metav1.ConditionFalse, "Conflict", st.Message)
	meta.RemoveStatusCondition(&st.Conditions, ConditionReady)
	return st
}

// route applies p's route and reports how it stands.
func (c *Controller) route(ctx context.Context, p *berthv1.ProviderHost) berthv1.ProviderHostStatus {
	st := berthv1.ProviderHostStatus{Conditions: slices.Clone(p.Status.Conditions)}
	kind, applied, err := c.applyRoute(ctx, p)
	st.Route = kind + "/" + p.Name
	if err != nil {
		st.Phase, st.Message = berthv1.HostFailed, fmt.Sprintf("could not write the %s: %v", kind, err)
		setCondition(&st, p, ConditionRouted, metav1.ConditionFalse, "WriteFailed", st.Message)
		return st
	}
	setCondition(&st, p, ConditionRouted, metav1.ConditionTrue, "Written", fmt.Sprintf("%s %s routes %s to service %s port %d", kind, p.Name, p.Spec.Hostname, p.Spec.Service, p.Spec.ExternalPort))
	var ready bool
	var why string
	switch c.cfg.Health.Mode {
	case HealthNone:
		st.Phase, st.Message = berthv1.HostRouted, fmt.Sprintf("routed by %s %s", kind, p.Name)
		meta.RemoveStatusCondition(&st.Conditions, ConditionReady)
		return st
	case HealthProbe:
		ready, why = c.probe.result(p.Spec.Hostname)
	default:
		ready, why = c.admitted(applied)
	}
	if ready {
		st.Phase, st.Message = berthv1.HostReady, why
		setCondition(&st, p, ConditionReady, metav1.ConditionTrue, "Checked", why)
	} else {
		st.Phase, st.Message = berthv1.HostUnready, why
		setCondition(&st, p, ConditionReady, metav1.ConditionFalse, "NotYet", why)
	}
	return st
}

func setCondition(st *berthv1.ProviderHostStatus, p *berthv1.ProviderHost, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation})
}

// applyRoute server-side applies p's route (an unchanged route is not written again)
// and returns it as the API server has it.
func (c *Controller) applyRoute(ctx context.Context, p *berthv1.ProviderHost) (kind string, applied runtime.Object, err error) {
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)}
	if c.cfg.Mode == ModeGateway {
		u, err := c.cfg.buildHTTPRoute(p)
		if err != nil {
			return "HTTPRoute", nil, err
		}
		b, err := json.Marshal(u)
		if err != nil {
			return "HTTPRoute", nil, err
		}
		out, err := c.dc.Resource(HTTPRouteResource).Namespace(p.Namespace).Patch(ctx, p.Name, types.ApplyPatchType, b, opts)
		c.m.ObserveWrite("apply", err)
		return "HTTPRoute", out, err
	}
	if c.cfg.Ingress.Annotations == AnnotationsTraefik {
		if err := c.applyMiddlewares(ctx, p); err != nil {
			return "Ingress", nil, err
		}
	}
	b, err := json.Marshal(c.cfg.buildIngress(p))
	if err != nil {
		return "Ingress", nil, err
	}
	out, err := c.cs.NetworkingV1().Ingresses(p.Namespace).Patch(ctx, p.Name, types.ApplyPatchType, b, opts)
	c.m.ObserveWrite("apply", err)
	return "Ingress", out, err
}

// applyMiddlewares applies the Traefik Middlewares p's options call for and deletes
// those they no longer do, before the Ingress names them.
func (c *Controller) applyMiddlewares(ctx context.Context, p *berthv1.ProviderHost) error {
	mws := c.dc.Resource(MiddlewareResource).Namespace(p.Namespace)
	for name, u := range traefikMiddlewares(p) {
		if u == nil {
			if err := mws.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete Middleware %s: %w", name, err)
			}
			continue
		}
		b, err := json.Marshal(u)
		if err != nil {
			return err
		}
		_, err = mws.Patch(ctx, name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)})
		c.m.ObserveWrite("apply", err)
		if err != nil {
			return fmt.Errorf("apply Middleware %s: %w", name, err)
		}
	}
	return nil
}

// deleteRoute deletes one of our routes, that very object (its UID).
func (c *Controller) deleteRoute(ctx context.Context, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	var err error
	if c.cfg.Mode == ModeGateway {
		err = c.dc.Resource(HTTPRouteResource).Namespace(ns).Delete(ctx, name, opts)
	} else {
		err = c.cs.NetworkingV1().Ingresses(ns).Delete(ctx, name, opts)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil // gone, or replaced by another object of that name (its own sync)
	}
	c.m.ObserveWrite("delete", err)
	if err != nil {
		return fmt.Errorf("delete route %s/%s: %w", ns, name, err)
	}
	return nil
}

// admitted reads whether the route's controller took it.
func (c *Controller) admitted(route runtime.Object) (bool, string) {
	switch r := route.(type) {
	case *networkingv1.Ingress:
		if len(r.Status.LoadBalancer.Ingress) > 0 {
			lb := r.Status.LoadBalancer.Ingress[0]
			return true, fmt.Sprintf("the ingress controller (class %s) admitted it at %s", c.cfg.Ingress.Class, cmp.Or(lb.IP, lb.Hostname))
		}
		return false, fmt.Sprintf("waiting for the controller of ingress class %s to admit the Ingress (its load-balancer status is empty)", c.cfg.Ingress.Class)
	case *unstructured.Unstructured:
		return httpRouteAccepted(r, c.cfg.Gateway)
	}
	return false, fmt.Sprintf("unknown route object %T", route)
}

// httpRouteAccepted reads the route's status for our Gateway's Accepted condition.
func httpRouteAccepted(u *unstructured.Unstructured, g GatewayConfig) (bool, string) {
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		name, _, _ := unstructured.NestedString(pm, "parentRef", "name")
		ns, _, _ := unstructured.NestedString(pm, "parentRef", "namespace")
		if name != g.Name || (ns != "" && ns != g.Namespace) {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(pm, "conditions")
		for _, cd := range conds {
			cm, _ := cd.(map[string]any)
			if cm["type"] != "Accepted" {
				continue
			}
			if cm["status"] == "True" {
				return true, fmt.Sprintf("Gateway %s/%s accepted the HTTPRoute", g.Namespace, g.Name)
			}
			return false, fmt.Sprintf("Gateway %s/%s did not accept the HTTPRoute: %v: %v", g.Namespace, g.Name, cm["reason"], cm["message"])
		}
	}
	return false, fmt.Sprintf("waiting for Gateway %s/%s to accept the HTTPRoute", g.Namespace, g.Name)
}

// sameStatus compares statuses ignoring the conditions' transition times.
func sameStatus(a, b berthv1.ProviderHostStatus) bool {
	return a.Phase == b.Phase && a.Message == b.Message && a.Route == b.Route && operator.SameConditions(a.Conditions, b.Conditions)
}

// writeStatus applies st to p's status subresource when it changed.
func (c *Controller) writeStatus(ctx context.Context, p *berthv1.ProviderHost, st berthv1.ProviderHostStatus) error {
	if sameStatus(p.Status, st) {
		return nil
	}
	return operator.ApplyStatus(ctx, c.client, berthv1.GroupVersion.WithKind("ProviderHost"), p.Namespace, p.Name, p.UID, st, FieldManager)
}

// probeTargets are the hostnames of ours that are routed here (for the prober).
func (c *Controller) probeTargets(ctx context.Context) []string {
	var l berthv1.ProviderHostList
	if err := c.client.List(ctx, &l); err != nil {
		return nil // the cache ended with ctx
	}
	var out []string
	for i := range l.Items {
		p := &l.Items[i]
		if !c.owner.Owns(p.Labels) || p.DeletionTimestamp != nil {
			continue
		}
		if all, err := c.claimants(ctx, p.Spec.Hostname); err == nil && len(all) > 0 && all[0].UID == p.UID {
			out = append(out, p.Spec.Hostname)
		}
	}
	return out
}
