package kube

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	berthv1 "berth.dev/berth/api/v1"
)

// FieldManager is berth's name in server-side apply.
const FieldManager = "berth"

// Resources of the hostname and leased-IP custom resources.
var (
	ProviderHostResource     = schema.GroupVersionResource{Group: berthv1.GroupVersion.Group, Version: berthv1.GroupVersion.Version, Resource: "providerhosts"}
	ProviderLeasedIPResource = schema.GroupVersionResource{Group: berthv1.GroupVersion.Group, Version: berthv1.GroupVersion.Version, Resource: "providerleasedips"}
)

// Apply server-side applies a lease's objects in dependency order: namespace, service
// account, network policies, secrets, workloads, services, hostnames, leased IPs. It
// stops at the first object the API server refuses and says which. Only the namespace
// is required; the rest may be empty.
func Apply(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, o *LeaseObjects) error {
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	apply := func(kind, name string, obj any, patch func([]byte) error) error {
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, name, err)
		}
		if err := patch(b); err != nil {
			return fmt.Errorf("apply %s %s: %w", kind, name, err)
		}
		return nil
	}
	ns := o.Namespace.Name
	if err := apply("namespace", ns, o.Namespace, func(b []byte) error {
		_, err := cs.CoreV1().Namespaces().Patch(ctx, ns, types.ApplyPatchType, b, opts)
		return err
	}); err != nil {
		return err
	}
	if sa := o.ServiceAccount; sa != nil {
		if err := apply("service account", sa.Name, sa, func(b []byte) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Patch(ctx, sa.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, p := range o.NetworkPolicies {
		if err := apply("network policy", p.Name, p, func(b []byte) error {
			_, err := cs.NetworkingV1().NetworkPolicies(ns).Patch(ctx, p.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, s := range o.Secrets {
		if err := apply("secret", s.Name, s, func(b []byte) error {
			_, err := cs.CoreV1().Secrets(ns).Patch(ctx, s.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, d := range o.Deployments {
		if err := apply("deployment", d.Name, d, func(b []byte) error {
			_, err := cs.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, s := range o.StatefulSets {
		if err := apply("statefulset", s.Name, s, func(b []byte) error {
			_, err := cs.AppsV1().StatefulSets(ns).Patch(ctx, s.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, s := range o.Services {
		if err := apply("service", s.Name, s, func(b []byte) error {
			_, err := cs.CoreV1().Services(ns).Patch(ctx, s.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, h := range o.Hosts {
		if err := apply("provider host", h.Name, h, func(b []byte) error {
			_, err := dc.Resource(ProviderHostResource).Namespace(ns).Patch(ctx, h.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, ip := range o.LeasedIPs {
		if err := apply("provider leased IP", ip.Name, ip, func(b []byte) error {
			_, err := dc.Resource(ProviderLeasedIPResource).Namespace(ns).Patch(ctx, ip.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
