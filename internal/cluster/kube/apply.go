package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

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
	ns := o.Namespace.Name
	if err := applyObject("namespace", ns, o.Namespace, func(b []byte, opts metav1.PatchOptions) error {
		_, err := cs.CoreV1().Namespaces().Patch(ctx, ns, types.ApplyPatchType, b, opts)
		return err
	}); err != nil {
		return err
	}
	return applyInNamespace(ctx, cs, dc, o)
}

// applyObject server-side applies one object through patch, forcing berth's fields.
func applyObject(kind, name string, obj any, patch func(b []byte, opts metav1.PatchOptions) error) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	force := true
	if err := patch(b, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, name, err)
	}
	return nil
}

// applyInNamespace applies what Apply does but the namespace, which must exist.
func applyInNamespace(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, o *LeaseObjects) error {
	ns := o.Namespace.Name
	if sa := o.ServiceAccount; sa != nil {
		if err := applyObject("service account", sa.Name, sa, func(b []byte, opts metav1.PatchOptions) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Patch(ctx, sa.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, p := range o.NetworkPolicies {
		if err := applyObject("network policy", p.Name, p, func(b []byte, opts metav1.PatchOptions) error {
			_, err := cs.NetworkingV1().NetworkPolicies(ns).Patch(ctx, p.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, s := range o.Secrets {
		if err := applyObject("secret", s.Name, s, func(b []byte, opts metav1.PatchOptions) error {
			_, err := cs.CoreV1().Secrets(ns).Patch(ctx, s.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, d := range o.Deployments {
		if err := applyObject("deployment", d.Name, d, func(b []byte, opts metav1.PatchOptions) error {
			_, err := cs.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, s := range o.StatefulSets {
		if err := applyStatefulSet(ctx, cs, s); err != nil {
			return err
		}
	}
	for _, s := range o.Services {
		if err := applyObject("service", s.Name, s, func(b []byte, opts metav1.PatchOptions) error {
			_, err := cs.CoreV1().Services(ns).Patch(ctx, s.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, h := range o.Hosts {
		if err := applyObject("provider host", h.Name, h, func(b []byte, opts metav1.PatchOptions) error {
			_, err := dc.Resource(ProviderHostResource).Namespace(ns).Patch(ctx, h.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	for _, ip := range o.LeasedIPs {
		if err := applyObject("provider leased IP", ip.Name, ip, func(b []byte, opts metav1.PatchOptions) error {
			_, err := dc.Resource(ProviderLeasedIPResource).Namespace(ns).Patch(ctx, ip.Name, types.ApplyPatchType, b, opts)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// applyStatefulSet applies a StatefulSet. Its volume claim templates cannot change
// once it exists: a set made before berth labelled its claim templates keeps its
// templates' labels, so applying it again is not refused (its claims stay unlabelled,
// and count on top of the lease's reservation until it closes). Any other change of a
// template is refused by the API server and reported.
func applyStatefulSet(ctx context.Context, cs kubernetes.Interface, s *appsv1.StatefulSet) error {
	sets := cs.AppsV1().StatefulSets(s.Namespace)
	patch := func(b []byte, opts metav1.PatchOptions) error {
		_, err := sets.Patch(ctx, s.Name, types.ApplyPatchType, b, opts)
		return err
	}
	err := applyObject("statefulset", s.Name, s, patch)
	if !apierrors.IsInvalid(err) {
		return err
	}
	have, gerr := sets.Get(ctx, s.Name, metav1.GetOptions{})
	if gerr != nil || !sameClaimsButLabels(have.Spec.VolumeClaimTemplates, s.Spec.VolumeClaimTemplates) {
		return err
	}
	kept := *s
	kept.Spec.VolumeClaimTemplates = slices.Clone(s.Spec.VolumeClaimTemplates)
	for i := range kept.Spec.VolumeClaimTemplates {
		kept.Spec.VolumeClaimTemplates[i].Labels = have.Spec.VolumeClaimTemplates[i].Labels
	}
	return applyObject("statefulset", s.Name, &kept, patch)
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// sameClaimsButLabels reports whether the claim templates a set has differ from those
// wanted in their labels only.
func sameClaimsButLabels(have, want []corev1.PersistentVolumeClaim) bool {
	return slices.EqualFunc(have, want, func(h, w corev1.PersistentVolumeClaim) bool {
		hs, ws := h.Spec.Resources.Requests[corev1.ResourceStorage], w.Spec.Resources.Requests[corev1.ResourceStorage]
		return h.Name == w.Name && hs.Cmp(ws) == 0 && slices.Equal(h.Spec.AccessModes, w.Spec.AccessModes) &&
			ptr.Deref(h.Spec.StorageClassName, "") == ptr.Deref(w.Spec.StorageClassName, "") && !maps.Equal(h.Labels, w.Labels)
	})
}
