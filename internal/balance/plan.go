package balance

import (
	"math"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// Why a withdrawal is made (Withdrawal.Reason, Event.Reason).
const (
	// ReasonPeriod: WithdrawPeriod passed since every lease was last withdrawn.
	ReasonPeriod = "period"
	// ReasonLowBalance: the provider's balance is below MinBalance.
	ReasonLowBalance = "low_balance"
	// ReasonLowFunds: deployments' escrow pays for fewer than LowFundsBlocks blocks.
	ReasonLowFunds = "low_funds"
	// ReasonManual: WithdrawAll was called.
	ReasonManual = "manual"
)

// candidate is an active lease of ours as listed: what its payment holds (whole
// units) and what it had paid out.
type candidate struct {
	id        market.LeaseID
	accrued   uint64
	withdrawn market.Coin
}

// view is what one check read from the ledger.
type view struct {
	height int64
	// leases are ours: active ones, and on a full check those in every other state.
	leases []ledger.LeaseResponse
	// remaining is how many more blocks each deployment's escrow pays for; deployments
	// with no limit (no rate) are absent.
	remaining map[market.DeploymentID]int64
	balances  []market.Coin
}

// plan is what a check decided.
type plan struct {
	// reason is why leases are withdrawn ("" when none are).
	reason string
	// all: every active lease is due (not only the low-funds ones).
	all      bool
	withdraw []candidate
	// lowFunds are the deployments below LowFundsBlocks, lowLeases our leases there.
	lowFunds  map[market.DeploymentID]bool
	lowLeases []market.LeaseID
	// balance is the provider's balance in MinBalance's denomination.
	balance    market.Coin
	lowBalance bool
}

// planInput is the checker's side of a decision.
type planInput struct {
	now      time.Time
	lastFull time.Time // last withdrawal of every lease
	manual   bool      // WithdrawAll
	cfg      Config    // with MinBalance resolved
}

// makePlan decides what to withdraw from what a check read. It is pure.
func makePlan(v *view, in planInput) plan {
	p := plan{lowFunds: map[market.DeploymentID]bool{}, balance: balanceOf(v.balances, in.cfg.MinBalance.Denom)}
	p.lowBalance = p.balance.Amount < in.cfg.MinBalance.Amount
	if in.cfg.LowFundsBlocks > 0 {
		for id, n := range v.remaining {
			if n < in.cfg.LowFundsBlocks {
				p.lowFunds[id] = true
			}
		}
	}
	switch {
	case in.manual:
		p.reason, p.all = ReasonManual, true
	case p.lowBalance:
		p.reason, p.all = ReasonLowBalance, true
	case periodDue(in.cfg.WithdrawPeriod, in.cfg.CheckInterval, in.lastFull, in.now):
		p.reason, p.all = ReasonPeriod, true
	}
	for i := range v.leases {
		l := &v.leases[i]
		if l.Lease.State != ledger.LeaseActive {
			continue
		}
		low := p.lowFunds[l.Lease.ID.Deployment()]
		if low {
			p.lowLeases = append(p.lowLeases, l.Lease.ID)
		}
		c, ok := candidateOf(l)
		if !ok || c.accrued == 0 || !p.all && !low {
			continue
		}
		p.withdraw = append(p.withdraw, c)
	}
	if p.reason == "" && len(p.withdraw) > 0 {
		p.reason = ReasonLowFunds
	}
	return p
}

// periodDue reports whether every lease is due for its periodic withdrawal. Checks
// come every interval, a little late each: half an interval early counts as due, so
// that the period does not slip by a whole interval. A last withdrawal in the future
// (the clock was set back) does not hold withdrawals back until then.
func periodDue(period, interval time.Duration, lastFull, now time.Time) bool {
	if period <= 0 {
		return false
	}
	return lastFull.IsZero() || lastFull.After(now) || now.Sub(lastFull) >= period-interval/2
}

// remainingBlocks is how many more blocks a deployment's escrow pays its leases for:
// its balance over its rate, the sum of all its open payments' rates (every
// provider's). false: nothing is paid from it, so it never runs out.
func remainingBlocks(d *ledger.DeploymentResponse) (int64, bool) {
	if d.Escrow.State != ledger.EscrowOpen {
		return 0, true
	}
	var rate market.Dec
	for i := range d.Payments {
		if d.Payments[i].State == ledger.PaymentOpen {
			rate = rate.Add(d.Payments[i].Rate.Amount)
		}
	}
	if rate.Sign() <= 0 {
		return 0, false
	}
	return int64(d.Escrow.Balance.Amount.QuoFloor(rate, math.MaxInt64)), true //nolint:gosec // capped at MaxInt64
}

// candidateOf reads a listed lease's payment. false: the amounts are out of range.
func candidateOf(l *ledger.LeaseResponse) (candidate, bool) {
	accrued, ok := l.Payment.Balance.Amount.TruncateUint()
	if !ok {
		return candidate{}, false
	}
	w, ok := withdrawnOf(&l.Payment)
	return candidate{id: l.Lease.ID, accrued: accrued, withdrawn: w}, ok
}

// withdrawnOf is what a payment has paid out (whole units: the ledger pays out only
// those).
func withdrawnOf(p *ledger.Payment) (market.Coin, bool) {
	n, ok := p.Withdrawn.Amount.TruncateUint()
	denom := p.Withdrawn.Denom
	if denom == "" {
		denom = p.Rate.Denom
	}
	return market.Coin{Amount: market.Uint(n), Denom: denom}, ok
}

func balanceOf(balances []market.Coin, denom string) market.Coin {
	for _, c := range balances {
		if c.Denom == denom {
			return c
		}
	}
	return market.Coin{Denom: denom}
}
