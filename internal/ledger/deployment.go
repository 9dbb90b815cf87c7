package ledger

import (
	"berth.dev/berth/internal/market"
)

func (x *execCtx) deployment(id market.DeploymentID) (Deployment, error) {
	var d Deployment
	if !getJSON(x.s, deploymentKey(id), &d) {
		return d, errf(CodeNotFound, "deployment %s does not exist", id)
	}
	return d, nil
}

func (x *execCtx) activeDeployment(id market.DeploymentID) (Deployment, error) {
	d, err := x.deployment(id)
	if err == nil && d.State != DeploymentActive {
		err = errf(CodeInvalidState, "deployment %s is %s", id, d.State)
	}
	return d, err
}

func (x *execCtx) group(id market.GroupID) (Group, error) {
	var g Group
	if !getJSON(x.s, groupKey(id), &g) {
		return g, errf(CodeNotFound, "group %s does not exist", id)
	}
	return g, nil
}

func (x *execCtx) order(id market.OrderID) (Order, error) {
	var o Order
	if !getJSON(x.s, orderKey(id), &o) {
		return o, errf(CodeNotFound, "order %s does not exist", id)
	}
	return o, nil
}

// setOrder saves an order and keeps the order-by-state index in step.
func (x *execCtx) setOrder(o Order, prevState string) {
	if prevState != "" && prevState != o.State {
		x.s.del(orderStateKey(prevState, o.ID))
	}
	x.s.setJSON(orderStateKey(o.State, o.ID), struct{}{})
	x.s.setJSON(orderKey(o.ID), o)
}

// openOrder puts a group up for bids with a new order.
func (x *execCtx) openOrder(g *Group) {
	g.LastOSeq++
	o := Order{ID: g.ID.Order(g.LastOSeq), State: OrderOpen, Spec: g.Spec, CreatedAt: x.height}
	x.setOrder(o, "")
	x.ev.emit(EventOrderCreated, orderAttrs(o.ID)...)
}

func (x *execCtx) createDeployment(m *MsgCreateDeployment) error {
	if _, ok := x.s.get(deploymentKey(m.ID)); ok {
		return errf(CodeAlreadyExists, "deployment %s already exists", m.ID)
	}
	if err := x.debit(m.ID.Owner, m.Deposit, "deployment deposit"); err != nil {
		return err
	}
	x.s.setJSON(deploymentKey(m.ID), Deployment{ID: m.ID, State: DeploymentActive, Version: m.Version, CreatedAt: x.height})
	denom := m.Deposit.Denom
	x.s.setJSON(escrowKey(m.ID), EscrowAccount{
		ID: m.ID, Owner: m.ID.Owner, State: EscrowOpen,
		Balance:     market.DecCoin{Amount: market.DecFromUint(uint64(m.Deposit.Amount)), Denom: denom},
		Transferred: market.DecCoin{Denom: denom},
		SettledAt:   x.height,
	})
	x.ev.emit(EventDeploymentCreated, deploymentAttrs(m.ID, AttrVersion, versionHex(m.Version))...)
	x.ev.emit(EventDeposit, deploymentAttrs(m.ID, AttrFrom, m.ID.Owner, AttrAmount, m.Deposit.String())...)
	for i, spec := range m.Groups {
		g := Group{ID: m.ID.Group(uint32(i + 1)), State: GroupOpen, Spec: spec, CreatedAt: x.height}
		x.openOrder(&g)
		x.s.setJSON(groupKey(g.ID), g)
	}
	return nil
}

func (x *execCtx) updateDeployment(m *MsgUpdateDeployment) error {
	d, err := x.activeDeployment(m.ID)
	if err != nil {
		return err
	}
	d.Version = m.Version
	x.s.setJSON(deploymentKey(m.ID), d)
	x.ev.emit(EventDeploymentUpdated, deploymentAttrs(m.ID, AttrVersion, versionHex(m.Version))...)
	return nil
}

func (x *execCtx) depositDeployment(m *MsgDepositDeployment) error {
	if _, err := x.activeDeployment(m.ID); err != nil {
		return err
	}
	a, err := x.escrow(m.ID)
	if err != nil {
		return err
	}
	if a.Balance.Denom != m.Amount.Denom {
		return invalid("amount: deployment %s is paid in %s, not %s", m.ID, a.Balance.Denom, m.Amount.Denom)
	}
	if err := x.debit(m.Depositor, m.Amount, "deposit"); err != nil {
		return err
	}
	err = x.updateEscrow(m.ID, func(a *EscrowAccount, _ *[]Payment) error {
		a.Balance.Amount = a.Balance.Amount.Add(market.DecFromUint(uint64(m.Amount.Amount)))
		a.State = EscrowOpen
		return nil
	})
	if err != nil {
		return err
	}
	x.ev.emit(EventDeposit, deploymentAttrs(m.ID, AttrFrom, m.Depositor, AttrAmount, m.Amount.String())...)
	return nil
}

// endGroupOrder ends the group's current order: an open order closes with its bids; an
// active one closes with its lease (leaseState and reason say how).
func (x *execCtx) endGroupOrder(g Group, reason string) error {
	if g.LastOSeq == 0 {
		return nil
	}
	o, err := x.order(g.ID.Order(g.LastOSeq))
	if err != nil {
		return err
	}
	switch o.State {
	case OrderOpen:
		if err := x.closeOpenBids(o.ID, BidClosed); err != nil {
			return err
		}
		x.closeOrder(o)
	case OrderActive:
		l, ok := x.activeLeaseOf(o.ID)
		if !ok {
			return errf(CodeInternal, "order %s is active without an active lease", o.ID)
		}
		return x.closeLease(l, LeaseClosed, reason)
	}
	return nil
}

func (x *execCtx) closeOrder(o Order) {
	prev := o.State
	o.State = OrderClosed
	x.setOrder(o, prev)
	x.ev.emit(EventOrderClosed, orderAttrs(o.ID)...)
}

func (x *execCtx) closeDeployment(m *MsgCloseDeployment) error {
	d, err := x.activeDeployment(m.ID)
	if err != nil {
		return err
	}
	var groups []Group
	x.s.ascend(groupsPrefix(m.ID), "", func(k string, v []byte) bool {
		var g Group
		decodeEntry(k, v, &g)
		groups = append(groups, g)
		return true
	})
	for i := range groups {
		g := &groups[i]
		if g.State == GroupClosed {
			continue
		}
		if err := x.endGroupOrder(*g, ReasonOwner); err != nil {
			return err
		}
		x.setGroupState(g, GroupClosed)
	}
	var refund market.Coin
	err = x.updateEscrow(m.ID, func(a *EscrowAccount, _ *[]Payment) error {
		n, ok := a.Balance.Amount.TruncateUint()
		if !ok {
			return errf(CodeInternal, "escrow of %s has balance %s", m.ID, a.Balance)
		}
		refund = market.Coin{Amount: market.Uint(n), Denom: a.Balance.Denom}
		a.Balance.Amount = a.Balance.Amount.Sub(market.DecFromUint(n))
		a.State = EscrowClosed
		return x.credit(a.Owner, refund)
	})
	if err != nil {
		return err
	}
	d.State = DeploymentClosed
	x.s.setJSON(deploymentKey(m.ID), d)
	x.ev.emit(EventDeploymentClosed, deploymentAttrs(m.ID, AttrAmount, refund.String())...)
	return nil
}

// groupEvents are the events of the group states a message can move a group to.
var groupEvents = map[string]string{
	GroupOpen: EventGroupStarted, GroupPaused: EventGroupPaused,
	GroupInsufficientFunds: EventGroupUnfunded, GroupClosed: EventGroupClosed,
}

// setGroupState saves the group in its new state and emits the state's event.
func (x *execCtx) setGroupState(g *Group, state string) {
	g.State = state
	x.s.setJSON(groupKey(g.ID), g)
	x.ev.emit(groupEvents[state], groupAttrs(g.ID)...)
}

// ownedGroup loads a group of an active deployment.
func (x *execCtx) ownedGroup(id market.GroupID) (Group, error) {
	if _, err := x.activeDeployment(id.Deployment()); err != nil {
		return Group{}, err
	}
	return x.group(id)
}

func (x *execCtx) closeGroup(m *MsgCloseGroup) error {
	g, err := x.ownedGroup(m.ID)
	if err != nil {
		return err
	}
	if g.State == GroupClosed {
		return errf(CodeInvalidState, "group %s is already closed", g.ID)
	}
	if err := x.endGroupOrder(g, ReasonOwner); err != nil {
		return err
	}
	x.setGroupState(&g, GroupClosed)
	return nil
}

func (x *execCtx) pauseGroup(m *MsgPauseGroup) error {
	g, err := x.ownedGroup(m.ID)
	if err != nil {
		return err
	}
	if g.State != GroupOpen {
		return errf(CodeInvalidState, "group %s is %s; only an open group can be paused", g.ID, g.State)
	}
	if err := x.endGroupOrder(g, ReasonOwner); err != nil {
		return err
	}
	x.setGroupState(&g, GroupPaused)
	return nil
}

func (x *execCtx) startGroup(m *MsgStartGroup) error {
	g, err := x.ownedGroup(m.ID)
	if err != nil {
		return err
	}
	if g.State != GroupPaused && g.State != GroupInsufficientFunds {
		return errf(CodeInvalidState, "group %s is %s; only a paused or unfunded group can be started", g.ID, g.State)
	}
	a, err := x.escrow(m.ID.Deployment())
	if err != nil {
		return err
	}
	if a.State != EscrowOpen {
		return errf(CodeInsufficientFunds, "deployment %s escrow is %s: deposit first", m.ID.Deployment(), a.State)
	}
	g.State = GroupOpen
	x.ev.emit(EventGroupStarted, groupAttrs(g.ID)...)
	x.openOrder(&g)
	x.s.setJSON(groupKey(g.ID), g)
	return nil
}
