package ledger

import (
	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

func (x *execCtx) bid(id market.BidID) (api.Bid, error) {
	var b api.Bid
	if !getJSON(x.s, bidKey(id), &b) {
		return b, api.Errorf(api.CodeNotFound, "bid %s does not exist", id)
	}
	return b, nil
}

func (x *execCtx) lease(id market.LeaseID) (api.Lease, error) {
	var l api.Lease
	if !getJSON(x.s, leaseKey(id), &l) {
		return l, api.Errorf(api.CodeNotFound, "lease %s does not exist", id)
	}
	return l, nil
}

func (x *execCtx) bidsOf(id market.OrderID) []api.Bid {
	var out []api.Bid
	x.s.ascend(bidsPrefix(id), "", func(k string, v []byte) bool {
		var b api.Bid
		decodeEntry(k, v, &b)
		out = append(out, b)
		return true
	})
	return out
}

func (x *execCtx) activeLeaseOf(id market.OrderID) (api.Lease, bool) {
	bids := x.bidsOf(id)
	for i := range bids {
		if bids[i].State == api.BidActive {
			l, err := x.lease(bids[i].ID.Lease())
			return l, err == nil && l.State == api.LeaseActive
		}
	}
	return api.Lease{}, false
}

// groupPrice is what the tenant pays at most per block for the whole group.
func groupPrice(g market.GroupSpec) market.DecCoin {
	var p market.DecCoin
	for _, ru := range g.Resources {
		p.Denom = ru.Price.Denom
		p.Amount = p.Amount.Add(ru.Price.Amount.MulUint(uint64(ru.Count)))
	}
	return p
}

func checkOffer(offer []api.ResourceOffer, g market.GroupSpec) error {
	for i, o := range offer {
		found := false
		for _, ru := range g.Resources {
			if ru.Resources.ID == o.Resources.ID {
				found = true
				if o.Count != ru.Count {
					return api.Errorf(api.CodeInvalidMsg, "resources_offer[%d]: count %d, the group's resource unit %d has %d", i, o.Count, ru.Resources.ID, ru.Count)
				}
			}
		}
		if !found {
			return api.Errorf(api.CodeInvalidMsg, "resources_offer[%d]: the group has no resource unit %d", i, o.Resources.ID)
		}
		for _, p := range offer[:i] {
			if p.Resources.ID == o.Resources.ID {
				return api.Errorf(api.CodeInvalidMsg, "resources_offer[%d]: resource unit %d is offered twice", i, o.Resources.ID)
			}
		}
	}
	return nil
}

// biddableOrder loads an order that takes bids and leases: the order and its group open,
// its deployment active.
func (x *execCtx) biddableOrder(id market.OrderID) (api.Order, api.Group, error) {
	o, err := x.order(id)
	if err != nil {
		return o, api.Group{}, err
	}
	if o.State != api.OrderOpen {
		return o, api.Group{}, api.Errorf(api.CodeInvalidState, "order %s is %s", o.ID, o.State)
	}
	g, err := x.ownedGroup(o.ID.Group())
	if err != nil {
		return o, g, err
	}
	if g.State != api.GroupOpen {
		return o, g, api.Errorf(api.CodeInvalidState, "group %s is %s", g.ID, g.State)
	}
	return o, g, nil
}

func (x *execCtx) setBid(b api.Bid) {
	x.s.setJSON(bidKey(b.ID), b)
	x.s.setJSON(bidProviderKey(b.ID), struct{}{})
}

func (x *execCtx) createBid(m *api.MsgCreateBid) error {
	var prov api.Provider
	if !getJSON(x.s, providerKey(m.Provider), &prov) {
		return api.Errorf(api.CodeUnknownProvider, "%s is not a registered provider", m.Provider)
	}
	o, _, err := x.biddableOrder(m.OrderID)
	if err != nil {
		return err
	}
	ceiling := groupPrice(o.Spec)
	if m.Price.Denom != ceiling.Denom {
		return api.Errorf(api.CodeInvalidMsg, "price: order %s is priced in %s, not %s", o.ID, ceiling.Denom, m.Price.Denom)
	}
	if m.Price.Amount.Cmp(ceiling.Amount) > 0 {
		return api.Errorf(api.CodePriceTooHigh, "price %s is above the order's price %s", m.Price, ceiling)
	}
	id := o.ID.Bid(m.Provider)
	bids := x.bidsOf(o.ID)
	for i := range bids {
		if bids[i].ID == id {
			return api.Errorf(api.CodeAlreadyExists, "provider %s has already bid on order %s", m.Provider, o.ID)
		}
	}
	if len(bids) >= int(x.p.MaxBidsPerOrder) {
		return api.Errorf(api.CodeTooManyBids, "order %s has %d bids, the most allowed (max_bids_per_order)", o.ID, len(bids))
	}
	if err := meetsRequirements(x.s, prov, o.Spec.Requirements); err != nil {
		return err
	}
	if err := checkOffer(m.ResourcesOffer, o.Spec); err != nil {
		return err
	}
	if err := x.debit(m.Provider, m.Deposit, "bid deposit"); err != nil {
		return err
	}
	x.setBid(api.Bid{ID: id, State: api.BidOpen, Price: m.Price, Deposit: m.Deposit, ResourcesOffer: m.ResourcesOffer, CreatedAt: x.height})
	x.ev.emit(api.EventBidCreated, bidAttrs(id, api.AttrPrice, m.Price.String())...)
	return nil
}

// finishBid moves a bid to a final state (closed or lost) and returns its deposit.
func (x *execCtx) finishBid(b api.Bid, state string) error {
	b.State = state
	x.setBid(b)
	if err := x.credit(b.ID.Provider, b.Deposit); err != nil {
		return err
	}
	x.ev.emit(api.EventBidClosed, bidAttrs(b.ID, api.AttrState, state)...)
	return nil
}

// closeOpenBids ends every open bid of an order (state closed or lost).
func (x *execCtx) closeOpenBids(id market.OrderID, state string) error {
	bids := x.bidsOf(id)
	for i := range bids {
		if bids[i].State != api.BidOpen {
			continue
		}
		if err := x.finishBid(bids[i], state); err != nil {
			return err
		}
	}
	return nil
}

func (x *execCtx) closeBid(m *api.MsgCloseBid) error {
	b, err := x.bid(m.ID)
	if err != nil {
		return err
	}
	switch b.State {
	case api.BidOpen:
		return x.finishBid(b, api.BidClosed)
	case api.BidActive:
		reason := m.Reason
		if reason == "" {
			reason = api.ReasonUnspecified
		}
		l, err := x.lease(b.ID.Lease())
		if err != nil {
			return err
		}
		return x.providerClosedLease(l, reason)
	default:
		return api.Errorf(api.CodeInvalidState, "bid %s is %s", b.ID, b.State)
	}
}

func (x *execCtx) createLease(m *api.MsgCreateLease) error {
	b, err := x.bid(m.BidID)
	if err != nil {
		return err
	}
	if b.State != api.BidOpen {
		return api.Errorf(api.CodeInvalidState, "bid %s is %s", b.ID, b.State)
	}
	o, g, err := x.biddableOrder(b.ID.Order())
	if err != nil {
		return err
	}
	a, err := x.escrow(g.ID.Deployment())
	if err != nil {
		return err
	}
	if a.State != api.EscrowOpen {
		return api.Errorf(api.CodeInsufficientFunds, "deployment %s escrow is %s: deposit first", g.ID.Deployment(), a.State)
	}
	lid := b.ID.Lease()
	err = x.updateEscrow(g.ID.Deployment(), func(a *api.EscrowAccount, pays *[]api.Payment) error {
		need := a.Rate.Add(b.Price.Amount)
		if a.Balance.Amount.Cmp(need) < 0 {
			return api.Errorf(api.CodeInsufficientFunds, "deployment %s escrow holds %s, less than one block of its leases (%s%s): deposit first",
				g.ID.Deployment(), a.Balance, need, a.Balance.Denom)
		}
		*pays = append(*pays, api.Payment{
			ID: lid, State: api.PaymentOpen, Rate: b.Price,
			Balance:   market.DecCoin{Denom: b.Price.Denom},
			Withdrawn: market.DecCoin{Denom: b.Price.Denom},
		})
		return nil
	})
	if err != nil {
		return err
	}
	b.State = api.BidActive
	x.setBid(b)
	if err := x.closeOpenBids(o.ID, api.BidLost); err != nil {
		return err
	}
	prev := o.State
	o.State = api.OrderActive
	x.setOrder(o, prev)
	x.s.setJSON(leaseKey(lid), api.Lease{ID: lid, State: api.LeaseActive, Price: b.Price, CreatedAt: x.height})
	x.s.setJSON(leaseProviderKey(lid), struct{}{})
	x.ev.emit(api.EventLeaseCreated, bidAttrs(market.BidID(lid), api.AttrPrice, b.Price.String())...)
	return nil
}

// closeLease ends an active lease: its payment is settled and paid out, its bid closes
// (deposit returned) and its order closes. The caller decides the group's fate.
func (x *execCtx) closeLease(l api.Lease, state, reason string) error {
	err := x.updateEscrow(l.ID.Deployment(), func(_ *api.EscrowAccount, pays *[]api.Payment) error {
		for i := range *pays {
			p := &(*pays)[i]
			if p.ID != l.ID {
				continue
			}
			if err := x.payOut(p); err != nil {
				return err
			}
			p.State = api.PaymentClosed
			if state == api.LeaseInsufficientFunds {
				p.State = api.PaymentOverdrawn
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.State, l.Reason, l.ClosedOn = state, reason, x.height
	x.s.setJSON(leaseKey(l.ID), l)
	x.ev.emit(api.EventLeaseClosed, bidAttrs(market.BidID(l.ID), api.AttrState, state, api.AttrReason, reason)...)
	b, err := x.bid(l.ID.Bid())
	if err != nil {
		return err
	}
	if err := x.finishBid(b, api.BidClosed); err != nil {
		return err
	}
	o, err := x.order(l.ID.Order())
	if err != nil {
		return err
	}
	x.closeOrder(o)
	return nil
}

// providerClosedLease closes a lease at its provider's request; the group is paused,
// for the tenant to start again (a new order) or close.
func (x *execCtx) providerClosedLease(l api.Lease, reason string) error {
	if l.State != api.LeaseActive {
		return api.Errorf(api.CodeInvalidState, "lease %s is %s", l.ID, l.State)
	}
	if err := x.closeLease(l, api.LeaseClosed, reason); err != nil {
		return err
	}
	g, err := x.group(l.ID.Order().Group())
	if err != nil {
		return err
	}
	if g.State == api.GroupOpen {
		x.setGroupState(&g, api.GroupPaused)
	}
	return nil
}

func (x *execCtx) closeLeaseMsg(m *api.MsgCloseLease) error {
	l, err := x.lease(m.ID)
	if err != nil {
		return err
	}
	if l.State != api.LeaseActive {
		return api.Errorf(api.CodeInvalidState, "lease %s is %s", l.ID, l.State)
	}
	if m.Sender != m.ID.Owner {
		return x.providerClosedLease(l, m.Reason)
	}
	if err := x.closeLease(l, api.LeaseClosed, api.ReasonOwner); err != nil {
		return err
	}
	g, err := x.group(l.ID.Order().Group())
	if err != nil {
		return err
	}
	x.setGroupState(&g, api.GroupClosed)
	return nil
}

func (x *execCtx) withdrawLease(m *api.MsgWithdrawLease) error {
	l, err := x.lease(m.ID)
	if err != nil {
		return err
	}
	if l.State != api.LeaseActive {
		return api.Errorf(api.CodeInvalidState, "lease %s is %s; its payment was paid out when it closed", l.ID, l.State)
	}
	return x.updateEscrow(l.ID.Deployment(), func(_ *api.EscrowAccount, pays *[]api.Payment) error {
		for i := range *pays {
			if (*pays)[i].ID == l.ID {
				return x.payOut(&(*pays)[i])
			}
		}
		return api.Errorf(api.CodeInternal, "lease %s has no payment", l.ID)
	})
}
