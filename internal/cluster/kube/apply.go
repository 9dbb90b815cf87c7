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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	berthv1 "berth.dev/berth/api/v1"
)

// FieldManager is berth's name in server-side apply.
const FieldManager = "berth"

// Apply server-side applies a lease's objects in dependency order: namespace, service
// account, network policies, secrets, workloads, services, hostnames, leased IPs. It
// stops at the first object the API server refuses and says which. Only the namespace
// is required; the rest may be empty.
func Apply(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, o *LeaseObjects) error {
	if err := applyObject(ctx, "namespace", o.Namespace, cs.CoreV1().Namespaces().Patch); err != nil {
		return err
	}
	return applyInNamespace(ctx, cs, dc, o)
}

// patchFunc is a client's Patch (typed clients' and the dynamic client's alike).
type patchFunc[T any] func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)

// applyObject server-side applies one object through patch, forcing berth's fields;
// kind names it in errors.
func applyObject[T any](ctx context.Context, kind string, obj metav1.Object, patch patchFunc[T]) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, obj.GetName(), err)
	}
	if _, err := patch(ctx, obj.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// applyEach applies objs in order, stopping at the first refused.
func applyEach[O metav1.Object, T any](ctx context.Context, kind string, objs []O, patch patchFunc[T]) error {
	for _, obj := range objs {
		if err := applyObject(ctx, kind, obj, patch); err != nil {
			return err
		}
	}
	return nil
}

// applyInNamespace applies what Apply does but the namespace, which must exist.
func applyInNamespace(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, o *LeaseObjects) error {
	ns := o.Namespace.Name
	var accounts []*corev1.ServiceAccount
	if o.ServiceAccount != nil {
		accounts = append(accounts, o.ServiceAccount)
	}
	if err := applyEach(ctx, "service account", accounts, cs.CoreV1().ServiceAccounts(ns).Patch); err != nil {
		return err
	}
	if err := applyEach(ctx, "network policy", o.NetworkPolicies, cs.NetworkingV1().NetworkPolicies(ns).Patch); err != nil {
		return err
	}
	if err := applyEach(ctx, "secret", o.Secrets, cs.CoreV1().Secrets(ns).Patch); err != nil {
		return err
	}
	if err := applyEach(ctx, "deployment", o.Deployments, cs.AppsV1().Deployments(ns).Patch); err != nil {
		return err
	}
	for _, s := range o.StatefulSets {
		if err := applyStatefulSet(ctx, cs, s); err != nil {
			return err
		}
	}
	if err := applyEach(ctx, "service", o.Services, cs.CoreV1().Services(ns).Patch); err != nil {
		return err
	}
	if err := applyEach(ctx, "provider host", o.Hosts, dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Patch); err != nil {
		return err
	}
	return applyEach(ctx, "provider leased IP", o.LeasedIPs, dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns).Patch)
}

// applyStatefulSet applies a StatefulSet. Its volume claim templates cannot change
// once it exists: a set made before berth labelled its claim templates keeps its
// templates' labels, so applying it again is not refused (its claims stay unlabelled,
// and count on top of the lease's reservation until it closes). Any other change of a
// template is refused by the API server and reported.
func applyStatefulSet(ctx context.Context, cs kubernetes.Interface, s *appsv1.StatefulSet) error {
	sets := cs.AppsV1().StatefulSets(s.Namespace)
	err := applyObject(ctx, "statefulset", s, sets.Patch)
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
	return applyObject(ctx, "statefulset", &kept, sets.Patch)
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
