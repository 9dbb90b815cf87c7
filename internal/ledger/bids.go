package ledger

import (
	"berth.dev/berth/internal/market"
)

func (x *execCtx) bid(id market.BidID) (Bid, error) {
	var b Bid
	if !getJSON(x.s, bidKey(id), &b) {
		return b, errf(CodeNotFound, "bid %s does not exist", id)
	}
	return b, nil
}

func (x *execCtx) lease(id market.LeaseID) (Lease, error) {
	var l Lease
	if !getJSON(x.s, leaseKey(id), &l) {
		return l, errf(CodeNotFound, "lease %s does not exist", id)
	}
	return l, nil
}

func (x *execCtx) bidsOf(id market.OrderID) []Bid {
	var out []Bid
	x.s.ascend(bidsPrefix(id), "", func(k string, v []byte) bool {
		var b Bid
		decodeEntry(k, v, &b)
		out = append(out, b)
		return true
	})
	return out
}

func (x *execCtx) activeLeaseOf(id market.OrderID) (Lease, bool) {
	bids := x.bidsOf(id)
	for i := range bids {
		if bids[i].State == BidActive {
			l, err := x.lease(bids[i].ID.Lease())
			return l, err == nil && l.State == LeaseActive
		}
	}
	return Lease{}, false
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

func checkOffer(offer []ResourceOffer, g market.GroupSpec) error {
	for i, o := range offer {
		found := false
		for _, ru := range g.Resources {
			if ru.Resources.ID == o.Resources.ID {
				found = true
				if o.Count != ru.Count {
					return invalid("resources_offer[%d]: count %d, the group's resource unit %d has %d", i, o.Count, ru.Resources.ID, ru.Count)
				}
			}
		}
		if !found {
			return invalid("resources_offer[%d]: the group has no resource unit %d", i, o.Resources.ID)
		}
		for _, p := range offer[:i] {
			if p.Resources.ID == o.Resources.ID {
				return invalid("resources_offer[%d]: resource unit %d is offered twice", i, o.Resources.ID)
			}
		}
	}
	return nil
}

// biddableOrder loads an order that takes bids and leases: the order and its group open,
// its deployment active.
func (x *execCtx) biddableOrder(id market.OrderID) (Order, Group, error) {
	o, err := x.order(id)
	if err != nil {
		return o, Group{}, err
	}
	if o.State != OrderOpen {
		return o, Group{}, errf(CodeInvalidState, "order %s is %s", o.ID, o.State)
	}
	g, err := x.ownedGroup(o.ID.Group())
	if err != nil {
		return o, g, err
	}
	if g.State != GroupOpen {
		return o, g, errf(CodeInvalidState, "group %s is %s", g.ID, g.State)
	}
	return o, g, nil
}

func (x *execCtx) setBid(b Bid) {
	x.s.setJSON(bidKey(b.ID), b)
	x.s.setJSON(bidProviderKey(b.ID), struct{}{})
}

func (x *execCtx) createBid(m *MsgCreateBid) error {
	var prov Provider
	if !getJSON(x.s, providerKey(m.Provider), &prov) {
		return errf(CodeUnknownProvider, "%s is not a registered provider", m.Provider)
	}
	o, _, err := x.biddableOrder(m.OrderID)
	if err != nil {
		return err
	}
	ceiling := groupPrice(o.Spec)
	if m.Price.Denom != ceiling.Denom {
		return invalid("price: order %s is priced in %s, not %s", o.ID, ceiling.Denom, m.Price.Denom)
	}
	if m.Price.Amount.Cmp(ceiling.Amount) > 0 {
		return errf(CodePriceTooHigh, "price %s is above the order's price %s", m.Price, ceiling)
	}
	id := o.ID.Bid(m.Provider)
	bids := x.bidsOf(o.ID)
	for i := range bids {
		if bids[i].ID == id {
			return errf(CodeAlreadyExists, "provider %s has already bid on order %s", m.Provider, o.ID)
		}
	}
	if len(bids) >= int(x.p.MaxBidsPerOrder) {
		return errf(CodeTooManyBids, "order %s has %d bids, the most allowed (max_bids_per_order)", o.ID, len(bids))
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
	x.setBid(Bid{ID: id, State: BidOpen, Price: m.Price, Deposit: m.Deposit, ResourcesOffer: m.ResourcesOffer, CreatedAt: x.height})
	x.ev.emit(EventBidCreated, bidAttrs(id, AttrPrice, m.Price.String())...)
	return nil
}

// finishBid moves a bid to a final state (closed or lost) and returns its deposit.
func (x *execCtx) finishBid(b Bid, state string) error {
	b.State = state
	x.setBid(b)
	if err := x.credit(b.ID.Provider, b.Deposit); err != nil {
		return err
	}
	x.ev.emit(EventBidClosed, bidAttrs(b.ID, AttrState, state)...)
	return nil
}

// closeOpenBids ends every open bid of an order (state closed or lost).
func (x *execCtx) closeOpenBids(id market.OrderID, state string) error {
	bids := x.bidsOf(id)
	for i := range bids {
		if bids[i].State != BidOpen {
			continue
		}
		if err := x.finishBid(bids[i], state); err != nil {
			return err
		}
	}
	return nil
}

func (x *execCtx) closeBid(m *MsgCloseBid) error {
	b, err := x.bid(m.ID)
	if err != nil {
		return err
	}
	switch b.State {
	case BidOpen:
		return x.finishBid(b, BidClosed)
	case BidActive:
		reason := m.Reason
		if reason == "" {
			reason = ReasonUnspecified
		}
		l, err := x.lease(b.ID.Lease())
		if err != nil {
			return err
		}
		return x.providerClosedLease(l, reason)
	default:
		return errf(CodeInvalidState, "bid %s is %s", b.ID, b.State)
	}
}

func (x *execCtx) createLease(m *MsgCreateLease) error {
	b, err := x.bid(m.BidID)
	if err != nil {
		return err
	}
	if b.State != BidOpen {
		return errf(CodeInvalidState, "bid %s is %s", b.ID, b.State)
	}
	o, g, err := x.biddableOrder(b.ID.Order())
	if err != nil {
		return err
	}
	a, err := x.escrow(g.ID.Deployment())
	if err != nil {
		return err
	}
	if a.State != EscrowOpen {
		return errf(CodeInsufficientFunds, "deployment %s escrow is %s: deposit first", g.ID.Deployment(), a.State)
	}
	lid := b.ID.Lease()
	err = x.updateEscrow(g.ID.Deployment(), func(a *EscrowAccount, pays *[]Payment) error {
		need := a.Rate.Add(b.Price.Amount)
		if a.Balance.Amount.Cmp(need) < 0 {
			return errf(CodeInsufficientFunds, "deployment %s escrow holds %s, less than one block of its leases (%s%s): deposit first",
				g.ID.Deployment(), a.Balance, need, a.Balance.Denom)
		}
		*pays = append(*pays, Payment{
			ID: lid, State: PaymentOpen, Rate: b.Price,
			Balance:   market.DecCoin{Denom: b.Price.Denom},
			Withdrawn: market.DecCoin{Denom: b.Price.Denom},
		})
		return nil
	})
	if err != nil {
		return err
	}
	b.State = BidActive
	x.setBid(b)
	if err := x.closeOpenBids(o.ID, BidLost); err != nil {
		return err
	}
	prev := o.State
	o.State = OrderActive
	x.setOrder(o, prev)
	x.s.setJSON(leaseKey(lid), Lease{ID: lid, State: LeaseActive, Price: b.Price, CreatedAt: x.height})
	x.s.setJSON(leaseProviderKey(lid), struct{}{})
	x.ev.emit(EventLeaseCreated, bidAttrs(market.BidID(lid), AttrPrice, b.Price.String())...)
	return nil
}

// closeLease ends an active lease: its payment is settled and paid out, its bid closes
// (deposit returned) and its order closes. The caller decides the group's fate.
func (x *execCtx) closeLease(l Lease, state, reason string) error {
	err := x.updateEscrow(l.ID.Deployment(), func(_ *EscrowAccount, pays *[]Payment) error {
		for i := range *pays {
			p := &(*pays)[i]
			if p.ID != l.ID {
				continue
			}
			if err := x.payOut(p); err != nil {
				return err
			}
			p.State = PaymentClosed
			if state == LeaseInsufficientFunds {
				p.State = PaymentOverdrawn
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.State, l.Reason, l.ClosedOn = state, reason, x.height
	x.s.setJSON(leaseKey(l.ID), l)
	x.ev.emit(EventLeaseClosed, bidAttrs(market.BidID(l.ID), AttrState, state, AttrReason, reason)...)
	b, err := x.bid(l.ID.Bid())
	if err != nil {
		return err
	}
	if err := x.finishBid(b, BidClosed); err != nil {
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
func (x *execCtx) providerClosedLease(l Lease, reason string) error {
	if l.State != LeaseActive {
		return errf(CodeInvalidState, "lease %s is %s", l.ID, l.State)
	}
	if err := x.closeLease(l, LeaseClosed, reason); err != nil {
		return err
	}
	g, err := x.group(l.ID.Order().Group())
	if err != nil {
		return err
	}
	if g.State == GroupOpen {
		x.setGroupState(&g, GroupPaused)
	}
	return nil
}

func (x *execCtx) closeLeaseMsg(m *MsgCloseLease) error {
	l, err := x.lease(m.ID)
	if err != nil {
		return err
	}
	if l.State != LeaseActive {
		return errf(CodeInvalidState, "lease %s is %s", l.ID, l.State)
	}
	if m.Sender != m.ID.Owner {
		return x.providerClosedLease(l, m.Reason)
	}
	if err := x.closeLease(l, LeaseClosed, ReasonOwner); err != nil {
		return err
	}
	g, err := x.group(l.ID.Order().Group())
	if err != nil {
		return err
	}
	x.setGroupState(&g, GroupClosed)
	return nil
}

func (x *execCtx) withdrawLease(m *MsgWithdrawLease) error {
	l, err := x.lease(m.ID)
	if err != nil {
		return err
	}
	if l.State != LeaseActive {
		return errf(CodeInvalidState, "lease %s is %s; its payment was paid out when it closed", l.ID, l.State)
	}
	return x.updateEscrow(l.ID.Deployment(), func(_ *EscrowAccount, pays *[]Payment) error {
		for i := range *pays {
			if (*pays)[i].ID == l.ID {
				return x.payOut(&(*pays)[i])
			}
		}
		return errf(CodeInternal, "lease %s has no payment", l.ID)
	})
}
