package balance

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/testenv"
)

// env is a real ledger node with a tenant, our provider, a rival provider and a
// bystander whose transfers make blocks (the test node makes a block only when there
// is a transaction, and escrow accrues per block).
type env struct {
	t                              *testing.T
	c                              *chain.Client
	tenant, prov, rival, bystander *chain.Broadcaster
	owner, me, other               string
	dseq                           uint64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	l := testenv.Ledger(t, testenv.LedgerOptions{Accounts: []string{"tenant", "provider", "rival", "bystander"}})
	c := l.Client(t)
	e := &env{
		t: t, c: c,
		tenant: l.Broadcaster(t, c, "tenant"), prov: l.Broadcaster(t, c, "provider"),
		rival: l.Broadcaster(t, c, "rival"), bystander: l.Broadcaster(t, c, "bystander"),
		owner: l.Address(t, "tenant"), me: l.Address(t, "provider"), other: l.Address(t, "rival"),
	}
	for _, p := range []*chain.Broadcaster{e.prov, e.rival} {
		e.send(p, &ledger.MsgCreateProvider{Owner: p.Address(), HostURI: "https://" + p.Address()[:12] + ".example:8443"})
	}
	return e
}

// send broadcasts msgs, at most 100 in a transaction.
func (e *env) send(b *chain.Broadcaster, msgs ...ledger.Msg) {
	e.t.Helper()
	for start := 0; start < len(msgs); start += 100 {
		if _, err := b.Broadcast(e.t.Context(), msgs[start:min(start+100, len(msgs))]...); err != nil {
			e.t.Fatalf("%s: %v", msgs[start].Type(), err)
		}
	}
}

// advance makes n blocks.
func (e *env) advance(n int) {
	e.t.Helper()
	for range n {
		e.send(e.bystander, &ledger.MsgSend{From: e.bystander.Address(), To: e.owner, Amount: []market.Coin{uakt(1)}})
	}
}

// dep is a deployment to create: one group per price, leased to us (ours) or to the
// rival (theirs). deposit defaults to the minimum, 5 000 000.
type dep struct {
	deposit uint64
	ours    []string
	theirs  []string
}

// ones are n prices of 1 a block.
func ones(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "1"
	}
	return out
}

func group(t *testing.T, name, price string) market.GroupSpec {
	return market.GroupSpec{Name: name, Resources: []market.ResourceUnit{{
		Count: 1, Price: decCoin(t, price),
		Resources: market.Resources{ID: 1, CPU: &market.CPU{Units: market.ResourceValue{Val: 100}}, Memory: &market.Memory{Size: market.ResourceValue{Val: 1 << 20}}},
	}}}
}

// deploy creates the deployments, bids on every group and leases them, batching each
// kind of message; it returns our leases of each deployment and the rival's.
func (e *env) deploy(deps ...dep) (ours, theirs [][]market.LeaseID) {
	e.t.Helper()
	var creates, bids, rivalBids, leases []ledger.Msg
	deposit := e.c.Params().BidMinDeposit
	ours, theirs = make([][]market.LeaseID, len(deps)), make([][]market.LeaseID, len(deps))
	for i, d := range deps {
		e.dseq++
		id := market.DeploymentID{Owner: e.owner, DSeq: e.dseq}
		var groups []market.GroupSpec
		add := func(price string, b *chain.Broadcaster, msgs *[]ledger.Msg, into *[]market.LeaseID) {
			groups = append(groups, group(e.t, fmt.Sprintf("g%d", len(groups)+1), price))
			bid := id.Group(uint32(len(groups))).Order(1).Bid(b.Address())
			*msgs = append(*msgs, &ledger.MsgCreateBid{OrderID: bid.Order(), Provider: b.Address(), Price: decCoin(e.t, price), Deposit: deposit})
			leases = append(leases, &ledger.MsgCreateLease{BidID: bid})
			*into = append(*into, bid.Lease())
		}
		for _, p := range d.ours {
			add(p, e.prov, &bids, &ours[i])
		}
		for _, p := range d.theirs {
			add(p, e.rival, &rivalBids, &theirs[i])
		}
		amount := d.deposit
		if amount == 0 {
			amount = 5_000_000
		}
		creates = append(creates, &ledger.MsgCreateDeployment{ID: id, Groups: groups, Version: bytes.Repeat([]byte{byte(e.dseq)}, 32), Deposit: uakt(amount)})
	}
	e.send(e.tenant, creates...)
	e.send(e.prov, bids...)
	if len(rivalBids) > 0 {
		e.send(e.rival, rivalBids...)
	}
	e.send(e.tenant, leases...)
	return ours, theirs
}

// closeLease closes a lease as its tenant.
func (e *env) closeLease(id market.LeaseID) {
	e.t.Helper()
	e.send(e.tenant, &ledger.MsgCloseLease{ID: id, Sender: id.Owner, Reason: ledger.ReasonOwner})
}

// leases are our leases on the ledger, in every state.
func (e *env) leases() map[market.LeaseID]ledger.LeaseResponse {
	e.t.Helper()
	out := map[market.LeaseID]ledger.LeaseResponse{}
	var key []byte
	for {
		var r ledger.LeasesResponse
		if err := ledger.QueryLeases.Into(e.t.Context(), e.c, ledger.LeasesRequest{Provider: e.me, Page: ledger.Page{Key: key, Limit: 1000}}, &r); err != nil {
			e.t.Fatal(err)
		}
		for _, l := range r.Leases {
			out[l.Lease.ID] = l
		}
		if len(r.NextKey) == 0 {
			return out
		}
		key = r.NextKey
	}
}

func (e *env) lease(id market.LeaseID) ledger.LeaseResponse {
	e.t.Helper()
	var r ledger.LeaseResponse
	if err := ledger.QueryLease.Into(e.t.Context(), e.c, ledger.LeaseRequest{ID: id}, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// state is a lease's state on the ledger.
func (e *env) state(id market.LeaseID) string {
	e.t.Helper()
	return e.lease(id).Lease.State
}

// paid is what the ledger has paid out for a lease of ours.
func (e *env) paid(id market.LeaseID) uint64 {
	e.t.Helper()
	r := e.lease(id)
	n, ok := r.Payment.Withdrawn.Amount.TruncateUint()
	if !ok {
		e.t.Fatalf("lease %s: withdrawn %s", id, r.Payment.Withdrawn)
	}
	return n
}

// assertEarnings checks that the checker's record is the ledger's: per lease, and in
// total.
func (e *env) assertEarnings(c *Checker) {
	e.t.Helper()
	var total uint64
	want := map[market.LeaseID]uint64{}
	for id, l := range e.leases() {
		n, _ := l.Payment.Withdrawn.Amount.TruncateUint()
		total += n
		if n > 0 {
			want[id] = n
		}
	}
	c.mu.Lock()
	got := map[market.LeaseID]uint64{}
	for id, l := range c.rec.leases {
		got[id] = uint64(l.withdrawn.Amount)
	}
	c.mu.Unlock()
	for id, n := range want {
		if got[id] != n {
			e.t.Errorf("lease %s: recorded %d, the ledger paid out %d", id, got[id], n)
		}
	}
	if len(got) != len(want) {
		e.t.Errorf("%d leases recorded, %d paid out", len(got), len(want))
	}
	earned := c.Status().Earnings
	if total == 0 && len(earned) == 0 {
		return
	}
	if len(earned) != 1 || earned[0] != uakt(total) {
		e.t.Errorf("earnings %v, the ledger paid out %duakt", earned, total)
	}
}

// testConfig withdraws only on thresholds, with the balance threshold off.
func testConfig() Config {
	c := DefaultConfig()
	c.WithdrawPeriod = 0
	c.MinBalance = uakt(0)
	return c
}

// checker builds a checker for our provider, with its event subscription and metrics
// registry. b defaults to our broadcaster; cfg.EarningsFile to a temporary file.
func (e *env) checker(cfg Config, b Broadcaster) (*Checker, *bus.Subscription[Event], *prometheus.Registry) {
	e.t.Helper()
	if b == nil {
		b = e.prov
	}
	cfg.Provider = e.me
	if cfg.EarningsFile == "" {
		cfg.EarningsFile = filepath.Join(e.t.TempDir(), "earnings.json")
	}
	events, err := bus.New[Event]("balance", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(events.Close)
	sub, err := events.Subscribe(1024, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, err := New(cfg, e.c, b, events, testLogger(), reg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, sub, reg
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// drain returns the events published so far.
func drain(sub *bus.Subscription[Event]) []Event {
	var out []Event
	for {
		select {
		case ev := <-sub.Events():
			out = append(out, ev)
		default:
			return out
		}
	}
}

// countingBroadcaster passes transactions on and records how many messages each had;
// before, when set, runs before each one is sent (i counts them from 0).
type countingBroadcaster struct {
	b      Broadcaster
	before func(i int)

	mu    sync.Mutex
	sizes []int
}

func (cb *countingBroadcaster) Broadcast(ctx context.Context, msgs ...ledger.Msg) (*chain.Result, error) {
	cb.mu.Lock()
	i := len(cb.sizes)
	cb.sizes = append(cb.sizes, len(msgs))
	cb.mu.Unlock()
	if cb.before != nil {
		cb.before(i)
	}
	return cb.b.Broadcast(ctx, msgs...)
}

func (cb *countingBroadcaster) take() []int {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	s := cb.sizes
	cb.sizes = nil
	return s
}

// lateBroadcaster is a shutdown arriving while a withdrawal waits for its block: the
// transaction goes into a block, then stop ends the checker's context, and a caller
// waiting under a context that has ended gets its error, as from chain.Broadcaster
// (whose wait ends with its caller's context while the transaction is committed
// anyway).
type lateBroadcaster struct {
	b    Broadcaster
	stop context.CancelFunc
}

func (lb *lateBroadcaster) Broadcast(ctx context.Context, msgs ...ledger.Msg) (*chain.Result, error) {
	res, err := lb.b.Broadcast(context.WithoutCancel(ctx), msgs...)
	lb.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, err
}
