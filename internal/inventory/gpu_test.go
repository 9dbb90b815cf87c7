package inventory_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/gpu"
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
			name:        "H100 SXM (HBM3 is no part of the model, but says SXM5)",
			labels:      gfd("NVIDIA-H100-80GB-HBM3", "81559", "8"),
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-H100-80GB-HBM3", Devices: 8, Offered: 8},
		},
		{
			name:        "RTX 4090: the memory label gives the RAM, a card not said SXM is PCIe",
			labels:      gfd("NVIDIA-GeForce-RTX-4090", "24564", "1"),
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "rtx4090", RAM: "24Gi", Interface: "pcie", Product: "NVIDIA-GeForce-RTX-4090", Devices: 1, Offered: 1},
		},
		{
			name:        "Tesla T4: the family word is dropped, 15360 MiB is the marketed 16Gi",
			labels:      gfd("Tesla-T4", "15360", "4"),
			allocatable: gpus(4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "t4", RAM: "16Gi", Interface: "pcie", Product: "Tesla-T4", Devices: 4, Offered: 4},
		},
		{
			name:        "unknown card: not offered, the message gives the PCI id to name it by",
			labels:      unknownCard,
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Product: "NVIDIA-Graphics-Device", PCIDevice: "10de:2330", Devices: 8},
			msg:         []string{"gpu.models", `"10de:2330"`, gpu.LabelModel, "NVIDIA-Graphics-Device"},
		},
		{
			name:        "unknown card without NFD: the message gives the product name to name it by",
			labels:      gfd("NVIDIA-Graphics-Device", "97871", "8"),
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Product: "NVIDIA-Graphics-Device", Devices: 8},
			msg:         []string{"gpu.models", `"NVIDIA-Graphics-Device"`, gpu.LabelModel},
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
			msg:         []string{"gpu.models", `"10de"`, gpu.LabelModel},
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
			labels:      map[string]string{gpu.LabelModel: "a100", gpu.LabelRAM: "40Gi", gpu.LabelInterface: "pcie"},
			allocatable: gpus(4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "40Gi", Interface: "pcie", Devices: 4, Offered: 4},
		},
		{
			name:        "device plugin only: not offered",
			labels:      map[string]string{"kubernetes.io/hostname": "gpu-1"},
			allocatable: gpus(4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Devices: 4},
			msg:         []string{"has no known model name", gpu.LabelModel},
		},
		{
			name: "berth's per-node labels win over GFD",
			labels: merge(gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), map[string]string{
				gpu.LabelVendor: "NVIDIA", gpu.LabelModel: "H800", gpu.LabelRAM: "80gi", gpu.LabelInterface: "PCIe",
			}),
			allocatable: gpus(8),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h800", RAM: "80Gi", Interface: "pcie", Product: "NVIDIA-A100-SXM4-80GB", Devices: 8, Offered: 8},
		},
		{
			name:        "berth's per-node labels win over the operator's overrides",
			labels:      merge(unknownCard, map[string]string{gpu.LabelModel: "h200", gpu.LabelRAM: "141Gi"}),
			allocatable: gpus(8),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"10de:2330": h20}},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h200", RAM: "141Gi", Interface: "sxm", Product: "NVIDIA-Graphics-Device", PCIDevice: "10de:2330", Devices: 8, Offered: 8},
		},
		{
			name:        "berth's per-node labels name an unknown card",
			labels:      merge(unknownCard, map[string]string{gpu.LabelModel: "h20", gpu.LabelRAM: "96Gi", gpu.LabelInterface: "sxm"}),
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
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "rtx4090", RAM: "24Gi", Interface: "pcie", Product: "NVIDIA-GeForce-RTX-4090-SHARED", Devices: 2, Sharing: inventory.SharingTimeSlicing, Replicas: 2},
			msg:         []string{"shared"},
		},
		{
			name: "MPS",
			labels: merge(gfd("NVIDIA-H100-80GB-HBM3-SHARED", "81559", "8"), map[string]string{
				inventory.LabelGFDSharing: inventory.SharingMPS, inventory.LabelGFDReplicas: "2",
			}),
			allocatable: gpus(16),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-H100-80GB-HBM3-SHARED", Devices: 16, Sharing: inventory.SharingMPS, Replicas: 2},
			msg:         []string{"mps", "2 replicas"},
		},
		{
			name: "time-slicing with renameByDefault: nvidia.com/gpu.shared only, never offered",
			labels: merge(gfd("NVIDIA-GeForce-RTX-4090", "24564", "2"), map[string]string{
				inventory.LabelGFDSharing: inventory.SharingTimeSlicing, inventory.LabelGFDReplicas: "4",
			}),
			allocatable: res(inventory.ResourceGPUShared, 8),
			opts:        inventory.GPUOptions{OfferShared: true},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "rtx4090", RAM: "24Gi", Interface: "pcie", Product: "NVIDIA-GeForce-RTX-4090", Devices: 8, Sharing: inventory.SharingTimeSlicing, Replicas: 4},
			msg:         []string{"shared (time-slicing, 4 replicas)", "nvidia.com/gpu.shared", "renameByDefault", "request nvidia.com/gpu", "even with gpu.offer_shared"},
		},
		{
			name:        "nvidia.com/gpu.shared without GFD's sharing labels: time-slicing, not offered",
			labels:      gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"),
			allocatable: res(inventory.ResourceGPUShared, 16),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 16, Sharing: inventory.SharingTimeSlicing},
			msg:         []string{"shared (time-slicing)", "nvidia.com/gpu.shared"},
		},
		{
			name:        "nvidia.com/gpu.shared alone describes GPUs",
			allocatable: res(inventory.ResourceGPUShared, 4),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Devices: 4, Sharing: inventory.SharingTimeSlicing},
			msg:         []string{"has no known model name", "nvidia.com/gpu.shared"},
		},
		{
			name:        "nvidia.com/gpu.shared next to whole GPUs: those are offered, the shares not",
			labels:      gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"),
			allocatable: mergeRes(gpus(6), res(inventory.ResourceGPUShared, 8)),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 6, Offered: 6},
			msg:         []string{"8 nvidia.com/gpu.shared", "counts 8 GPUs"},
		},
		{
			name:        "GH200: the product's 480GB is CPU and GPU memory, the memory label the GPU's",
			labels:      gfd("NVIDIA-GH200-480GB", "97871", "1"),
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "gh200", RAM: "96Gi", Product: "NVIDIA-GH200-480GB", Devices: 1, Offered: 1},
		},
		{
			name:        "GH200 without a memory label: the product's size is all there is",
			labels:      gfd("NVIDIA-GH200-480GB", "", "1"),
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "gh200", RAM: "480Gi", Product: "NVIDIA-GH200-480GB", Devices: 1, Offered: 1},
		},
		{
			name:        "MIG single strategy: the memory label is a slice's, not the card's",
			labels:      merge(gfd("NVIDIA-H100-PCIe-MIG-1g.10gb", "9984", "14"), map[string]string{inventory.LabelGFDMIG: "single"}),
			allocatable: gpus(14),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "h100", Interface: "pcie", Product: "NVIDIA-H100-PCIe-MIG-1g.10gb", Devices: 14, Sharing: inventory.SharingMIG},
			msg:         []string{"MIG", "single"},
		},
		{
			name:        "a model too long to carry the interface it only implies is offered without it",
			labels:      gfd("NVIDIA-Jetson-AGX-Orin", "65536", "1"),
			allocatable: gpus(1),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "jetsonagxorin", RAM: "64Gi", Product: "NVIDIA-Jetson-AGX-Orin", Devices: 1, Offered: 1},
		},
		{
			name:        "the built-in Akash name gives way to the operator's override",
			labels:      gfd("NVIDIA-RTX-A5000", "24564", "2"),
			allocatable: gpus(2),
			opts:        inventory.GPUOptions{Models: map[string]inventory.GPUModelOverride{"NVIDIA-RTX-A5000": {Model: "rtxa5000", RAM: "24Gi"}}},
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "rtxa5000", RAM: "24Gi", Product: "NVIDIA-RTX-A5000", Devices: 2, Offered: 2},
		},
		{
			name:        "a per-node interface label wins over the one implied",
			labels:      merge(gfd("NVIDIA-L40S", "46068", "2"), map[string]string{gpu.LabelInterface: "sxm"}),
			allocatable: gpus(2),
			want:        &berthv1.InventoryGPU{Vendor: "nvidia", Model: "l40s", RAM: "48Gi", Interface: "sxm", Product: "NVIDIA-L40S", Devices: 2, Offered: 2},
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
		{name: "berth's labels without any GPU", labels: map[string]string{gpu.LabelModel: "a100"}},
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

// Cards as GFD names them (nvidia.com/gpu.product, and nvidia.com/gpu.memory as the
// driver reports the usable memory) get the names Akash's providers advertise and
// tenants' SDLs ask for: akash-network/provider-configs devices/pcie/gpus.json (main
// at 2d04f4f, "10de:<device>" below), whose interfaces Akash's provider lower-cases
// and folds sxm* into sxm. "PR #n" is an entry proposed there but not merged; "not
// listed" a card Akash has no entry for, named by the same rules.
func TestDescribeGPUAkashNames(t *testing.T) {
	for _, c := range []struct{ product, memory, model, ram, iface string }{
		{"NVIDIA-A100-SXM4-80GB", "81920", "a100", "80Gi", "sxm"},                                         // 10de:20b2 a100 SXM4 80Gi
		{"NVIDIA-A100-SXM4-40GB", "40960", "a100", "40Gi", "sxm"},                                         // 10de:20b0 a100 SXM4 40Gi
		{"NVIDIA-A100-PCIE-40GB", "40960", "a100", "40Gi", "pcie"},                                        // 10de:20b1, 20f1 a100 PCIe 40Gi
		{"NVIDIA-A100-80GB-PCIe", "81920", "a100", "80Gi", "pcie"},                                        // 10de:20b5 a100 PCIe 80Gi
		{"NVIDIA-A800-SXM4-80GB", "81920", "a800", "80Gi", "sxm"},                                         // 10de:20f3 a800 SXM4 80Gi
		{"NVIDIA-H100-80GB-HBM3", "81559", "h100", "80Gi", "sxm"},                                         // 10de:2330 h100 SXM5 80Gi
		{"NVIDIA-H100-PCIe", "81559", "h100", "80Gi", "pcie"},                                             // 10de:2331 h100 PCIe 80Gi
		{"NVIDIA-H100-NVL", "95830", "h100nvl", "94Gi", "pcie"},                                           // PR #91: 10de:2321 h100nvl PCIe 94Gi
		{"NVIDIA-H200", "143771", "h200", "141Gi", "sxm"},                                                 // 10de:2335 h200 SXM5 141Gi
		{"NVIDIA-H200-NVL", "143771", "h200nvl", "141Gi", "pcie"},                                         // 10de:233b h200nvl PCIe 141Gi
		{"NVIDIA-B200", "183359", "b200", "192Gi", "sxm"},                                                 // PR #92: 10de:2901 b200 SXM6 192Gi
		{"NVIDIA-GH200-480GB", "97871", "gh200", "96Gi", ""},                                              // not listed; a superchip: no interface
		{"NVIDIA-L40S", "46068", "l40s", "48Gi", "pcie"},                                                  // PR #92: 10de:26b9 l40s PCIe 48Gi
		{"NVIDIA-L4", "23034", "l4", "24Gi", "pcie"},                                                      // PR #92: 10de:27b8 l4 PCIe 24Gi
		{"NVIDIA-L40", "46068", "l40", "48Gi", "pcie"},                                                    // not listed
		{"NVIDIA-A10", "23028", "a10", "24Gi", "pcie"},                                                    // not listed
		{"NVIDIA-A10G", "23028", "a10g", "24Gi", "pcie"},                                                  // not listed
		{"NVIDIA-A40", "46068", "a40", "48Gi", "pcie"},                                                    // 10de:2235 a40 PCIe 48Gi
		{"Quadro-RTX-8000", "46080", "rtx8000", "48Gi", "pcie"},                                           // 10de:1e78 rtx8000 PCIe 48Gi
		{"Quadro-RTX-6000", "24576", "rtx6000", "24Gi", "pcie"},                                           // 10de:1e30 rtx6000 PCIe 24Gi
		{"Tesla-T4", "15360", "t4", "16Gi", "pcie"},                                                       // 10de:1eb8 t4 PCIe 16Gi
		{"Tesla-V100-SXM2-16GB", "16384", "v100", "16Gi", "sxm"},                                          // 10de:1db1 v100 SXM2 16Gi
		{"Tesla-V100-SXM2-32GB", "32510", "v100", "32Gi", "sxm"},                                          // 10de:1db5 v100 SXM2 32Gi
		{"Tesla-V100-PCIE-32GB", "32768", "v100", "32Gi", "pcie"},                                         // 10de:1df0 v100 PCIe 32Gi
		{"Tesla-P40", "24451", "p40", "24Gi", "pcie"},                                                     // 10de:1b38 p40 PCIe 24Gi
		{"Tesla-P4", "7611", "p4", "8Gi", "pcie"},                                                         // 10de:1bb3 p4 PCIe 8Gi
		{"NVIDIA-GeForce-RTX-4090", "24564", "rtx4090", "24Gi", "pcie"},                                   // 10de:2684 rtx4090 PCIe 24Gi
		{"NVIDIA-GeForce-RTX-3090", "24576", "rtx3090", "24Gi", "pcie"},                                   // 10de:2204 rtx3090 PCIe 24Gi
		{"NVIDIA-GeForce-RTX-3080", "10240", "rtx3080", "10Gi", "pcie"},                                   // 10de:2216 rtx3080 PCIe 10Gi
		{"NVIDIA-GeForce-RTX-3060", "12288", "rtx3060", "12Gi", "pcie"},                                   // 10de:2487 rtx3060 PCIe 12Gi
		{"NVIDIA-GeForce-RTX-4060-Ti", "16380", "rtx4060ti", "16Gi", "pcie"},                              // 10de:2805 rtx4060ti PCIe 16Gi
		{"NVIDIA-GeForce-GTX-1080-Ti", "11264", "gtx1080ti", "11Gi", "pcie"},                              // 10de:1b06 gtx1080ti PCIe 11Gi
		{"NVIDIA-GeForce-RTX-2080-Ti", "11264", "rtx2080ti", "11Gi", "pcie"},                              // 10de:1e04 rtx2080ti PCIe 11Gi
		{"NVIDIA-GeForce-RTX-2060-SUPER", "8192", "rtx2060s", "8Gi", "pcie"},                              // 10de:1f06 rtx2060s PCIe 8Gi
		{"NVIDIA-GeForce-RTX-2070-SUPER", "8192", "rtx2070s", "8Gi", "pcie"},                              // 10de:1e84 rtx2070s PCIe 8Gi
		{"NVIDIA-GeForce-RTX-2080-SUPER", "8192", "rtx2080s", "8Gi", "pcie"},                              // 10de:1e81 rtx2080s PCIe 8Gi
		{"NVIDIA-GeForce-GTX-1650-SUPER", "4096", "gtx1650s", "4Gi", "pcie"},                              // 10de:2187 gtx1650s PCIe 4Gi
		{"NVIDIA-GeForce-RTX-4070-SUPER", "12282", "rtx4070s", "12Gi", "pcie"},                            // 10de:2783 rtx4070s PCIe 12Gi
		{"NVIDIA-GeForce-RTX-4080-SUPER", "16376", "rtx4080s", "16Gi", "pcie"},                            // 10de:2702 rtx4080s PCIe 16Gi
		{"NVIDIA-GeForce-RTX-3060-Laptop-GPU", "6144", "rtx3060m", "6Gi", "pcie"},                         // 10de:2520, 2560 rtx3060m PCIe 6Gi
		{"NVIDIA-GeForce-RTX-5090-Laptop-GPU", "24463", "rtx5090m", "24Gi", "pcie"},                       // 10de:2c58 rtx5090m PCIe 24Gi
		{"NVIDIA-GeForce-RTX-5090", "32607", "rtx5090", "32Gi", "pcie"},                                   // 10de:2b85 rtx5090 PCIe 32Gi
		{"NVIDIA-RTX-A6000", "49140", "rtxa6000", "48Gi", "pcie"},                                         // 10de:2230 rtxa6000 PCIe 48Gi
		{"NVIDIA-RTX-A5000", "24564", "a5000", "24Gi", "pcie"},                                            // 10de:2231 a5000 PCIe 24Gi
		{"NVIDIA-RTX-A2000", "6138", "rtxa2000", "6Gi", "pcie"},                                           // 10de:2531 rtxa2000 PCIe 6Gi
		{"NVIDIA-RTX-4000-SFF-Ada-Generation", "20475", "rtx4000sada", "20Gi", "pcie"},                    // 10de:27b0 rtx4000sada PCIe 20Gi
		{"NVIDIA-RTX-4000-Ada-Generation", "20475", "rtx4000ada", "20Gi", "pcie"},                         // 10de:27b2 rtx4000ada PCIe 20Gi
		{"NVIDIA-RTX-2000E-Ada-Generation", "16380", "rtx2000eada", "16Gi", "pcie"},                       // 10de:28b0 rtx2000eada PCIe 16Gi
		{"NVIDIA-RTX-6000-Ada-Generation", "49140", "rtx6000ada", "48Gi", "pcie"},                         // not listed (rtx6000 is the Quadro RTX 6000); as 27b2 rtx4000ada
		{"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "97887", "pro6000se", "96Gi", "pcie"},            // 10de:2bb5 pro6000se PCIe 96Gi
		{"NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", "97887", "pro6000we", "96Gi", "pcie"},       // 10de:2bb1 pro6000we PCIe 96Gi
		{"NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", "97887", "pro6000mq", "96Gi", "pcie"}, // 10de:2bb4 pro6000mq PCIe 96Gi
	} {
		t.Run(c.product, func(t *testing.T) {
			g := inventory.DescribeGPU(gfd(c.product, c.memory, "1"), gpus(1), inventory.GPUOptions{})
			if g == nil || g.Offered != 1 || g.Message != "" {
				t.Fatalf("want one offered GPU, got %+v", g)
			}
			if got, want := inventory.Model(g), (gpu.Model{Vendor: "nvidia", Model: c.model, RAM: c.ram, Interface: c.iface}); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
			if _, invalid := inventory.Capabilities(g, nil); len(invalid) > 0 {
				t.Errorf("invalid capability labels %q", invalid)
			}
		})
	}
}

// GFD's memory label is the usable memory, a little under the size the card is sold
// with, which SDLs ask for; sizes near none stay as they are.
func TestDescribeGPUMarketedRAM(t *testing.T) {
	for _, c := range []struct{ memory, ram string }{
		{"15360", "16Gi"}, {"23028", "24Gi"}, {"46068", "48Gi"}, {"143771", "141Gi"}, {"183359", "192Gi"},
		{"81251", "80Gi"}, {"95830", "94Gi"}, {"97871", "96Gi"}, {"10240", "10Gi"}, {"11264", "11Gi"},
		{"275040", "288Gi"}, {"22528", "22Gi"}, {"14336", "14Gi"}, {"1000000", "977Gi"}, {"1024", "1Gi"}, {"511", ""}, {"600", "1Gi"},
	} {
		g := inventory.DescribeGPU(gfd("NVIDIA-Z9", c.memory, "1"), gpus(1), inventory.GPUOptions{})
		if g.RAM != c.ram || g.Offered != 1 {
			t.Errorf("%s MiB: RAM %q, want %q (%+v)", c.memory, g.RAM, c.ram, *g)
		}
	}
}

func TestModel(t *testing.T) {
	if m := inventory.Model(nil); m != (gpu.Model{}) {
		t.Errorf("Model(nil) = %v", m)
	}
	if m := inventory.Model(&berthv1.InventoryGPU{Vendor: "nvidia", Devices: 4, PCIDevice: "10de:2330"}); m != (gpu.Model{}) {
		t.Errorf("Model of an unnamed card = %v", m)
	}
	g := &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 8, Offered: 8}
	if m, want := inventory.Model(g), (gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}); m != want {
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
	f.Add("NVIDIA-GH200-480GB", "97871", "1", "", "", "", uint16(1), uint16(0), false)
	f.Add("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", "97887", "2", "", "", "", uint16(2), uint16(0), false)
	f.Add("NVIDIA-Jetson-AGX-Orin", "65536", "1", "", "", "", uint16(1), uint16(0), false)
	f.Add("NVIDIA-H100-PCIe-MIG-1g.10gb", "9984", "14", "", "", "", uint16(14), uint16(0), false)
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
