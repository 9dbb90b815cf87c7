package ledger

import (
	"bytes"
	stded25519 "crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/google/btree"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/sdl"
)

// The property tests drive the ledger with random blocks of valid and invalid messages
// and check, after every transaction and every block, what must hold whatever the
// messages were:
//
//   - total supply is what genesis created;
//   - no escrow account or payment balance is negative, and every payment has been paid
//     exactly its rate for each block its lease ran and its account could pay;
//   - no order has more than max_bids_per_order bids;
//   - an order has at most one active lease, an active order exactly one, and an open
//     order's group is open (and the indexes agree with the records);
//   - a rejected transaction changes nothing but, when it reached execution, its
//     signer's sequence;
//   - the app hash is deterministic: a fresh App replaying the same blocks computes the
//     same hash and results at every height, and an App reopened from the database
//     reports the committed height and hash and holds the same state.

const (
	propSeeds  = 16
	propBlocks = 60
)

func propParams() api.Params {
	p := api.DefaultParams()
	p.DeploymentMinDeposit = []market.Coin{{Amount: 1000, Denom: api.DefaultDenom}}
	p.BidMinDeposit = market.Coin{Amount: 200, Denom: api.DefaultDenom}
	p.MaxBidsPerOrder = 3
	p.MaxGroupsPerDeployment = 3
	return p
}

// propStats counts what happened across all seeds, so the test can insist that the
// random runs exercised every path it means to check.
type propStats struct {
	mu     sync.Mutex
	events map[string]int
	codes  map[api.Code]int
}

func (s *propStats) add(events map[string]int, codes map[api.Code]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range events {
		s.events[k] += n
	}
	for k, n := range codes {
		s.codes[k] += n
	}
}

func TestPropertiesRandomBlocks(t *testing.T) {
	stats := &propStats{events: map[string]int{}, codes: map[api.Code]int{}}
	webGroups := webDeployment(t)
	t.Run("seeds", func(t *testing.T) {
		for seed := range uint64(propSeeds) {
			t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
				t.Parallel()
				r := newPropRun(t, seed, webGroups)
				r.run(propBlocks)
				stats.add(r.events, r.codes)
			})
		}
	})
	if t.Failed() {
		return
	}
	// Each main path must have happened at least once across the seeds, or the
	// properties above were checked on nothing.
	for _, ev := range []string{
		api.EventTransfer, api.EventProviderCreated, api.EventProviderUpdated, api.EventAuditSigned, api.EventAuditDeleted,
		api.EventDeploymentCreated, api.EventDeploymentUpdated, api.EventDeploymentClosed, api.EventDeposit,
		api.EventGroupPaused, api.EventGroupStarted, api.EventGroupClosed, api.EventGroupUnfunded,
		api.EventOrderCreated, api.EventOrderClosed, api.EventBidCreated, api.EventLeaseCreated, api.EventWithdrawal,
		api.EventBidClosed + "/" + api.BidLost, api.EventBidClosed + "/" + api.BidClosed,
		api.EventLeaseClosed + "/" + api.ReasonInsufficientFunds, api.EventLeaseClosed + "/" + api.ReasonOwner,
		api.EventLeaseClosed + "/" + api.ReasonUnstable, propMultiDepletion,
	} {
		if stats.events[ev] == 0 {
			t.Errorf("no %s event in %d seeds × %d blocks", ev, propSeeds, propBlocks)
		}
	}
	for _, c := range []api.Code{
		api.CodeOK, api.CodeUnauthorized, api.CodeWrongSequence, api.CodeInvalidMsg, api.CodeInsufficientFunds,
		api.CodeNotFound, api.CodeAlreadyExists, api.CodeInvalidState, api.CodeNotPermitted, api.CodePriceTooHigh,
		api.CodeTooManyBids, api.CodeRequirements, api.CodeUnknownProvider,
	} {
		if stats.codes[c] == 0 {
			t.Errorf("no transaction with code %s in %d seeds × %d blocks", c, propSeeds, propBlocks)
		}
	}
	t.Logf("events: %v", stats.events)
	t.Logf("codes: %v", stats.codes)
}

// propRun is one seed's run: the App under test, a second App that replays every
// block from its own database, and the random source that makes the blocks.
type propRun struct {
	t      *testing.T
	rng    *rand.Rand
	h      *harness
	replay *App
	params api.Params
	total  uint64

	web       *sdl.Result
	tenants   []string
	providers []string
	auditor   string
	outsider  string // funded, never a provider
	nameOf    map[string]string
	strangers []string // addresses without keys that received funds

	snap     *propSnap // the committed state, decoded
	cache    decodeCache
	consumed []signedTx // transactions that used their sequence, to replay
	events   map[string]int
	codes    map[api.Code]int
}

type signedTx struct {
	signer string
	raw    []byte
}

// plannedTx is one transaction of a block before it is signed.
type plannedTx struct {
	signer string // name of the signing account
	msgs   []api.Msg
	// pre is the code of a transaction the generator made to be rejected before
	// execution (it does not use its sequence); 0 for one that reaches execution.
	pre api.Code
	raw []byte // a transaction signed before, replayed as is
}

func newPropRun(t *testing.T, seed uint64, web *sdl.Result) *propRun {
	r := &propRun{
		t:         t,
		rng:       rand.New(rand.NewPCG(seed, 0x6265727468)),
		params:    propParams(),
		web:       web,
		tenants:   []string{"t0", "t1", "t2"},
		providers: []string{"p0", "p1", "p2", "p3", "p4"},
		auditor:   "auditor",
		outsider:  "outsider",
		nameOf:    map[string]string{},
		events:    map[string]int{},
		codes:     map[api.Code]int{},
		cache:     decodeCache{},
	}
	funds := map[string]uint64{r.auditor: 10_000, r.outsider: 50_000}
	for _, n := range r.tenants {
		funds[n] = 300_000
	}
	for _, n := range r.providers {
		funds[n] = 20_000
	}
	var genesis []byte
	r.h, genesis = newSeededHarness(t, seed, r.params, funds)
	for n, a := range r.h.names {
		r.nameOf[a] = n
	}
	for _, n := range funds {
		r.total += n
	}
	db := dbm.NewMemDB()
	app, err := NewApp(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.replay = app
	resp, err := app.InitChain(t.Context(), &abci.RequestInitChain{ChainId: r.h.chain, AppStateBytes: genesis, InitialHeight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := r.h.app.s.hash.sum(); !bytes.Equal(resp.AppHash, want) {
		t.Fatalf("genesis app hash %X on replay, %X on the first App", resp.AppHash, want)
	}
	return r
}

// newSeededHarness is newHarnessParams with keys derived from the seed, so a failing
// seed replays exactly; it returns the genesis app_state too.
func newSeededHarness(t testing.TB, seed uint64, params api.Params, funds map[string]uint64) (*harness, []byte) {
	t.Helper()
	h := &harness{t: t, db: dbm.NewMemDB(), chain: testChain, keys: map[string]api.PrivKey{}, seq: map[string]uint64{}, names: map[string]string{}}
	names := make([]string, 0, len(funds))
	for n := range funds {
		names = append(names, n)
	}
	sort.Strings(names)
	g := api.GenesisState{Params: params}
	for _, n := range names {
		k := seededKey(t, seed, n)
		addr, err := k.PubKey().Address(params.AddressPrefix)
		if err != nil {
			t.Fatal(err)
		}
		h.keys[addr], h.names[n] = k, addr
		g.Accounts = append(g.Accounts, api.GenesisAccount{Address: addr, Balances: []market.Coin{{Amount: market.Uint(funds[n]), Denom: api.DefaultDenom}}})
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	h.open()
	if _, err := h.app.InitChain(t.Context(), &abci.RequestInitChain{ChainId: h.chain, AppStateBytes: b, InitialHeight: 1}); err != nil {
		t.Fatalf("InitChain: %v", err)
	}
	return h, b
}

// seededKey derives an account's key from the seed and its name. Most accounts have
// ed25519 keys, which are much cheaper to verify under the race detector; the auditor
// and the outsider have secp256k1 keys, so both kinds sign.
func seededKey(t testing.TB, seed uint64, name string) api.PrivKey {
	t.Helper()
	secret := sha256.Sum256([]byte(fmt.Sprintf("berth property test/%d/%s", seed, name)))
	typ, b := api.KeyEd25519, []byte(stded25519.NewKeyFromSeed(secret[:]))
	if name == "auditor" || name == "outsider" {
		typ, b = api.KeySecp256k1, secret[:]
	}
	k, err := api.PrivKeyFromBytes(typ, b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (r *propRun) run(blocks int) {
	// Block 1 registers the providers and the auditor vouches for some of them.
	attrs := map[string]market.Attributes{
		"p0": {usWest, {Key: "tier", Value: "1"}},
		"p1": {usWest},
		"p2": {usWest},
		"p3": {{Key: "region", Value: "eu-central"}},
		"p4": {usWest},
	}
	var setup []plannedTx
	for _, p := range r.providers {
		setup = append(setup, plannedTx{signer: p, msgs: []api.Msg{r.providerMsg(p, attrs[p])}})
	}
	setup = append(setup,
		plannedTx{signer: r.auditor, msgs: []api.Msg{&api.MsgSignProviderAttributes{Auditor: r.h.addr(r.auditor), Owner: r.h.addr("p0"), Attributes: market.Attributes{usWest}}}},
		plannedTx{signer: r.auditor, msgs: []api.Msg{&api.MsgSignProviderAttributes{Auditor: r.h.addr(r.auditor), Owner: r.h.addr("p2"), Attributes: market.Attributes{usWest}}}},
	)
	for i, res := range r.block(setup) {
		if res.Code != 0 {
			r.t.Fatalf("setup tx %d: %s", i, res.Log)
		}
	}
	for r.h.height < int64(blocks) {
		var txs []plannedTx
		if r.rng.IntN(10) >= 3 { // 30% of blocks are empty, so escrow runs down
			for range 1 + r.rng.IntN(8) {
				if p := r.randomTx(); p != nil {
					txs = append(txs, *p)
				}
			}
		}
		r.block(txs)
	}
	r.restart()
	// The hash kept up to date write by write (and undo by undo) is the hash of the
	// state computed from scratch.
	var fresh ltHash
	r.h.app.s.work.Ascend(func(e kv) bool {
		fresh.add([]byte(e.k), e.v, +1)
		return true
	})
	if fresh != r.h.app.s.hash {
		r.t.Fatalf("height %d: the state hashes to %X from scratch, the App says %X", r.h.height, fresh.sum(), r.h.app.s.hash.sum())
	}
}

// block signs and executes the planned transactions as the next block, with the
// per-transaction checks, then the replay, restart and invariant checks.
func (r *propRun) block(txs []plannedTx) []*abci.ExecTxResult {
	t, h := r.t, r.h
	h.height++
	height := h.height
	raws := make([][]byte, len(txs))
	for i, p := range txs {
		if p.raw != nil {
			raws[i] = p.raw
			continue
		}
		raws[i] = h.tx(p.signer, p.msgs...)
		if p.pre != 0 {
			h.seq[h.addr(p.signer)]-- // rejected before execution: the sequence stays
		}
	}

	// The App under test executes the block in FinalizeBlock's steps (the escrow
	// depletions, then each transaction), so that each transaction can be checked on
	// its own.
	resp, err := h.app.FinalizeBlock(t.Context(), &abci.RequestFinalizeBlock{Height: height})
	if err != nil {
		t.Fatalf("FinalizeBlock %d: %v", height, err)
	}
	r.count(resp.Events)
	r.countDepletions(resp.Events)
	results := make([]*abci.ExecTxResult, len(raws))
	for i := range raws {
		results[i] = r.deliver(height, i, txs[i], raws)
	}
	hash := h.app.s.hash.sum()
	if _, err := h.app.Commit(t.Context(), &abci.RequestCommit{}); err != nil {
		t.Fatalf("Commit %d: %v", height, err)
	}
	r.checkInfo(h.app, "App", height, hash)

	// The replay executes the same block in one FinalizeBlock from its own database.
	rresp, err := r.replay.FinalizeBlock(t.Context(), &abci.RequestFinalizeBlock{Height: height, Txs: raws})
	if err != nil {
		t.Fatalf("replay FinalizeBlock %d: %v", height, err)
	}
	if !bytes.Equal(rresp.AppHash, hash) {
		t.Fatalf("height %d: replay app hash %X, want %X", height, rresp.AppHash, hash)
	}
	if !reflect.DeepEqual(rresp.Events, resp.Events) {
		t.Fatalf("height %d: replay block events %v, want %v", height, rresp.Events, resp.Events)
	}
	for i, rr := range rresp.TxResults {
		if rr.Code != results[i].Code || rr.Log != results[i].Log || !reflect.DeepEqual(rr.Events, results[i].Events) {
			t.Fatalf("height %d tx %d: replay result %d %q %v, want %d %q %v",
				height, i, rr.Code, rr.Log, rr.Events, results[i].Code, results[i].Log, results[i].Events)
		}
	}
	if _, err := r.replay.Commit(t.Context(), &abci.RequestCommit{}); err != nil {
		t.Fatalf("replay Commit %d: %v", height, err)
	}
	r.checkInfo(r.replay, "replay", height, hash)

	r.checkInvariants()
	r.checkQueries()
	if r.rng.IntN(8) == 0 {
		r.restart()
	}
	return results
}

// txLevelCodes are the codes of transactions rejected before their messages run.
var txLevelCodes = []api.Code{api.CodeTxDecode, api.CodeTxTooLarge, api.CodeWrongChain, api.CodeUnauthorized, api.CodeWrongSequence, api.CodeUnknownAccount}

// deliver executes the block's transaction i and checks what it changed: a transaction
// rejected before execution nothing, one whose messages failed only its signer's
// sequence.
func (r *propRun) deliver(height int64, i int, p plannedTx, raws [][]byte) *abci.ExecTxResult {
	t, s, raw := r.t, r.h.app.s, raws[i]
	addr := r.h.addr(p.signer)
	key := accountKey(addr)
	before := s.hash
	oldAcc, _ := s.get(key)
	var acc0 api.Account
	getJSON(s, key, &acc0)

	res := r.h.app.deliver(raw, height)
	code := api.Code(res.Code)
	r.codes[code]++
	where := func() string { return fmt.Sprintf("height %d tx %d (%s)", height, i, describe(p)) }
	// diff shows what the transaction changed, for a failure message: the replay, still
	// at the last block, executes this block up to the transaction to show the state
	// before it.
	diff := func() string {
		if _, err := r.replay.FinalizeBlock(t.Context(), &abci.RequestFinalizeBlock{Height: height, Txs: raws[:i]}); err != nil {
			return err.Error()
		}
		return stateDiff(r.replay.s.work, s.work)
	}

	if p.pre != 0 || p.raw != nil {
		want := p.pre
		if p.raw != nil {
			want = api.CodeWrongSequence
		}
		if code != want {
			t.Fatalf("%s: code %s, want %s: %s", where(), code, want, res.Log)
		}
		if s.hash != before {
			t.Fatalf("%s: rejected before execution but changed state:\n%s", where(), diff())
		}
		if len(res.Events) != 0 {
			t.Fatalf("%s: rejected with events %v", where(), res.Events)
		}
		if code == api.CodeWrongSequence {
			got, ok := api.ExpectedSequence(api.ErrorFromCode(res.Code, res.Codespace, res.Log))
			if !ok || got != acc0.Sequence {
				t.Fatalf("%s: log %q: expected sequence %d, %v; the account is at %d", where(), res.Log, got, ok, acc0.Sequence)
			}
		}
		return res
	}

	var acc1 api.Account
	getJSON(s, key, &acc1)
	if acc1.Sequence != acc0.Sequence+1 {
		t.Fatalf("%s: code %s: sequence %d → %d, want it used: %s", where(), code, acc0.Sequence, acc1.Sequence, res.Log)
	}
	r.consumed = append(r.consumed, signedTx{signer: p.signer, raw: raw})
	if code == api.CodeOK {
		r.count(res.Events)
		return res
	}
	if slices.Contains(txLevelCodes, code) {
		t.Fatalf("%s: transaction-level code %s after the sequence was used: %s", where(), code, res.Log)
	}
	if len(res.Events) != 0 {
		t.Fatalf("%s: failed with events %v", where(), res.Events)
	}
	newAcc, _ := s.get(key)
	want := before
	want.add([]byte(key), oldAcc, -1)
	want.add([]byte(key), newAcc, +1)
	if s.hash != want {
		t.Fatalf("%s: failed (%s) but changed more than the signer's account:\n%s", where(), res.Log, diff())
	}
	return res
}

func describe(p plannedTx) string {
	if p.raw != nil {
		return p.signer + " replays a transaction"
	}
	types := make([]string, len(p.msgs))
	for i, m := range p.msgs {
		types[i] = m.Type()
	}
	return p.signer + ": " + strings.Join(types, ", ")
}

// stateDiff lists the entries that differ between two states (at most 20).
func stateDiff(a, b *btree.BTreeG[kv]) string {
	var out []string
	a.Ascend(func(e kv) bool {
		if v, ok := b.Get(e); !ok {
			out = append(out, fmt.Sprintf("- %q", e.k))
		} else if !bytes.Equal(v.v, e.v) {
			out = append(out, fmt.Sprintf("~ %q: %s → %s", e.k, e.v, v.v))
		}
		return len(out) < 20
	})
	b.Ascend(func(e kv) bool {
		if _, ok := a.Get(e); !ok {
			out = append(out, fmt.Sprintf("+ %q: %s", e.k, e.v))
		}
		return len(out) < 20
	})
	return strings.Join(out, "\n")
}

func (r *propRun) count(evs []abci.Event) {
	for _, e := range evs {
		r.events[e.Type]++
		for _, a := range e.Attributes {
			if (e.Type == api.EventBidClosed && a.Key == api.AttrState) || (e.Type == api.EventLeaseClosed && a.Key == api.AttrReason) {
				r.events[e.Type+"/"+a.Value]++
			}
		}
	}
}

// countDepletions counts the blocks where one account's depletion closed several
// leases: the case where the order they close in must not matter.
func (r *propRun) countDepletions(evs []abci.Event) {
	closed := map[string]int{}
	for _, e := range evs {
		if e.Type != api.EventLeaseClosed {
			continue
		}
		var owner, dseq string
		for _, a := range e.Attributes {
			switch a.Key {
			case api.AttrOwner:
				owner = a.Value
			case api.AttrDSeq:
				dseq = a.Value
			}
		}
		closed[owner+"/"+dseq]++
	}
	for _, n := range closed {
		if n > 1 {
			r.events[propMultiDepletion]++
		}
	}
}

const propMultiDepletion = "depletion closing several leases"

func (r *propRun) checkInfo(app *App, which string, height int64, hash []byte) {
	r.t.Helper()
	info, err := app.Info(r.t.Context(), &abci.RequestInfo{})
	if err != nil {
		r.t.Fatal(err)
	}
	if info.LastBlockHeight != height || !bytes.Equal(info.LastBlockAppHash, hash) {
		r.t.Fatalf("%s Info: height %d hash %X, want %d %X", which, info.LastBlockHeight, info.LastBlockAppHash, height, hash)
	}
}

// restart reopens the App under test from its database, as a node does when it starts,
// and goes on with the reopened one.
func (r *propRun) restart() {
	t, h := r.t, r.h
	old := h.app.s.committed()
	app, err := NewApp(h.db, nil)
	if err != nil {
		t.Fatalf("height %d: reopen: %v", h.height, err)
	}
	r.checkInfo(app, "reopened App", old.height, old.appHash)
	if d := stateDiff(old.tree, app.s.committed().tree); d != "" {
		t.Fatalf("height %d: reopened state differs:\n%s", h.height, d)
	}
	if app.chainID != h.chain || !jsonEqual(app.params, h.app.params) {
		t.Fatalf("height %d: reopened chain %q params %+v", h.height, app.chainID, app.params)
	}
	h.app = app
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// --- helpers for the generators and checks ---

func (r *propRun) chance(percent int) bool { return r.rng.IntN(100) < percent }

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// pickMostly picks, with the given percent chance, among the items that satisfy ok,
// else among all; false when there is nothing to pick.
func pickMostly[T any](r *propRun, xs []T, percent int, ok func(T) bool) (T, bool) {
	var zero T
	if !r.chance(percent) {
		if len(xs) == 0 {
			return zero, false
		}
		return pick(r.rng, xs), true
	}
	var good []T
	for _, x := range xs {
		if ok(x) {
			good = append(good, x)
		}
	}
	if len(good) == 0 {
		return zero, false
	}
	return pick(r.rng, good), true
}

// propSnap is the committed state decoded once per block, for the invariants and for
// the next block's random messages. Groups and orders are read without their specs.
type propSnap struct {
	v       *view
	deps    []api.Deployment
	groups  []propGroup
	orders  []propOrder
	bids    []api.Bid
	leases  []api.Lease
	escrows []api.EscrowAccount
	pays    []api.Payment
}

type propGroup struct {
	ID       market.GroupID `json:"id"`
	State    string         `json:"state"`
	LastOSeq uint32         `json:"last_oseq"`
}

type propOrder struct {
	ID    market.OrderID `json:"id"`
	State string         `json:"state"`
}

// decodeCache keeps decoded state entries by key, to decode only what changed.
type decodeCache map[string]decoded

type decoded struct {
	raw []byte
	val any
}

func newPropSnap(v *view, c decodeCache) *propSnap {
	return &propSnap{
		v:       v,
		deps:    scan[api.Deployment](v, tDeployment, c),
		groups:  scan[propGroup](v, tGroup, c),
		orders:  scan[propOrder](v, tOrder, c),
		bids:    scan[api.Bid](v, tBid, c),
		leases:  scan[api.Lease](v, tLease, c),
		escrows: scan[api.EscrowAccount](v, tEscrow, c),
		pays:    scan[api.Payment](v, tPayment, c),
	}
}

func scan[T any](rd reader, tbl string, c decodeCache) []T {
	var out []T
	rd.ascend(table(tbl).String(), "", func(k string, v []byte) bool {
		if d, ok := c[k]; ok && bytes.Equal(d.raw, v) {
			if t, ok := d.val.(T); ok {
				out = append(out, t)
				return true
			}
		}
		t := decodeAs[T](k, v)
		c[k] = decoded{raw: v, val: t}
		out = append(out, t)
		return true
	})
	return out
}
