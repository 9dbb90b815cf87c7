package ledger

import (
	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

func (x *execCtx) deployment(id market.DeploymentID) (api.Deployment, error) {
	var d api.Deployment
	if !getJSON(x.s, deploymentKey(id), &d) {
		return d, api.Errorf(api.CodeNotFound, "deployment %s does not exist", id)
	}
	return d, nil
}

func (x *execCtx) activeDeployment(id market.DeploymentID) (api.Deployment, error) {
	d, err := x.deployment(id)
	if err == nil && d.State != api.DeploymentActive {
		err = api.Errorf(api.CodeInvalidState, "deployment %s is %s", id, d.State)
	}
	return d, err
}

func (x *execCtx) group(id market.GroupID) (api.Group, error) {
	var g api.Group
	if !getJSON(x.s, groupKey(id), &g) {
		return g, api.Errorf(api.CodeNotFound, "group %s does not exist", id)
	}
	return g, nil
}

func (x *execCtx) order(id market.OrderID) (api.Order, error) {
	var o api.Order
	if !getJSON(x.s, orderKey(id), &o) {
		return o, api.Errorf(api.CodeNotFound, "order %s does not exist", id)
	}
	return o, nil
}

// setOrder saves an order and keeps the order-by-state index in step.
func (x *execCtx) setOrder(o api.Order, prevState string) {
	if prevState != "" && prevState != o.State {
		x.s.del(orderStateKey(prevState, o.ID))
	}
	x.s.setJSON(orderStateKey(o.State, o.ID), struct{}{})
	x.s.setJSON(orderKey(o.ID), o)
}

// openOrder puts a group up for bids with a new order.
func (x *execCtx) openOrder(g *api.Group) {
	g.LastOSeq++
	o := api.Order{ID: g.ID.Order(g.LastOSeq), State: api.OrderOpen, Spec: g.Spec, CreatedAt: x.height}
	x.setOrder(o, "")
	x.ev.emit(api.EventOrderCreated, orderAttrs(o.ID)...)
}

func (x *execCtx) createDeployment(m *api.MsgCreateDeployment) error {
	if _, ok := x.s.get(deploymentKey(m.ID)); ok {
		return api.Errorf(api.CodeAlreadyExists, "deployment %s already exists", m.ID)
	}
	if err := x.debit(m.ID.Owner, m.Deposit, "deployment deposit"); err != nil {
		return err
	}
	x.s.setJSON(deploymentKey(m.ID), api.Deployment{ID: m.ID, State: api.DeploymentActive, Version: m.Version, CreatedAt: x.height})
	denom := m.Deposit.Denom
	x.s.setJSON(escrowKey(m.ID), api.EscrowAccount{
		ID: m.ID, Owner: m.ID.Owner, State: api.EscrowOpen,
		Balance:     market.DecCoin{Amount: market.DecFromUint(uint64(m.Deposit.Amount)), Denom: denom},
		Transferred: market.DecCoin{Denom: denom},
		SettledAt:   x.height,
	})
	x.ev.emit(api.EventDeploymentCreated, deploymentAttrs(m.ID, api.AttrVersion, versionHex(m.Version))...)
	x.ev.emit(api.EventDeposit, deploymentAttrs(m.ID, api.AttrFrom, m.ID.Owner, api.AttrAmount, m.Deposit.String())...)
	for i, spec := range m.Groups {
		g := api.Group{ID: m.ID.Group(uint32(i + 1)), State: api.GroupOpen, Spec: spec, CreatedAt: x.height}
		x.openOrder(&g)
		x.s.setJSON(groupKey(g.ID), g)
	}
	return nil
}

func (x *execCtx) updateDeployment(m *api.MsgUpdateDeployment) error {
	d, err := x.activeDeployment(m.ID)
	if err != nil {
		return err
	}
	d.Version = m.Version
	x.s.setJSON(deploymentKey(m.ID), d)
	x.ev.emit(api.EventDeploymentUpdated, deploymentAttrs(m.ID, api.AttrVersion, versionHex(m.Version))...)
	return nil
}

func (x *execCtx) depositDeployment(m *api.MsgDepositDeployment) error {
	if _, err := x.activeDeployment(m.ID); err != nil {
		return err
	}
	a, err := x.escrow(m.ID)
	if err != nil {
		return err
	}
	if a.Balance.Denom != m.Amount.Denom {
		return api.Errorf(api.CodeInvalidMsg, "amount: deployment %s is paid in %s, not %s", m.ID, a.Balance.Denom, m.Amount.Denom)
	}
	if err := x.debit(m.Depositor, m.Amount, "deposit"); err != nil {
		return err
	}
	err = x.updateEscrow(m.ID, func(a *api.EscrowAccount, _ *[]api.Payment) error {
		a.Balance.Amount = a.Balance.Amount.Add(market.DecFromUint(uint64(m.Amount.Amount)))
		a.State = api.EscrowOpen
		return nil
	})
	if err != nil {
		return err
	}
	x.ev.emit(api.EventDeposit, deploymentAttrs(m.ID, api.AttrFrom, m.Depositor, api.AttrAmount, m.Amount.String())...)
	return nil
}

// endGroupOrder ends the group's current order: an open order closes with its bids; an
// active one closes with its lease (leaseState and reason say how).
func (x *execCtx) endGroupOrder(g api.Group, reason string) error {
	if g.LastOSeq == 0 {
		return nil
	}
	o, err := x.order(g.ID.Order(g.LastOSeq))
	if err != nil {
		return err
	}
	switch o.State {
	case api.OrderOpen:
		if err := x.closeOpenBids(o.ID, api.BidClosed); err != nil {
			return err
		}
		x.closeOrder(o)
	case api.OrderActive:
		l, ok := x.activeLeaseOf(o.ID)
		if !ok {
			return api.Errorf(api.CodeInternal, "order %s is active without an active lease", o.ID)
		}
		return x.closeLease(l, api.LeaseClosed, reason)
	}
	return nil
}

func (x *execCtx) closeOrder(o api.Order) {
	prev := o.State
	o.State = api.OrderClosed
	x.setOrder(o, prev)
	x.ev.emit(api.EventOrderClosed, orderAttrs(o.ID)...)
}

func (x *execCtx) closeDeployment(m *api.MsgCloseDeployment) error {
	d, err := x.activeDeployment(m.ID)
	if err != nil {
		return err
	}
	var groups []api.Group
	x.s.ascend(groupsPrefix(m.ID), "", func(k string, v []byte) bool {
		var g api.Group
		decodeEntry(k, v, &g)
		groups = append(groups, g)
		return true
	})
	for i := range groups {
		g := &groups[i]
		if g.State == api.GroupClosed {
			continue
		}
		if err := x.endGroupOrder(*g, api.ReasonOwner); err != nil {
			return err
		}
		x.setGroupState(g, api.GroupClosed)
	}
	var refund market.Coin
	err = x.updateEscrow(m.ID, func(a *api.EscrowAccount, _ *[]api.Payment) error {
		n, ok := a.Balance.Amount.TruncateUint()
		if !ok {
			return api.Errorf(api.CodeInternal, "escrow of %s has balance %s", m.ID, a.Balance)
		}
		refund = market.Coin{Amount: market.Uint(n), Denom: a.Balance.Denom}
		a.Balance.Amount = a.Balance.Amount.Sub(market.DecFromUint(n))
		a.State = api.EscrowClosed
		return x.credit(a.Owner, refund)
	})
	if err != nil {
		return err
	}
	d.State = api.DeploymentClosed
	x.s.setJSON(deploymentKey(m.ID), d)
	x.ev.emit(api.EventDeploymentClosed, deploymentAttrs(m.ID, api.AttrAmount, refund.String())...)
	return nil
}

// groupEvents are the events of the group states a message can move a group to.
var groupEvents = map[string]string{
	api.GroupOpen: api.EventGroupStarted, api.GroupPaused: api.EventGroupPaused,
	api.GroupInsufficientFunds: api.EventGroupUnfunded, api.GroupClosed: api.EventGroupClosed,
}

// setGroupState saves the group in its new state and emits the state's event.
func (x *execCtx) setGroupState(g *api.Group, state string) {
	g.State = state
	x.s.setJSON(groupKey(g.ID), g)
	x.ev.emit(groupEvents[state], groupAttrs(g.ID)...)
}

// ownedGroup loads a group of an active deployment.
func (x *execCtx) ownedGroup(id market.GroupID) (api.Group, error) {
	if _, err := x.activeDeployment(id.Deployment()); err != nil {
		return api.Group{}, err
	}
	return x.group(id)
}

func (x *execCtx) closeGroup(m *api.MsgCloseGroup) error {
	g, err := x.ownedGroup(m.ID)
	if err != nil {
		return err
	}
	if g.State == api.GroupClosed {
		return api.Errorf(api.CodeInvalidState, "group %s is already closed", g.ID)
	}
	if err := x.endGroupOrder(g, api.ReasonOwner); err != nil {
		return err
	}
	x.setGroupState(&g, api.GroupClosed)
	return nil
}

func (x *execCtx) pauseGroup(m *api.MsgPauseGroup) error {
	g, err := x.ownedGroup(m.ID)
	if err != nil {
		return err
	}
	if g.State != api.GroupOpen {
		return api.Errorf(api.CodeInvalidState, "group %s is %s; only an open group can be paused", g.ID, g.State)
	}
	if err := x.endGroupOrder(g, api.ReasonOwner); err != nil {
		return err
	}
	x.setGroupState(&g, api.GroupPaused)
	return nil
}

func (x *execCtx) startGroup(m *api.MsgStartGroup) error {
	g, err := x.ownedGroup(m.ID)
	if err != nil {
		return err
	}
	if g.State != api.GroupPaused && g.State != api.GroupInsufficientFunds {
		return api.Errorf(api.CodeInvalidState, "group %s is %s; only a paused or unfunded group can be started", g.ID, g.State)
	}
	a, err := x.escrow(m.ID.Deployment())
	if err != nil {
		return err
	}
	if a.State != api.EscrowOpen {
		return api.Errorf(api.CodeInsufficientFunds, "deployment %s escrow is %s: deposit first", m.ID.Deployment(), a.State)
	}
	g.State = api.GroupOpen
	x.ev.emit(api.EventGroupStarted, groupAttrs(g.ID)...)
	x.openOrder(&g)
	x.s.setJSON(groupKey(g.ID), g)
	return nil
}
