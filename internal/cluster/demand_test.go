package cluster

import (
	_ "embed"
	"math"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/sdl"
)

//go:embed testdata/demand.sdl.yaml
var demandSDL string

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
	if len(u.GPUs) != 2 || u.GPUs[0] != (gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}) {
		t.Fatalf("gpus %+v", u.GPUs)
	}
	if d.Storage["beta3"] != 30<<30 || d.NodePorts != 3 || d.LeasedIPs != 1 {
		t.Fatalf("demand %+v", d)
	}
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
