package bidengine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine/bidtest"
)

// benchOrders is a mix: mostly web services, 10% GPU, 5% persistent storage, 10% that
// ask for an attribute we lack (declined before any capacity is looked at).
func benchOrders() []market.GroupSpec {
	region := market.Attributes{{Key: "region", Value: "us-west"}}
	var out []market.GroupSpec
	for i := range 100 {
		switch {
		case i%10 == 0:
			out = append(out, groupSpec(nil, unitSpec{Count: 1, CPU: 4000, Mem: 32 * gib, GPUs: 2, GPUAttrs: market.Attributes{{Key: "vendor/nvidia/model/a100", Value: "true"}}}))
		case i%20 == 1:
			out = append(out, groupSpec(region, unitSpec{Count: 2, CPU: 1000, Mem: 2 * gib, Persist: "beta3"}))
		case i%10 == 2:
			out = append(out, groupSpec(market.Attributes{{Key: "region", Value: "eu-central"}}, web))
		default:
			out = append(out, groupSpec(region, unitSpec{Count: uint32(1 + i%4), CPU: uint64(250 * (1 + i%8)), Mem: uint64(1+i%4) * gib / 2}))
		}
	}
	return out
}

// BenchmarkDecide measures the decision core on a 1,000-node inventory: eligibility,
// budget, demand, reservation (greedy placement over every node), pricing, and the
// release of the reservation when the bid ends. Run it on one core:
//
//	go test ./internal/bidengine -run XXX -bench Decide -cpu 1
func BenchmarkDecide(b *testing.B) {
	for _, bc := range []struct {
		name   string
		pricer func(b *testing.B) Pricer
	}{
		{"scale", func(b *testing.B) Pricer { return &ScalePricer{Rates: *engineRates(b)} }},
		{"script", func(b *testing.B) Pricer {
			dir := b.TempDir()
			path := filepath.Join(dir, "price.sh")
			if err := os.WriteFile(path, []byte("#!/bin/sh\necho 1\n"), 0o700); err != nil {
				b.Fatal(err)
			}
			p, err := NewScriptPricer(ScriptConfig{Path: path})
			if err != nil {
				b.Fatal(err)
			}
			return p
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newTestEngine(b, EngineConfig{
				Provider: us, Pricer: bc.pricer(b), Deposit: market.Coin{Amount: 5000000, Denom: "uakt"}, BidTimeout: time.Minute,
				Policy: Policy{Attributes: market.Attributes{
					{Key: "region", Value: "us-west"},
					{Key: "capabilities/storage/1/class", Value: "beta3"}, {Key: "capabilities/storage/1/persistent", Value: "true"},
					{Key: "capabilities/gpu/vendor/nvidia/model/a100", Value: "true"},
				}},
			}, bidtest.Capacity1000())
			specs := benchOrders()
			ended := errors.New("bid ended")
			bids := 0
			i := 0
			for b.Loop() {
				o := openOrder(uint64(i+1), specs[i%len(specs)])
				m, err := e.Decide(b.Context(), o, t0)
				if err != nil {
					b.Fatal(err)
				}
				if m != nil {
					bids++
					e.BidSent(o.ID, ended, t0) // the reservation is released
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(bids)/float64(b.N)*100, "bid-%")
		})
	}
}
