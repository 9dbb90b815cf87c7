package inventory

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// TaintGPU is the taint managed Kubernetes puts on GPU node pools (GKE, AKS, and
// NVIDIA's GPU operator where asked): only pods tolerating it run there. berth's GPU
// pods tolerate it.
const TaintGPU = "nvidia.com/gpu"

// GPUOnly reports whether a node is tainted for GPU workloads only (TaintGPU).
func GPUOnly(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == TaintGPU && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute)
	})
}

// Schedulable reports whether a node takes workloads: Ready, not cordoned, and no
// NoSchedule or NoExecute taint but TaintGPU (GPUOnly). When it does not, why says
// which.
func Schedulable(n *corev1.Node) (ok bool, why string) {
	if n.Spec.Unschedulable {
		return false, "cordoned"
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintGPU {
			continue
		}
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false, fmt.Sprintf("taint %s:%s", t.Key, t.Effect)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, "not Ready (" + string(c.Status) + ")"
		}
	}
	return false, "no Ready condition yet"
}

// PodRequests is what the scheduler accounts a pod for, as the scheduler computes it
// (k8s.io/component-helpers): its containers' requests plus its sidecars' (init
// containers that keep running), or what its init phase needs at most, whichever is
// more, resource by resource; pod-level resources where the pod sets them; the
// resources a resize in progress holds; plus its overhead.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})
}

// Finished reports whether a pod holds nothing any more (Succeeded or Failed).
func Finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func addTo(sum, l corev1.ResourceList) {
	for name, q := range l {
		have := sum[name]
		have.Add(q)
		sum[name] = have
	}
}

func subFrom(l, minus corev1.ResourceList) {
	for name, q := range minus {
		have := l[name]
		have.Sub(q)
		if have.Sign() <= 0 {
			delete(l, name)
		} else {
			l[name] = have
		}
	}
}

// PodUse is one pod's claim on a node: its requests and, when it is a lease's, whose.
type PodUse struct {
	Node     string
	Requests corev1.ResourceList
	Owner    *ownership.Owner
}

// NodeReport builds a node's entry: its schedulability, allocatable resources (with
// nvidia.com/gpu replaced by the GPUs offered), what its pods use in all and per
// provider, and its GPUs. storageClasses are the offered classes its pods can use.
func NodeReport(n *corev1.Node, pods []PodUse, opts GPUOptions, storageClasses []string) berthv1.InventoryNode {
	ok, why := Schedulable(n)
	out := berthv1.InventoryNode{Name: n.Name, Schedulable: ok, NotSchedulable: why, GPUOnly: GPUOnly(n), StorageClasses: storageClasses}
	out.Allocatable = n.Status.Allocatable.DeepCopy()
	out.GPU = DescribeGPU(n.Labels, n.Status.Allocatable, opts)
	if out.GPU != nil {
		if out.GPU.Offered > 0 {
			out.Allocatable[ResourceGPU] = *resource.NewQuantity(out.GPU.Offered, resource.DecimalSI)
		} else {
			delete(out.Allocatable, ResourceGPU)
		}
	}
	used := corev1.ResourceList{}
	byOwner := map[ownership.Owner]corev1.ResourceList{}
	for _, p := range pods {
		addTo(used, p.Requests)
		if p.Owner != nil {
			if byOwner[*p.Owner] == nil {
				byOwner[*p.Owner] = corev1.ResourceList{}
			}
			addTo(byOwner[*p.Owner], p.Requests)
		}
		q := used[corev1.ResourcePods]
		q.Add(*resource.NewQuantity(1, resource.DecimalSI))
		used[corev1.ResourcePods] = q
	}
	if len(used) > 0 {
		out.Used = used
	}
	for o, l := range byOwner {
		l[corev1.ResourcePods] = *resource.NewQuantity(int64(countOwned(pods, o)), resource.DecimalSI)
		out.Leases = append(out.Leases, berthv1.InventoryOwnerUsage{Provider: o.Provider, ChainID: o.ChainID, Used: l})
	}
	slices.SortFunc(out.Leases, func(a, b berthv1.InventoryOwnerUsage) int {
		return strings.Compare(a.Provider+"/"+a.ChainID, b.Provider+"/"+b.ChainID)
	})
	return out
}

func countOwned(pods []PodUse, o ownership.Owner) int {
	n := 0
	for _, p := range pods {
		if p.Owner != nil && *p.Owner == o {
			n++
		}
	}
	return n
}

// Others is what a node's pods use besides owner's leases: Used less owner's part
// (with the part of the provider's objects that record no chain, which it takes for
// its own: ownership.Owner.Owns).
func Others(n berthv1.InventoryNode, owner ownership.Owner) corev1.ResourceList {
	out := n.Used.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for _, l := range n.Leases {
		if owns(owner, l.Provider, l.ChainID) {
			subFrom(out, l.Used)
		}
	}
	return out
}

// OthersStorage is what a class's bound claims hold besides owner's leases', as
// Others.
func OthersStorage(s berthv1.InventoryStorage, owner ownership.Owner) int64 {
	n := s.Used.Value()
	for _, l := range s.Leases {
		if owns(owner, l.Provider, l.ChainID) {
			n -= l.Used.Value()
		}
	}
	return max(n, 0)
}

func owns(o ownership.Owner, provider, chainID string) bool {
	return provider == o.Provider && (chainID == o.ChainID || chainID == "")
}
