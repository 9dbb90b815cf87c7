package ledger

import (
	"fmt"
	"slices"
	"sort"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// queryPages reads every page of a list query, limit items at a time, and returns the
// IDs listed, sorted.
func queryPages[Resp any](h *harness, path string, limit uint32, req func(api.Page) any, ids func(Resp) ([]string, []byte)) []string {
	var out []string
	var key []byte
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			h.t.Fatalf("query %s: the pages do not end", path)
		}
		var resp Resp
		h.mustQuery(path, req(api.Page{Key: key, Limit: limit}), &resp)
		list, next := ids(resp)
		out = append(out, list...)
		if len(next) == 0 {
			break
		}
		key = next
	}
	sort.Strings(out)
	return out
}

// checkListQuery runs a list query with random filters, page by page, and checks that
// it lists exactly the entries that match.
func (r *propRun) checkListQuery() {
	h, snap := r.h, r.snap
	limit := uint32(1 + r.rng.IntN(4))
	owner, provider := "", ""
	if r.chance(50) {
		owner = h.addr(pick(r.rng, r.tenants))
	}
	if r.chance(50) {
		provider = h.addr(pick(r.rng, r.providers))
	}
	var got, want []string
	var what string
	switch r.rng.IntN(3) {
	case 0:
		req := api.OrdersRequest{State: pick(r.rng, []string{"", api.OrderOpen, api.OrderActive, api.OrderClosed}), Owner: owner}
		what = fmt.Sprintf("%+v", req)
		got = queryPages(h, api.QueryOrders.Path, limit, func(p api.Page) any { req.Page = p; return req }, func(resp api.OrdersResponse) ([]string, []byte) {
			var ids []string
			for _, o := range resp.Orders {
				ids = append(ids, o.ID.String())
			}
			return ids, resp.NextKey
		})
		for _, o := range snap.orders {
			if (req.State == "" || o.State == req.State) && (owner == "" || o.ID.Owner == owner) {
				want = append(want, o.ID.String())
			}
		}
	case 1:
		req := api.BidsRequest{State: pick(r.rng, []string{"", api.BidOpen, api.BidActive, api.BidLost, api.BidClosed})}
		switch {
		case provider != "":
			req.Provider = provider
		case owner != "":
			req.Owner = owner
			if r.chance(50) {
				req.DSeq = uint64(1 + r.rng.IntN(12))
			}
		default:
			if len(snap.orders) == 0 {
				return
			}
			o := pick(r.rng, snap.orders).ID
			req.Order = &o
		}
		what = fmt.Sprintf("%+v", req)
		got = queryPages(h, api.QueryBids.Path, limit, func(p api.Page) any { req.Page = p; return req }, func(resp api.BidsResponse) ([]string, []byte) {
			var ids []string
			for _, b := range resp.Bids {
				ids = append(ids, b.ID.String())
			}
			return ids, resp.NextKey
		})
		for _, b := range snap.bids {
			if (req.State == "" || b.State == req.State) && (req.Provider == "" || b.ID.Provider == req.Provider) &&
				(req.Owner == "" || b.ID.Owner == req.Owner) && (req.DSeq == 0 || b.ID.DSeq == req.DSeq) &&
				(req.Order == nil || b.ID.Order() == *req.Order) {
				want = append(want, b.ID.String())
			}
		}
	default:
		req := api.LeasesRequest{State: pick(r.rng, []string{"", api.LeaseActive, api.LeaseInsufficientFunds, api.LeaseClosed}), Owner: owner, Provider: provider}
		if owner != "" && r.chance(50) {
			req.DSeq = uint64(1 + r.rng.IntN(12))
		}
		what = fmt.Sprintf("%+v", req)
		got = queryPages(h, api.QueryLeases.Path, limit, func(p api.Page) any { req.Page = p; return req }, func(resp api.LeasesResponse) ([]string, []byte) {
			var ids []string
			for _, l := range resp.Leases {
				ids = append(ids, l.Lease.ID.String())
			}
			return ids, resp.NextKey
		})
		for _, l := range snap.leases {
			if (req.State == "" || l.State == req.State) && (req.Provider == "" || l.ID.Provider == req.Provider) &&
				(req.Owner == "" || l.ID.Owner == req.Owner) && (req.DSeq == 0 || l.ID.DSeq == req.DSeq) {
				want = append(want, l.ID.String())
			}
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		r.t.Fatalf("height %d: query %s (pages of %d) lists %d entries, want %d:\ngot  %v\nwant %v", snap.v.height, what, limit, len(got), len(want), got, want)
	}
}

// checkQueries checks that queries, which settle escrow to the query's height, agree
// with the state: a random lease, a random deployment, a random list; and the supply
// now and then.
func (r *propRun) checkQueries() {
	t, h, snap := r.t, r.h, r.snap
	height := snap.v.height
	if height%10 == 0 {
		var sup api.SupplyResponse
		h.mustQuery(api.QuerySupply.Path, nil, &sup)
		if len(sup.Supply) != 1 || sup.Supply[0].Denom != api.DefaultDenom || sup.Supply[0].Amount.Cmp(market.DecFromUint(r.total)) != 0 {
			t.Fatalf("height %d: supply query %v, want %d%s", height, sup.Supply, r.total, api.DefaultDenom)
		}
	}
	if len(snap.leases) > 0 {
		l := pick(r.rng, snap.leases)
		var lr api.LeaseResponse
		h.mustQuery(api.QueryLease.Path, api.LeaseRequest{ID: l.ID}, &lr)
		paid := lr.Payment.Balance.Amount.Add(lr.Payment.Withdrawn.Amount)
		if l.State == api.LeaseActive {
			if want := l.Price.Amount.MulUint(uint64(height - l.CreatedAt)); paid.Cmp(want) != 0 || lr.Payment.State != api.PaymentOpen {
				t.Fatalf("height %d: lease %s (created at %d) query: %s payment paid %s, want %s", height, l.ID, l.CreatedAt, lr.Payment.State, paid, want)
			}
		} else if !jsonEqual(lr.Lease, l) {
			t.Fatalf("height %d: lease %s query %+v, state %+v", height, l.ID, lr.Lease, l)
		}
	}
	r.checkListQuery()
	if len(snap.escrows) > 0 {
		a := pick(r.rng, snap.escrows)
		var dr api.DeploymentResponse
		h.mustQuery(api.QueryDeployment.Path, api.DeploymentRequest{ID: a.ID}, &dr)
		e := dr.Escrow
		if e.Balance.Amount.Add(e.Transferred.Amount).Cmp(a.Balance.Amount.Add(a.Transferred.Amount)) != 0 || e.Balance.Amount.Sign() < 0 {
			t.Fatalf("height %d: deployment %s query: escrow %s + %s transferred, state %s + %s", height, a.ID, e.Balance, e.Transferred, a.Balance, a.Transferred)
		}
		if e.State == api.EscrowOpen && e.SettledAt != height {
			t.Fatalf("height %d: deployment %s query: open escrow settled to %d", height, a.ID, e.SettledAt)
		}
	}
}

// checkInvariants checks the committed state.
func (r *propRun) checkInvariants() {
	t := r.t
	v := r.h.app.s.committed()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("height %d: "+format, append([]any{v.height}, args...)...)
	}

	// 1. Supply.
	if sup := Supply(v); len(sup) != 1 || sup[api.DefaultDenom].Cmp(market.DecFromUint(r.total)) != 0 {
		fail("supply %v, want %d%s", sup, r.total, api.DefaultDenom)
	}

	snap := newPropSnap(v, r.cache)
	r.snap = snap
	deps := map[market.DeploymentID]api.Deployment{}
	for _, d := range snap.deps {
		deps[d.ID] = d
	}
	groups := map[market.GroupID]propGroup{}
	groupsOf := map[market.DeploymentID][]propGroup{}
	for _, g := range snap.groups {
		groups[g.ID] = g
		groupsOf[g.ID.Deployment()] = append(groupsOf[g.ID.Deployment()], g)
	}
	orders := map[market.OrderID]propOrder{}
	ordersOf := map[market.GroupID][]propOrder{}
	for _, o := range snap.orders {
		orders[o.ID] = o
		ordersOf[o.ID.Group()] = append(ordersOf[o.ID.Group()], o)
	}
	bids := map[market.BidID]api.Bid{}
	bidsOf := map[market.OrderID][]api.Bid{}
	for _, b := range snap.bids {
		bids[b.ID] = b
		bidsOf[b.ID.Order()] = append(bidsOf[b.ID.Order()], b)
		if _, ok := v.get(bidProviderKey(b.ID)); !ok {
			fail("bid %s is missing from the provider index", b.ID)
		}
	}
	leases := map[market.LeaseID]api.Lease{}
	leasesOf := map[market.OrderID][]api.Lease{}
	for _, l := range snap.leases {
		leases[l.ID] = l
		leasesOf[l.ID.Order()] = append(leasesOf[l.ID.Order()], l)
		if _, ok := v.get(leaseProviderKey(l.ID)); !ok {
			fail("lease %s is missing from the provider index", l.ID)
		}
	}
	escrows := map[market.DeploymentID]api.EscrowAccount{}
	for _, a := range snap.escrows {
		escrows[a.ID] = a
	}
	pays := map[market.LeaseID]api.Payment{}
	paysOf := map[market.DeploymentID][]api.Payment{}
	for _, p := range snap.pays {
		pays[p.ID] = p
		paysOf[p.ID.Deployment()] = append(paysOf[p.ID.Deployment()], p)
	}
	if len(escrows) != len(deps) {
		fail("%d escrow accounts for %d deployments", len(escrows), len(deps))
	}
	if len(pays) != len(leases) {
		fail("%d payments for %d leases", len(pays), len(leases))
	}

	// 2. No negative balances; the accounts' books balance.
	depletions := 0
	v.ascend(depletionPrefix(), "", func(string, []byte) bool { depletions++; return true })
	scheduled := 0
	for id, a := range escrows {
		if a.Balance.Amount.Sign() < 0 || a.Transferred.Amount.Sign() < 0 {
			fail("escrow of %s: balance %s, transferred %s", id, a.Balance, a.Transferred)
		}
		rate, paid := market.Dec{}, market.Dec{}
		for _, p := range paysOf[id] {
			if p.State == api.PaymentOpen {
				rate = rate.Add(p.Rate.Amount)
			}
			paid = paid.Add(p.Balance.Amount).Add(p.Withdrawn.Amount)
		}
		if a.Rate.Cmp(rate) != 0 {
			fail("escrow of %s: rate %s, its open payments' rates add up to %s", id, a.Rate, rate)
		}
		if a.Transferred.Amount.Cmp(paid) != 0 {
			fail("escrow of %s: transferred %s, its payments were paid %s", id, a.Transferred.Amount, paid)
		}
		switch a.State {
		case api.EscrowOpen:
			if a.Rate.Sign() > 0 && a.DepletesAt < v.height {
				fail("escrow of %s is open at rate %s but depleted at %d", id, a.Rate, a.DepletesAt)
			}
		case api.EscrowOverdrawn, api.EscrowClosed:
			if a.Rate.Sign() != 0 || a.DepletesAt != 0 {
				fail("escrow of %s is %s with rate %s, depletes at %d", id, a.State, a.Rate, a.DepletesAt)
			}
		default:
			fail("escrow of %s is %q", id, a.State)
		}
		if a.DepletesAt != 0 {
			scheduled++
			if _, ok := v.get(depletionKey(a.DepletesAt, id)); !ok {
				fail("escrow of %s depletes at %d but is not scheduled", id, a.DepletesAt)
			}
		}
	}
	if depletions != scheduled {
		fail("%d depletions scheduled for %d accounts with a depletion height", depletions, scheduled)
	}
	for id, p := range pays {
		if p.Balance.Amount.Sign() < 0 || p.Withdrawn.Amount.Sign() < 0 {
			fail("payment %s: balance %s, withdrawn %s", id, p.Balance, p.Withdrawn)
		}
		l, ok := leases[id]
		if !ok {
			fail("payment %s has no lease", id)
		}
		a := escrows[id.Deployment()]
		// The payment has been paid its rate for every block from its lease's creation to
		// the last block paid for: the account's settlement height while the lease runs,
		// the block it closed in, or the block before when its account could not pay
		// that one.
		var to int64
		switch {
		case l.State == api.LeaseActive && p.State == api.PaymentOpen:
			to = a.SettledAt
		case l.State == api.LeaseClosed && p.State == api.PaymentClosed:
			to = l.ClosedOn
		case l.State == api.LeaseInsufficientFunds && p.State == api.PaymentOverdrawn:
			to = l.ClosedOn - 1
		default:
			fail("lease %s is %s with a %s payment", id, l.State, p.State)
		}
		if want := p.Rate.Amount.MulUint(uint64(to - l.CreatedAt)); p.Balance.Amount.Add(p.Withdrawn.Amount).Cmp(want) != 0 {
			fail("lease %s (%s, created at %d, closed on %d) at %s per block was paid %s + %s withdrawn, want %s for the blocks to %d",
				id, l.State, l.CreatedAt, l.ClosedOn, p.Rate, p.Balance.Amount, p.Withdrawn.Amount, want, to)
		}
		if p.State != api.PaymentOpen && !p.Balance.Amount.IsZero() {
			if n, _ := p.Balance.Amount.TruncateUint(); n != 0 {
				fail("payment %s is %s with %s not paid out", id, p.State, p.Balance)
			}
		}
	}

	// 3 and 4. Bids and leases per order; orders and their groups.
	inIndex := 0
	for _, st := range []string{api.OrderOpen, api.OrderActive, api.OrderClosed} {
		v.ascend(orderStatePrefix(st), "", func(k string, _ []byte) bool {
			inIndex++
			id, ok := decodeOrderIDKey(k, orderStatePrefix(st))
			if o, found := orders[id]; !ok || !found || o.State != st {
				fail("order index %s says %s, the order is %q", id, st, o.State)
			}
			return true
		})
	}
	if inIndex != len(orders) {
		fail("order index has %d entries for %d orders", inIndex, len(orders))
	}
	for id, o := range orders {
		obids := bidsOf[id]
		if len(obids) > int(r.params.MaxBidsPerOrder) {
			fail("order %s has %d bids, max_bids_per_order is %d", id, len(obids), r.params.MaxBidsPerOrder)
		}
		var activeBids, openBids []api.Bid
		for _, b := range obids {
			switch b.State {
			case api.BidActive:
				activeBids = append(activeBids, b)
			case api.BidOpen:
				openBids = append(openBids, b)
			}
		}
		var active []api.Lease
		for _, l := range leasesOf[id] {
			if l.State == api.LeaseActive {
				active = append(active, l)
			}
		}
		if len(active) > 1 {
			fail("order %s has %d active leases", id, len(active))
		}
		g, ok := groups[id.Group()]
		if !ok {
			fail("order %s has no group", id)
		}
		switch o.State {
		case api.OrderOpen:
			if len(active) != 0 || len(activeBids) != 0 {
				fail("open order %s has %d active leases and %d active bids", id, len(active), len(activeBids))
			}
			if g.State != api.GroupOpen {
				fail("order %s is open, its group is %s", id, g.State)
			}
		case api.OrderActive:
			if len(active) != 1 || len(activeBids) != 1 || active[0].ID.Bid() != activeBids[0].ID || len(openBids) != 0 {
				fail("active order %s has %d active leases, %d active bids, %d open bids", id, len(active), len(activeBids), len(openBids))
			}
			if g.State != api.GroupOpen {
				fail("order %s is active, its group is %s", id, g.State)
			}
		case api.OrderClosed:
			if len(active) != 0 || len(activeBids) != 0 || len(openBids) != 0 {
				fail("closed order %s has %d active leases, %d active bids, %d open bids", id, len(active), len(activeBids), len(openBids))
			}
		default:
			fail("order %s is %q", id, o.State)
		}
	}
	for id, g := range groups {
		if g.LastOSeq == 0 {
			fail("group %s has no order", id)
		}
		for _, o := range ordersOf[id] {
			if o.ID.OSeq > g.LastOSeq {
				fail("group %s has order %s after its last %d", id, o.ID, g.LastOSeq)
			}
			if o.ID.OSeq < g.LastOSeq && o.State != api.OrderClosed {
				fail("group %s: order %s is %s, its newest is %d", id, o.ID, o.State, g.LastOSeq)
			}
		}
		last := orders[id.Order(g.LastOSeq)]
		if open := last.State == api.OrderOpen || last.State == api.OrderActive; open != (g.State == api.GroupOpen) {
			fail("group %s is %s, its order %s is %s", id, g.State, last.ID, last.State)
		}
		d := deps[id.Deployment()]
		if d.State == api.DeploymentClosed && g.State != api.GroupClosed {
			fail("deployment %s is closed, its group %s is %s", d.ID, id, g.State)
		}
	}
	for id, d := range deps {
		a := escrows[id]
		if (d.State == api.DeploymentClosed) != (a.State == api.EscrowClosed) {
			fail("deployment %s is %s, its escrow %s", id, d.State, a.State)
		}
		if len(groupsOf[id]) == 0 {
			fail("deployment %s has no groups", id)
		}
	}
	for id, b := range bids {
		o := orders[id.Order()]
		l, hasLease := leases[id.Lease()]
		switch b.State {
		case api.BidOpen:
			if o.State != api.OrderOpen || hasLease && l.State == api.LeaseActive {
				fail("bid %s is open, its order is %s", id, o.State)
			}
		case api.BidActive:
			if !hasLease || l.State != api.LeaseActive {
				fail("bid %s is active without an active lease", id)
			}
		case api.BidLost, api.BidClosed:
			if hasLease && l.State == api.LeaseActive {
				fail("bid %s is %s, its lease active", id, b.State)
			}
		default:
			fail("bid %s is %q", id, b.State)
		}
	}
	for id, l := range leases {
		if l.State == api.LeaseActive && deps[id.Deployment()].State != api.DeploymentActive {
			fail("lease %s is active, its deployment %s", id, deps[id.Deployment()].State)
		}
	}
}
