package balance

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/testenv"
)

func flatten(ls [][]market.LeaseID) []market.LeaseID {
	var out []market.LeaseID
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

func sameLeases(a, b []market.LeaseID) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, compareLeases)
	slices.SortFunc(b, compareLeases)
	return slices.Equal(a, b)
}

// TestWithdrawBatches: 100 leases are withdrawn in one transaction, 101 in two.
func TestWithdrawBatches(t *testing.T) {
	e := newEnv(t)
	var deps []dep
	for range 5 {
		deps = append(deps, dep{ours: ones(20)})
	}
	ours, _ := e.deploy(deps...)
	all := flatten(ours)
	e.advance(1) // a block of accrual: one whole unit each
	cb := &countingBroadcaster{b: e.prov}
	c, sub, reg := e.checker(testConfig(), cb)

	w, err := c.WithdrawAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sizes := cb.take(); !slices.Equal(sizes, []int{100}) || w.Txs != 1 || w.Reason != ReasonManual || !sameLeases(w.Leases, all) {
		t.Fatalf("withdrawal %+v in transactions of %v messages; want 100 leases in one", w, sizes)
	}
	var paid uint64
	for _, id := range all {
		n := e.paid(id)
		if n == 0 {
			t.Fatalf("lease %s paid nothing out", id)
		}
		paid += n
	}
	if len(w.Amount) != 1 || w.Amount[0] != uakt(paid) {
		t.Fatalf("withdrawal amount %v, the ledger paid out %d", w.Amount, paid)
	}
	e.assertEarnings(c)
	evs := drain(sub)
	if len(evs) != 1 || evs[0].Kind != KindWithdrawal || evs[0].Height != w.Height || evs[0].Reason != ReasonManual ||
		len(evs[0].Leases) != 100 || !slices.Equal(evs[0].Amount, w.Amount) || evs[0].Balance.Amount == 0 {
		t.Fatalf("events %+v", evs)
	}
	if ok, n := testutil.ToFloat64(c.m.withdrawals.WithLabelValues(outcomeOK)), testutil.ToFloat64(c.m.withdrawnLeases); ok != 1 || n != 100 {
		t.Fatalf("metrics: %v transactions, %v leases", ok, n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metrics lint: %v %v", problems, err)
	}

	more, _ := e.deploy(dep{ours: []string{"1"}})
	all = append(all, more[0]...)
	e.advance(1)
	w, err = c.WithdrawAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sizes := cb.take(); !slices.Equal(sizes, []int{100, 1}) || w.Txs != 2 || !sameLeases(w.Leases, all) {
		t.Fatalf("withdrawal %+v in transactions of %v messages; want 101 leases in two", w, sizes)
	}
	e.assertEarnings(c)
	st := c.Status()
	if st.Leases != 101 || st.LastWithdrawalHeight != w.Height || st.LastWithdrawal.IsZero() || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}
}

// TestWithdrawLeaseClosedMeanwhile: a lease that closes between the listing and the
// transaction does not stop the others.
func TestWithdrawLeaseClosedMeanwhile(t *testing.T) {
	e := newEnv(t)
	ours, _ := e.deploy(dep{ours: ones(5)}, dep{ours: []string{"1"}})
	gone := ours[1][0]
	e.advance(1)
	cb := &countingBroadcaster{b: e.prov}
	cb.before = func(i int) {
		if i == 0 {
			e.closeLease(gone)
		}
	}
	c, _, _ := e.checker(testConfig(), cb)
	w, err := c.WithdrawAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sizes := cb.take(); !slices.Equal(sizes, []int{6, 5}) || w.Txs != 1 || w.Closed != 1 || !sameLeases(w.Leases, ours[0]) {
		t.Fatalf("withdrawal %+v in transactions of %v messages; want 6, then the 5 still active", w, sizes)
	}
	for _, id := range append(ours[0], gone) {
		if e.paid(id) == 0 {
			t.Fatalf("lease %s paid nothing out", id)
		}
	}
	e.assertEarnings(c)
	if ok, failed := testutil.ToFloat64(c.m.withdrawals.WithLabelValues(outcomeOK)), testutil.ToFloat64(c.m.withdrawals.WithLabelValues(outcomeError)); ok != 1 || failed != 1 {
		t.Fatalf("metrics: %v transactions ok, %v failed", ok, failed)
	}
}

// TestLowFunds: Run withdraws, at its next check, the leases of a deployment whose
// escrow pays for fewer than LowFundsBlocks blocks (counting every provider's rate),
// and no other.
func TestLowFunds(t *testing.T) {
	e := newEnv(t)
	healthy, _ := e.deploy(dep{deposit: 100_000_000, ours: []string{"1"}})
	cfg := testConfig()
	cfg.CheckInterval = 50 * time.Millisecond
	c, sub, _ := e.checker(cfg, nil)
	stop := testenv.Go(t, c.Run)
	testenv.Eventually(t, 30*time.Second, "a first check", func() bool { return c.Status().Leases == 1 })

	// 5 000 000 at 1 + 10 000 a block: 499 blocks. Our lease alone would last 5 000 000.
	low, theirs := e.deploy(dep{ours: []string{"1"}, theirs: []string{"10000"}})
	e.advance(1)
	var evs []Event
	testenv.Eventually(t, 30*time.Second, "the low-funds lease withdrawn", func() bool {
		evs = append(evs, drain(sub)...)
		return slices.ContainsFunc(evs, func(ev Event) bool { return ev.Kind == KindWithdrawal })
	})
	stop()
	if e.paid(low[0][0]) == 0 {
		t.Fatal("the low-funds lease paid nothing out")
	}

	if n := e.paid(healthy[0][0]); n != 0 {
		t.Fatalf("the healthy deployment's lease was withdrawn (%d)", n)
	}
	if n := e.paid(theirs[0][0]); n != 0 {
		t.Fatalf("the rival's lease was withdrawn (%d)", n)
	}
	if st := c.Status(); st.LowFundsLeases != 1 || st.Leases != 2 || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}
	var lowEvents, withdrawals int
	for _, ev := range append(evs, drain(sub)...) {
		switch ev.Kind {
		case KindLowFunds:
			lowEvents++
			if !slices.Equal(ev.Leases, low[0]) {
				t.Fatalf("low funds event %+v", ev)
			}
		case KindWithdrawal:
			withdrawals++
			if ev.Reason != ReasonLowFunds || !slices.Equal(ev.Leases, low[0]) {
				t.Fatalf("withdrawal event %+v", ev)
			}
		default:
			t.Fatalf("event %+v", ev)
		}
	}
	if lowEvents != 1 || withdrawals == 0 {
		t.Fatalf("%d low funds events (want 1, when the deployment fell below), %d withdrawals", lowEvents, withdrawals)
	}
	e.assertEarnings(c)
}

// TestWithdrawalAtShutdown: a shutdown that comes while a withdrawal waits for its
// block does not lose what the ledger paid: the checker waits for the transaction it
// sent, records the payout, publishes the withdrawal and saves the record before Run
// returns.
func TestWithdrawalAtShutdown(t *testing.T) {
	e := newEnv(t)
	low, _ := e.deploy(dep{ours: []string{"1"}, theirs: []string{"10000"}})
	e.advance(1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := testConfig()
	cfg.EarningsFile = filepath.Join(t.TempDir(), "earnings.json")
	c, sub, _ := e.checker(cfg, &lateBroadcaster{b: e.prov, stop: cancel})
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	paid := e.paid(low[0][0])
	if paid == 0 {
		t.Fatal("the withdrawal paid nothing out")
	}
	e.assertEarnings(c)
	if !slices.ContainsFunc(drain(sub), func(ev Event) bool { return ev.Kind == KindWithdrawal }) {
		t.Error("no withdrawal event")
	}
	rec, found, err := loadEarnings(cfg.EarningsFile, e.me)
	if err != nil || !found {
		t.Fatalf("earnings file: found %v, %v", found, err)
	}
	if got := rec.totalCoins(); len(got) != 1 || got[0] != uakt(paid) {
		t.Fatalf("earnings file totals %v, the ledger paid out %duakt", got, paid)
	}
}

// TestMinBalance: with the provider's balance below MinBalance, a check withdraws
// every lease.
func TestMinBalance(t *testing.T) {
	e := newEnv(t)
	ours, _ := e.deploy(dep{deposit: 100_000_000, ours: ones(3)}, dep{deposit: 100_000_000, ours: []string{"2"}})
	e.advance(1)
	cfg := testConfig()
	cfg.MinBalance = uakt(10_000_000_000_000) // more than any dev account holds
	c, sub, _ := e.checker(cfg, nil)
	for round := range 2 {
		w, err := c.check(t.Context(), false, false)
		if err != nil {
			t.Fatal(err)
		}
		if w.Reason != ReasonLowBalance || !sameLeases(w.Leases, flatten(ours)) {
			t.Fatalf("round %d: withdrawal %+v", round, w)
		}
		st := c.Status()
		// The account holds every denomination genesis funded; min_balance watches one.
		if !st.Low || st.MinBalance != cfg.MinBalance || len(st.Balance) != len(ledger.DefaultDenoms()) || balanceOf(st.Balance, "uakt").Amount == 0 {
			t.Fatalf("round %d: status %+v", round, st)
		}
		var kinds []string
		for _, ev := range drain(sub) {
			kinds = append(kinds, ev.Kind)
		}
		want := []string{KindLowBalance, KindWithdrawal}
		if round > 0 {
			want = want[1:] // the balance was low already
		}
		if !slices.Equal(kinds, want) {
			t.Fatalf("round %d: events %v, want %v", round, kinds, want)
		}
		if got := testutil.ToFloat64(c.m.account.WithLabelValues("uakt")); got != float64(balanceOf(c.Status().Balance, "uakt").Amount) {
			t.Fatalf("berth_balance_account %v, status %v", got, c.Status().Balance)
		}
		e.advance(1)
	}
	e.assertEarnings(c)
	b, err := json.Marshal(c.Status())
	if err != nil || !strings.Contains(string(b), `"low_funds_leases":0`) || !strings.Contains(string(b), `"last_withdrawal_height":`) {
		t.Fatalf("status JSON %s (%v)", b, err)
	}

	// The zero MinBalance is the ledger's bid deposit.
	cfg.MinBalance = market.Coin{}
	cfg.EarningsFile = ""
	c, _, _ = e.checker(cfg, nil)
	if got := c.Status().MinBalance; got != e.c.Params().BidMinDeposit {
		t.Fatalf("default min balance %s, want the bid deposit %s", got, e.c.Params().BidMinDeposit)
	}
}

// TestEarnings: the record equals what the ledger paid out for our leases, through
// withdrawals, closes the checker is told of and closes it finds, and it survives a
// restart.
func TestEarnings(t *testing.T) {
	e := newEnv(t)
	// The third deployment pays for 50 blocks, then the ledger closes its lease.
	ours, _ := e.deploy(dep{ours: []string{"1", "1"}}, dep{ours: []string{"3"}}, dep{ours: []string{"100000"}})
	unfunded := ours[2][0]
	e.advance(1)
	cfg := testConfig()
	cfg.EarningsFile = t.TempDir() + "/state/earnings.json"
	c, sub, _ := e.checker(cfg, nil)
	if _, err := c.check(t.Context(), true, false); err != nil {
		t.Fatal(err)
	}
	if e.paid(unfunded) == 0 {
		t.Fatal("the lease running out of funds was not withdrawn")
	}
	if _, err := c.WithdrawAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.assertEarnings(c)

	// Closed by the tenant; the app reports it.
	e.closeLease(ours[1][0])
	if err := c.LeaseClosed(t.Context(), ours[1][0], ledger.ReasonOwner); err != nil {
		t.Fatal(err)
	}
	// Closed by the ledger for insufficient funds (blocks come with transactions only,
	// and a block that changed state is followed by another).
	for i := 0; e.state(unfunded) == ledger.LeaseActive; i++ {
		if i == 100 {
			t.Fatal("the deployment does not run out of funds")
		}
		e.advance(1)
	}
	if err := c.LeaseClosed(t.Context(), unfunded, ledger.ReasonInsufficientFunds); err != nil {
		t.Fatal(err)
	}
	e.assertEarnings(c)
	var unfundedEvents []Event
	for _, ev := range drain(sub) {
		if ev.Kind == KindLeaseUnfunded {
			unfundedEvents = append(unfundedEvents, ev)
		}
	}
	if len(unfundedEvents) != 1 || !slices.Equal(unfundedEvents[0].Leases, []market.LeaseID{unfunded}) ||
		!slices.Equal(unfundedEvents[0].Amount, []market.Coin{uakt(e.paid(unfunded))}) || unfundedEvents[0].Height == 0 {
		t.Fatalf("lease unfunded events %+v", unfundedEvents)
	}
	if e.paid(unfunded) != 5_000_000 {
		t.Fatalf("the unfunded lease paid out %d, want its deployment's whole deposit", e.paid(unfunded))
	}

	// Closed without the checker being told: the next check finds it.
	e.closeLease(ours[0][1])
	// Opened and closed between two checks: a full check finds it.
	brief, _ := e.deploy(dep{ours: []string{"5"}})
	e.advance(2)
	e.closeLease(brief[0][0])
	if _, err := c.check(t.Context(), false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.check(t.Context(), true, false); err != nil {
		t.Fatal(err)
	}
	e.assertEarnings(c)
	c.mu.Lock()
	states := map[market.LeaseID]string{}
	for id, l := range c.rec.leases {
		states[id] = l.state
	}
	c.mu.Unlock()
	if states[ours[0][1]] != ledger.LeaseClosed || states[brief[0][0]] != ledger.LeaseClosed || states[unfunded] != ledger.LeaseInsufficientFunds || states[ours[0][0]] != ledger.LeaseActive {
		t.Fatalf("recorded states %v", states)
	}

	// A new checker (a restart) loads the record.
	before := c.Status()
	c2, _, _ := e.checker(cfg, nil)
	if after := c2.Status(); !slices.Equal(after.Earnings, before.Earnings) || after.LastWithdrawalHeight != before.LastWithdrawalHeight ||
		!after.LastWithdrawal.Equal(before.LastWithdrawal) {
		t.Fatalf("after a restart: %+v; before: %+v", after, before)
	}
	e.assertEarnings(c2)

	// A corrupt record is refused, by name.
	if err := os.WriteFile(cfg.EarningsFile, []byte(`{"version": 1, "provider": "`+e.me+`", "totals": ["1uakt"], "leases": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Provider = e.me
	if _, err := New(cfg, e.c, e.prov, nil, testLogger(), nil); err == nil || !strings.Contains(err.Error(), cfg.EarningsFile) {
		t.Fatalf("New with a corrupt earnings file: %v", err)
	}
}

// TestNew: what New refuses.
func TestNew(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.EarningsFile = t.TempDir() + "/earnings.json"
	cfg.Provider = "akash1notanaddress"
	if _, err := New(cfg, e.c, e.prov, nil, testLogger(), nil); err == nil || !strings.Contains(err.Error(), "provider") {
		t.Fatalf("New with a bad provider address: %v", err)
	}
	cfg.Provider = e.me
	if _, err := New(cfg, e.c, nil, nil, testLogger(), nil); err == nil {
		t.Fatal("New without a broadcaster")
	}
	// Another provider's record.
	if err := os.WriteFile(cfg.EarningsFile, []byte(`{"version": 1, "provider": "`+e.other+`", "totals": [], "leases": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, e.c, e.prov, nil, testLogger(), nil); err == nil || !strings.Contains(err.Error(), e.other) {
		t.Fatalf("New with another provider's record: %v", err)
	}
	if err := os.Remove(cfg.EarningsFile); err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, e.c, e.prov, nil, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LeaseClosed(t.Context(), market.LeaseID{Owner: e.owner, DSeq: 1, GSeq: 1, OSeq: 1, Provider: e.other}, ledger.ReasonOwner); err == nil {
		t.Fatal("LeaseClosed accepted another provider's lease")
	}
	// Nothing to do: the first check still writes the (empty) record.
	if w, err := c.check(t.Context(), true, false); err != nil || len(w.Leases) != 0 {
		t.Fatalf("check: %+v %v", w, err)
	}
	if _, err := os.Stat(cfg.EarningsFile); err != nil {
		t.Fatal(err)
	}
}

// TestWithdrawPeriod: every lease is withdrawn when WithdrawPeriod has passed since the
// last withdrawal of every lease, also across a restart.
func TestWithdrawPeriod(t *testing.T) {
	e := newEnv(t)
	ours, _ := e.deploy(dep{deposit: 100_000_000, ours: ones(3)})
	cfg := testConfig()
	cfg.WithdrawPeriod = time.Hour
	cfg.EarningsFile = t.TempDir() + "/earnings.json"
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func(c *Checker) { c.now = func() time.Time { return now } }
	c, _, _ := e.checker(cfg, nil)
	clock(c)
	step := func(c *Checker, after time.Duration, want string) {
		t.Helper()
		now = now.Add(after)
		e.advance(1)
		w, err := c.check(t.Context(), false, false)
		if err != nil {
			t.Fatal(err)
		}
		if w.Reason != want || (want != "") != (len(w.Leases) == len(ours[0])) {
			t.Fatalf("after %s: withdrawal %+v, want reason %q", after, w, want)
		}
	}
	step(c, 0, ReasonPeriod) // no withdrawal of everything recorded yet
	step(c, 30*time.Minute, "")
	step(c, 30*time.Minute, ReasonPeriod)
	// A restart remembers when.
	c2, _, _ := e.checker(cfg, nil)
	clock(c2)
	step(c2, 0, "")
	step(c2, time.Hour, ReasonPeriod)
	// WithdrawAll counts as a withdrawal of everything.
	now = now.Add(30 * time.Minute)
	if _, err := c2.WithdrawAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	step(c2, 45*time.Minute, "")
	e.assertEarnings(c2)
}

// flakyLedger fails the next fail queries.
type flakyLedger struct {
	Ledger
	mu   sync.Mutex
	fail int
}

func (f *flakyLedger) QueryRaw(ctx context.Context, path string, req []byte) ([]byte, error) {
	f.mu.Lock()
	failing := f.fail > 0
	if failing {
		f.fail--
	}
	f.mu.Unlock()
	if failing {
		return nil, errors.New("node unreachable")
	}
	return f.Ledger.QueryRaw(ctx, path, req)
}

// TestLedgerErrors: a check that cannot read the ledger fails, says so in its status
// and changes nothing; the next one works.
func TestLedgerErrors(t *testing.T) {
	e := newEnv(t)
	ours, _ := e.deploy(dep{ours: ones(2)})
	e.advance(1)
	cfg := testConfig()
	cfg.Provider, cfg.EarningsFile = e.me, t.TempDir()+"/earnings.json"
	fl := &flakyLedger{Ledger: e.c}
	c, err := New(cfg, fl, e.prov, nil, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fl.mu.Lock()
	fl.fail = 1
	fl.mu.Unlock()
	if _, err := c.WithdrawAll(t.Context()); err == nil || !strings.Contains(err.Error(), "node unreachable") {
		t.Fatalf("WithdrawAll with the node down: %v", err)
	}
	if st := c.Status(); !strings.Contains(st.LastError, "node unreachable") || !st.LastCheck.IsZero() {
		t.Fatalf("status %+v", st)
	}
	for _, id := range ours[0] {
		if e.paid(id) != 0 {
			t.Fatalf("lease %s withdrawn by a failed check", id)
		}
	}
	w, err := c.WithdrawAll(t.Context())
	if err != nil || len(w.Leases) != 2 {
		t.Fatalf("WithdrawAll: %+v %v", w, err)
	}
	if st := c.Status(); st.LastError != "" || st.LastCheck.IsZero() {
		t.Fatalf("status %+v", st)
	}
	e.assertEarnings(c)
}
