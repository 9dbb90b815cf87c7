package bidengine

import (
	_ "embed"
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/sdl"
)

func dec(t testing.TB, s string) market.Dec {
	t.Helper()
	d, err := market.ParseDec(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

//go:embed testdata/gpu.sdl.yaml
var gpuSDL string

func gpuRequest(t *testing.T) Request {
	t.Helper()
	res, _, err := sdl.Parse([]byte(gpuSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Groups[0]
	r, err := NewRequest("akash1tenant", g, map[uint32]GPU{g.Resources[0].Resources.ID: {Vendor: "nvidia", Model: "a100", RAM: "80Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRequest(t *testing.T) {
	r := gpuRequest(t)
	if len(r.Units) != 1 {
		t.Fatalf("units %+v", r.Units)
	}
	u := r.Units[0]
	want := Unit{Count: 3, CPUMillis: 2000, MemoryBytes: 8 << 30, Endpoints: 2, LeasedIPs: 1, GPUs: 2, GPU: GPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}}
	if u.Count != want.Count || u.CPUMillis != want.CPUMillis || u.MemoryBytes != want.MemoryBytes || u.Endpoints != want.Endpoints ||
		u.LeasedIPs != want.LeasedIPs || u.GPUs != want.GPUs || u.GPU != want.GPU {
		t.Fatalf("unit %+v, want %+v", u, want)
	}
	// The order's entry: vendor/nvidia/model/a100/ram/80Gi.
	if asked := (GPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}); u.GPUAsked != asked {
		t.Fatalf("GPU asked %+v, want %+v", u.GPUAsked, asked)
	}
	classes := map[string]uint64{}
	for _, s := range u.Storage {
		classes[s.Class] = s.Bytes
	}
	if classes[ClassEphemeral] != 1<<30 || classes["beta3"] != 10<<30 || classes[ClassRAM] != 512<<20 {
		t.Fatalf("storage %+v", u.Storage)
	}
	if r.MaxPrice.Denom != "uakt" || r.MaxPrice.Amount.Cmp(market.NewDec(300000)) != 0 {
		t.Fatalf("max price %s", r.MaxPrice)
	}
	res, _, err := sdl.Parse([]byte(gpuSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u0 := res.Groups[0].Resources[0].Resources.ID
	if _, err := NewRequest("o", res.Groups[0], nil); err == nil {
		t.Fatal("a GPU unit without a reserved model was priced")
	}
	if _, err := NewRequest("o", res.Groups[0], map[uint32]GPU{u0: {Vendor: "nvidia", Model: "a100", RAM: "40Gi"}}); err == nil ||
		!strings.Contains(err.Error(), "the reserved GPU nvidia/a100/ram/40Gi is not one the order accepts") {
		t.Fatalf("a reserved GPU the order does not accept: %v", err)
	}
}

func rates(t *testing.T) *ScaleRates {
	t.Helper()
	s := &ScaleRates{
		Denom:    "uakt",
		CPU:      dec(t, "1.5"),  // per millicpu
		Memory:   dec(t, "0.25"), // per MiB
		Storage:  map[string]market.Dec{ClassEphemeral: dec(t, "0.01"), "beta3": dec(t, "0.02"), ClassRAM: dec(t, "0.001")},
		Endpoint: dec(t, "10"),
		LeasedIP: dec(t, "100"),
		GPU:      map[string]market.Dec{"A100": dec(t, "20000"), "*": dec(t, "5000")},
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScalePrice(t *testing.T) {
	s := rates(t)
	r := gpuRequest(t)
	price, err := s.Price(r)
	if err != nil {
		t.Fatal(err)
	}
	// Port 80 is a shared HTTP endpoint; port 9000 a random port and a leased-IP port.
	// Per replica: 2000×1.5 + 8192×0.25 + 1024×0.01 + 10240×0.02 + 512×0.001
	//              + 2×10 + 1×100 + 2×20000 = 3000 + 2048 + 10.24 + 204.8 + 0.512
	//              + 20 + 100 + 40000 = 45383.552; three replicas: 136150.656.
	if want := dec(t, "136150.656"); price.Amount.Cmp(want) != 0 || price.Denom != "uakt" {
		t.Fatalf("price %s, want %suakt", price, want)
	}

	// Another model takes the "*" rate: 2×5000 instead of 2×20000 per replica.
	r.Units[0].GPU.Model = "h100"
	price, err = s.Price(r)
	if err != nil || price.Amount.Cmp(dec(t, "46150.656")) != 0 {
		t.Fatalf("h100: %s %v", price, err)
	}
}

// TestScaleExchange prices orders in other denominations at the configured rate, the
// same resources costing rate times as many units, and bids in the order's denomination.
func TestScaleExchange(t *testing.T) {
	s := rates(t)
	s.Exchange = map[string]market.Dec{"uact": dec(t, "1.25"), "uakt": market.NewDec(1)}
	r := gpuRequest(t)
	r.MaxPrice = market.DecCoin{Amount: market.NewDec(1_000_000), Denom: "uact"}
	price, err := s.Price(r)
	// 136150.656 uakt (TestScalePrice) × 1.25 = 170188.32 uact.
	if err != nil || price.Denom != "uact" || price.Amount.Cmp(dec(t, "170188.32")) != 0 {
		t.Fatalf("uact order: %s %v, want 170188.32uact", price, err)
	}
	// The converted price is what is checked against the order's.
	r.MaxPrice.Amount = dec(t, "170188.31")
	var nb *NoBid
	if _, err := s.Price(r); !errors.As(err, &nb) || nb.Reason != ReasonPriceAboveMax {
		t.Fatalf("uact order below our converted price: %v", err)
	}
	// The rates' own denomination is never converted.
	r.MaxPrice = market.DecCoin{Amount: market.NewDec(1_000_000), Denom: "uakt"}
	if price, err := s.Price(r); err != nil || price.Denom != "uakt" || price.Amount.Cmp(dec(t, "136150.656")) != 0 {
		t.Fatalf("uakt order: %s %v", price, err)
	}
	// Rates below 1 convert down, truncated to 18 decimals like every price
	// (136150.656 × 0.333333333333333333 = 45383.551999999999954616448).
	s.Exchange["uact"] = dec(t, "0.333333333333333333")
	r.MaxPrice = market.DecCoin{Amount: market.NewDec(1_000_000), Denom: "uact"}
	if price, err := s.Price(r); err != nil || price.Amount.Cmp(dec(t, "45383.551999999999954616")) != 0 {
		t.Fatalf("uact at a third: %s %v", price, err)
	}
}

func TestScalePricer(t *testing.T) {
	var p Pricer = &ScalePricer{Rates: *rates(t)}
	price, err := p.Price(t.Context(), gpuRequest(t))
	if err != nil || price.Amount.Cmp(dec(t, "136150.656")) != 0 {
		t.Fatalf("price %s %v", price, err)
	}
}

func TestScaleExactDecimals(t *testing.T) {
	s := &ScaleRates{Denom: "uakt", Memory: dec(t, "0.000000000000000003"), CPU: market.Dec{}, Storage: map[string]market.Dec{}}
	r := Request{MaxPrice: market.DecCoin{Amount: market.NewDec(1), Denom: "uakt"},
		Units: []Unit{{Count: 1, MemoryBytes: 3 << 20}, {Count: 1, MemoryBytes: 1 << 19}}}
	// 3 MiB × 3e-18 = 9e-18; half a MiB × 3e-18 = 1.5e-18, truncated to 1e-18.
	price, err := s.Price(r)
	if err != nil || price.Amount.Cmp(dec(t, "0.00000000000000001")) != 0 {
		t.Fatalf("price %s %v", price, err)
	}
}

func TestNoBidReasons(t *testing.T) {
	s := rates(t)
	tests := []struct {
		name   string
		change func(*Request, *ScaleRates)
		reason string
	}{
		{"other denom", func(r *Request, _ *ScaleRates) { r.MaxPrice.Denom = "uusdc" }, ReasonDenom},
		{"denom without a rate", func(r *Request, s *ScaleRates) {
			s.Exchange = map[string]market.Dec{"uact": market.NewDec(1)}
			r.MaxPrice.Denom = "uusdc"
		}, ReasonDenom},
		{"unpriced class", func(_ *Request, s *ScaleRates) { delete(s.Storage, "beta3") }, ReasonStorageClass},
		{"unpriced gpu", func(r *Request, s *ScaleRates) { r.Units[0].GPU.Model = "h100"; delete(s.GPU, "*") }, ReasonGPUModel},
		{"above the order", func(r *Request, _ *ScaleRates) { r.MaxPrice.Amount = market.NewDec(100000) }, ReasonPriceAboveMax},
		{"free", func(r *Request, s *ScaleRates) {
			*s = ScaleRates{Denom: "uakt"}
			r.Units[0].GPUs = 0
			r.Units[0].Storage = nil
		}, ReasonPriceNotPositive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gpuRequest(t)
			sc := *s
			sc.Storage = map[string]market.Dec{}
			for k, v := range s.Storage {
				sc.Storage[k] = v
			}
			sc.GPU = map[string]market.Dec{}
			for k, v := range s.GPU {
				sc.GPU[k] = v
			}
			tt.change(&r, &sc)
			_, err := sc.Price(r)
			var nb *NoBid
			if !errors.As(err, &nb) || nb.Reason != tt.reason || nb.Detail == "" {
				t.Fatalf("error %v, want a no-bid with reason %s", err, tt.reason)
			}
		})
	}
}

func TestValidateRates(t *testing.T) {
	for name, s := range map[string]ScaleRates{
		"bad denom":      {Denom: "u"},
		"negative cpu":   {Denom: "uakt", CPU: market.NewDec(-1)},
		"negative gpu":   {Denom: "uakt", GPU: map[string]market.Dec{"a100": market.NewDec(-1)}},
		"empty gpu key":  {Denom: "uakt", GPU: map[string]market.Dec{" ": market.NewDec(1)}},
		"negative class": {Denom: "uakt", Storage: map[string]market.Dec{"beta3": market.NewDec(-2)}},
		"zero exchange":  {Denom: "uakt", Exchange: map[string]market.Dec{"uact": {}}},
		"bad exchange":   {Denom: "uakt", Exchange: map[string]market.Dec{"u": market.NewDec(1)}},
		"own rate not 1": {Denom: "uakt", Exchange: map[string]market.Dec{"uakt": market.NewDec(2)}},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
