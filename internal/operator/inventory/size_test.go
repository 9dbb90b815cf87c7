package inventory

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "berth.dev/berth/api/v1"
)

// TestReportOf2000Nodes: the report of a 2,000-node cluster (GPU nodes, each with a
// provider's leases and two storage classes) is written to the real API server and
// read back whole; 3,000 are refused by the operator itself, saying why, before the
// API server would.
func TestReportOf2000Nodes(t *testing.T) {
	e := newEnv(t)
	c, err := New(e.cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.dc = e.dc // writes without running
	report := func(n int) *berthv1.InventoryStatus {
		st := &berthv1.InventoryStatus{UpdatedAt: metav1.Now(), Operator: "berth-inventory-operator-7d9f8c6b5-x2x9q_1"}
		q := resource.MustParse
		for i := range n {
			st.Nodes = append(st.Nodes, berthv1.InventoryNode{
				Name: fmt.Sprintf("gpu-node-%05d.region.example", i), Schedulable: true,
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("127900m"), corev1.ResourceMemory: q("1031824Mi"), corev1.ResourceEphemeralStorage: q("3500Gi"),
					corev1.ResourcePods: q("110"), "nvidia.com/gpu": q("8"), "hugepages-2Mi": q("0")},
				Used: corev1.ResourceList{corev1.ResourceCPU: q("64250m"), corev1.ResourceMemory: q("515Gi"), corev1.ResourceEphemeralStorage: q("1200Gi"),
					corev1.ResourcePods: q("23"), "nvidia.com/gpu": q("4")},
				Leases: []berthv1.InventoryOwnerUsage{{Provider: "akash1rw8h2m5achdxu6c5vasxucu6m08ta96sv7zqyw", ChainID: "akashnet-2",
					Used: corev1.ResourceList{corev1.ResourceCPU: q("48"), corev1.ResourceMemory: q("384Gi"), corev1.ResourcePods: q("8"), "nvidia.com/gpu": q("4")}}},
				GPU: &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-H100-80GB-HBM3",
					PCIDevice: "10de:2330", Devices: 8, Offered: 8, Labelled: true},
				StorageClasses: []string{"beta2", "beta3"},
			})
		}
		return st
	}
	if _, err := c.write(t.Context(), report(2000)); err != nil {
		t.Fatalf("2,000 nodes: %v", err)
	}
	inv, err := e.inventoryOf(t.Context(), e.cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Status.Nodes) != 2000 || inv.Status.Nodes[1999].GPU == nil || inv.Status.Nodes[1999].GPU.Offered != 8 {
		t.Fatalf("read back %d nodes", len(inv.Status.Nodes))
	}
	if _, err := c.write(t.Context(), report(3000)); err == nil || !strings.Contains(err.Error(), "too many nodes (3000)") {
		t.Fatalf("3,000 nodes: %v", err)
	}
}
