package inventory_test

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/ownership"
)

// checkRes compares resource lists by value, a missing resource differing from 0.
func checkRes(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Errorf("%s: %v, want %v", what, show(got), show(want))
		return
	}
	for k, w := range want {
		if g := got[k]; g.Cmp(w) != 0 {
			t.Errorf("%s: %s %s, want %s", what, k, g.String(), w.String())
		}
	}
}

func show(l corev1.ResourceList) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for k, q := range l {
		out[k] = q.String()
	}
	return out
}

func ready(status corev1.ConditionStatus) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: status}
}

func TestSchedulable(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.NodeSpec
		cond []corev1.NodeCondition
		ok   bool
		why  string
	}{
		{name: "ready", cond: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, ready(corev1.ConditionTrue)}, ok: true},
		{name: "cordoned", spec: corev1.NodeSpec{Unschedulable: true}, cond: []corev1.NodeCondition{ready(corev1.ConditionTrue)}, why: "cordoned"},
		{name: "cordoned and not ready", spec: corev1.NodeSpec{Unschedulable: true}, cond: []corev1.NodeCondition{ready(corev1.ConditionFalse)}, why: "cordoned"},
		{
			name: "NoSchedule taint",
			spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule}}},
			cond: []corev1.NodeCondition{ready(corev1.ConditionTrue)},
			why:  "taint node.kubernetes.io/disk-pressure:NoSchedule",
		},
		{
			name: "NoExecute taint after a PreferNoSchedule one",
			spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: "drain", Value: "now", Effect: corev1.TaintEffectNoExecute},
			}},
			cond: []corev1.NodeCondition{ready(corev1.ConditionTrue)},
			why:  "taint drain:NoExecute",
		},
		{
			name: "PreferNoSchedule only",
			spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}},
			cond: []corev1.NodeCondition{ready(corev1.ConditionTrue)},
			ok:   true,
		},
		{name: "not ready", cond: []corev1.NodeCondition{ready(corev1.ConditionFalse)}, why: "not Ready (False)"},
		{name: "ready unknown", cond: []corev1.NodeCondition{ready(corev1.ConditionUnknown)}, why: "not Ready (Unknown)"},
		{name: "no condition", why: "no Ready condition yet"},
		{name: "no Ready condition", cond: []corev1.NodeCondition{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse}}, why: "no Ready condition yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: tt.spec, Status: corev1.NodeStatus{Conditions: tt.cond}}
			ok, why := inventory.Schedulable(n)
			if ok != tt.ok || why != tt.why {
				t.Fatalf("Schedulable = %v %q, want %v %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}

func container(requests corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}}
}

func TestPodRequests(t *testing.T) {
	tests := []struct {
		name     string
		spec     corev1.PodSpec
		want     corev1.ResourceList
		wantNone bool
	}{
		{name: "no containers", wantNone: true},
		{name: "no requests", spec: corev1.PodSpec{Containers: []corev1.Container{container(nil)}}, wantNone: true},
		{
			name: "containers add up",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(res(corev1.ResourceCPU, "1", corev1.ResourceMemory, "1Gi")),
				container(res(corev1.ResourceCPU, "500m", inventory.ResourceGPU, 1)),
			}},
			want: res(corev1.ResourceCPU, "1500m", corev1.ResourceMemory, "1Gi", inventory.ResourceGPU, 1),
		},
		{
			name: "the largest init container, resource by resource",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					container(res(corev1.ResourceCPU, "2", corev1.ResourceMemory, "512Mi")),
					container(res(corev1.ResourceCPU, "3", corev1.ResourceEphemeralStorage, "10Gi")),
				},
				Containers: []corev1.Container{
					container(res(corev1.ResourceCPU, "1", corev1.ResourceMemory, "1Gi")),
					container(res(corev1.ResourceMemory, "1Gi")),
				},
			},
			want: res(corev1.ResourceCPU, "3", corev1.ResourceMemory, "2Gi", corev1.ResourceEphemeralStorage, "10Gi"),
		},
		{
			name: "init containers smaller than the containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(res(corev1.ResourceCPU, "100m"))},
				Containers:     []corev1.Container{container(res(corev1.ResourceCPU, "250m")), container(res(corev1.ResourceCPU, "250m"))},
			},
			want: res(corev1.ResourceCPU, "500m"),
		},
		{
			name: "overhead on top",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(res(corev1.ResourceCPU, "4"))},
				Containers:     []corev1.Container{container(res(corev1.ResourceCPU, "1", corev1.ResourceMemory, "1Gi"))},
				Overhead:       res(corev1.ResourceCPU, "250m", corev1.ResourceMemory, "120Mi"),
			},
			want: res(corev1.ResourceCPU, "4250m", corev1.ResourceMemory, "1144Mi"),
		},
		{
			name: "overhead alone",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil)}, Overhead: res(corev1.ResourceCPU, "250m")},
			want: res(corev1.ResourceCPU, "250m"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: tt.spec}
			before := p.DeepCopy()
			got := inventory.PodRequests(p)
			if tt.wantNone {
				if len(got) != 0 {
					t.Fatalf("want none, got %v", show(got))
				}
			} else {
				checkRes(t, "requests", got, tt.want)
			}
			if !equalPods(p, before) {
				t.Error("PodRequests changed the pod")
			}
			// What it returns is its own: adding to it leaves the pod alone.
			for k, q := range got {
				q.Add(q)
				got[k] = q
			}
			if !equalPods(p, before) {
				t.Error("PodRequests returned quantities shared with the pod")
			}
		})
	}
}

func equalPods(a, b *corev1.Pod) bool {
	lists := func(p *corev1.Pod) []corev1.ResourceList {
		var out []corev1.ResourceList
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			out = append(out, c.Resources.Requests)
		}
		return append(out, p.Spec.Overhead)
	}
	la, lb := lists(a), lists(b)
	if len(la) != len(lb) {
		return false
	}
	for i := range la {
		if len(la[i]) != len(lb[i]) {
			return false
		}
		for k, q := range la[i] {
			if q.Cmp(lb[i][k]) != 0 {
				return false
			}
		}
	}
	return true
}

func TestFinished(t *testing.T) {
	for phase, want := range map[corev1.PodPhase]bool{
		corev1.PodPending: false, corev1.PodRunning: false, corev1.PodUnknown: false, "": false,
		corev1.PodSucceeded: true, corev1.PodFailed: true,
	} {
		if got := inventory.Finished(&corev1.Pod{Status: corev1.PodStatus{Phase: phase}}); got != want {
			t.Errorf("Finished(%q) = %v", phase, got)
		}
	}
}

func node(name string, labels map[string]string, allocatable corev1.ResourceList) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{Allocatable: allocatable, Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue)}},
	}
}

func baseAllocatable() corev1.ResourceList {
	return res(corev1.ResourceCPU, "127500m", corev1.ResourceMemory, "1000Gi", corev1.ResourcePods, 110, corev1.ResourceEphemeralStorage, "800Gi")
}

func TestNodeReport(t *testing.T) {
	allocatable := mergeRes(baseAllocatable(), gpus(8))
	n := node("gpu-1", gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), allocatable.DeepCopy())
	pods := []inventory.PodUse{
		{Node: "gpu-1", Requests: res(corev1.ResourceCPU, 4, corev1.ResourceMemory, "16Gi", inventory.ResourceGPU, 2), Owner: owner(ownerZ)},
		{Node: "gpu-1", Requests: res(corev1.ResourceCPU, 2), Owner: owner(ownerZ)},
		{Node: "gpu-1", Requests: res(corev1.ResourceCPU, 1, corev1.ResourceMemory, "1Gi"), Owner: owner(ownerA)},
		{Node: "gpu-1", Requests: res(corev1.ResourceCPU, "500m", corev1.ResourceMemory, "100Mi")},
		{Node: "gpu-1"}, // requests nothing, but is a pod
	}
	got := inventory.NodeReport(n, pods, inventory.GPUOptions{}, []string{"local-path", "ceph-rbd"})
	if got.Name != "gpu-1" || !got.Schedulable || got.NotSchedulable != "" {
		t.Errorf("name %q schedulable %v %q", got.Name, got.Schedulable, got.NotSchedulable)
	}
	if !slices.Equal(got.StorageClasses, []string{"local-path", "ceph-rbd"}) {
		t.Errorf("storage classes %q", got.StorageClasses)
	}
	if got.GPU == nil || got.GPU.Model != "a100" || got.GPU.Devices != 8 || got.GPU.Offered != 8 {
		t.Fatalf("GPU %+v", got.GPU)
	}
	checkRes(t, "allocatable", got.Allocatable, allocatable)
	checkRes(t, "used", got.Used, res(corev1.ResourceCPU, "7500m", corev1.ResourceMemory, "17508Mi", inventory.ResourceGPU, 2, corev1.ResourcePods, 5))
	if len(got.Leases) != 2 {
		t.Fatalf("leases %+v", got.Leases)
	}
	a, z := got.Leases[0], got.Leases[1]
	if a.Provider != ownerA.Provider || a.ChainID != ownerA.ChainID || z.Provider != ownerZ.Provider || z.ChainID != ownerZ.ChainID {
		t.Fatalf("leases of %s/%s and %s/%s, want %v then %v", a.Provider, a.ChainID, z.Provider, z.ChainID, ownerA, ownerZ)
	}
	checkRes(t, "lease A", a.Used, res(corev1.ResourceCPU, 1, corev1.ResourceMemory, "1Gi", corev1.ResourcePods, 1))
	checkRes(t, "lease Z", z.Used, res(corev1.ResourceCPU, 6, corev1.ResourceMemory, "16Gi", inventory.ResourceGPU, 2, corev1.ResourcePods, 2))
	checkRes(t, "node's allocatable afterwards", n.Status.Allocatable, allocatable)
	checkRes(t, "first pod's requests afterwards", pods[0].Requests, res(corev1.ResourceCPU, 4, corev1.ResourceMemory, "16Gi", inventory.ResourceGPU, 2))

	t.Run("others", func(t *testing.T) {
		used := got.Used.DeepCopy()
		checkRes(t, "others than Z", inventory.Others(got, ownerZ), res(corev1.ResourceCPU, "1500m", corev1.ResourceMemory, "1124Mi", corev1.ResourcePods, 3))
		checkRes(t, "others than A", inventory.Others(got, ownerA), res(corev1.ResourceCPU, "6500m", corev1.ResourceMemory, "16484Mi", inventory.ResourceGPU, 2, corev1.ResourcePods, 4))
		checkRes(t, "others than nobody's", inventory.Others(got, ownership.Owner{Provider: "akash1nobody", ChainID: "akashnet-2"}), used)
		checkRes(t, "used afterwards", got.Used, used)
	})
}

func TestNodeReportGPUs(t *testing.T) {
	shared := merge(gfd("NVIDIA-A100-SXM4-80GB-SHARED", "81920", "8"), map[string]string{
		inventory.LabelGFDSharing: inventory.SharingTimeSlicing, inventory.LabelGFDReplicas: "4",
	})
	tests := []struct {
		name    string
		labels  map[string]string
		gpus    int
		opts    inventory.GPUOptions
		offered int64 // -1: no GPU
	}{
		{name: "no GPU", labels: map[string]string{"kubernetes.io/hostname": "cpu-1"}, offered: -1},
		{name: "unknown card: its GPUs are no part of allocatable", labels: merge(gfd("NVIDIA-Graphics-Device", "97871", "8"), map[string]string{nfdUnknownCard: "true"}), gpus: 8},
		{
			name: "unknown card named", labels: merge(gfd("NVIDIA-Graphics-Device", "97871", "8"), map[string]string{nfdUnknownCard: "true"}), gpus: 8,
			opts: inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h20"}}}, offered: 8,
		},
		{name: "time-sliced", labels: shared, gpus: 32},
		{name: "time-sliced, offered", labels: shared, gpus: 32, opts: inventory.GPUOptions{OfferShared: true}, offered: 32},
		{name: "gpu.count differs", labels: gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), gpus: 7, offered: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocatable := baseAllocatable()
			if tt.gpus > 0 {
				allocatable = mergeRes(allocatable, gpus(tt.gpus))
			}
			n := node("n1", tt.labels, allocatable.DeepCopy())
			got := inventory.NodeReport(n, nil, tt.opts, nil)
			want := baseAllocatable()
			switch {
			case tt.offered < 0:
				if got.GPU != nil {
					t.Fatalf("GPU %+v", *got.GPU)
				}
			case got.GPU == nil:
				t.Fatal("no GPU")
			case got.GPU.Offered != tt.offered || got.GPU.Devices != int64(tt.gpus):
				t.Fatalf("offered %d of %d, want %d of %d", got.GPU.Offered, got.GPU.Devices, tt.offered, tt.gpus)
			}
			if tt.offered > 0 {
				want = mergeRes(want, gpus(int(tt.offered)))
			}
			checkRes(t, "allocatable", got.Allocatable, want)
			checkRes(t, "node's allocatable afterwards", n.Status.Allocatable, allocatable)
			if got.Used != nil || got.Leases != nil || got.StorageClasses != nil {
				t.Errorf("used %v leases %v classes %v of a node without pods nor classes", got.Used, got.Leases, got.StorageClasses)
			}
		})
	}
}

func TestNodeReportNotSchedulable(t *testing.T) {
	n := node("n1", nil, baseAllocatable())
	n.Spec.Unschedulable = true
	got := inventory.NodeReport(n, []inventory.PodUse{{Requests: res(corev1.ResourceCPU, 1), Owner: owner(ownerA)}}, inventory.GPUOptions{}, []string{"local-path"})
	if got.Schedulable || got.NotSchedulable != "cordoned" {
		t.Errorf("schedulable %v %q", got.Schedulable, got.NotSchedulable)
	}
	// What runs there is still reported.
	checkRes(t, "used", got.Used, res(corev1.ResourceCPU, 1, corev1.ResourcePods, 1))
	if len(got.Leases) != 1 {
		t.Errorf("leases %+v", got.Leases)
	}
}

func TestOthersOfNothing(t *testing.T) {
	for _, n := range []berthv1.InventoryNode{
		{Name: "n1"},
		{Name: "n1", Leases: []berthv1.InventoryOwnerUsage{{Provider: ownerA.Provider, ChainID: ownerA.ChainID, Used: res(corev1.ResourceCPU, 1)}}},
	} {
		got := inventory.Others(n, ownerA)
		if got == nil || len(got) != 0 {
			t.Errorf("Others of %+v = %v, want an empty list", n, show(got))
		}
	}
	// A report out of step (a lease using more than the node): nothing below zero.
	n := berthv1.InventoryNode{
		Name:   "n1",
		Used:   res(corev1.ResourceCPU, 1, corev1.ResourceMemory, "1Gi"),
		Leases: []berthv1.InventoryOwnerUsage{{Provider: ownerA.Provider, ChainID: ownerA.ChainID, Used: res(corev1.ResourceCPU, 2, corev1.ResourceMemory, "1Gi")}},
	}
	if got := inventory.Others(n, ownerA); len(got) != 0 {
		t.Errorf("Others = %v, want nothing", show(got))
	}
}
