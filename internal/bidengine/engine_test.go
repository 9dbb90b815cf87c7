package bidengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine/bidtest"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/gpu"
)

const (
	us     = "akash1us"
	rival  = "akash1rival"
	tenant = "akash1tenant"
	gib    = bidtest.GiB
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// testPricer prices with scale rates, or runs fn when set.
type testPricer struct {
	rates *ScaleRates
	fn    func(ctx context.Context, r Request) (market.DecCoin, error)
}

func (p *testPricer) Price(ctx context.Context, r Request) (market.DecCoin, error) {
	if p.fn != nil {
		return p.fn(ctx, r)
	}
	return p.rates.Price(r)
}

func engineRates(t testing.TB) *ScaleRates {
	return &ScaleRates{
		Denom: "uakt", CPU: dec(t, "0.1"), Memory: dec(t, "0.01"),
		Storage:  map[string]market.Dec{ClassEphemeral: dec(t, "0.001"), "beta3": dec(t, "0.002")},
		Endpoint: dec(t, "1"),
		GPU:      map[string]market.Dec{"a100": dec(t, "100"), "*": dec(t, "50")},
	}
}

type unitSpec = bidtest.Unit

var groupSpec = bidtest.GroupSpec

func openOrder(dseq uint64, spec market.GroupSpec) ledger.Order {
	return ledger.Order{ID: market.OrderID{Owner: tenant, DSeq: dseq, GSeq: 1, OSeq: 1}, State: ledger.OrderOpen, Spec: spec}
}

type harness struct {
	t   *testing.T
	cap *cluster.Capacity
	e   *Engine
	now time.Time
}

func newHarness(t *testing.T, mutate func(*EngineConfig)) *harness {
	t.Helper()
	c := cluster.NewCapacity()
	for i := range 3 {
		c.SetNode(cluster.Node{Name: fmt.Sprintf("n%d", i), Schedulable: true, Allocatable: cluster.Amounts{CPU: 4000, Memory: 16 * gib, EphemeralStorage: 100 * gib, Pods: 110}})
	}
	c.SetNode(cluster.Node{Name: "gpu", Schedulable: true, GPU: gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"},
		Allocatable: cluster.Amounts{CPU: 32000, Memory: 256 * gib, EphemeralStorage: 1000 * gib, GPUs: 8, Pods: 110}})
	c.SetPoolCapacity(cluster.StoragePool("beta3"), 100*gib)
	c.SetPoolCapacity(cluster.PoolNodePorts, 100)
	cfg := EngineConfig{
		Provider: us,
		Policy: Policy{Attributes: market.Attributes{
			{Key: "region", Value: "us-west"}, {Key: "tier", Value: "community"},
			{Key: "capabilities/storage/1/class", Value: "beta3"}, {Key: "capabilities/storage/1/persistent", Value: "true"},
			{Key: "capabilities/gpu/vendor/nvidia/model/a100", Value: "true"},
			{Key: "capabilities/gpu/vendor/nvidia/model/a100/ram/80Gi", Value: "true"},
		}},
		Pricer:     &testPricer{rates: engineRates(t)},
		Deposit:    market.Coin{Amount: 5000000, Denom: "uakt"},
		BidTimeout: 5 * time.Minute,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return &harness{t: t, cap: c, e: newTestEngine(t, cfg, c), now: t0}
}

// newTestEngine builds an engine with a history of 1000 decisions.
func newTestEngine(tb testing.TB, cfg EngineConfig, c Capacity) *Engine {
	tb.Helper()
	h, err := NewHistory(1000, nil)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := NewEngine(cfg, c, h)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func (h *harness) decide(o ledger.Order) *ledger.MsgCreateBid {
	h.t.Helper()
	m, err := h.e.Decide(h.t.Context(), o, h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

func (h *harness) last() Decision {
	h.t.Helper()
	d := h.e.History().Last(1)
	if len(d) == 0 {
		h.t.Fatal("no decision recorded")
	}
	return d[0]
}

func event(typ string, id market.OrderID, provider string, kv ...string) ledger.Event {
	a := map[string]string{
		ledger.AttrOwner: id.Owner, ledger.AttrDSeq: strconv.FormatUint(id.DSeq, 10),
		ledger.AttrGSeq: strconv.FormatUint(uint64(id.GSeq), 10), ledger.AttrOSeq: strconv.FormatUint(uint64(id.OSeq), 10),
	}
	if provider != "" {
		a[ledger.AttrProvider] = provider
	}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i]] = kv[i+1]
	}
	return ledger.Event{Type: typ, Attrs: a}
}

func (h *harness) apply(evs ...ledger.Event) []Action {
	return h.e.Apply(ledger.Block{Height: 10, Events: evs}, h.now)
}

var web = bidtest.Web

func TestBidWonAndLeaseClosed(t *testing.T) {
	h := newHarness(t, nil)
	o := openOrder(1, groupSpec(market.Attributes{{Key: "region", Value: "us-west"}}, web))
	m := h.decide(o)
	if m == nil {
		t.Fatalf("no bid: %+v", h.last())
	}
	// 2 × (500 × 0.1 + 512 × 0.01 + 1024 × 0.001) = 2 × 56.144
	if m.Price.String() != "112.288000000000000000uakt" || m.Deposit.String() != "5000000uakt" || m.Provider != us || len(m.ResourcesOffer) != 1 {
		t.Fatalf("bid %+v", m)
	}
	if d := h.last(); d.Result != ResultBid || d.Reason != ReasonPriced {
		t.Fatalf("decision %+v", d)
	}
	if h.decide(o) != nil {
		t.Fatal("bid twice on one order")
	}
	h.e.BidSent(o.ID, nil, h.now)
	acts := h.apply(event(ledger.EventLeaseCreated, o.ID, us), event(ledger.EventOrderClosed, o.ID, ""))
	if len(acts) != 1 || acts[0].Kind != ActPublishWon || acts[0].Won.Lease != o.ID.Bid(us).Lease() || acts[0].Won.Price.String() != m.Price.String() {
		t.Fatalf("actions %+v", acts)
	}
	if !h.cap.Reserved(o.ID) {
		t.Fatal("a won lease lost its reservation")
	}
	// Won bids do not time out.
	h.now = h.now.Add(time.Hour)
	if acts := h.e.Tick(h.now); len(acts) != 0 {
		t.Fatalf("tick %+v", acts)
	}
	acts = h.apply(event(ledger.EventLeaseClosed, o.ID, us, ledger.AttrReason, "owner"))
	if len(acts) != 1 || acts[0].Kind != ActPublishClosed || acts[0].Closed.Lease != o.ID.Bid(us).Lease() || acts[0].Closed.Reason != "owner" {
		t.Fatalf("actions on lease.closed %+v", acts)
	}
	if h.cap.Reserved(o.ID) || len(h.e.Tracked()) != 0 {
		t.Fatal("a closed lease kept its reservation")
	}
	if err := h.cap.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestLostGivesCapacityBack(t *testing.T) {
	h := newHarness(t, nil)
	// Only the GPU node has 256Gi of memory: an order of 2 × 100Gi fills it.
	big := groupSpec(nil, unitSpec{Count: 2, CPU: 1000, Mem: 100 * gib})
	o1, o2 := openOrder(1, big), openOrder(2, big)
	if h.decide(o1) == nil {
		t.Fatalf("no bid: %+v", h.last())
	}
	h.e.BidSent(o1.ID, nil, h.now)
	if h.decide(o2) != nil {
		t.Fatal("bid beyond capacity")
	}
	if d := h.last(); d.Result != ResultNoBid || d.Reason != ReasonCapacityNodes {
		t.Fatalf("decision %+v", d)
	}
	h.apply(event(ledger.EventLeaseCreated, o1.ID, rival), event(ledger.EventBidClosed, o1.ID, us, ledger.AttrState, ledger.BidLost))
	if d := h.last(); d.Result != ResultLost {
		t.Fatalf("decision %+v", d)
	}
	o3 := openOrder(3, big)
	if h.decide(o3) == nil {
		t.Fatalf("capacity not given back: %+v", h.last())
	}
}

func TestDeclineReasons(t *testing.T) {
	gpuAttrs := func(model string) market.Attributes {
		return market.Attributes{{Key: "vendor/nvidia/model/" + model, Value: "true"}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*EngineConfig)
		spec   market.GroupSpec
		reason string
	}{
		{"attribute", nil, groupSpec(market.Attributes{{Key: "region", Value: "eu-central"}}, web), ReasonAttributes},
		{"glob attribute matches", nil, groupSpec(market.Attributes{{Key: "reg*", Value: "us-west"}}, web), ""},
		{"signed by", nil, func() market.GroupSpec {
			g := groupSpec(market.Attributes{{Key: "region", Value: "us-west"}}, web)
			g.Requirements.SignedBy.AnyOf = []string{"akash1auditor"}
			return g
		}(), ReasonSignedBy},
		{"gpu model", nil, groupSpec(nil, unitSpec{Count: 1, CPU: 1000, Mem: gib, GPUs: 1, GPUAttrs: gpuAttrs("h100")}), ReasonGPUCapability},
		{"gpu ram", nil, groupSpec(nil, unitSpec{Count: 1, CPU: 1000, Mem: gib, GPUs: 1, GPUAttrs: gpuAttrs("a100/ram/40Gi")}), ReasonGPUCapability},
		{"gpu fits", nil, groupSpec(nil, unitSpec{Count: 2, CPU: 1000, Mem: gib, GPUs: 4, GPUAttrs: gpuAttrs("a100")}), ""},
		{"gpu capacity", nil, groupSpec(nil, unitSpec{Count: 3, CPU: 1000, Mem: gib, GPUs: 4, GPUAttrs: gpuAttrs("a100")}), ReasonCapacityGPU},
		{"storage class", nil, groupSpec(nil, unitSpec{Count: 1, CPU: 100, Mem: gib, Persist: "beta2"}), ReasonStorageCapability},
		{"storage capacity", nil, groupSpec(nil, unitSpec{Count: 11, CPU: 100, Mem: gib, Persist: "beta3"}), ReasonCapacityStorage},
		{"deny", func(c *EngineConfig) { c.Policy.Deny = []string{tenant} }, groupSpec(nil, web), ReasonTenantDenied},
		{"allow", func(c *EngineConfig) { c.Policy.Allow = []string{"akash1friend"} }, groupSpec(nil, web), ReasonTenantDenied},
		{"limits", func(c *EngineConfig) { c.Policy.Limits.CPUMillis = 400 }, groupSpec(nil, web), ReasonLimits},
		{"required of orders", func(c *EngineConfig) {
			c.Policy.RequireAttributes = market.Attributes{{Key: "tier", Value: "community"}}
		}, groupSpec(nil, web), ReasonOrderAttributes},
		{"price", nil, groupSpec(nil, unitSpec{Count: 1, CPU: 500, Mem: 512 << 20, Price: "10"}), ReasonPriceAboveMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mutate)
			// Screening agrees with the decision, and reserves and records nothing.
			sc, err := h.e.Screen(t.Context(), tenant, tc.spec)
			if err != nil || sc.Bid != (tc.reason == "") || (tc.reason != "" && (sc.Reason != tc.reason || sc.Detail == "")) {
				t.Fatalf("screen: %+v %v, want reason %q", sc, err, tc.reason)
			}
			if len(h.cap.Reservations()) != 0 || len(h.e.History().Last(10)) != 0 {
				t.Fatal("screening reserved or recorded")
			}
			m := h.decide(openOrder(1, tc.spec))
			d := h.last()
			if m != nil && (!sc.Bid || sc.Price.String() != m.Price.String()) {
				t.Fatalf("screened price %v, bid %v", sc.Price, m.Price)
			}
			if tc.reason == "" {
				if m == nil {
					t.Fatalf("no bid: %+v", d)
				}
				return
			}
			if m != nil || d.Result != ResultNoBid || d.Reason != tc.reason || d.Detail == "" {
				t.Fatalf("bid %v, decision %+v, want no bid for %s", m != nil, d, tc.reason)
			}
			if len(h.cap.Reservations()) != 0 {
				t.Fatal("a declined order kept a reservation")
			}
		})
	}
}

func TestBudget(t *testing.T) {
	h := newHarness(t, func(c *EngineConfig) { c.BidsPerHour, c.TenantBidsPerHour = 3, 2 })
	small := groupSpec(nil, unitSpec{Count: 1, CPU: 100, Mem: 1 << 20})
	order := func(owner string, dseq uint64) ledger.Order {
		o := openOrder(dseq, small)
		o.ID.Owner = owner
		return o
	}
	for i := range 2 {
		if h.decide(order(tenant, uint64(i))) == nil {
			t.Fatalf("bid %d: %+v", i, h.last())
		}
	}
	if h.decide(order(tenant, 9)) != nil || h.last().Reason != ReasonTenantBudget {
		t.Fatalf("tenant budget: %+v", h.last())
	}
	if h.decide(order("akash1other", 1)) == nil {
		t.Fatalf("another tenant: %+v", h.last())
	}
	if h.decide(order("akash1third", 1)) != nil || h.last().Reason != ReasonBudget {
		t.Fatalf("overall budget: %+v", h.last())
	}
	// A declined order spends nothing: 20 minutes later one bid (1/3 of an hour × 3) is back.
	h.now = h.now.Add(20 * time.Minute)
	if h.decide(order("akash1third", 2)) == nil {
		t.Fatalf("after refill: %+v", h.last())
	}
}

func TestPricingRefusalReleasesCapacity(t *testing.T) {
	refuse := errors.New("boom")
	h := newHarness(t, func(c *EngineConfig) {
		c.Pricer = &testPricer{fn: func(context.Context, Request) (market.DecCoin, error) {
			return market.DecCoin{}, &NoBid{Reason: "price_script_failed", Detail: refuse.Error()}
		}}
	})
	if h.decide(openOrder(1, groupSpec(nil, web))) != nil {
		t.Fatal("bid although pricing refused")
	}
	if d := h.last(); d.Reason != "price_script_failed" || len(h.cap.Reservations()) != 0 || len(h.e.Tracked()) != 0 {
		t.Fatalf("decision %+v, reservations %v", d, h.cap.Reservations())
	}
}

func TestOrderClosedWhilePricing(t *testing.T) {
	var h *harness
	o := openOrder(1, groupSpec(nil, web))
	h = newHarness(t, func(c *EngineConfig) {
		c.Pricer = &testPricer{fn: func(_ context.Context, r Request) (market.DecCoin, error) {
			// The group closes while the script runs.
			h.apply(event(ledger.EventGroupClosed, o.ID, ""))
			return engineRates(t).Price(r)
		}}
	})
	if h.decide(o) != nil {
		t.Fatal("bid on an order that closed during pricing")
	}
	if d := h.last(); d.Result != ResultClosed || len(h.cap.Reservations()) != 0 {
		t.Fatalf("decision %+v", d)
	}
}

func TestBidTimeoutAndGroupClose(t *testing.T) {
	h := newHarness(t, nil)
	o1, o2 := openOrder(1, groupSpec(nil, web)), openOrder(2, groupSpec(nil, web))
	h.decide(o1)
	h.decide(o2)
	h.e.BidSent(o1.ID, nil, h.now)
	h.apply(event(ledger.EventBidCreated, o2.ID, us)) // the event overtakes the broadcaster
	h.e.BidSent(o2.ID, nil, h.now)
	if got := h.e.NextDeadline(); !got.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("next deadline %s", got)
	}
	// The group of o2 pauses and the ledger's bid.closed is not in this block: we
	// close the bid ourselves.
	paused := event(ledger.EventGroupPaused, o2.ID, "")
	delete(paused.Attrs, ledger.AttrOSeq)
	acts := h.apply(paused)
	if len(acts) != 1 || acts[0].Kind != ActCloseBid || acts[0].Bid != o2.ID.Bid(us) {
		t.Fatalf("actions %+v", acts)
	}
	h.now = h.now.Add(5 * time.Minute)
	acts = h.e.Tick(h.now)
	if len(acts) != 1 || acts[0].Kind != ActCloseBid || acts[0].Bid != o1.ID.Bid(us) {
		t.Fatalf("tick %+v", acts)
	}
	if d := h.last(); d.Reason != ReasonBidTimeout || len(h.cap.Reservations()) != 0 {
		t.Fatalf("decision %+v", d)
	}
}

func TestBidFailedAndUnknownLease(t *testing.T) {
	h := newHarness(t, nil)
	o := openOrder(1, groupSpec(nil, web))
	h.decide(o)
	h.e.BidSent(o.ID, fmt.Errorf("send: %w", ledger.ErrAlreadyExists), h.now)
	if d := h.last(); d.Result != ResultFailed || d.Reason != "tx_already_exists" || len(h.cap.Reservations()) != 0 {
		t.Fatalf("decision %+v", d)
	}
	// A lease on a bid we do not track (made before a crash): adopt it.
	acts := h.apply(event(ledger.EventLeaseCreated, o.ID, us))
	if len(acts) != 1 || acts[0].Kind != ActAdopt {
		t.Fatalf("actions %+v", acts)
	}
	won, err := h.e.Adopt(ledger.Lease{ID: o.ID.Bid(us).Lease(), State: ledger.LeaseActive}, o.Spec, false, h.now)
	if err != nil || won == nil || !h.cap.Reserved(o.ID) {
		t.Fatalf("adopt %+v %v", won, err)
	}
	// And a bid.created for a bid we do not track: restore it.
	o2 := openOrder(2, groupSpec(nil, web))
	if acts := h.apply(event(ledger.EventBidCreated, o2.ID, us)); len(acts) != 1 || acts[0].Kind != ActRestoreBid {
		t.Fatalf("actions %+v", acts)
	}
}

// TestBudgetHoldsUnderConcurrentPricing: orders priced at the same time cannot all pass
// the budget (it is spent when the capacity is reserved, refunded if pricing says no).
func TestBudgetHoldsUnderConcurrentPricing(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, func(c *EngineConfig) {
		c.BidsPerHour = 2
		c.Pricer = &testPricer{fn: func(ctx context.Context, r Request) (market.DecCoin, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return market.DecCoin{}, ctx.Err()
			}
			if r.Units[0].CPUMillis == 300 {
				return market.DecCoin{}, &NoBid{Reason: ReasonScriptFailed, Detail: "refused"}
			}
			return engineRates(t).Price(r)
		}}
	})
	small := func(cpu uint64) market.GroupSpec { return groupSpec(nil, unitSpec{Count: 1, CPU: cpu, Mem: 1 << 20}) }
	results := make(chan *ledger.MsgCreateBid, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			m, err := h.e.Decide(t.Context(), openOrder(uint64(i+1), small(100)), h.now)
			if err != nil {
				t.Error(err)
			}
			results <- m
		})
	}
	// Three are declined at once, without waiting for pricing.
	declined := 0
	for range 3 {
		if m := <-results; m == nil {
			declined++
		}
	}
	if declined != 3 {
		t.Fatalf("%d of the first 3 answers declined", declined)
	}
	close(release)
	wg.Wait()
	close(results)
	bids := 0
	for m := range results {
		if m != nil {
			bids++
		}
	}
	if bids != 2 {
		t.Fatalf("%d bids with a budget of 2", bids)
	}
	// A refusal by pricing gives its budget back.
	h.now = h.now.Add(30 * time.Minute) // one bid refilled
	if h.decide(openOrder(10, small(300))) != nil {
		t.Fatal("a refused order was bid on")
	}
	if h.decide(openOrder(11, small(100))) == nil {
		t.Fatalf("the refused order's budget was not refunded: %+v", h.last())
	}
}

// TestDeclineLogged: with a logger, a declined order is logged with its reason, for the
// operator; a bid is not logged by the engine (the service logs bids placed).
func TestDeclineLogged(t *testing.T) {
	var buf bytes.Buffer
	h := newHarness(t, func(c *EngineConfig) { c.Log = slog.New(slog.NewTextHandler(&buf, nil)) })
	if h.decide(openOrder(1, groupSpec(market.Attributes{{Key: "region", Value: "eu-central"}}, web))) != nil {
		t.Fatal("bid on an order needing another region")
	}
	if out := buf.String(); !strings.Contains(out, `msg="order declined"`) || !strings.Contains(out, "reason=attributes") || !strings.Contains(out, "region=eu-central") {
		t.Fatalf("log: %q", out)
	}
	buf.Reset()
	if h.decide(openOrder(2, groupSpec(nil, web))) == nil {
		t.Fatal("no bid on a fitting order")
	}
	if buf.Len() != 0 {
		t.Fatalf("a bid was logged as declined: %q", buf.String())
	}
}

// TestDeclinedWhileInventoryUnknown: an order declined because the inventory is not
// known is asked to be decided again by the Tick after the inventory is back (once,
// oldest first), not by a block's events, and not while it is still unknown.
func TestDeclinedWhileInventoryUnknown(t *testing.T) {
	h := newHarness(t, nil)
	h.cap.SetUnavailable("no report yet")
	o1, o2 := openOrder(1, groupSpec(nil, web)), openOrder(2, groupSpec(nil, web))
	for _, o := range []ledger.Order{o1, o2} {
		if m := h.decide(o); m != nil || h.last().Reason != ReasonInventoryStale {
			t.Fatalf("order %d: bid %v, decision %+v; want no bid for %s", o.ID.DSeq, m, h.last(), ReasonInventoryStale)
		}
		h.now = h.now.Add(time.Second)
	}
	decides := func(acts []Action) []uint64 {
		var out []uint64
		for _, a := range acts {
			if a.Kind == ActDecide {
				out = append(out, a.Order.DSeq)
			}
		}
		return out
	}
	if got := decides(h.e.Tick(h.now)); len(got) != 0 {
		t.Fatalf("tick while the inventory is unknown: decide %v", got)
	}
	h.cap.SetUnavailable("")
	other := openOrder(3, groupSpec(nil, web))
	if got := decides(h.apply(event(ledger.EventOrderClosed, other.ID, ""))); len(got) != 0 {
		t.Fatalf("a block's events: decide %v, want nothing but the tick's", got)
	}
	if got := decides(h.e.Tick(h.now)); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("tick once the inventory is known: decide %v, want [1 2]", got)
	}
	if got := decides(h.e.Tick(h.now)); len(got) != 0 {
		t.Fatalf("the next tick: decide %v again", got)
	}
	if m := h.decide(o1); m == nil {
		t.Fatalf("order 1 decided again: no bid (%+v)", h.last())
	}
}
