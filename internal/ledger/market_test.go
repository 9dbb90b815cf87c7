package ledger

import (
	"errors"
	"strings"
	"testing"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/fixture"
	"berth.dev/berth/internal/sdl"
)

// webDeployment reads fixture.WebSDL: one group of two 0.5-CPU replicas at 1000uakt each,
// placed on providers with region=us-west.
func webDeployment(t testing.TB) *sdl.Result {
	t.Helper()
	r, _, err := sdl.Parse(fixture.WebSDL, sdl.Options{})
	if err != nil {
		t.Fatalf("sdl: %v", err)
	}
	return r
}

func (h *harness) createDeployment(owner string, dseq uint64, deposit uint64) market.DeploymentID {
	h.t.Helper()
	r := webDeployment(h.t)
	id := market.DeploymentID{Owner: h.addr(owner), DSeq: dseq}
	h.ok(owner, &api.MsgCreateDeployment{ID: id, Groups: r.Groups, Version: r.Version, Deposit: market.Coin{Amount: market.Uint(deposit), Denom: api.DefaultDenom}})
	return id
}

func (h *harness) registerProvider(name string, attrs ...market.Attribute) {
	h.t.Helper()
	h.ok(name, &api.MsgCreateProvider{Owner: h.addr(name), HostURI: "https://" + name + ".example.com:8443", Attributes: attrs})
}

func (h *harness) bid(provider string, oid market.OrderID, price string) market.BidID {
	h.t.Helper()
	h.ok(provider, &api.MsgCreateBid{OrderID: oid, Provider: h.addr(provider), Price: market.DecCoin{Amount: dec(h.t, price), Denom: api.DefaultDenom}, Deposit: api.DefaultParams().BidMinDeposit})
	return oid.Bid(h.addr(provider))
}

var usWest = market.Attribute{Key: "region", Value: "us-west"}

const fund = 1_000_000_000

func TestLeaseLifecycle(t *testing.T) {
	h := newHarness(t, fund, "tenant", "p1", "p2")
	total := uint64(3 * fund)
	h.registerProvider("p1", usWest)
	h.registerProvider("p2", usWest)
	id := h.createDeployment("tenant", 100, 10_000_000)
	if ev := h.events(api.EventOrderCreated); len(ev) != 1 || ev[0][api.AttrOwner] != id.Owner || ev[0][api.AttrDSeq] != "100" || ev[0][api.AttrGSeq] != "1" || ev[0][api.AttrOSeq] != "1" {
		t.Fatalf("order.created events: %v", ev)
	}
	oid := id.Group(1).Order(1)
	var orders api.OrdersResponse
	h.mustQuery(api.QueryOrders.Path, api.OrdersRequest{State: api.OrderOpen}, &orders)
	if len(orders.Orders) != 1 || orders.Orders[0].ID != oid {
		t.Fatalf("open orders: %+v", orders)
	}
	h.mustQuery(api.QueryOrders.Path, api.OrdersRequest{State: api.OrderOpen, Owner: id.Owner}, &orders)
	if len(orders.Orders) != 1 || orders.Orders[0].ID != oid {
		t.Fatalf("the tenant's open orders: %+v", orders)
	}
	// By ID: absent orders are left out; ids exclude the other filters.
	h.mustQuery(api.QueryOrders.Path, api.OrdersRequest{IDs: []market.OrderID{id.Group(9).Order(1), oid}}, &orders)
	if len(orders.Orders) != 1 || orders.Orders[0].ID != oid {
		t.Fatalf("orders by ID: %+v", orders)
	}
	if err := h.query(api.QueryOrders.Path, api.OrdersRequest{IDs: []market.OrderID{oid}, State: api.OrderOpen}, &orders); !errors.Is(err, api.ErrBadQuery) {
		t.Fatalf("ids with state: %v", err)
	}

	// The group is priced 2 × 1000 per block; a bid above that is refused.
	h.fail(api.CodePriceTooHigh, "p1", &api.MsgCreateBid{OrderID: oid, Provider: h.addr("p1"), Price: market.DecCoin{Amount: dec(t, "2000.5"), Denom: api.DefaultDenom}, Deposit: api.DefaultParams().BidMinDeposit})
	b1 := h.bid("p1", oid, "1500.5")
	b2 := h.bid("p2", oid, "1200")
	if got := h.balance("p2"); got != fund-5_000_000 {
		t.Fatalf("p2 balance after bid deposit %d", got)
	}
	var bids api.BidsResponse
	h.mustQuery(api.QueryBids.Path, api.BidsRequest{Order: &oid}, &bids)
	if len(bids.Bids) != 2 {
		t.Fatalf("bids: %+v", bids)
	}
	h.checkSupply(total)

	// Only the owner accepts a bid.
	h.fail(api.CodeUnauthorized, "p1", &api.MsgCreateLease{BidID: b2})
	h.seq[h.addr("p1")]-- // the tx was rejected before execution: sequence not used
	h.ok("tenant", &api.MsgCreateLease{BidID: b2})
	leaseHeight := h.height
	if ev := h.events(api.EventLeaseCreated); len(ev) != 1 || ev[0][api.AttrProvider] != b2.Provider {
		t.Fatalf("lease.created: %v", ev)
	}
	if ev := h.events(api.EventBidClosed); len(ev) != 1 || ev[0][api.AttrProvider] != b1.Provider || ev[0][api.AttrState] != api.BidLost {
		t.Fatalf("losing bid: %v", ev)
	}
	if got := h.balance("p1"); got != fund {
		t.Fatalf("losing bid deposit not returned: p1 has %d", got)
	}
	var o api.Order
	h.mustQuery(api.QueryOrder.Path, api.OrderRequest{ID: oid}, &o)
	if o.State != api.OrderActive {
		t.Fatalf("order state %s", o.State)
	}

	// Ten blocks later the lease has accrued 10 × 1200.
	for range 10 {
		h.block()
	}
	var lr api.LeaseResponse
	h.mustQuery(api.QueryLease.Path, api.LeaseRequest{ID: b2.Lease()}, &lr)
	if want := market.DecFromUint(uint64(h.height-leaseHeight) * 1200); lr.Payment.Balance.Amount.Cmp(want) != 0 {
		t.Fatalf("accrued %s, want %s", lr.Payment.Balance.Amount, want)
	}
	h.checkSupply(total)
	h.ok("p2", &api.MsgWithdrawLease{ID: b2.Lease()})
	paid := uint64(h.height-leaseHeight) * 1200
	if got := h.balance("p2"); got != fund-5_000_000+paid {
		t.Fatalf("p2 balance %d after withdrawing %d", got, paid)
	}
	if ev := h.events(api.EventWithdrawal); len(ev) != 1 || ev[0][api.AttrAmount] != uintStr(paid)+"uakt" {
		t.Fatalf("withdrawal events %v", ev)
	}

	// A stranger cannot close the lease; the tenant can.
	log := h.fail(api.CodeNotPermitted, "p1", &api.MsgCloseLease{ID: b2.Lease(), Sender: h.addr("p1"), Reason: api.ReasonUnstable})
	if !strings.Contains(log, "neither") {
		t.Fatalf("log %q", log)
	}
	h.seq[h.addr("p1")]--
	h.ok("tenant", &api.MsgCloseLease{ID: b2.Lease(), Sender: h.addr("tenant"), Reason: api.ReasonOwner})
	paid = uint64(h.height-leaseHeight) * 1200
	if got := h.balance("p2"); got != fund+paid {
		t.Fatalf("p2 balance %d, want deposit back and %d paid", got, paid)
	}
	h.mustQuery(api.QueryLease.Path, api.LeaseRequest{ID: b2.Lease()}, &lr)
	if lr.Lease.State != api.LeaseClosed || lr.Lease.Reason != api.ReasonOwner || lr.Payment.State != api.PaymentClosed {
		t.Fatalf("closed lease %+v", lr)
	}
	var dr api.DeploymentResponse
	h.mustQuery(api.QueryDeployment.Path, api.DeploymentRequest{ID: id}, &dr)
	if dr.Groups[0].State != api.GroupClosed {
		t.Fatalf("group %s after the tenant closed its lease", dr.Groups[0].State)
	}

	h.ok("tenant", &api.MsgCloseDeployment{ID: id})
	if got := h.balance("tenant"); got != fund-paid {
		t.Fatalf("tenant balance %d, want %d (paid %d)", got, fund-paid, paid)
	}
	h.checkSupply(total)
}

func TestInsufficientFundsClosesLeases(t *testing.T) {
	params := api.DefaultParams()
	params.DeploymentMinDeposit = []market.Coin{{Amount: 1000, Denom: api.DefaultDenom}}
	h := newHarnessParams(t, params, fund, "tenant", "p1")
	h.registerProvider("p1", usWest)
	// 5000 at 1200 per block pays 4 full blocks.
	id := h.createDeployment("tenant", 7, 5000)
	oid := id.Group(1).Order(1)
	b := h.bid("p1", oid, "1200")
	h.ok("tenant", &api.MsgCreateLease{BidID: b})
	start := h.height
	for h.height < start+4 {
		h.block()
		if ev := h.events(api.EventLeaseClosed); len(ev) != 0 {
			t.Fatalf("height %d: lease closed early: %v", h.height, ev)
		}
	}
	h.block()
	ev := h.events(api.EventLeaseClosed)
	if len(ev) != 1 || ev[0][api.AttrReason] != api.ReasonInsufficientFunds || ev[0][api.AttrState] != api.LeaseInsufficientFunds {
		t.Fatalf("height %d: lease.closed %v", h.height, ev)
	}
	if ev := h.events(api.EventGroupUnfunded); len(ev) != 1 {
		t.Fatalf("group.insufficient_funds %v", ev)
	}
	// The provider got exactly 4 blocks and its deposit back.
	if got := h.balance("p1"); got != fund+4*1200 {
		t.Fatalf("p1 balance %d, want %d", got, fund+4*1200)
	}
	var dr api.DeploymentResponse
	h.mustQuery(api.QueryDeployment.Path, api.DeploymentRequest{ID: id}, &dr)
	if dr.Escrow.State != api.EscrowOverdrawn || dr.Escrow.Balance.Amount.Cmp(market.DecFromUint(200)) != 0 || dr.Groups[0].State != api.GroupInsufficientFunds {
		t.Fatalf("after depletion: escrow %+v group %s", dr.Escrow, dr.Groups[0].State)
	}
	h.checkSupply(2 * fund)

	// A deposit and a start open a new order (oseq 2).
	h.fail(api.CodeInsufficientFunds, "tenant", &api.MsgStartGroup{ID: id.Group(1)})
	h.ok("tenant", &api.MsgDepositDeployment{ID: id, Depositor: h.addr("tenant"), Amount: market.Coin{Amount: 100_000, Denom: api.DefaultDenom}})
	h.ok("tenant", &api.MsgStartGroup{ID: id.Group(1)})
	if ev := h.events(api.EventOrderCreated); len(ev) != 1 || ev[0][api.AttrOSeq] != "2" {
		t.Fatalf("order.created after start: %v", ev)
	}
	h.checkSupply(2 * fund)
}

// When an account cannot pay for a block, all its leases close having been paid to the
// same height, the last one it paid in full, whatever order they close in.
func TestDepletionPaysEveryLeaseToTheSameHeight(t *testing.T) {
	params := api.DefaultParams()
	params.DeploymentMinDeposit = []market.Coin{{Amount: 1000, Denom: api.DefaultDenom}}
	h := newHarnessParams(t, params, fund, "tenant", "p1", "p2")
	h.registerProvider("p1", usWest)
	h.registerProvider("p2", usWest)
	r := webDeployment(t)
	g1, g2 := r.Groups[0], r.Groups[0]
	g2.Name = "second"
	id := market.DeploymentID{Owner: h.addr("tenant"), DSeq: 1}
	// 1450 pays 2 blocks of 300 + 200 and leaves 450: enough for one more block of
	// either lease alone, not of both.
	h.ok("tenant", &api.MsgCreateDeployment{ID: id, Groups: []market.GroupSpec{g1, g2}, Version: r.Version, Deposit: market.Coin{Amount: 1450, Denom: api.DefaultDenom}})
	b1 := h.bid("p1", id.Group(1).Order(1), "300")
	b2 := h.bid("p2", id.Group(2).Order(1), "200")
	h.ok("tenant", &api.MsgCreateLease{BidID: b1}, &api.MsgCreateLease{BidID: b2})
	start := h.height
	for h.height < start+3 {
		h.block()
	}
	if ev := h.events(api.EventLeaseClosed); len(ev) != 2 {
		t.Fatalf("height %d: lease.closed %v", h.height, ev)
	}
	for _, c := range []struct {
		b    market.BidID
		rate uint64
	}{{b1, 300}, {b2, 200}} {
		var lr api.LeaseResponse
		h.mustQuery(api.QueryLease.Path, api.LeaseRequest{ID: c.b.Lease()}, &lr)
		paid := lr.Payment.Withdrawn.Amount.Add(lr.Payment.Balance.Amount)
		if want := market.DecFromUint(2 * c.rate); lr.Lease.State != api.LeaseInsufficientFunds || paid.Cmp(want) != 0 {
			t.Errorf("lease %s: %s, paid %s, want 2 blocks (%s)", c.b.Provider, lr.Lease.State, paid, want)
		}
	}
	var dr api.DeploymentResponse
	h.mustQuery(api.QueryDeployment.Path, api.DeploymentRequest{ID: id}, &dr)
	if dr.Escrow.State != api.EscrowOverdrawn || dr.Escrow.Balance.Amount.Cmp(market.DecFromUint(450)) != 0 {
		t.Errorf("escrow %s with %s, want overdrawn with 450 left", dr.Escrow.State, dr.Escrow.Balance)
	}
	h.checkSupply(3 * fund)
}
