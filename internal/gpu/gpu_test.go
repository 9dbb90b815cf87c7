package gpu

import (
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

func TestParseProduct(t *testing.T) {
	for _, tc := range []struct {
		product string
		want    Model
	}{
		// Akash's names: akash-network/provider-configs devices/pcie/gpus.json (10de:<device>;
		// "PR #n" proposed there, not merged; "not listed": no entry).
		{"NVIDIA-A100-SXM4-80GB", Model{"nvidia", "a100", "80Gi", "sxm"}},                                     // 10de:20b2 SXM4
		{"NVIDIA-A100-PCIE-40GB", Model{"nvidia", "a100", "40Gi", "pcie"}},                                    // 10de:20b1 PCIe
		{"NVIDIA-H100-80GB-HBM3", Model{"nvidia", "h100", "80Gi", "sxm"}},                                     // 10de:2330 SXM5
		{"NVIDIA-H100-PCIe", Model{"nvidia", "h100", "", "pcie"}},                                             // 10de:2331 PCIe
		{"NVIDIA-GeForce-RTX-4090", Model{"nvidia", "rtx4090", "", "pcie"}},                                   // 10de:2684 PCIe
		{"Tesla-T4", Model{"nvidia", "t4", "", "pcie"}},                                                       // 10de:1eb8 PCIe
		{"NVIDIA-RTX-A6000", Model{"nvidia", "rtxa6000", "", "pcie"}},                                         // 10de:2230 rtxa6000
		{"NVIDIA-RTX-A5000", Model{"nvidia", "a5000", "", "pcie"}},                                            // 10de:2231 a5000
		{"NVIDIA H100 NVL", Model{"nvidia", "h100nvl", "", "pcie"}},                                           // PR #91: 10de:2321 h100nvl PCIe
		{"NVIDIA-H200", Model{"nvidia", "h200", "", "sxm"}},                                                   // 10de:2335 h200 SXM5
		{"NVIDIA-H200-NVL", Model{"nvidia", "h200nvl", "", "pcie"}},                                           // 10de:233b h200nvl PCIe
		{"NVIDIA-B200", Model{"nvidia", "b200", "", "sxm"}},                                                   // PR #92: 10de:2901 b200 SXM6
		{"NVIDIA-B100", Model{"nvidia", "b100", "", "sxm"}},                                                   // not listed; HGX only
		{"NVIDIA-GH200-480GB", Model{"nvidia", "gh200", "480Gi", ""}},                                         // not listed; a superchip
		{"NVIDIA-L40S", Model{"nvidia", "l40s", "", "pcie"}},                                                  // PR #92: 10de:26b9 l40s PCIe
		{"NVIDIA-GeForce-RTX-4070-SUPER", Model{"nvidia", "rtx4070s", "", "pcie"}},                            // 10de:2783 rtx4070s
		{"NVIDIA-GeForce-RTX-2060-SUPER", Model{"nvidia", "rtx2060s", "", "pcie"}},                            // 10de:1f06 rtx2060s
		{"NVIDIA-GeForce-RTX-2070-SUPER", Model{"nvidia", "rtx2070s", "", "pcie"}},                            // 10de:1e84 rtx2070s
		{"NVIDIA-GeForce-RTX-2080-SUPER", Model{"nvidia", "rtx2080s", "", "pcie"}},                            // 10de:1e81 rtx2080s
		{"NVIDIA-GeForce-GTX-1650-SUPER", Model{"nvidia", "gtx1650s", "", "pcie"}},                            // 10de:2187 gtx1650s
		{"NVIDIA-GeForce-RTX-3060-Laptop-GPU", Model{"nvidia", "rtx3060m", "", "pcie"}},                       // 10de:2520 rtx3060m
		{"NVIDIA GeForce RTX 5090 Laptop GPU", Model{"nvidia", "rtx5090m", "", "pcie"}},                       // 10de:2c58 rtx5090m
		{"NVIDIA-RTX-4000-SFF-Ada-Generation", Model{"nvidia", "rtx4000sada", "", "pcie"}},                    // 10de:27b0 rtx4000sada
		{"NVIDIA-RTX-4000-Ada-Generation", Model{"nvidia", "rtx4000ada", "", "pcie"}},                         // 10de:27b2 rtx4000ada
		{"NVIDIA-RTX-6000-Ada-Generation", Model{"nvidia", "rtx6000ada", "", "pcie"}},                         // not listed; as 27b2
		{"Quadro-RTX-6000", Model{"nvidia", "rtx6000", "", "pcie"}},                                           // 10de:1e30 rtx6000
		{"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", Model{"nvidia", "pro6000se", "", "pcie"}},            // 10de:2bb5
		{"NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", Model{"nvidia", "pro6000we", "", "pcie"}},       // 10de:2bb1
		{"NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", Model{"nvidia", "pro6000mq", "", "pcie"}}, // 10de:2bb4
		{"Tesla-V100-SXM2-32GB", Model{"nvidia", "v100", "32Gi", "sxm"}},                                      // 10de:1db5 SXM2
		// Words that are no part of a model only once it has begun.
		{"SUPER", Model{"nvidia", "super", "", "pcie"}},
		{"NVIDIA-80GB", Model{"nvidia", "", "80Gi", ""}},
		{"", Model{"nvidia", "", "", ""}},
	} {
		if got := ParseProduct(tc.product); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.product, got, tc.want)
		}
	}
}

func TestParseAttributes(t *testing.T) {
	got, err := ParseAttributes(market.Attributes{
		{Key: "vendor/nvidia/model/a100/ram/80Gi/interface/sxm", Value: "true"},
		{Key: "vendor/nvidia/model/*", Value: "true"},
	})
	if err != nil || len(got) != 2 || got[0] != (Model{"nvidia", "a100", "80Gi", "sxm"}) || got[1].Model != "*" {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"vendor/nvidia", "model/a100/vendor/nvidia", "vendor/nvidia/model/a100/ram", "vendor/nvidia/model/a100/color/red", "vendor//model/a100"} {
		if _, err := ParseAttributes(market.Attributes{{Key: bad, Value: "true"}}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseProduct(f *testing.F) {
	for _, s := range []string{"NVIDIA-A100-SXM4-80GB", "Tesla-T4", "", "---", "80gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := ParseProduct(s)
		if g.Vendor != "nvidia" || strings.ContainsAny(g.Model, "-_ ") || g.Interface != "" && g.Interface != "pcie" && g.Interface != "sxm" {
			t.Fatalf("%q → %+v", s, g)
		}
	})
}

func FuzzParseAttributes(f *testing.F) {
	for _, s := range []string{"vendor/nvidia/model/a100", "vendor/nvidia/model/*/ram/80Gi", "vendor/x/model/y/interface/sxm", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		gs, err := ParseAttributes(market.Attributes{{Key: key, Value: "true"}})
		if err == nil && (len(gs) != 1 || gs[0].Vendor == "" || gs[0].Model == "") {
			t.Fatalf("%q → %+v", key, gs)
		}
	})
}
