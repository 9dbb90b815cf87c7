package inventory_test

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
)

// TestReviewFindings: each case is an input the review found mishandled.
func TestReviewFindings(t *testing.T) {
	t.Run("NFD-only card without the device plugin says so", func(t *testing.T) {
		g := inventory.DescribeGPU(map[string]string{nfdUnknownCard: "true"}, nil,
			inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h20"}}})
		if g == nil || g.Offered != 0 || !strings.Contains(g.Message, "device plugin") {
			t.Fatalf("%+v", g)
		}
	})
	t.Run("an absurd memory label is ignored, not overflowed", func(t *testing.T) {
		g := inventory.DescribeGPU(gfd("Tesla-T4", "9223372036854775807", "1"), gpus(1), inventory.GPUOptions{})
		if g.Model != "t4" || g.RAM != "" || g.Offered != 1 {
			t.Fatalf("%+v", g)
		}
	})
	t.Run("a per-node model label still gets GFD's memory", func(t *testing.T) {
		l := gfd("NVIDIA-Graphics-Device", "97871", "8")
		l[gpu.LabelModel] = "h20"
		g := inventory.DescribeGPU(l, gpus(8), inventory.GPUOptions{})
		if g.Model != "h20" || g.RAM != "96Gi" || g.Offered != 8 {
			t.Fatalf("%+v", g)
		}
	})
	t.Run("affinity asks for the memory as nodes are labelled", func(t *testing.T) {
		keys := inventory.GPUAffinity(gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80gi"})
		if len(keys) != 2 || keys[1] != inventory.GPULabel("nvidia", "a100", "80Gi", "") || !strings.HasSuffix(keys[1], ".ram.80Gi") {
			t.Fatalf("%q", keys)
		}
	})
	t.Run("a card named too long for a label is not offered", func(t *testing.T) {
		g := inventory.DescribeGPU(gfd("NVIDIA-RTX-PRO-4500-Blackwell-Server-Edition", "32607", "2"), gpus(2), inventory.GPUOptions{})
		if g.Offered != 0 || !strings.Contains(g.Message, "gpu.models") {
			t.Fatalf("%+v", g)
		}
		ada := inventory.DescribeGPU(gfd("NVIDIA-RTX-6000-Ada-Generation", "49140", "2"), gpus(2), inventory.GPUOptions{})
		if ada.Model != "rtx6000ada" || ada.RAM != "48Gi" || ada.Offered != 2 {
			t.Fatalf("%+v", ada)
		}
	})
	t.Run("a class named too long for a label is refused", func(t *testing.T) {
		err := inventory.StorageClass{Class: strings.Repeat("c", 40), Source: inventory.SourceLocal, Size: "1Ti"}.Validate("storage[0]")
		if err == nil || !strings.Contains(err.Error(), "storage[0].class") {
			t.Fatal(err)
		}
	})
	t.Run("sizes past 1Ei are refused; per-node sizes saturate", func(t *testing.T) {
		for _, size := range []string{"9227000000000000000", "1e19", "99999999999999999999", "2Ei"} {
			if err := (inventory.StorageClass{Class: "c", Source: inventory.SourceLocal, Size: size}).Validate("s"); err == nil {
				t.Errorf("size %s accepted", size)
			}
		}
		sc := inventory.StorageClass{Class: "c", Source: inventory.SourceLocal, SizePerNode: "1Ei"}
		if err := sc.Validate("s"); err != nil {
			t.Fatal(err)
		}
		nodes := make([]string, 64)
		out, _ := inventory.Storage(sc, inventory.StorageInput{Schedulable: nodes})
		if out.Capacity.Value() != math.MaxInt64 {
			t.Fatalf("capacity %s", out.Capacity.String())
		}
	})
	t.Run("labels of what the caller does not own are left", func(t *testing.T) {
		have := map[string]string{inventory.StorageLabel("mine"): "true", inventory.StorageLabel("theirs"): "true", inventory.GPULabel("nvidia", "a100", "", ""): "true"}
		owns := func(k string) bool { return inventory.IsGPULabel(k) || k == inventory.StorageLabel("mine") }
		patch := inventory.LabelChanges(have, map[string]string{}, owns)
		if len(patch) != 2 || patch[inventory.StorageLabel("mine")] != nil || patch[inventory.GPULabel("nvidia", "a100", "", "")] != nil {
			t.Fatalf("%v", patch)
		}
		if _, ok := patch[inventory.StorageLabel("theirs")]; ok {
			t.Fatal("another's class's label removed")
		}
	})
	t.Run("pod-level resources count for the pod", func(t *testing.T) {
		cpu := func(s string) corev1.ResourceList {
			return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
		}
		p := &corev1.Pod{Spec: corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: cpu("4")},
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}, {Name: "b"}},
		}}
		if q := inventory.PodRequests(p)[corev1.ResourceCPU]; q.MilliValue() != 4000 {
			t.Fatalf("cpu %s, want the pod's 4", q.String())
		}
	})
	t.Run("sidecars count with the containers", func(t *testing.T) {
		always := corev1.ContainerRestartPolicyAlways
		cpu := func(s string) corev1.ResourceList {
			return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
		}
		p := &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: cpu("1")}},
				{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: cpu("4")}},
			},
			Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: cpu("2")}}},
		}}
		// max(app 2 + sidecar 1, init 4 + sidecar 1) = 5.
		if q := inventory.PodRequests(p)[corev1.ResourceCPU]; q.MilliValue() != 5000 {
			t.Fatalf("cpu %s, want 5", q.String())
		}
		p.Spec.InitContainers[1].Resources.Requests = cpu("1")
		if q := inventory.PodRequests(p)[corev1.ResourceCPU]; q.MilliValue() != 3000 {
			t.Fatalf("cpu %s, want 3", q.String())
		}
	})
}

// TestAkashNameFindings: each case is a card the review found named otherwise than
// Akash's providers name it (akash-network/provider-configs devices/pcie/gpus.json),
// so that common SDLs did not match.
func TestAkashNameFindings(t *testing.T) {
	describe := func(product, memory string, opts inventory.GPUOptions) gpu.Model {
		t.Helper()
		g := inventory.DescribeGPU(gfd(product, memory, "1"), gpus(1), opts)
		if g == nil || g.Offered != 1 {
			t.Fatalf("%s: want one offered GPU, got %+v", product, g)
		}
		return inventory.Model(g)
	}
	t.Run("the memory label is rounded to the size the card is sold with", func(t *testing.T) {
		// 10de:1eb8 t4 16Gi, PR #92's 10de:26b9 l40s 48Gi, 10de:2335 h200 141Gi.
		for product, want := range map[string]string{"Tesla-T4/15360": "16Gi", "NVIDIA-L40S/46068": "48Gi", "NVIDIA-H200/143771": "141Gi", "NVIDIA-A10/23028": "24Gi"} {
			p, mib, _ := strings.Cut(product, "/")
			if g := describe(p, mib, inventory.GPUOptions{}); g.RAM != want {
				t.Errorf("%s: %s, want ram %s", product, g, want)
			}
		}
	})
	t.Run("a card not said to be SXM is PCIe, as Akash lists it", func(t *testing.T) {
		// SDLs asking interface: pcie for an rtx4090 (10de:2684 PCIe) matched none.
		if g := describe("NVIDIA-GeForce-RTX-4090", "24564", inventory.GPUOptions{}); g.Interface != "pcie" {
			t.Errorf("%s", g)
		}
		if g := describe("NVIDIA-H100-80GB-HBM3", "81559", inventory.GPUOptions{}); g.Interface != "sxm" {
			t.Errorf("%s: the H100 SXM5 (10de:2330)", g)
		}
	})
	t.Run("NVL, SUPER, Laptop and Akash's own names", func(t *testing.T) {
		for product, want := range map[string]string{
			"NVIDIA-H200-NVL": "h200nvl", "NVIDIA-GeForce-RTX-4070-SUPER": "rtx4070s", "NVIDIA-GeForce-RTX-3060-Laptop-GPU": "rtx3060m",
			"NVIDIA-RTX-A5000": "a5000", "NVIDIA-RTX-A6000": "rtxa6000", "NVIDIA-RTX-4000-SFF-Ada-Generation": "rtx4000sada",
			"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition": "pro6000se", "NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition": "pro6000we",
		} {
			if g := describe(product, "", inventory.GPUOptions{}); g.Model != want {
				t.Errorf("%s: %s, want model %s", product, g, want)
			}
		}
		over := inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"nvidia-rtx-a5000": {Model: "rtxa5000"}}}
		if g := describe("NVIDIA-RTX-A5000", "24564", over); g.Model != "rtxa5000" {
			t.Errorf("the operator's gpu.models lost to the built-in name: %s", g)
		}
	})
	t.Run("the GH200's 480GB is not its GPU's memory", func(t *testing.T) {
		if g := describe("NVIDIA-GH200-480GB", "97871", inventory.GPUOptions{}); g.RAM != "96Gi" {
			t.Errorf("%s", g)
		}
	})
	t.Run("GPUs shared as nvidia.com/gpu.shared are reported, never offered", func(t *testing.T) {
		l := merge(gfd("Tesla-T4", "15360", "1"), map[string]string{inventory.LabelGFDSharing: inventory.SharingTimeSlicing, inventory.LabelGFDReplicas: "4"})
		g := inventory.DescribeGPU(l, res(inventory.ResourceGPUShared, 4), inventory.GPUOptions{OfferShared: true})
		if g == nil || g.Sharing != inventory.SharingTimeSlicing || g.Devices != 4 || g.Offered != 0 ||
			!strings.Contains(g.Message, "nvidia.com/gpu.shared") || strings.Contains(g.Message, "is NVIDIA's device plugin running") {
			t.Fatalf("%+v", g)
		}
	})
}

// TestGPUOnly: the nvidia.com/gpu taint of managed GPU node pools leaves a node
// schedulable, for GPU workloads only; other taints still keep it out.
func TestGPUOnly(t *testing.T) {
	n := &corev1.Node{
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: inventory.TaintGPU, Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if ok, why := inventory.Schedulable(n); !ok || !inventory.GPUOnly(n) {
		t.Fatalf("GPU pool node: schedulable %v (%s), GPU-only %v", ok, why, inventory.GPUOnly(n))
	}
	if r := inventory.NodeReport(n, nil, inventory.GPUOptions{}, nil); !r.Schedulable || !r.GPUOnly {
		t.Fatalf("report %+v", r)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoSchedule})
	if ok, _ := inventory.Schedulable(n); ok {
		t.Fatal("a drained GPU node takes workloads")
	}
	n.Spec.Taints = nil
	if inventory.GPUOnly(n) {
		t.Fatal("an untainted node is GPU-only")
	}
}
