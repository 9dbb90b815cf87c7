package onchain

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/bidengine/bidtest"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/leasefeed"
	"berth.dev/berth/internal/testenv"
)

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
	e := newEngine(b, bidengine.EngineConfig{Provider: me, Pricer: &bidengine.ScalePricer{Rates: *rates(b)}, Deposit: c.Params().BidMinDeposit, BidTimeout: time.Hour}, bidtest.Capacity1000())
	cur, err := NewCursor(filepath.Join(b.TempDir(), "cursor"))
	if err != nil {
		b.Fatal(err)
	}
	leases, err := bus.New[leasefeed.Event]("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{Cursor: cur, Observe: observe}, e, c, bc, leases, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
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
	spec := bidtest.GroupSpec(market.Attributes{{Key: "region", Value: "us-west"}}, bidtest.Web)
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
