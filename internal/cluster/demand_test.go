package cluster

import (
	"math"
	"strings"
	"testing"

	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/sdl"
)

func TestParseGPUProduct(t *testing.T) {
	for _, tc := range []struct {
		product string
		want    GPUModel
	}{
		// Akash's names: akash-network/provider-configs devices/pcie/gpus.json (10de:<device>;
		// "PR #n" proposed there, not merged; "not listed": no entry).
		{"NVIDIA-A100-SXM4-80GB", GPUModel{"nvidia", "a100", "80Gi", "sxm"}},                                     // 10de:20b2 SXM4
		{"NVIDIA-A100-PCIE-40GB", GPUModel{"nvidia", "a100", "40Gi", "pcie"}},                                    // 10de:20b1 PCIe
		{"NVIDIA-H100-80GB-HBM3", GPUModel{"nvidia", "h100", "80Gi", "sxm"}},                                     // 10de:2330 SXM5
		{"NVIDIA-H100-PCIe", GPUModel{"nvidia", "h100", "", "pcie"}},                                             // 10de:2331 PCIe
		{"NVIDIA-GeForce-RTX-4090", GPUModel{"nvidia", "rtx4090", "", "pcie"}},                                   // 10de:2684 PCIe
		{"Tesla-T4", GPUModel{"nvidia", "t4", "", "pcie"}},                                                       // 10de:1eb8 PCIe
		{"NVIDIA-RTX-A6000", GPUModel{"nvidia", "rtxa6000", "", "pcie"}},                                         // 10de:2230 rtxa6000
		{"NVIDIA-RTX-A5000", GPUModel{"nvidia", "a5000", "", "pcie"}},                                            // 10de:2231 a5000
		{"NVIDIA H100 NVL", GPUModel{"nvidia", "h100nvl", "", "pcie"}},                                           // PR #91: 10de:2321 h100nvl PCIe
		{"NVIDIA-H200", GPUModel{"nvidia", "h200", "", "sxm"}},                                                   // 10de:2335 h200 SXM5
		{"NVIDIA-H200-NVL", GPUModel{"nvidia", "h200nvl", "", "pcie"}},                                           // 10de:233b h200nvl PCIe
		{"NVIDIA-B200", GPUModel{"nvidia", "b200", "", "sxm"}},                                                   // PR #92: 10de:2901 b200 SXM6
		{"NVIDIA-B100", GPUModel{"nvidia", "b100", "", "sxm"}},                                                   // not listed; HGX only
		{"NVIDIA-GH200-480GB", GPUModel{"nvidia", "gh200", "480Gi", ""}},                                         // not listed; a superchip
		{"NVIDIA-L40S", GPUModel{"nvidia", "l40s", "", "pcie"}},                                                  // PR #92: 10de:26b9 l40s PCIe
		{"NVIDIA-GeForce-RTX-4070-SUPER", GPUModel{"nvidia", "rtx4070s", "", "pcie"}},                            // 10de:2783 rtx4070s
		{"NVIDIA-GeForce-RTX-2060-SUPER", GPUModel{"nvidia", "rtx2060s", "", "pcie"}},                            // 10de:1f06 rtx2060s
		{"NVIDIA-GeForce-RTX-2070-SUPER", GPUModel{"nvidia", "rtx2070s", "", "pcie"}},                            // 10de:1e84 rtx2070s
		{"NVIDIA-GeForce-RTX-2080-SUPER", GPUModel{"nvidia", "rtx2080s", "", "pcie"}},                            // 10de:1e81 rtx2080s
		{"NVIDIA-GeForce-GTX-1650-SUPER", GPUModel{"nvidia", "gtx1650s", "", "pcie"}},                            // 10de:2187 gtx1650s
		{"NVIDIA-GeForce-RTX-3060-Laptop-GPU", GPUModel{"nvidia", "rtx3060m", "", "pcie"}},                       // 10de:2520 rtx3060m
		{"NVIDIA GeForce RTX 5090 Laptop GPU", GPUModel{"nvidia", "rtx5090m", "", "pcie"}},                       // 10de:2c58 rtx5090m
		{"NVIDIA-RTX-4000-SFF-Ada-Generation", GPUModel{"nvidia", "rtx4000sada", "", "pcie"}},                    // 10de:27b0 rtx4000sada
		{"NVIDIA-RTX-4000-Ada-Generation", GPUModel{"nvidia", "rtx4000ada", "", "pcie"}},                         // 10de:27b2 rtx4000ada
		{"NVIDIA-RTX-6000-Ada-Generation", GPUModel{"nvidia", "rtx6000ada", "", "pcie"}},                         // not listed; as 27b2
		{"Quadro-RTX-6000", GPUModel{"nvidia", "rtx6000", "", "pcie"}},                                           // 10de:1e30 rtx6000
		{"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", GPUModel{"nvidia", "pro6000se", "", "pcie"}},            // 10de:2bb5
		{"NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", GPUModel{"nvidia", "pro6000we", "", "pcie"}},       // 10de:2bb1
		{"NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", GPUModel{"nvidia", "pro6000mq", "", "pcie"}}, // 10de:2bb4
		{"Tesla-V100-SXM2-32GB", GPUModel{"nvidia", "v100", "32Gi", "sxm"}},                                      // 10de:1db5 SXM2
		// Words that are no part of a model only once it has begun.
		{"SUPER", GPUModel{"nvidia", "super", "", "pcie"}},
		{"NVIDIA-80GB", GPUModel{"nvidia", "", "80Gi", ""}},
		{"", GPUModel{"nvidia", "", "", ""}},
	} {
		if got := ParseGPUProduct(tc.product); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.product, got, tc.want)
		}
	}
}

func TestParseGPUAttributes(t *testing.T) {
	got, err := ParseGPUAttributes(market.Attributes{
		{Key: "vendor/nvidia/model/a100/ram/80Gi/interface/sxm", Value: "true"},
		{Key: "vendor/nvidia/model/*", Value: "true"},
	})
	if err != nil || len(got) != 2 || got[0] != (GPUModel{"nvidia", "a100", "80Gi", "sxm"}) || got[1].Model != "*" {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"vendor/nvidia", "model/a100/vendor/nvidia", "vendor/nvidia/model/a100/ram", "vendor/nvidia/model/a100/color/red", "vendor//model/a100"} {
		if _, err := ParseGPUAttributes(market.Attributes{{Key: bad, Value: "true"}}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

const demandSDL = `
version: "2.0"
services:
  web:
    image: nginx
    params:
      storage:
        data: {mount: /data}
        shm: {mount: /dev/shm}
    expose:
      - port: 80
        to: [{global: true}]
      - port: 5000
        proto: udp
        to: [{global: true}]
      - port: 6000
        as: 6000
        to: [{global: true, ip: pub}]
      - port: 6001
        as: 6001
        to: [{global: true, ip: pub}]
endpoints:
  pub: {kind: ip}
profiles:
  compute:
    web:
      resources:
        cpu: {units: 0.5}
        memory: {size: 512Mi}
        storage:
          - size: 1Gi
          - {name: data, size: 10Gi, attributes: {persistent: true, class: beta3}}
          - {name: shm, size: 256Mi, attributes: {class: ram}}
        gpu:
          units: 1
          attributes: {vendor: {nvidia: [{model: a100, ram: 80Gi}, {model: h100}]}}
  placement:
    dc:
      pricing:
        web: {denom: uakt, amount: 1000}
deployment:
  web:
    dc: {profile: web, count: 3}
`

// TestDemandOf: every global port other than HTTP on 80 takes a node port (Akash gives
// the leased-IP ports one too), the IP endpoint counts once.
func TestDemandOf(t *testing.T) {
	res, _, err := sdl.Parse([]byte(demandSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := DemandOf(res.Groups[0], Overcommit{})
	if err != nil {
		t.Fatal(err)
	}
	u := d.Units[0]
	if u.Count != 3 || u.Each != (Amounts{CPU: 500, Memory: 768 << 20, EphemeralStorage: 1 << 30, GPUs: 1, Pods: 1}) {
		t.Fatalf("unit %+v", u)
	}
	if len(u.GPUs) != 2 || u.GPUs[0] != (GPUModel{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}) {
		t.Fatalf("gpus %+v", u.GPUs)
	}
	if d.Storage["beta3"] != 30<<30 || d.NodePorts != 3 || d.LeasedIPs != 1 {
		t.Fatalf("demand %+v", d)
	}
}

func TestLeaseLabelsRoundTrip(t *testing.T) {
	id := market.LeaseID{Owner: "akash1owner", DSeq: 42, GSeq: 2, OSeq: 3, Provider: "akash1prov"}
	got, ok := LeaseFromLabels(LeaseLabels(id, "chain-a"))
	if !ok || got != id {
		t.Fatalf("%+v %v", got, ok)
	}
	l := LeaseLabels(id, "chain-a")
	l[LabelDSeq] = "x"
	if _, ok := LeaseFromLabels(l); ok {
		t.Fatal("a bad dseq label parsed")
	}
}

// TestOwner: a provider on a chain owns its objects only: not another provider's, not
// its own on another chain; objects written before the chain ID was recorded are its.
func TestOwner(t *testing.T) {
	me := Owner{Provider: "akash1prov", ChainID: "chain-a"}
	id := market.LeaseID{Owner: "akash1owner", DSeq: 42, GSeq: 2, OSeq: 3, Provider: me.Provider}
	legacy := LeaseLabels(id, "")
	delete(legacy, LabelChainID)
	otherProvider := id
	otherProvider.Provider = "akash1rival"
	for _, c := range []struct {
		name   string
		labels map[string]string
		owns   bool
	}{
		{"ours", me.LeaseLabels(id), true},
		{"ours before chain IDs were recorded", legacy, true},
		{"ours on another chain", LeaseLabels(id, "chain-b"), false},
		{"another provider's", LeaseLabels(otherProvider, "chain-a"), false},
		{"not berth's", map[string]string{LabelProvider: me.Provider}, false},
	} {
		if got := me.Owns(c.labels); got != c.owns {
			t.Errorf("%s: Owns = %v", c.name, got)
		}
		if got, ok := me.LeaseOf(c.labels); ok != c.owns || (ok && got != id) {
			t.Errorf("%s: LeaseOf = %v %v", c.name, got, ok)
		}
	}
	if err := me.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Owner{{Provider: me.Provider}, {ChainID: "x"}, {Provider: me.Provider, ChainID: "bad chain"}, {Provider: me.Provider, ChainID: strings.Repeat("c", 64)}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if got := me.Selector(); got != "berth.dev/managed=true,berth.dev/provider=akash1prov" {
		t.Fatalf("selector %q", got)
	}
}

func FuzzParseGPUProduct(f *testing.F) {
	for _, s := range []string{"NVIDIA-A100-SXM4-80GB", "Tesla-T4", "", "---", "80gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := ParseGPUProduct(s)
		if g.Vendor != "nvidia" || strings.ContainsAny(g.Model, "-_ ") || g.Interface != "" && g.Interface != "pcie" && g.Interface != "sxm" {
			t.Fatalf("%q → %+v", s, g)
		}
	})
}

func FuzzParseGPUAttributes(f *testing.F) {
	for _, s := range []string{"vendor/nvidia/model/a100", "vendor/nvidia/model/*/ram/80Gi", "vendor/x/model/y/interface/sxm", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		gs, err := ParseGPUAttributes(market.Attributes{{Key: key, Value: "true"}})
		if err == nil && (len(gs) != 1 || gs[0].Vendor == "" || gs[0].Model == "") {
			t.Fatalf("%q → %+v", key, gs)
		}
	})
}

func TestOvercommitRequest(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		pct   uint32
		want  int64
	}{
		{1000, 0, 1000}, {1000, 100, 500}, {1000, 25, 800}, {1, 100, 1}, {3, 100, 2}, {0, 100, 0}, {1000, 5000, 91},
	} {
		if got := Request(tc.limit, tc.pct); got != tc.want {
			t.Errorf("Request(%d, %d%%) = %d, want %d", tc.limit, tc.pct, got, tc.want)
		}
	}
	// With 100% CPU overcommit a 4-CPU node takes two 4-CPU replicas.
	f, _, err := sdl.Parse([]byte(demandSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := DemandOf(f.Groups[0], Overcommit{CPU: 100, Memory: 50, Storage: 100})
	if err != nil {
		t.Fatal(err)
	}
	if e := d.Units[0].Each; e.CPU != 250 || e.Memory != (768<<20)*2/3 || e.EphemeralStorage != 512<<20 || e.GPUs != 1 {
		t.Fatalf("overcommitted unit %s", e)
	}
	if d.Storage["beta3"] != 15<<30 {
		t.Fatalf("overcommitted pool %d", d.Storage["beta3"])
	}
}

// TestDemandOfLimits: the largest quantities SDL allows are taken (a 32 TiB volume, 2 TiB
// of memory), while counts that take a group's total out of range are refused.
func TestDemandOfLimits(t *testing.T) {
	unit := func(storage, memory uint64, count uint32) market.GroupSpec {
		return market.GroupSpec{Name: "g", Resources: []market.ResourceUnit{{
			Count: count,
			Resources: market.Resources{
				ID:     1,
				CPU:    &market.CPU{Units: market.ResourceValue{Val: 1000}},
				Memory: &market.Memory{Size: market.ResourceValue{Val: market.Uint(memory)}},
				Storage: []market.Storage{{Name: "data", Size: market.ResourceValue{Val: market.Uint(storage)},
					Attributes: market.Attributes{{Key: market.StorageAttributeClass, Value: "beta3"}, {Key: market.StorageAttributePersistent, Value: "true"}}}},
			},
		}}}
	}
	d, err := DemandOf(unit(32<<40, 2<<40, 2), Overcommit{})
	if err != nil {
		t.Fatalf("the largest SDL quantities: %v", err)
	}
	if d.Storage["beta3"] != 64<<40 || d.Units[0].Each.Memory != 2<<40 {
		t.Fatalf("demand %+v", d)
	}
	for name, g := range map[string]market.GroupSpec{
		"quantity over 64 TiB":    unit(65<<40, 1<<30, 1),
		"storage total overflows": unit(32<<40, 1<<30, 1<<20),
		"memory total overflows":  unit(1<<30, 2<<40, 1<<30),
		"count at uint32's limit": unit(1<<40, 1<<40, math.MaxUint32),
	} {
		if _, err := DemandOf(g, Overcommit{}); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s: err = %v, want out of range", name, err)
		}
	}
}
