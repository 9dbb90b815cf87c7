package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// named is a Kubernetes object (a pointer to one).
type named interface{ GetName() string }

// wanted lists the names of desired objects.
func wanted[T named](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetName()
	}
	return out
}

// listed lists the names of a list's items (T is the item type, PT its pointer).
func listed[T any, PT interface {
	*T
	named
}](items []T) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = PT(&items[i]).GetName()
	}
	return out
}

// pruner deletes, kind by kind, the objects found that are not wanted, collecting
// the failures.
type pruner struct {
	errs []error
}

func (p *pruner) kind(kind string, want, have []string, listErr error, del func(name string) error) {
	if listErr != nil {
		p.errs = append(p.errs, fmt.Errorf("list %ss: %w", kind, listErr))
		return
	}
	for _, n := range have {
		if slices.Contains(want, n) {
			continue
		}
		if err := del(n); err != nil && !apierrors.IsNotFound(err) {
			p.errs = append(p.errs, fmt.Errorf("delete %s %s: %w", kind, n, err))
		}
	}
}

// Prune deletes the lease's objects the desired set o no longer has, so that a
// manifest update removing a service, a port, a secret, a hostname or a leased IP
// leaves nothing of it running. Only owner's objects in the lease's namespace are
// considered. Persistent volume claims are kept: a tenant's data
// outlives a service's removal until the lease closes.
func Prune(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, o *LeaseObjects, owner ownership.Owner) error {
	ns := o.Namespace.Name
	opts := metav1.ListOptions{LabelSelector: owner.Selector()}
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	var p pruner

	deps := cs.AppsV1().Deployments(ns)
	if l, err := deps.List(ctx, opts); err != nil {
		p.kind("deployment", nil, nil, err, nil)
	} else {
		p.kind("deployment", wanted(o.Deployments), listed(l.Items), nil, func(n string) error { return deps.Delete(ctx, n, del) })
	}
	sts := cs.AppsV1().StatefulSets(ns)
	if l, err := sts.List(ctx, opts); err != nil {
		p.kind("statefulset", nil, nil, err, nil)
	} else {
		p.kind("statefulset", wanted(o.StatefulSets), listed(l.Items), nil, func(n string) error { return sts.Delete(ctx, n, del) })
	}
	svcs := cs.CoreV1().Services(ns)
	if l, err := svcs.List(ctx, opts); err != nil {
		p.kind("service", nil, nil, err, nil)
	} else {
		p.kind("service", wanted(o.Services), listed(l.Items), nil, func(n string) error { return svcs.Delete(ctx, n, del) })
	}
	secrets := cs.CoreV1().Secrets(ns)
	if l, err := secrets.List(ctx, opts); err != nil {
		p.kind("secret", nil, nil, err, nil)
	} else {
		p.kind("secret", wanted(o.Secrets), listed(l.Items), nil, func(n string) error { return secrets.Delete(ctx, n, del) })
	}
	pols := cs.NetworkingV1().NetworkPolicies(ns)
	if l, err := pols.List(ctx, opts); err != nil {
		p.kind("network policy", nil, nil, err, nil)
	} else {
		p.kind("network policy", wanted(o.NetworkPolicies), listed(l.Items), nil, func(n string) error { return pols.Delete(ctx, n, del) })
	}
	hosts := dc.Resource(berthv1.ProviderHostResource).Namespace(ns)
	if l, err := hosts.List(ctx, opts); err != nil {
		p.kind("provider host", nil, nil, err, nil)
	} else {
		p.kind("provider host", wanted(o.Hosts), listed(l.Items), nil, func(n string) error { return hosts.Delete(ctx, n, del) })
	}
	ips := dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns)
	if l, err := ips.List(ctx, opts); err != nil {
		p.kind("provider leased IP", nil, nil, err, nil)
	} else {
		p.kind("provider leased IP", wanted(o.LeasedIPs), listed(l.Items), nil, func(n string) error { return ips.Delete(ctx, n, del) })
	}
	if len(p.errs) > 0 {
		return fmt.Errorf("prune lease namespace %s: %w", ns, errors.Join(p.errs...))
	}
	return nil
}
