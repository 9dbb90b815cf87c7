package onchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/bidengine/bidtest"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/inventory/invtest"
	"berth.dev/berth/internal/leasefeed"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

// providerStack is one run of the provider's bid side: inventory, engine, service,
// broadcaster, as `berth provider run` composes them.
type providerStack struct {
	cap    *cluster.Capacity
	engine *bidengine.Engine
	svc    *Service
	leases *bus.Subscription[leasefeed.Event]
	stop   func()
}

func startProvider(t *testing.T, l *testenv.LedgerNode, k *testenv.Kube, cursor string, mutate func(*bidengine.EngineConfig)) *providerStack {
	t.Helper()
	c := l.Client(t)
	bc := l.Broadcaster(t, c, "provider")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	capacity := cluster.NewCapacity()
	kc, err := kube.NewCache(k.Clientset(t), nil, ownership.Owner{Provider: "akash1bidengineprovider", ChainID: "berth-test"})
	if err != nil {
		t.Fatal(err)
	}
	cacheCtx, stopCache := context.WithCancel(context.Background())
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- kc.Run(cacheCtx) }()
	t.Cleanup(func() {
		stopCache()
		if err := <-cacheDone; err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	inv, err := kube.NewInventory(kc, k.Clientset(t), capacity, kube.InventoryConfig{NodePorts: 100}, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := bidengine.EngineConfig{
		Provider:   l.Address(t, "provider"),
		Pricer:     &bidengine.ScalePricer{Rates: *rates(t)},
		Deposit:    c.Params().BidMinDeposit,
		BidTimeout: 10 * time.Minute,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	e := newEngine(t, cfg, capacity)
	cur, err := NewCursor(cursor)
	if err != nil {
		t.Fatal(err)
	}
	leaseBus, err := leasefeed.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := leaseBus.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{Cursor: cur}, e, c, bc, leaseBus, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	run("client", c.Run)
	run("broadcaster", bc.Run)
	run("inventory", inv.Run)
	if err := inv.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	run("bid engine", svc.Run)
	select {
	case <-svc.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("bid engine not ready in 30 s")
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
			leaseBus.Close()
		}
	}
	t.Cleanup(stop)
	return &providerStack{cap: capacity, engine: e, svc: svc, leases: sub, stop: stop}
}

type tenantClient struct {
	t    *testing.T
	c    *chain.Client
	b    *chain.Broadcaster
	addr string
}

func newTenant(t *testing.T, l *testenv.LedgerNode, name string) *tenantClient {
	c := l.Client(t)
	b := l.Broadcaster(t, c, name)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &tenantClient{t: t, c: c, b: b, addr: l.Address(t, name)}
}

func (tc *tenantClient) deploy(dseq uint64, spec market.GroupSpec) market.OrderID {
	tc.t.Helper()
	id := market.DeploymentID{Owner: tc.addr, DSeq: dseq}
	_, err := tc.b.Broadcast(tc.t.Context(), &ledger.MsgCreateDeployment{
		ID: id, Groups: []market.GroupSpec{spec}, Version: bytes.Repeat([]byte{byte(dseq)}, 32),
		Deposit: market.Coin{Amount: 5_000_000, Denom: ledger.DefaultDenom},
	})
	if err != nil {
		tc.t.Fatalf("create deployment %d: %v", dseq, err)
	}
	return id.Group(1).Order(1)
}

// bidOf waits until the order has our bid.
func bidOf(t *testing.T, c *chain.Client, order market.OrderID, provider string) ledger.Bid {
	t.Helper()
	var b ledger.Bid
	eventuallyNoErr(t, "bid on "+order.String(), func() error {
		return ledger.QueryBid.Into(t.Context(), c, ledger.BidRequest{ID: order.Bid(provider)}, &b)
	})
	return b
}

// eventuallyNoErr waits up to 30 s until f succeeds, reporting its last error.
func eventuallyNoErr(t *testing.T, what string, f func() error) {
	t.Helper()
	testenv.EventuallyNoError(t, 30*time.Second, what, f)
}

// decisionFor waits for the engine's decision on an order.
func decisionFor(t *testing.T, e *bidengine.Engine, order market.OrderID) bidengine.Decision {
	t.Helper()
	var d bidengine.Decision
	eventuallyNoErr(t, "a decision on "+order.String(), func() error {
		for _, x := range e.History().Last(0) {
			if x.Order == order {
				d = x
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	return d
}

// TestProviderBidsOnTheLedger runs the bid side of a provider against the in-process
// ledger and the real Kubernetes test cluster (kwok nodes).
func TestProviderBidsOnTheLedger(t *testing.T) {
	k := testenv.Cluster(t)
	if err := k.AddNodes(t.Context(),
		localenv.NodeSpec{Name: "bid-cpu-1", CPU: "4", Memory: "16Gi"},
		localenv.NodeSpec{Name: "bid-cpu-2", CPU: "4", Memory: "16Gi"},
		invtest.Labelled(t, localenv.NodeSpec{Name: "bid-gpu", CPU: "16", Memory: "64Gi", GPUs: 4, GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUMemoryMiB: 81920}),
	); err != nil {
		t.Fatal(err)
	}
	l := testenv.Ledger(t, testenv.LedgerOptions{Accounts: []string{"tenant", "provider", "rival", "denied", "greedy", "late"}})
	admin := newTenant(t, l, "provider")
	region := market.Attributes{{Key: "region", Value: "us-west"}}
	attrs := market.Attributes{region[0], {Key: "capabilities/gpu/vendor/nvidia/model/a100", Value: "true"}}
	for _, p := range []string{"provider", "rival"} {
		b := l.Broadcaster(t, admin.c, p)
		if _, err := b.Broadcast(t.Context(), &ledger.MsgCreateProvider{Owner: l.Address(t, p), HostURI: "https://" + p + ".example:8443", Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	me := l.Address(t, "provider")
	cursor := filepath.Join(t.TempDir(), "bidengine.cursor")
	mutate := func(c *bidengine.EngineConfig) {
		c.Policy.Deny = []string{l.Address(t, "denied")}
		c.TenantBidsPerHour = 4
	}
	p := startProvider(t, l, k, cursor, mutate)
	tenant := newTenant(t, l, "tenant")

	// A matching order gets our bid at the scale price.
	webSpec := bidtest.GroupSpec(region, bidtest.Web)
	o1 := tenant.deploy(1, webSpec)
	b1 := bidOf(t, tenant.c, o1, me)
	if b1.Price.String() != "112.288000000000000000uakt" || b1.State != ledger.BidOpen {
		t.Fatalf("bid %+v", b1)
	}
	if !p.cap.Reserved(o1) {
		t.Fatal("no reservation for an open bid")
	}

	// Orders we must not bid on, each with its reason.
	gpu := func(model string) market.Attributes {
		return market.Attributes{{Key: "vendor/nvidia/model/" + model, Value: "true"}}
	}
	denied := newTenant(t, l, "denied")
	for _, tc := range []struct {
		order  market.OrderID
		reason string
	}{
		{tenant.deploy(2, bidtest.GroupSpec(market.Attributes{{Key: "region", Value: "eu-central"}}, bidtest.Web)), bidengine.ReasonAttributes},
		{tenant.deploy(3, bidtest.GroupSpec(nil, bidtest.Unit{Count: 1, CPU: 1000, Mem: bidtest.GiB, GPUs: 1, GPUAttrs: gpu("h100")})), bidengine.ReasonGPUCapability},
		{tenant.deploy(4, bidtest.GroupSpec(nil, bidtest.Unit{Count: 1, CPU: 1000, Mem: bidtest.GiB, GPUs: 8, GPUAttrs: gpu("a100")})), bidengine.ReasonCapacityGPU},
		{tenant.deploy(5, bidtest.GroupSpec(nil, bidtest.Unit{Count: 3, CPU: 8000, Mem: bidtest.GiB})), bidengine.ReasonCapacityNodes},
		{denied.deploy(1, webSpec), bidengine.ReasonTenantDenied},
	} {
		if d := decisionFor(t, p.engine, tc.order); d.Result != bidengine.ResultNoBid || d.Reason != tc.reason || d.Detail == "" {
			t.Errorf("order %s: decision %+v, want no bid for %s", tc.order, d, tc.reason)
		}
	}
	greedy := newTenant(t, l, "greedy")
	small := bidtest.GroupSpec(nil, bidtest.Unit{Count: 1, CPU: 100, Mem: 64 << 20})
	for i := range 5 {
		o := greedy.deploy(uint64(i+1), small)
		d := decisionFor(t, p.engine, o)
		if want := map[bool]string{true: bidengine.ReasonTenantBudget, false: bidengine.ReasonPriced}[i == 4]; d.Reason != want {
			t.Errorf("greedy order %d: %+v, want %s", i+1, d, want)
		}
	}

	// Won: the tenant leases our bid → LeaseWon on the bus.
	if _, err := tenant.b.Broadcast(t.Context(), &ledger.MsgCreateLease{BidID: o1.Bid(me)}); err != nil {
		t.Fatal(err)
	}
	if w := nextLeaseEvent(t, p.leases).Won; w == nil || w.Lease != o1.Bid(me).Lease() || w.Price.String() != b1.Price.String() || w.Rebuilt {
		t.Fatalf("lease won %+v", w)
	}

	// Lost: the tenant leases the rival's cheaper bid → our bid is lost and its
	// capacity is back.
	o6 := tenant.deploy(6, webSpec)
	bidOf(t, tenant.c, o6, me)
	rival := l.Broadcaster(t, admin.c, "rival")
	if _, err := rival.Broadcast(t.Context(), &ledger.MsgCreateBid{OrderID: o6, Provider: l.Address(t, "rival"),
		Price: market.DecCoin{Denom: "uakt", Amount: market.DecFromUint(50)}, Deposit: tenant.c.Params().BidMinDeposit}); err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.b.Broadcast(t.Context(), &ledger.MsgCreateLease{BidID: o6.Bid(l.Address(t, "rival"))}); err != nil {
		t.Fatal(err)
	}
	if d := decisionFor(t, p.engine, o6); d.Result != bidengine.ResultLost && d.Result != bidengine.ResultBid {
		t.Fatalf("decision %+v", d)
	}
	eventuallyNoErr(t, "capacity released after losing", func() error {
		if p.cap.Reserved(o6) {
			return fmt.Errorf("order %s still reserved", o6)
		}
		return nil
	})

	// The provider is killed while orders keep arriving, and restarted.
	late := newTenant(t, l, "late")
	var orders []market.OrderID
	var omu sync.Mutex
	arrive := func(from, to uint64) {
		for d := from; d <= to; d++ {
			o := late.deploy(d, small)
			omu.Lock()
			orders = append(orders, o)
			omu.Unlock()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { arrive(1, 12) })
	// Stop once a few of the late orders are in.
	eventuallyNoErr(t, "late orders arriving", func() error {
		omu.Lock()
		defer omu.Unlock()
		if len(orders) < 4 {
			return fmt.Errorf("%d orders", len(orders))
		}
		return nil
	})
	p.stop()
	wg.Wait() // the rest arrive while the provider is down
	arrive(13, 14)
	p2 := startProvider(t, l, k, cursor, func(c *bidengine.EngineConfig) { mutate(c); c.TenantBidsPerHour = 0 })
	wg.Go(func() { arrive(15, 18) }) // and after it is back
	wg.Wait()

	// Every late order has exactly one bid of ours (the ledger allows one per provider;
	// the engine must not even try twice).
	for _, o := range orders {
		if b := bidOf(t, tenant.c, o, me); b.State != ledger.BidOpen {
			t.Errorf("order %s: bid %s", o, b.State)
		}
	}
	for _, d := range p2.engine.History().Last(0) {
		if d.Result == bidengine.ResultFailed {
			t.Errorf("after the restart: %+v", d)
		}
	}
	// The restarted engine holds our won lease and the open bids again, each reserved.
	if w := nextLeaseEvent(t, p2.leases).Won; w == nil || w.Lease != o1.Bid(me).Lease() || !w.Rebuilt {
		t.Fatalf("rebuilt lease %+v", w)
	}
	for _, o := range append([]market.OrderID{o1}, orders...) {
		if !p2.cap.Reserved(o) {
			t.Errorf("order %s not reserved after the restart", o)
		}
	}
	if err := p2.cap.Check(); err != nil {
		t.Fatal(err)
	}

	// The tenant closes the deployment: the lease's close follows its won on the one
	// stream, and its capacity is back.
	if _, err := tenant.b.Broadcast(t.Context(), &ledger.MsgCloseDeployment{ID: o1.Group().Deployment()}); err != nil {
		t.Fatal(err)
	}
	if c := nextLeaseEvent(t, p2.leases).Closed; c == nil || c.Lease != o1.Bid(me).Lease() {
		t.Fatalf("after the close: %+v, want the lease closed", c)
	}
	if p2.cap.Reserved(o1) {
		t.Error("a closed lease still holds its capacity")
	}
}

// nextLeaseEvent waits up to 30 s for the stream's next event.
func nextLeaseEvent(t *testing.T, sub *bus.Subscription[leasefeed.Event]) leasefeed.Event {
	t.Helper()
	select {
	case ev := <-sub.Events():
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no lease event in 30 s")
	}
	return leasefeed.Event{}
}

// TestOrdersDeclinedWhileInventoryUnknownAreBidLater: orders that arrive while the
// cluster's inventory is not known (the inventory operator has not reported yet, or
// its report is too old) are declined with inventory_stale, and decided again once it
// is: those still open get their bid, those closed meanwhile get nothing.
func TestOrdersDeclinedWhileInventoryUnknownAreBidLater(t *testing.T) {
	k := testenv.Cluster(t)
	if err := k.AddNodes(t.Context(), localenv.NodeSpec{Name: "late-inventory-1", CPU: "4", Memory: "16Gi"}); err != nil {
		t.Fatal(err)
	}
	l := testenv.Ledger(t, testenv.LedgerOptions{Accounts: []string{"tenant", "provider"}})
	admin := newTenant(t, l, "provider")
	me := l.Address(t, "provider")
	if _, err := admin.b.Broadcast(t.Context(), &ledger.MsgCreateProvider{Owner: me, HostURI: "https://provider.example:8443"}); err != nil {
		t.Fatal(err)
	}
	p := startProvider(t, l, k, filepath.Join(t.TempDir(), "bidengine.cursor"), nil)
	p.cap.SetUnavailable("no report in Inventory test on the cluster")
	tenant := newTenant(t, l, "tenant")

	small := bidtest.GroupSpec(nil, bidtest.Unit{Count: 1, CPU: 100, Mem: 64 << 20})
	kept, closed := tenant.deploy(1, small), tenant.deploy(2, small)
	for _, o := range []market.OrderID{kept, closed} {
		if d := decisionFor(t, p.engine, o); d.Result != bidengine.ResultNoBid || d.Reason != bidengine.ReasonInventoryStale {
			t.Fatalf("order %s while the inventory is unknown: %+v, want no bid for %s", o, d, bidengine.ReasonInventoryStale)
		}
	}
	if _, err := tenant.b.Broadcast(t.Context(), &ledger.MsgCloseDeployment{ID: closed.Group().Deployment()}); err != nil {
		t.Fatal(err)
	}

	p.cap.SetUnavailable("")
	b := bidOf(t, tenant.c, kept, me)
	if b.State != ledger.BidOpen || !p.cap.Reserved(kept) {
		t.Fatalf("bid %+v (reserved %v), want an open bid holding its capacity", b, p.cap.Reserved(kept))
	}
	if d := decisionFor(t, p.engine, kept); d.Result != bidengine.ResultBid || d.Reason != bidengine.ReasonPriced {
		t.Errorf("order %s once the inventory is known: %+v, want a bid", kept, d)
	}
	var none ledger.Bid
	if err := ledger.QueryBid.Into(t.Context(), tenant.c, ledger.BidRequest{ID: closed.Bid(me)}, &none); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("order %s closed while the inventory was unknown: bid %+v, %v; want none", closed, none, err)
	}
	if p.cap.Reserved(closed) {
		t.Errorf("order %s closed while the inventory was unknown holds capacity", closed)
	}
}
