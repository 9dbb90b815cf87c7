package ledger

import (
	"math"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

func (x *execCtx) escrow(id market.DeploymentID) (api.EscrowAccount, error) {
	var a api.EscrowAccount
	if !getJSON(x.s, escrowKey(id), &a) {
		return a, api.Errorf(api.CodeNotFound, "escrow account of deployment %s does not exist", id)
	}
	return a, nil
}

// settleTo is the height the account can be settled to at h: h itself, or the last
// height it can pay in full if that is earlier. An account that is not open pays
// nothing more: it stays settled where it stopped.
func settleTo(a *api.EscrowAccount, h int64) int64 {
	if a.State != api.EscrowOpen {
		return a.SettledAt
	}
	if a.Rate.Sign() > 0 && a.DepletesAt < h {
		return a.DepletesAt
	}
	return h
}

// accrue pays the open payments for the blocks since the account was last settled, up
// to h (clamped by settleTo). It changes only the values passed in.
func accrue(a *api.EscrowAccount, pays []api.Payment, h int64) {
	to := settleTo(a, h)
	if to <= a.SettledAt {
		return
	}
	blocks := uint64(to - a.SettledAt) //nolint:gosec // to > SettledAt
	a.SettledAt = to
	for i := range pays {
		p := &pays[i]
		if p.State != api.PaymentOpen {
			continue
		}
		amt := p.Rate.Amount.MulUint(blocks)
		p.Balance.Amount = p.Balance.Amount.Add(amt)
		a.Balance.Amount = a.Balance.Amount.Sub(amt)
		a.Transferred.Amount = a.Transferred.Amount.Add(amt)
	}
}

func readPayments(r reader, id market.DeploymentID) []api.Payment {
	var out []api.Payment
	r.ascend(paymentsPrefix(id), "", func(k string, v []byte) bool {
		var p api.Payment
		decodeEntry(k, v, &p)
		out = append(out, p)
		return true
	})
	return out
}

// depletesAt is the last height the account's balance pays in full at its rate.
func depletesAt(a *api.EscrowAccount) int64 {
	if a.Rate.Sign() <= 0 {
		return 0
	}
	n := a.Balance.Amount.QuoFloor(a.Rate, uint64(math.MaxInt64-a.SettledAt)) //nolint:gosec // heights are positive
	return a.SettledAt + int64(n)                                             //nolint:gosec // n ≤ MaxInt64 - SettledAt
}

// updateEscrow settles the deployment's account to the current height, lets fn change
// the account and its payments, then saves them and reschedules the account's
// depletion.
func (x *execCtx) updateEscrow(id market.DeploymentID, fn func(a *api.EscrowAccount, pays *[]api.Payment) error) error {
	a, err := x.escrow(id)
	if err != nil {
		return err
	}
	if a.DepletesAt != 0 {
		x.s.del(depletionKey(a.DepletesAt, id))
	}
	pays := readPayments(x.s, id)
	accrue(&a, pays, x.height)
	if err := fn(&a, &pays); err != nil {
		return err
	}
	rate := market.Dec{}
	for i := range pays {
		if pays[i].State == api.PaymentOpen {
			rate = rate.Add(pays[i].Rate.Amount)
		}
	}
	a.Rate = rate
	a.DepletesAt = 0
	if a.State == api.EscrowOpen {
		a.DepletesAt = depletesAt(&a)
	}
	if a.DepletesAt != 0 {
		x.s.setJSON(depletionKey(a.DepletesAt, id), struct{}{})
	}
	x.s.setJSON(escrowKey(id), a)
	// Unchanged payments write identical bytes, which the store skips.
	for i := range pays {
		x.s.setJSON(paymentKey(pays[i].ID), pays[i])
	}
	return nil
}

// payOut moves the whole units accrued to a payment to its provider's balance; the
// fraction of a unit stays in the payment.
func (x *execCtx) payOut(p *api.Payment) error {
	n, ok := p.Balance.Amount.TruncateUint()
	if !ok {
		return api.Errorf(api.CodeInternal, "payment %s balance %s is out of range", p.ID, p.Balance)
	}
	if n == 0 {
		return nil
	}
	p.Balance.Amount = p.Balance.Amount.Sub(market.DecFromUint(n))
	p.Withdrawn.Amount = p.Withdrawn.Amount.Add(market.DecFromUint(n))
	amt := market.Coin{Amount: market.Uint(n), Denom: p.Balance.Denom}
	if err := x.credit(p.ID.Provider, amt); err != nil {
		return err
	}
	x.ev.emit(api.EventWithdrawal, bidAttrs(market.BidID(p.ID), api.AttrAmount, amt.String())...)
	return nil
}

// processDepletions closes the leases of every escrow account that cannot pay for the
// current block: each is settled to its last fully paid height, then its leases close
// with reason insufficient_funds and its groups wait for a deposit.
func (x *execCtx) processDepletions() error {
	var due []market.DeploymentID
	x.s.ascend(depletionPrefix(), "", func(k string, _ []byte) bool {
		id, h, ok := decodeDepletionKey(k)
		if !ok || h >= x.height {
			return false
		}
		due = append(due, id)
		return true
	})
	for _, id := range due {
		if err := x.depleted(id); err != nil {
			return err
		}
	}
	return nil
}

func (x *execCtx) depleted(id market.DeploymentID) error {
	// Settle the account to its last fully paid height and stop it there before any
	// lease closes: each close lowers the account's rate, and an account still open
	// would then pay the leases that close after it for a block it cannot pay for all.
	err := x.updateEscrow(id, func(a *api.EscrowAccount, _ *[]api.Payment) error {
		a.State = api.EscrowOverdrawn
		return nil
	})
	if err != nil {
		return err
	}
	var leases []api.Lease
	x.s.ascend(leasesOfDeploymentPrefix(id), "", func(k string, v []byte) bool {
		var l api.Lease
		decodeEntry(k, v, &l)
		if l.State == api.LeaseActive {
			leases = append(leases, l)
		}
		return true
	})
	for _, l := range leases {
		if err := x.closeLease(l, api.LeaseInsufficientFunds, api.ReasonInsufficientFunds); err != nil {
			return err
		}
		g, err := x.group(l.ID.Order().Group())
		if err != nil {
			return err
		}
		x.setGroupState(&g, api.GroupInsufficientFunds)
	}
	return nil
}
