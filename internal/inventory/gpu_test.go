package inventory_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/inventory"
)

// Labels as GPU feature discovery and node feature discovery publish them.
const (
	nfd = "feature.node.kubernetes.io/pci-"
	// NFD's default deviceLabelFields are class and vendor; a display controller of
	// NVIDIA's, with and without the device id.
	nfdNvidiaDisplay = nfd + "0302_10de.present"
	nfdUnknownCard   = nfd + "0302_10de_2330.present"
	nfdNVSwitch      = nfd + "0680_10de.present" // a bridge, not a GPU
	nfdMellanox      = nfd + "0207_15b3.present"
)

// res is a resource list of whole numbers.
func res(kv ...any) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		var name corev1.ResourceName
		switch k := kv[i].(type) {
		case corev1.ResourceName:
			name = k
		case string:
			name = corev1.ResourceName(k)
		}
		switch v := kv[i+1].(type) {
		case int:
			l[name] = *resource.NewQuantity(int64(v), resource.DecimalSI)
		case string:
			l[name] = resource.MustParse(v)
		}
	}
	return l
}

func gpus(n int) corev1.ResourceList { return res(inventory.ResourceGPU, n) }

// merge is the union of label maps, later ones winning.
func merge(ls ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range ls {
		for k, v := range l {
			out[k] = v
		}
	}
	return out
}

// gfd is what GPU feature discovery labels a node with (plus some labels of its that
// DescribeGPU must ignore).
func gfd(product, memory, count string) map[string]string {
	return map[string]string{
		inventory.LabelGFDProduct:        product,
		inventory.LabelGFDMemory:         memory,
		inventory.LabelGFDCount:          count,
		inventory.LabelGFDSharing:        "none",
		"nvidia.com/gpu.family":          "ampere",
		"nvidia.com/cuda.driver.major":   "550",
		"nvidia.com/gpu.compute.major":   "8",
		"nvidia.com/gpu.present":         "true",
		"nvidia.com/mig.capable":         "true",
		"nvidia.com/gpu.deploy.operands": "true",
		"kubernetes.io/hostname":         "gpu-1",
	}
}

// checkGPU compares got with want, but Message against wantMsg: every fragment must
// be in it; no fragment means Message must be empty.
func checkGPU(t *testing.T, got, want *berthv1.InventoryGPU, wantMsg []string) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("want no GPU, got %+v", *got)
		}
		return
	}
	if got == nil {
		t.Fatalf("want %+v, got nil", *want)
	}
	g := *got
	g.Message = ""
	if !reflect.DeepEqual(g, *want) {
		t.Errorf("got  %+v\nwant %+v", g, *want)
	}
	if len(wantMsg) == 0 && got.Message != "" {
		t.Errorf("want no message, got %q", got.Message)
	}
	for _, m := range wantMsg {
		if !strings.Contains(got.Message, m) {
			t.Errorf("message %q does not mention %q", got.Message, m)
		}
	}
}

func TestDescribeGPU(t *testing.T) {
	unknownCard := merge(gfd("NVIDIA-Graphics-Device", "97871", "8"), map[string]string{nfdUnknownCard: "true"})
	h20 := inventory.GPUModelOverride{Model: "h20", RAM: "96Gi", Interface: "sxm"}
	a100 := func(devices, offered int64) berthv1.InventoryGPU {
		return berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: devices, Offered: offered}
	}
	namedH20 := berthv1.InventoryGPU{Vendor: "nvidia", Model: "h20", RAM: "96Gi", Interface: "sxm", Product: "NVIDIA-Graphics-Device", PCIDevice: "10de:2330", Devices: 8, Offered: 8}
	withPCI := func(g berthv1.InventoryGPU, pci string) *berthv1.InventoryGPU {
		g.PCIDevice = pci
		return &g
	}
	tests := []struct {
		name        string
		labels      map[string]string
		allocatable corev1.ResourceList
		opts        inventory.GPUOptions
		want        *berthv1.InventoryGPU
		msg         []string
	}{
		{
			name:        "A100 SXM4 80GB",
			labels:      merge(gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), map[string]string{nfdNvidiaDisplay: "true", nfdNVSwitch: "true", nfdMellanox: "true"}),
			allocatable: mergeRes(gpus(8), res(corev1.ResourceCPU, 128, corev1.ResourceMemory, "2Ti")),
			want:        withPCI(a100(8, 8), "10de"),
		},
		{
			name:        "H100 PCIe",
			labels:      gfd("NVIDIA-H100-PCIe", "81559", "2"),
			allocatable: gpus(2),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Interface: "pcie", Product: "NVIDIA-H100-PCIe", Devices: 2, Offered: 2},
		},
		{
			name:        "H100 SXM (HBM3 is no part of the model)",
			labels:      gfd("NVIDIA-H100-80GB-HBM3", "81559", "8"),
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Product: "NVIDIA-H100-80GB-HBM3", Devices: 8, Offered: 8},
		},
		{
			name:        "RTX 4090: the memory label gives the RAM",
			labels:      gfd("NVIDIA-GeForce-RTX-4090", "24564", "1"),
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "rtx4090", RAM: "24Gi", Product: "NVIDIA-GeForce-RTX-4090", Devices: 1, Offered: 1},
		},
		{
			name:        "Tesla T4: the family word is dropped, 15360 MiB rounds to 15Gi",
			labels:      gfd("Tesla-T4", "15360", "4"),
			allocatable: gpus(4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "t4", RAM: "15Gi", Product: "Tesla-T4", Devices: 4, Offered: 4},
		},
		{
			name:        "unknown card: not offered, the message gives the PCI id to name it by",
			labels:      unknownCard,
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Product: "NVIDIA-Graphics-Device", PCIDevice: "10de:2330", Devices: 8},
			msg:         []string{"gpu.models", `"10de:2330"`, cluster.LabelGPUModel, "NVIDIA-Graphics-Device"},
		},
		{
			name:        "unknown card without NFD: the message gives the product name to name it by",
			labels:      gfd("NVIDIA-Graphics-Device", "97871", "8"),
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Product: "NVIDIA-Graphics-Device", Devices: 8},
			msg:         []string{"gpu.models", `"NVIDIA-Graphics-Device"`, cluster.LabelGPUModel},
		},
		{
			name:        "unknown card named by its PCI id",
			labels:      unknownCard,
			allocatable: gpus(8),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10de:2330": h20}},
			want:        &namedH20,
		},
		{
			name:        "unknown card named by its PCI id, in capitals",
			labels:      unknownCard,
			allocatable: gpus(8),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10DE:2330": h20}},
			want:        &namedH20,
		},
		{
			name:        "unknown card named by its product, case-insensitively",
			labels:      unknownCard,
			allocatable: gpus(8),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"nvidia-graphics-device": h20}},
			want:        &namedH20,
		},
		{
			name:        "override in capitals without RAM: lower-cased, RAM from the memory label",
			labels:      unknownCard,
			allocatable: gpus(8),
			opts: inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{
				"10de:2330": {Vendor: "NVIDIA", Model: "H20", Interface: "sxm"},
				"10de:9999": {Model: "other"},
			}},
			want: &namedH20,
		},
		{
			name:        "an override for a product GFD can name wins over the name",
			labels:      gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"),
			allocatable: gpus(8),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"NVIDIA-A100-SXM4-80GB": {Model: "a800", Interface: "pcie"}}},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a800", RAM: "80Gi", Interface: "pcie", Product: "NVIDIA-A100-SXM4-80GB", Devices: 8, Offered: 8},
		},
		{
			name:        "NFD only (pci-10de), device plugin but no GFD",
			labels:      map[string]string{nfd + "10de.present": "true"},
			allocatable: gpus(2),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", PCIDevice: "10de", Devices: 2},
			msg:         []string{"gpu.models", `"10de"`, cluster.LabelGPUModel},
		},
		{
			name:        "NFD only (pci-0300_10de), device plugin but no GFD",
			labels:      map[string]string{nfd + "0300_10de.present": "true", nfdMellanox: "true"},
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", PCIDevice: "10de", Devices: 1},
			msg:         []string{"gpu.models", `"10de"`},
		},
		{
			name:        "NFD only with device ids, named by the PCI id",
			labels:      map[string]string{nfd + "0302_10de_1db6.present": "true", nfd + "0680_10de_22a3.present": "true"},
			allocatable: gpus(4),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10de:1db6": {Model: "v100", RAM: "32Gi", Interface: "pcie"}}},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "v100", RAM: "32Gi", Interface: "pcie", PCIDevice: "10de:1db6", Devices: 4, Offered: 4},
		},
		{
			name:        "NFD: a label with the device id says more than one without",
			labels:      map[string]string{nfdNvidiaDisplay: "true", nfdUnknownCard: "true"},
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", PCIDevice: "10de:2330", Devices: 1},
			msg:         []string{`"10de:2330"`},
		},
		{
			name:        "device plugin and berth's labels only",
			labels:      map[string]string{cluster.LabelGPUModel: "a100", cluster.LabelGPURAM: "40Gi", cluster.LabelGPUInterface: "pcie"},
			allocatable: gpus(4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "40Gi", Interface: "pcie", Devices: 4, Offered: 4},
		},
		{
			name:        "device plugin only: not offered",
			labels:      map[string]string{"kubernetes.io/hostname": "gpu-1"},
			allocatable: gpus(4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Devices: 4},
			msg:         []string{"has no known model name", cluster.LabelGPUModel},
		},
		{
			name: "berth's per-node labels win over GFD",
			labels: merge(gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), map[string]string{
				cluster.LabelGPUVendor: "NVIDIA", cluster.LabelGPUModel: "H800", cluster.LabelGPURAM: "80gi", cluster.LabelGPUInterface: "PCIe",
			}),
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h800", RAM: "80Gi", Interface: "pcie", Product: "NVIDIA-A100-SXM4-80GB", Devices: 8, Offered: 8},
		},
		{
			name:        "berth's per-node labels win over the operator's overrides",
			labels:      merge(unknownCard, map[string]string{cluster.LabelGPUModel: "h200", cluster.LabelGPURAM: "141Gi"}),
			allocatable: gpus(8),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10de:2330": h20}},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h200", RAM: "141Gi", Interface: "sxm", Product: "NVIDIA-Graphics-Device", PCIDevice: "10de:2330", Devices: 8, Offered: 8},
		},
		{
			name:        "berth's per-node labels name an unknown card",
			labels:      merge(unknownCard, map[string]string{cluster.LabelGPUModel: "h20", cluster.LabelGPURAM: "96Gi", cluster.LabelGPUInterface: "sxm"}),
			allocatable: gpus(8),
			want:        &namedH20,
		},
		{
			name: "time-slicing: not offered by default",
			labels: merge(gfd("NVIDIA-A100-SXM4-80GB-SHARED", "81920", "8"), map[string]string{
				inventory.LabelGFDSharing: inventory.SharingTimeSlicing, inventory.LabelGFDReplicas: "4",
			}),
			allocatable: gpus(32),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB-SHARED", Devices: 32, Sharing: inventory.SharingTimeSlicing, Replicas: 4},
			msg:         []string{"shared", "time-slicing", "4 replicas", "gpu.offer_shared"},
		},
		{
			name: "time-slicing offered when OfferShared",
			labels: merge(gfd("NVIDIA-A100-SXM4-80GB-SHARED", "81920", "8"), map[string]string{
				inventory.LabelGFDSharing: inventory.SharingTimeSlicing, inventory.LabelGFDReplicas: "4",
			}),
			allocatable: gpus(32),
			opts:        inventory.GPUOptions{OfferShared: true},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB-SHARED", Devices: 32, Offered: 32, Sharing: inventory.SharingTimeSlicing, Replicas: 4},
		},
		{
			name:        "the -SHARED suffix alone means time-slicing",
			labels:      merge(gfd("NVIDIA-GeForce-RTX-4090-SHARED", "24564", "1"), map[string]string{inventory.LabelGFDReplicas: "2"}),
			allocatable: gpus(2),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "rtx4090", RAM: "24Gi", Product: "NVIDIA-GeForce-RTX-4090-SHARED", Devices: 2, Sharing: inventory.SharingTimeSlicing, Replicas: 2},
			msg:         []string{"shared"},
		},
		{
			name: "MPS",
			labels: merge(gfd("NVIDIA-H100-80GB-HBM3-SHARED", "81559", "8"), map[string]string{
				inventory.LabelGFDSharing: inventory.SharingMPS, inventory.LabelGFDReplicas: "2",
			}),
			allocatable: gpus(16),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Product: "NVIDIA-H100-80GB-HBM3-SHARED", Devices: 16, Sharing: inventory.SharingMPS, Replicas: 2},
			msg:         []string{"mps", "2 replicas"},
		},
		{
			name: "time-sliced unknown card named by its base product",
			labels: merge(gfd("NVIDIA-Graphics-Device-SHARED", "97871", "8"), map[string]string{
				inventory.LabelGFDSharing: inventory.SharingTimeSlicing, inventory.LabelGFDReplicas: "2",
			}),
			allocatable: gpus(16),
			opts:        inventory.GPUOptions{OfferShared: true, Models: map[string]inventory.GPUModelOverride{"NVIDIA-Graphics-Device": h20}},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h20", RAM: "96Gi", Interface: "sxm", Product: "NVIDIA-Graphics-Device-SHARED", Devices: 16, Offered: 16, Sharing: inventory.SharingTimeSlicing, Replicas: 2},
		},
		{
			name: "MIG single strategy: the slices are nvidia.com/gpu, not offered",
			labels: merge(gfd("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "4864", "56"), map[string]string{
				inventory.LabelGFDMIG: "single", "nvidia.com/mig.config": "all-1g.5gb",
			}),
			allocatable: gpus(56),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "40Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", Devices: 56, Sharing: inventory.SharingMIG},
			msg:         []string{"MIG", "single"},
		},
		{
			name:        "MIG single strategy, even when OfferShared",
			labels:      merge(gfd("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "4864", "56"), map[string]string{inventory.LabelGFDMIG: "single"}),
			allocatable: gpus(56),
			opts:        inventory.GPUOptions{OfferShared: true},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "40Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", Devices: 56, Sharing: inventory.SharingMIG},
			msg:         []string{"MIG"},
		},
		{
			name:        "MIG mixed strategy: the slices are nvidia.com/mig-*, not offered",
			labels:      merge(gfd("NVIDIA-A100-SXM4-80GB", "81920", "1"), map[string]string{inventory.LabelGFDMIG: "mixed"}),
			allocatable: mergeRes(gpus(0), res("nvidia.com/mig-1g.10gb", 7)),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Sharing: inventory.SharingMIG, MIG: map[string]int64{"1g.10gb": 7}},
			msg:         []string{"MIG devices (7 × 1g.10gb) are not offered"},
		},
		{
			name:        "MIG mixed strategy with whole GPUs left: those are offered",
			labels:      merge(gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), map[string]string{inventory.LabelGFDMIG: "mixed"}),
			allocatable: mergeRes(gpus(6), res("nvidia.com/mig-1g.10gb", 7, "nvidia.com/mig-3g.40gb", 2, "nvidia.com/mig-2g.20gb", 0)),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 6, Offered: 6, Sharing: inventory.SharingMIG, MIG: map[string]int64{"1g.10gb": 7, "3g.40gb": 2}},
			msg:         []string{"MIG devices (2 × 3g.40gb, 7 × 1g.10gb)"},
		},
		{
			name:   "GFD labels but no nvidia.com/gpu: the device plugin is missing",
			labels: gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"),
			want:   &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB"},
			msg:    []string{"device plugin", "nvidia.com/gpu"},
		},
		{
			name:        "GFD labels and nvidia.com/gpu 0: the device plugin is missing",
			labels:      gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"),
			allocatable: gpus(0),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB"},
			msg:         []string{"device plugin"},
		},
		{
			name:   "only a GPU count, no device plugin",
			labels: map[string]string{inventory.LabelGFDCount: "2"},
			want:   &berthv1.InventoryGPU{Vendor: "nvidia"},
			msg:    []string{"has no known model name", "device plugin"},
		},
		{
			name:        "gpu.count differs from what the device plugin advertises",
			labels:      gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"),
			allocatable: gpus(6),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 6, Offered: 6},
			msg:         []string{"counts 8 GPUs", "advertises 6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			labels := merge(tt.labels)
			allocatable := tt.allocatable.DeepCopy()
			got := inventory.DescribeGPU(tt.labels, tt.allocatable, tt.opts)
			checkGPU(t, got, tt.want, tt.msg)
			if !reflect.DeepEqual(labels, merge(tt.labels)) || !reflect.DeepEqual(allocatable, tt.allocatable) {
				t.Error("DescribeGPU changed its arguments")
			}
			if again := inventory.DescribeGPU(tt.labels, tt.allocatable, tt.opts); !reflect.DeepEqual(again, got) {
				t.Errorf("not deterministic: %+v, then %+v", *got, *again)
			}
		})
	}
}

// mergeRes is the union of resource lists.
func mergeRes(ls ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range ls {
		for k, v := range l {
			out[k] = v
		}
	}
	return out
}

func TestDescribeGPUNone(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		allocatable corev1.ResourceList
	}{
		{name: "nothing"},
		{
			name: "CPU node with NFD labels and a Mellanox NIC",
			labels: map[string]string{
				"feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
				nfdMellanox:               "true",
				nfd + "0300_1a03.present": "true", // ASPEED BMC display
				"kubernetes.io/arch":      "amd64",
			},
			allocatable: res(corev1.ResourceCPU, 64, corev1.ResourceMemory, "256Gi", corev1.ResourcePods, 110),
		},
		{name: "an AMD GPU", labels: map[string]string{nfd + "0300_1002.present": "true"}, allocatable: res("amd.com/gpu", 8)},
		{name: "NVIDIA bridge only (NVSwitch)", labels: map[string]string{nfdNVSwitch: "true", nfd + "0680_10de_22a3.present": "true"}},
		{name: "NFD label false", labels: map[string]string{nfdUnknownCard: "false", nfd + "10de.present": "false"}},
		{name: "NFD label without .present", labels: map[string]string{nfd + "0302_10de.sriov.capable": "true"}},
		{name: "NFD label with a field that is not hex", labels: map[string]string{nfd + "03xx_10de.present": "true"}},
		{name: "nvidia.com/gpu 0 and no labels", allocatable: gpus(0)},
		{name: "blank product, zero count", labels: map[string]string{inventory.LabelGFDProduct: "  ", inventory.LabelGFDCount: "0"}},
		{name: "count that is not a number", labels: map[string]string{inventory.LabelGFDCount: "eight"}},
		{name: "MIG resources of none", allocatable: res("nvidia.com/mig-1g.10gb", 0)},
		{name: "berth's labels without any GPU", labels: map[string]string{cluster.LabelGPUModel: "a100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := inventory.DescribeGPU(tt.labels, tt.allocatable, inventory.GPUOptions{OfferShared: true}); g != nil {
				t.Fatalf("want nil, got %+v", *g)
			}
		})
	}
}

// Cards as GFD names them: every one that is offered gets all its capability labels
// (a label name holds 63 characters), and a node carrying them satisfies the affinity
// of an order asking for exactly that card.
func TestDescribeGPUCapabilitiesOfRealCards(t *testing.T) {
	for _, c := range []struct{ product, memory string }{
		{"NVIDIA-A100-SXM4-80GB", "81920"},
		{"NVIDIA-A100-PCIE-40GB", "40960"},
		{"NVIDIA-A100-80GB-PCIe", "81920"},
		{"NVIDIA-H100-80GB-HBM3", "81559"},
		{"NVIDIA-H100-PCIe", "81559"},
		{"NVIDIA-H100-NVL", "95830"},
		{"NVIDIA-H200", "143771"},
		{"NVIDIA-GH200-480GB", "97871"},
		{"NVIDIA-L40S", "46068"},
		{"NVIDIA-L4", "23034"},
		{"NVIDIA-A10", "23028"},
		{"NVIDIA-GeForce-RTX-4090", "24564"},
		{"NVIDIA-GeForce-RTX-3090", "24576"},
		{"NVIDIA-RTX-A6000", "49140"},
		{"NVIDIA-RTX-6000-Ada-Generation", "49140"},
		{"Tesla-V100-SXM2-16GB", "16384"},
		{"Tesla-T4", "15360"},
	} {
		t.Run(c.product, func(t *testing.T) {
			g := inventory.DescribeGPU(gfd(c.product, c.memory, "1"), gpus(1), inventory.GPUOptions{})
			if g == nil || g.Offered != 1 || g.Model == "" || g.RAM == "" {
				t.Fatalf("want one offered GPU with a model and RAM, got %+v", g)
			}
			labels, invalid := inventory.Capabilities(g, nil)
			if len(invalid) > 0 {
				t.Errorf("%s/%s/%s/%s: invalid capability labels %q", g.Vendor, g.Model, g.RAM, g.Interface, invalid)
			}
			for _, k := range inventory.GPUAffinity(inventory.Model(g)) {
				if labels[k] != "true" {
					t.Errorf("the node does not carry %s, which an order for %s needs", k, inventory.Model(g))
				}
			}
		})
	}
}

func TestModel(t *testing.T) {
	if m := inventory.Model(nil); m != (cluster.GPUModel{}) {
		t.Errorf("Model(nil) = %v", m)
	}
	if m := inventory.Model(&berthv1.InventoryGPU{Vendor: "nvidia", Devices: 4, PCIDevice: "10de:2330"}); m != (cluster.GPUModel{}) {
		t.Errorf("Model of an unnamed card = %v", m)
	}
	g := &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 8, Offered: 8}
	if m, want := inventory.Model(g), (cluster.GPUModel{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}); m != want {
		t.Errorf("Model = %v, want %v", m, want)
	}
}

func TestGPUOptionsValidate(t *testing.T) {
	tests := []struct {
		name   string
		models map[string]inventory.GPUModelOverride
		want   string // "" for valid, else a fragment of the error
	}{
		{name: "none"},
		{name: "by PCI id", models: map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h20", RAM: "96Gi", Interface: "sxm"}}},
		{name: "by product, capitals", models: map[string]inventory.GPUModelOverride{"NVIDIA-Graphics-Device": {Vendor: "NVIDIA", Model: "H20", RAM: "141Gi", Interface: "pcie"}}},
		{name: "model only", models: map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h20"}}},
		{name: "model of 11 characters, with memory and interface", models: map[string]inventory.GPUModelOverride{"k": {Model: strings.Repeat("a", 11), RAM: "80Gi", Interface: "pcie"}}},
		{name: "model too long for a label", models: map[string]inventory.GPUModelOverride{"k": {Model: strings.Repeat("a", 40)}}, want: "63-character"},
		{name: "same key twice", models: map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h20"}, "10DE:2330": {Model: "h20"}}, want: "name the same card"},
		{name: "empty key", models: map[string]inventory.GPUModelOverride{"": {Model: "h20"}}, want: "gpu.models: empty key"},
		{name: "blank key", models: map[string]inventory.GPUModelOverride{" \t": {Model: "h20"}}, want: "gpu.models: empty key"},
		{name: "no model", models: map[string]inventory.GPUModelOverride{"10de:2330": {RAM: "96Gi"}}, want: `gpu.models["10de:2330"].model`},
		{name: "model with a dash", models: map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h-20"}}, want: `gpu.models["10de:2330"].model "h-20"`},
		{name: "model with a space", models: map[string]inventory.GPUModelOverride{"k": {Model: "h 20"}}, want: `gpu.models["k"].model`},
		{name: "model of 41 characters", models: map[string]inventory.GPUModelOverride{"k": {Model: strings.Repeat("a", 41)}}, want: `gpu.models["k"].model`},
		{name: "bad vendor", models: map[string]inventory.GPUModelOverride{"k": {Vendor: "nvidia corp", Model: "h20"}}, want: `gpu.models["k"].vendor "nvidia corp"`},
		{name: "RAM in GB", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", RAM: "96GB"}}, want: `gpu.models["k"].ram "96GB"`},
		{name: "RAM without unit", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", RAM: "96"}}, want: `gpu.models["k"].ram`},
		{name: "RAM zero", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", RAM: "0Gi"}}, want: `gpu.models["k"].ram`},
		{name: "RAM leading zero", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", RAM: "096Gi"}}, want: `gpu.models["k"].ram`},
		{name: "RAM lower-case unit", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", RAM: "96gi"}}, want: `gpu.models["k"].ram`},
		{name: "interface in capitals", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", Interface: "SXM"}}, want: `gpu.models["k"].interface "SXM"`},
		{name: "interface nvlink", models: map[string]inventory.GPUModelOverride{"k": {Model: "h20", Interface: "nvlink"}}, want: `gpu.models["k"].interface`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := inventory.GPUOptions{Models: tt.models}.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("want an error with %q, got none", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

// FuzzDescribeGPU feeds DescribeGPU labels as GFD and NFD could publish them. It never
// panics; it never offers more GPUs than the device plugin advertises, nor a GPU
// without a model; an offered GPU gets all its capability labels (else workloads
// asking for it could not be placed); and a GPU withheld is explained.
func FuzzDescribeGPU(f *testing.F) {
	f.Add("NVIDIA-A100-SXM4-80GB", "81920", "8", "", "", "0302_10de", uint16(8), uint16(0), false)
	f.Add("NVIDIA-H100-PCIe", "81559", "2", "", "none", "10de", uint16(2), uint16(0), false)
	f.Add("NVIDIA-GeForce-RTX-4090", "24564", "1", "", "", "", uint16(1), uint16(0), false)
	f.Add("NVIDIA-Graphics-Device", "97871", "8", "", "", "0302_10de_2330", uint16(8), uint16(0), false)
	f.Add("NVIDIA-A100-SXM4-80GB-SHARED", "81920", "8", "4", "time-slicing", "", uint16(32), uint16(0), true)
	f.Add("NVIDIA-H100-80GB-HBM3-SHARED", "81559", "8", "2", "mps", "", uint16(16), uint16(0), false)
	f.Add("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "4864", "56", "", "", "", uint16(56), uint16(0), false)
	f.Add("NVIDIA-A100-SXM4-80GB", "81920", "1", "", "", "", uint16(0), uint16(7), false)
	f.Add("", "", "", "", "", "0680_10de_22a3", uint16(0), uint16(0), false)
	f.Add("Tesla-T4", "15360", "4", "", "", "feature.node.kubernetes.io/pci-10de.present", uint16(6), uint16(0), false)
	f.Fuzz(func(t *testing.T, product, memory, count, replicas, sharing, nfdKey string, devices, mig uint16, offerShared bool) {
		labels := map[string]string{
			inventory.LabelGFDProduct:  product,
			inventory.LabelGFDMemory:   memory,
			inventory.LabelGFDCount:    count,
			inventory.LabelGFDReplicas: replicas,
			inventory.LabelGFDSharing:  sharing,
			inventory.LabelGFDMIG:      "single",
		}
		if nfdKey != "" {
			if !strings.Contains(nfdKey, "/") {
				nfdKey = nfd + nfdKey + ".present"
			}
			labels[nfdKey] = "true"
		}
		allocatable := gpus(int(devices))
		if mig > 0 {
			allocatable["nvidia.com/mig-1g.10gb"] = *resource.NewQuantity(int64(mig), resource.DecimalSI)
		}
		g := inventory.DescribeGPU(labels, allocatable, inventory.GPUOptions{OfferShared: offerShared})
		if g == nil {
			if devices > 0 || mig > 0 {
				t.Fatalf("nil for a node with %d GPUs and %d MIG devices", devices, mig)
			}
			return
		}
		if g.Devices != int64(devices) {
			t.Fatalf("Devices %d, allocatable %d", g.Devices, devices)
		}
		if g.Offered < 0 || g.Offered > g.Devices {
			t.Fatalf("Offered %d of %d devices: %+v", g.Offered, g.Devices, *g)
		}
		if g.Devices > 0 && g.Offered == 0 && g.Message == "" {
			t.Fatalf("%d GPUs withheld without a message: %+v", g.Devices, *g)
		}
		if g.Offered == 0 {
			return
		}
		if g.Model == "" {
			t.Fatalf("offers %d GPUs of no model: %+v", g.Offered, *g)
		}
		caps, invalid := inventory.Capabilities(g, nil)
		if len(invalid) > 0 {
			t.Fatalf("offers %d GPUs %s whose capability labels are not label keys: %q", g.Offered, inventory.Model(g), invalid)
		}
		if caps[inventory.GPULabel(g.Vendor, g.Model, "", "")] != "true" {
			t.Fatalf("offers %s without its label: %v", inventory.Model(g), caps)
		}
		for k := range caps {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Fatalf("label %q: %v", k, errs)
			}
		}
	})
}
