package balance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/leasefeed"
)

// Ledger is what the checker reads from the ledger (chain.Client).
type Ledger interface {
	// QueryRaw asks a query (the ledger.Query… descriptors); refusals are *ledger.Error.
	ledger.Querier
	// Height is the latest committed height.
	Height(ctx context.Context) (int64, error)
	// Params are the chain's rules.
	Params() ledger.Params
}

// Broadcaster sends messages, signed by the provider, as one transaction and waits
// until it is in a block (chain.Broadcaster).
type Broadcaster interface {
	Broadcast(ctx context.Context, msgs ...ledger.Msg) (*chain.Result, error)
}

// The chain package's client and broadcaster are what the app passes.
var (
	_ Ledger      = (*chain.Client)(nil)
	_ Broadcaster = (*chain.Broadcaster)(nil)
)

// reconcileInterval is how often Run lists our leases in every state (see the package
// comment).
const reconcileInterval = time.Hour

// leasePageLimit is the page size of lease listings (the ledger's largest).
const leasePageLimit = 1000

// Status is the checker's state for the provider's status endpoint.
type Status struct {
	Provider string `json:"provider"`
	// Balance is the provider account's balances at the last check.
	Balance []market.Coin `json:"balance"`
	// MinBalance is the balance kept for bid deposits; Low: Balance is below it.
	MinBalance market.Coin `json:"min_balance"`
	Low        bool        `json:"low"`
	// Earnings are the totals the ledger has paid out for our leases, as recorded.
	Earnings []market.Coin `json:"earnings"`
	// Leases are our active leases at the last check; LowFundsLeases those whose
	// deployment pays for fewer than LowFundsBlocks blocks.
	Leases         int `json:"leases"`
	LowFundsLeases int `json:"low_funds_leases"`
	// LastCheck is when the last check read the ledger, at LastCheckHeight.
	LastCheck       time.Time `json:"last_check,omitzero"`
	LastCheckHeight int64     `json:"last_check_height,omitempty"`
	// LastWithdrawal is our last successful withdrawal transaction.
	LastWithdrawal       time.Time `json:"last_withdrawal,omitzero"`
	LastWithdrawalHeight int64     `json:"last_withdrawal_height,omitempty"`
	// LastError is why the last check failed ("" when it succeeded).
	LastError string `json:"last_error,omitempty"`
}

// Withdrawal is what one withdrawal did.
type Withdrawal struct {
	// Reason is why (a Reason* constant; "" when nothing was due).
	Reason string `json:"reason,omitempty"`
	// Leases were withdrawn, in transactions that succeeded.
	Leases []market.LeaseID `json:"leases"`
	// Closed counts leases left out because they closed before their transaction
	// (the ledger paid them out when they closed).
	Closed int `json:"closed,omitempty"`
	// Txs counts the successful transactions; Height is the last one's.
	Txs    int   `json:"txs"`
	Height int64 `json:"height,omitempty"`
	// Amount is what the ledger paid out, per denomination.
	Amount []market.Coin `json:"amount"`
}

// Checker is the balance checker. See the package comment.
type Checker struct {
	cfg    Config
	ledger Ledger
	bc     Broadcaster
	events *bus.Bus[Event]
	log    *slog.Logger
	m      *metrics
	now    func() time.Time

	// Two locks, always taken in this order: pass, then mu.
	//
	// pass makes a check (or WithdrawAll) one at a time; it is held across the
	// ledger's reads and broadcasts, and guards the fields below it.
	pass          sync.Mutex
	lowDeps       map[market.DeploymentID]bool // below LowFundsBlocks at the last check
	low           bool                         // the balance was below MinBalance when last read
	accountDenoms map[string]bool              // denominations in berth_balance_account

	// mu guards the state below it and the earnings file's writes (save); it is
	// never held across a call to the ledger.
	mu     sync.Mutex
	rec    *earnings
	dirty  bool                    // rec differs from the file
	active map[market.LeaseID]bool // our active leases at the last check
	st     Status                  // the check's fields; earnings come from rec
}

// New returns a checker with the earnings record loaded from cfg.EarningsFile; it
// starts nothing. events may be nil (nothing is published); reg may be nil (metrics
// are not registered).
func New(cfg Config, l Ledger, b Broadcaster, events *bus.Bus[Event], log *slog.Logger, reg prometheus.Registerer) (*Checker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if l == nil || b == nil || log == nil {
		return nil, errors.New("balance: ledger, broadcaster and logger are required")
	}
	params := l.Params()
	if err := ledger.CheckAddress(cfg.Provider, params.AddressPrefix); err != nil {
		return nil, fmt.Errorf("balance: provider %q: %w", cfg.Provider, err)
	}
	if cfg.MinBalance.Denom == "" {
		cfg.MinBalance = params.BidMinDeposit
	}
	rec, found, err := loadEarnings(cfg.EarningsFile, cfg.Provider)
	if err != nil {
		return nil, fmt.Errorf("balance: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	c := &Checker{
		cfg: cfg, ledger: l, bc: b, events: events, log: log, m: m, now: time.Now,
		lowDeps: map[market.DeploymentID]bool{}, accountDenoms: map[string]bool{},
		rec: rec, dirty: !found, active: map[market.LeaseID]bool{},
		st: Status{Provider: cfg.Provider, MinBalance: cfg.MinBalance, Balance: []market.Coin{}},
	}
	c.earningsGaugesLocked()
	return c, nil
}

// Run checks at once, then every CheckInterval, until ctx ends; it returns nil then.
// Failed checks are logged and the next one starts afresh.
func (c *Checker) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.CheckInterval)
	defer t.Stop()
	var reconciled time.Time
	for {
		full := reconciled.IsZero() || c.now().Sub(reconciled) >= reconcileInterval
		start := c.now()
		_, err := c.check(ctx, full, false)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			c.log.WarnContext(ctx, "balance check failed; trying again at the next check", slog.String("error", err.Error()))
		case full:
			reconciled = start
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// WithdrawAll withdraws every active lease of ours that has accrued a whole unit, as
// part of a check (which also refreshes the earnings record and the status).
func (c *Checker) WithdrawAll(ctx context.Context) (Withdrawal, error) {
	return c.check(ctx, false, true)
}

// LeaseClosed records the final payout of a lease of ours that the ledger closed (the
// reason is the ledger's close reason). A lease closed for insufficient funds is published as KindLeaseUnfunded (FollowLeases
// calls it for each lease the feed says closed).
func (c *Checker) LeaseClosed(ctx context.Context, id market.LeaseID, reason string) error {
	if id.Provider != c.cfg.Provider {
		return fmt.Errorf("balance: lease %s is not provider %s's", id, c.cfg.Provider)
	}
	r, err := c.readLease(ctx, id)
	if err != nil {
		return fmt.Errorf("balance: %w", err)
	}
	if reason == ledger.ReasonInsufficientFunds || r.Lease.State == ledger.LeaseInsufficientFunds {
		w, _ := withdrawnOf(&r.Payment)
		ev := Event{Kind: KindLeaseUnfunded, Height: r.Lease.ClosedOn, Time: c.now(), Reason: reason, Leases: []market.LeaseID{id}}
		if w.Amount > 0 {
			ev.Amount = []market.Coin{w}
		}
		c.mu.Lock()
		ev.Balance = balanceOf(c.st.Balance, c.cfg.MinBalance.Denom)
		c.mu.Unlock()
		c.log.InfoContext(ctx, "lease closed for insufficient funds", slog.String("lease", id.String()), slog.String("withdrawn", w.String()))
		c.publish(ev)
	}
	return c.save()
}

// FollowLeases records each closed lease's payout (LeaseClosed) as the lease feed
// reports it, until ctx ends. Closes missed while the follower fell behind are found by
// the next check (a lease gone from the active list is read again).
func (c *Checker) FollowLeases(ctx context.Context, f *leasefeed.Follower) error {
	return f.Run(ctx, func(ev leasefeed.Event) {
		if ev.Closed == nil {
			return
		}
		if err := c.LeaseClosed(ctx, ev.Closed.Lease, ev.Closed.Reason); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "record a closed lease's earnings", slog.String("lease", ev.Closed.Lease.String()), slog.String("error", err.Error()))
		}
	}, func(err error) {
		c.log.WarnContext(ctx, "lease feed fell behind; the next check finds the payouts missed", slog.String("error", err.Error()))
	})
}

// Status returns the checker's state.
func (c *Checker) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Balance = slices.Clone(s.Balance)
	s.Earnings = c.rec.totalCoins()
	s.LastWithdrawal, s.LastWithdrawalHeight = c.rec.lastTime, c.rec.lastHeight
	return s
}

// check is one pass: read, record, decide, withdraw, save. full lists our leases in
// every state; manual withdraws every lease.
func (c *Checker) check(ctx context.Context, full, manual bool) (Withdrawal, error) {
	c.pass.Lock()
	defer c.pass.Unlock()
	w, err := c.checkLocked(ctx, full, manual)
	if serr := c.save(); serr != nil {
		err = errors.Join(err, serr)
	}
	if ctx.Err() == nil { // a check cut short by shutdown is no failure to report
		c.mu.Lock()
		c.st.LastError = ""
		if err != nil {
			c.st.LastError = err.Error()
		}
		c.mu.Unlock()
	}
	return w, err
}

func (c *Checker) checkLocked(ctx context.Context, full, manual bool) (Withdrawal, error) {
	now := c.now()
	v, err := c.read(ctx, full)
	if err != nil {
		return Withdrawal{}, fmt.Errorf("balance: %w", err)
	}
	c.m.lastCheck.Set(float64(now.UnixNano()) / 1e9)
	c.observe(ctx, v, full)
	c.mu.Lock()
	lastFull := c.rec.lastFull
	c.mu.Unlock()
	p := makePlan(v, planInput{now: now, lastFull: lastFull, manual: manual, cfg: c.cfg})
	c.thresholds(ctx, v, &p, now)
	c.setStatus(v, &p, now)

	w := Withdrawal{Reason: p.reason, Leases: []market.LeaseID{}, Amount: []market.Coin{}}
	if len(p.withdraw) > 0 {
		w, err = c.withdraw(ctx, p.reason, p.withdraw)
		if len(w.Leases) > 0 {
			c.afterWithdrawal(ctx, &w)
		}
		if err != nil {
			return w, fmt.Errorf("balance: %w", err)
		}
	}
	if p.all {
		c.mu.Lock()
		c.rec.lastFull = now
		c.dirty = true
		c.mu.Unlock()
	}
	return w, nil
}

// read is what a check reads from the ledger.
func (c *Checker) read(ctx context.Context, full bool) (*view, error) {
	h, err := c.ledger.Height(ctx)
	if err != nil {
		return nil, err
	}
	state := ledger.LeaseActive
	if full {
		state = ""
	}
	leases, err := c.listLeases(ctx, state)
	if err != nil {
		return nil, err
	}
	v := &view{height: h, leases: leases, remaining: map[market.DeploymentID]int64{}}
	seen := map[market.DeploymentID]bool{}
	for i := range leases {
		id := leases[i].Lease.ID.Deployment()
		if leases[i].Lease.State != ledger.LeaseActive || seen[id] {
			continue
		}
		seen[id] = true
		var d ledger.DeploymentResponse
		err := ledger.QueryDeployment.Into(ctx, c.ledger, ledger.DeploymentRequest{ID: id}, &d)
		if err != nil {
			return nil, fmt.Errorf("deployment %s: %w", id, err)
		}
		if n, ok := remainingBlocks(&d); ok {
			v.remaining[id] = n
		}
	}
	if v.balances, err = c.account(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// listLeases reads every page of our leases in state ("": all).
func (c *Checker) listLeases(ctx context.Context, state string) ([]ledger.LeaseResponse, error) {
	var out []ledger.LeaseResponse
	req := ledger.LeasesRequest{Provider: c.cfg.Provider, State: state, Page: ledger.Page{Limit: leasePageLimit}}
	err := ledger.List(ctx, c.ledger, ledger.QueryLeases, req, func(r ledger.LeasesResponse) error {
		for i := range r.Leases {
			if r.Leases[i].Lease.ID.Provider == c.cfg.Provider {
				out = append(out, r.Leases[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leases of %s: %w", c.cfg.Provider, err)
	}
	return out, nil
}

// account reads the provider's balances (none when the account does not exist yet).
func (c *Checker) account(ctx context.Context) ([]market.Coin, error) {
	var a ledger.AccountResponse
	err := ledger.QueryAccount.Into(ctx, c.ledger, ledger.AccountRequest{Address: c.cfg.Provider}, &a)
	if errors.Is(err, ledger.ErrNotFound) {
		return []market.Coin{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", c.cfg.Provider, err)
	}
	return a.Balances, nil
}

// readLease reads one lease of ours and records what it has paid out.
func (c *Checker) readLease(ctx context.Context, id market.LeaseID) (ledger.LeaseResponse, error) {
	var r ledger.LeaseResponse
	if err := ledger.QueryLease.Into(ctx, c.ledger, ledger.LeaseRequest{ID: id}, &r); err != nil {
		return r, fmt.Errorf("lease %s: %w", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.recordLocked(&r); err != nil {
		return r, err
	}
	if r.Lease.State == ledger.LeaseActive {
		c.active[id] = true
	} else {
		delete(c.active, id)
	}
	return r, nil
}

// recordLocked copies a listed lease's payout into the record.
func (c *Checker) recordLocked(r *ledger.LeaseResponse) error {
	w, ok := withdrawnOf(&r.Payment)
	if !ok {
		return fmt.Errorf("lease %s: withdrawn %s is out of range", r.Lease.ID, r.Payment.Withdrawn)
	}
	changed, err := c.rec.raise(r.Lease.ID, w, r.Lease.State)
	if err != nil {
		return err
	}
	if changed {
		c.dirty = true
		c.earningsGaugesLocked()
	}
	return nil
}

// observe records the listed leases' payouts, and reads again the leases that were
// active at the last check and are no longer listed (closed since: paid out then).
func (c *Checker) observe(ctx context.Context, v *view, full bool) {
	c.mu.Lock()
	next := map[market.LeaseID]bool{}
	for i := range v.leases {
		l := &v.leases[i]
		if err := c.recordLocked(l); err != nil {
			c.log.WarnContext(ctx, "balance: cannot record a lease's payout", slog.String("lease", l.Lease.ID.String()), slog.String("error", err.Error()))
		}
		if l.Lease.State == ledger.LeaseActive {
			next[l.Lease.ID] = true
		}
	}
	var gone []market.LeaseID
	if !full {
		for id := range c.active {
			if !next[id] {
				gone = append(gone, id)
			}
		}
	}
	c.active = next
	c.mu.Unlock()
	slices.SortFunc(gone, compareLeases)
	for _, id := range gone {
		if _, err := c.readLease(ctx, id); err != nil {
			// Try again at the next check.
			c.mu.Lock()
			c.active[id] = true
			c.mu.Unlock()
			c.log.WarnContext(ctx, "balance: cannot read a closed lease's final payout", slog.String("lease", id.String()), slog.String("error", err.Error()))
		}
	}
}

// thresholds publishes the deployments newly below LowFundsBlocks and a balance
// newly below MinBalance.
func (c *Checker) thresholds(ctx context.Context, v *view, p *plan, now time.Time) {
	var fresh []market.LeaseID
	for _, id := range p.lowLeases {
		if !c.lowDeps[id.Deployment()] {
			fresh = append(fresh, id)
		}
	}
	c.lowDeps = p.lowFunds
	if len(fresh) > 0 {
		c.log.InfoContext(ctx, "deployments running out of funds: withdrawing their leases", slog.Int("leases", len(fresh)), slog.Int64("low_funds_blocks", c.cfg.LowFundsBlocks))
		c.publish(Event{Kind: KindLowFunds, Height: v.height, Time: now, Reason: ReasonLowFunds, Leases: fresh, Balance: p.balance})
	}
	if p.lowBalance && !c.low {
		c.log.WarnContext(ctx, "provider balance below min_balance: withdrawing every lease", slog.String("balance", p.balance.String()), slog.String("min_balance", c.cfg.MinBalance.String()))
		c.publish(Event{Kind: KindLowBalance, Height: v.height, Time: now, Reason: ReasonLowBalance, Balance: p.balance})
	}
	c.low = p.lowBalance
}

func (c *Checker) setStatus(v *view, p *plan, now time.Time) {
	active := 0
	for i := range v.leases {
		if v.leases[i].Lease.State == ledger.LeaseActive {
			active++
		}
	}
	c.accountGauges(v.balances)
	c.m.leases.Set(float64(active))
	c.m.lowFunds.Set(float64(len(p.lowLeases)))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Balance = v.balances
	c.st.Low = p.lowBalance
	c.st.Leases = active
	c.st.LowFundsLeases = len(p.lowLeases)
	c.st.LastCheck, c.st.LastCheckHeight = now, v.height
}

// afterWithdrawal reads the provider's balance again and publishes the withdrawal.
func (c *Checker) afterWithdrawal(ctx context.Context, w *Withdrawal) {
	ev := Event{Kind: KindWithdrawal, Height: w.Height, Time: c.now(), Reason: w.Reason, Leases: slices.Clone(w.Leases), Amount: slices.Clone(w.Amount)}
	balances, err := c.account(ctx)
	c.mu.Lock()
	if err == nil {
		c.st.Balance = balances
		c.st.Low = balanceOf(balances, c.cfg.MinBalance.Denom).Amount < c.cfg.MinBalance.Amount
		c.low = c.st.Low
	}
	ev.Balance = balanceOf(c.st.Balance, c.cfg.MinBalance.Denom)
	c.mu.Unlock()
	if err == nil {
		c.accountGauges(balances)
	}
	c.log.InfoContext(ctx, "withdrew leases", slog.String("reason", w.Reason), slog.Int("leases", len(w.Leases)),
		slog.Int("txs", w.Txs), slog.Int64("height", w.Height), slog.Any("amount", w.Amount))
	c.publish(ev)
}

func (c *Checker) publish(ev Event) {
	if c.events != nil {
		c.events.Publish(ev)
	}
}

// earningsGaugesLocked sets berth_balance_earnings from the record.
func (c *Checker) earningsGaugesLocked() {
	for d, v := range c.rec.totals {
		c.m.earnings.WithLabelValues(d).Set(float64(v))
	}
}

// accountGauges sets berth_balance_account (0 for denominations no longer held).
func (c *Checker) accountGauges(balances []market.Coin) {
	held := map[string]bool{}
	for _, b := range balances {
		held[b.Denom] = true
		c.accountDenoms[b.Denom] = true
		c.m.account.WithLabelValues(b.Denom).Set(float64(b.Amount))
	}
	for d := range c.accountDenoms {
		if !held[d] {
			c.m.account.WithLabelValues(d).Set(0)
		}
	}
}

// save writes the record when it changed.
func (c *Checker) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	b, err := c.rec.marshal()
	if err == nil {
		err = writeFileAtomic(c.cfg.EarningsFile, b)
	}
	if err != nil {
		return fmt.Errorf("balance: earnings file %s: %w", c.cfg.EarningsFile, err)
	}
	c.dirty = false
	return nil
}

func compareLeases(a, b market.LeaseID) int { return strings.Compare(a.String(), b.String()) }
