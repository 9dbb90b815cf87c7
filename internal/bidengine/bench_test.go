package bidengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/testenv"
)

// benchCapacity is a 1,000-node cluster: 900 CPU nodes and 100 nodes with 8 A100s.
func benchCapacity() *cluster.Capacity {
	c := cluster.NewCapacity()
	for i := range 900 {
		c.SetNode(cluster.Node{Name: fmt.Sprintf("cpu-%04d", i), Schedulable: true,
			Allocatable: cluster.Amounts{CPU: 32000, Memory: 128 * gib, EphemeralStorage: 1000 * gib, Pods: 110}})
	}
	for i := range 100 {
		c.SetNode(cluster.Node{Name: fmt.Sprintf("gpu-%04d", i), Schedulable: true, GPU: cluster.GPUModel{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"},
			Allocatable: cluster.Amounts{CPU: 64000, Memory: 512 * gib, EphemeralStorage: 2000 * gib, GPUs: 8, Pods: 110}})
	}
	c.SetPoolCapacity(cluster.StoragePool("beta3"), 1<<50)
	c.SetPoolCapacity(cluster.PoolNodePorts, 1<<20)
	return c
}

// benchOrders is a mix: mostly web services, 10% GPU, 5% persistent storage, 10% that
// ask for an attribute we lack (declined before any capacity is looked at).
func benchOrders() []market.GroupSpec {
	region := market.Attributes{{Key: "region", Value: "us-west"}}
	var out []market.GroupSpec
	for i := range 100 {
		switch {
		case i%10 == 0:
			out = append(out, groupSpec(nil, unitSpec{count: 1, cpu: 4000, mem: 32 * gib, gpus: 2, gpuAttrs: market.Attributes{{Key: "vendor/nvidia/model/a100", Value: "true"}}}))
		case i%20 == 1:
			out = append(out, groupSpec(region, unitSpec{count: 2, cpu: 1000, mem: 2 * gib, persist: "beta3"}))
		case i%10 == 2:
			out = append(out, groupSpec(market.Attributes{{Key: "region", Value: "eu-central"}}, web))
		default:
			out = append(out, groupSpec(region, unitSpec{count: uint32(1 + i%4), cpu: uint64(250 * (1 + i%8)), mem: uint64(1+i%4) * gib / 2}))
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
			}, benchCapacity())
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

// benchProvider runs the Service on l against a synthetic 1,000-node inventory.
func benchProvider(b *testing.B, l *testenv.LedgerNode, observe func(time.Duration)) {
	b.Helper()
	c := l.Client(b)
	key, err := l.Keys.Signer("provider")
	if err != nil {
		b.Fatal(err)
	}
	bc, err := chain.NewBroadcaster(c, key, chain.BroadcastOptions{Linger: ProviderLinger})
	if err != nil {
		b.Fatal(err)
	}
	me := l.Address(b, "provider")
	if _, err := bc.Broadcast(b.Context(), &ledger.MsgCreateProvider{Owner: me, HostURI: "https://p.example:8443", Attributes: market.Attributes{{Key: "region", Value: "us-west"}}}); err != nil {
		b.Fatal(err)
	}
	e := newTestEngine(b, EngineConfig{Provider: me, Pricer: &ScalePricer{Rates: *engineRates(b)}, Deposit: c.Params().BidMinDeposit, BidTimeout: time.Hour}, benchCapacity())
	cur, err := NewCursor(filepath.Join(b.TempDir(), "cursor"))
	if err != nil {
		b.Fatal(err)
	}
	won, err := bus.New[LeaseWon]("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{Cursor: cur, Observe: observe}, e, c, bc, Buses{Won: won}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(b.Context()))
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	wg.Go(func() { _ = bc.Run(ctx) })
	wg.Go(func() { _ = svc.Run(ctx) })
	b.Cleanup(func() { cancel(); wg.Wait() })
	<-svc.Ready()
}

// deployments builds n deployment messages of the tenant from dseq on.
func deployments(owner string, from uint64, n int) []ledger.Msg {
	spec := groupSpec(market.Attributes{{Key: "region", Value: "us-west"}}, web)
	msgs := make([]ledger.Msg, n)
	for i := range msgs {
		d := from + uint64(i)
		msgs[i] = &ledger.MsgCreateDeployment{ID: market.DeploymentID{Owner: owner, DSeq: d}, Groups: []market.GroupSpec{spec},
			Version: bytes.Repeat([]byte{byte(d)}, 32), Deposit: market.Coin{Amount: 5_000_000, Denom: ledger.DefaultDenom}}
	}
	return msgs
}

// BenchmarkOrderToBid measures, on the in-process ledger, the time from the provider
// reading an order's block to handing the bid to the broadcaster, with 20 orders per
// block.
func BenchmarkOrderToBid(b *testing.B) {
	l := testenv.Ledger(b, testenv.LedgerOptions{})
	// Latencies queue here while the tenant sends (a full buffer only delays bids).
	observed := make(chan time.Duration, 4096)
	benchProvider(b, l, func(d time.Duration) { observed <- d })
	tc := l.Client(b)
	tenant := l.Broadcaster(b, tc, "tenant")
	owner := l.Address(b, "tenant")
	const perBlock = 20
	var dseq uint64 = 1
	for b.Loop() {
		if _, err := tenant.Broadcast(b.Context(), deployments(owner, dseq, perBlock)...); err != nil {
			b.Fatal(err)
		}
		dseq += perBlock
	}
	want := b.N * perBlock
	lat := make([]time.Duration, 0, want)
	deadline := time.After(time.Minute)
	for len(lat) < want {
		select {
		case d := <-observed:
			lat = append(lat, d)
		case <-deadline:
			b.Fatalf("%d of %d bids", len(lat), want)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lat)), "bids")
}

// BenchmarkNextBlock measures, with 1 s blocks and 20 new orders in every block, the
// share of our bids included in the block right after their order's. One iteration
// is one block of orders: run it with -benchtime 30x.
func BenchmarkNextBlock(b *testing.B) {
	l := testenv.Ledger(b, testenv.LedgerOptions{BlockInterval: time.Second})
	benchProvider(b, l, nil)
	tc := l.Client(b)
	tenant := l.Broadcaster(b, tc, "tenant")
	owner := l.Address(b, "tenant")
	me := l.Address(b, "provider")
	const perBlock = 20
	var dseq uint64 = 1
	var orders []market.OrderID
	for b.Loop() {
		if _, err := tenant.Broadcast(b.Context(), deployments(owner, dseq, perBlock)...); err != nil {
			b.Fatal(err)
		}
		for d := dseq; d < dseq+perBlock; d++ {
			orders = append(orders, market.OrderID{Owner: owner, DSeq: d, GSeq: 1, OSeq: 1})
		}
		dseq += perBlock
	}
	// Wait block by block (up to 30 s) until every order has our bid.
	bids := map[market.OrderID]ledger.Bid{}
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	pending := slices.Clone(orders)
	for len(pending) > 0 && ctx.Err() == nil {
		h, err := tc.Height(ctx)
		if err != nil {
			break
		}
		pending = slices.DeleteFunc(pending, func(o market.OrderID) bool {
			var bid ledger.Bid
			if ledger.QueryBid.Into(ctx, tc, ledger.BidRequest{ID: o.Bid(me)}, &bid) != nil {
				return false
			}
			bids[o] = bid
			return true
		})
		if len(pending) > 0 {
			_, _ = tc.WaitHeight(ctx, h+1)
		}
	}
	next, later, missing := 0, 0, 0
	gaps := map[int64]int{}
	for _, o := range orders {
		var ord ledger.Order
		bid := bids[o]
		if err := ledger.QueryOrder.Into(b.Context(), tc, ledger.OrderRequest{ID: o}, &ord); err != nil {
			b.Fatal(err)
		}
		switch bid.CreatedAt {
		case 0:
			missing++
		case ord.CreatedAt + 1:
			next++
		default:
			later++
			gaps[bid.CreatedAt-ord.CreatedAt]++
		}
	}
	if later > 0 {
		b.Logf("bids later than the next block, by blocks after their order: %v", gaps)
	}
	b.ReportMetric(float64(next)/float64(len(orders))*100, "next-block-%")
	b.ReportMetric(float64(later), "later")
	b.ReportMetric(float64(missing), "missing")
}
