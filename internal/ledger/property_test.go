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
	"strconv"
	"strings"
	"sync"
	"testing"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/google/btree"

	"berth.dev/berth/internal/market"
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

func propParams() Params {
	p := DefaultParams()
	p.DeploymentMinDeposit = []market.Coin{{Amount: 1000, Denom: DefaultDenom}}
	p.BidMinDeposit = market.Coin{Amount: 200, Denom: DefaultDenom}
	p.MaxBidsPerOrder = 3
	p.MaxGroupsPerDeployment = 3
	return p
}

// propStats counts what happened across all seeds, so the test can insist that the
// random runs exercised every path it means to check.
type propStats struct {
	mu     sync.Mutex
	events map[string]int
	codes  map[Code]int
}

func (s *propStats) add(events map[string]int, codes map[Code]int) {
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
	stats := &propStats{events: map[string]int{}, codes: map[Code]int{}}
	webGroups := parseSDL(t, webSDL)
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
		EventTransfer, EventProviderCreated, EventProviderUpdated, EventAuditSigned, EventAuditDeleted,
		EventDeploymentCreated, EventDeploymentUpdated, EventDeploymentClosed, EventDeposit,
		EventGroupPaused, EventGroupStarted, EventGroupClosed, EventGroupUnfunded,
		EventOrderCreated, EventOrderClosed, EventBidCreated, EventLeaseCreated, EventWithdrawal,
		EventBidClosed + "/" + BidLost, EventBidClosed + "/" + BidClosed,
		EventLeaseClosed + "/" + ReasonInsufficientFunds, EventLeaseClosed + "/" + ReasonOwner,
		EventLeaseClosed + "/" + ReasonUnstable, propMultiDepletion,
	} {
		if stats.events[ev] == 0 {
			t.Errorf("no %s event in %d seeds × %d blocks", ev, propSeeds, propBlocks)
		}
	}
	for _, c := range []Code{
		CodeOK, CodeUnauthorized, CodeWrongSequence, CodeInvalidMsg, CodeInsufficientFunds,
		CodeNotFound, CodeAlreadyExists, CodeInvalidState, CodeNotPermitted, CodePriceTooHigh,
		CodeTooManyBids, CodeRequirements, CodeUnknownProvider,
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
	params Params
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
	codes    map[Code]int
}

type signedTx struct {
	signer string
	raw    []byte
}

// plannedTx is one transaction of a block before it is signed.
type plannedTx struct {
	signer string // name of the signing account
	msgs   []Msg
	// pre is the code of a transaction the generator made to be rejected before
	// execution (it does not use its sequence); 0 for one that reaches execution.
	pre Code
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
		codes:     map[Code]int{},
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
func newSeededHarness(t testing.TB, seed uint64, params Params, funds map[string]uint64) (*harness, []byte) {
	t.Helper()
	h := &harness{t: t, db: dbm.NewMemDB(), chain: testChain, keys: map[string]PrivKey{}, seq: map[string]uint64{}, names: map[string]string{}}
	names := make([]string, 0, len(funds))
	for n := range funds {
		names = append(names, n)
	}
	sort.Strings(names)
	g := GenesisState{Params: params}
	for _, n := range names {
		k := seededKey(t, seed, n)
		addr, err := k.PubKey().Address(params.AddressPrefix)
		if err != nil {
			t.Fatal(err)
		}
		h.keys[addr], h.names[n] = k, addr
		g.Accounts = append(g.Accounts, GenesisAccount{Address: addr, Balances: []market.Coin{{Amount: market.Uint(funds[n]), Denom: DefaultDenom}}})
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
func seededKey(t testing.TB, seed uint64, name string) PrivKey {
	t.Helper()
	secret := sha256.Sum256([]byte(fmt.Sprintf("berth property test/%d/%s", seed, name)))
	typ, b := KeyEd25519, []byte(stded25519.NewKeyFromSeed(secret[:]))
	if name == "auditor" || name == "outsider" {
		typ, b = KeySecp256k1, secret[:]
	}
	k, err := PrivKeyFromBytes(typ, b)
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
		setup = append(setup, plannedTx{signer: p, msgs: []Msg{r.providerMsg(p, attrs[p])}})
	}
	setup = append(setup,
		plannedTx{signer: r.auditor, msgs: []Msg{&MsgSignProviderAttributes{Auditor: r.h.addr(r.auditor), Owner: r.h.addr("p0"), Attributes: market.Attributes{usWest}}}},
		plannedTx{signer: r.auditor, msgs: []Msg{&MsgSignProviderAttributes{Auditor: r.h.addr(r.auditor), Owner: r.h.addr("p2"), Attributes: market.Attributes{usWest}}}},
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
var txLevelCodes = []Code{CodeTxDecode, CodeTxTooLarge, CodeWrongChain, CodeUnauthorized, CodeWrongSequence, CodeUnknownAccount}

// deliver executes the block's transaction i and checks what it changed: a transaction
// rejected before execution nothing, one whose messages failed only its signer's
// sequence.
func (r *propRun) deliver(height int64, i int, p plannedTx, raws [][]byte) *abci.ExecTxResult {
	t, s, raw := r.t, r.h.app.s, raws[i]
	addr := r.h.addr(p.signer)
	key := accountKey(addr)
	before := s.hash
	oldAcc, _ := s.get(key)
	var acc0 Account
	getJSON(s, key, &acc0)

	res := r.h.app.deliver(raw, height)
	code := Code(res.Code)
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
			want = CodeWrongSequence
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
		if code == CodeWrongSequence {
			got, ok := ExpectedSequence(ErrorFromCode(res.Code, res.Codespace, res.Log))
			if !ok || got != acc0.Sequence {
				t.Fatalf("%s: log %q: expected sequence %d, %v; the account is at %d", where(), res.Log, got, ok, acc0.Sequence)
			}
		}
		return res
	}

	var acc1 Account
	getJSON(s, key, &acc1)
	if acc1.Sequence != acc0.Sequence+1 {
		t.Fatalf("%s: code %s: sequence %d → %d, want it used: %s", where(), code, acc0.Sequence, acc1.Sequence, res.Log)
	}
	r.consumed = append(r.consumed, signedTx{signer: p.signer, raw: raw})
	if code == CodeOK {
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
			if (e.Type == EventBidClosed && a.Key == AttrState) || (e.Type == EventLeaseClosed && a.Key == AttrReason) {
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
		if e.Type != EventLeaseClosed {
			continue
		}
		var owner, dseq string
		for _, a := range e.Attributes {
			switch a.Key {
			case AttrOwner:
				owner = a.Value
			case AttrDSeq:
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

// --- random transactions ---

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
	deps    []Deployment
	groups  []propGroup
	orders  []propOrder
	bids    []Bid
	leases  []Lease
	escrows []EscrowAccount
	pays    []Payment
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
		deps:    scan[Deployment](v, tDeployment, c),
		groups:  scan[propGroup](v, tGroup, c),
		orders:  scan[propOrder](v, tOrder, c),
		bids:    scan[Bid](v, tBid, c),
		leases:  scan[Lease](v, tLease, c),
		escrows: scan[EscrowAccount](v, tEscrow, c),
		pays:    scan[Payment](v, tPayment, c),
	}
}

func scan[T any](rd reader, tbl string, c decodeCache) []T {
	var out []T
	rd.ascend(table(tbl).String(), "", func(k string, v []byte) bool {
		if d, ok := c[k]; ok && bytes.Equal(d.raw, v) {
			out = append(out, d.val.(T))
			return true
		}
		t := decodeAs[T](v)
		c[k] = decoded{raw: v, val: t}
		out = append(out, t)
		return true
	})
	return out
}

func (r *propRun) coin(n uint64) market.Coin {
	return market.Coin{Amount: market.Uint(n), Denom: DefaultDenom}
}

func (r *propRun) providerMsg(name string, attrs market.Attributes) *MsgCreateProvider {
	return &MsgCreateProvider{Owner: r.h.addr(name), HostURI: "https://" + name + ".example.com:8443", Attributes: attrs}
}

func (r *propRun) otherTenant(than string) string {
	for {
		if n := pick(r.rng, r.tenants); n != than {
			return n
		}
	}
}

type txGen struct {
	weight int
	gen    func(s *propSnap) *plannedTx
}

func (r *propRun) randomTx() *plannedTx {
	v := r.snap
	gens := []txGen{
		{8, r.genCreateDeployment},
		{5, r.genDeposit},
		{30, r.genBid},
		{24, r.genLease},
		{3, r.genCloseLease},
		{3, r.genCloseBid},
		{3, r.genGroup},
		{5, r.genWithdraw},
		{2, r.genCloseDeployment},
		{4, r.genSend},
		{2, r.genUpdateDeployment},
		{2, r.genProvider},
		{2, r.genAudit},
		{3, r.genBundle},
		{2, r.genReplay},
	}
	total := 0
	for _, g := range gens {
		total += g.weight
	}
	n := r.rng.IntN(total)
	for _, g := range gens {
		if n < g.weight {
			return g.gen(v)
		}
		n -= g.weight
	}
	return nil
}

func (r *propRun) randomPrice() market.Dec {
	var s string
	if r.chance(30) {
		s = fmt.Sprintf("%d.%03d", r.rng.IntN(60), r.rng.IntN(1000))
	} else {
		s = strconv.Itoa(1 + r.rng.IntN(400))
	}
	d, err := market.ParseDec(s)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *propRun) randomGroups() ([]market.GroupSpec, []byte) {
	if r.chance(20) {
		return r.web.Groups, r.web.Version
	}
	n := 1 + r.rng.IntN(3)
	groups := make([]market.GroupSpec, n)
	for i := range groups {
		g := market.GroupSpec{Name: fmt.Sprintf("g%d", i)}
		switch r.rng.IntN(5) {
		case 0, 1:
			g.Requirements.Attributes = market.Attributes{usWest}
		case 2:
			g.Requirements.Attributes = market.Attributes{usWest}
			g.Requirements.SignedBy.AnyOf = []string{r.h.addr(r.auditor)}
		case 3:
			g.Requirements.Attributes = market.Attributes{{Key: "region", Value: "eu-central"}}
		}
		for u := range 1 + r.rng.IntN(2) {
			g.Resources = append(g.Resources, market.ResourceUnit{
				Count: uint32(1 + r.rng.IntN(3)),
				Price: market.DecCoin{Amount: r.randomPrice(), Denom: DefaultDenom},
				Resources: market.Resources{
					ID:        uint32(u + 1),
					CPU:       &market.CPU{Units: market.ResourceValue{Val: market.Uint(100 * (1 + r.rng.IntN(10)))}},
					Memory:    &market.Memory{Size: market.ResourceValue{Val: 512 << 20}},
					Endpoints: market.Endpoints{},
				},
			})
		}
		groups[i] = g
	}
	version := sha256.Sum256([]byte(fmt.Sprint(r.rng.Uint64())))
	return groups, version[:]
}

func (r *propRun) genCreateDeployment(*propSnap) *plannedTx {
	owner := pick(r.rng, r.tenants)
	if r.chance(10) {
		owner = "p0" // a provider deploys too, and may lease from itself
	}
	groups, version := r.randomGroups()
	m := &MsgCreateDeployment{
		ID:      market.DeploymentID{Owner: r.h.addr(owner), DSeq: uint64(1 + r.rng.IntN(12))},
		Groups:  groups,
		Version: version,
		Deposit: r.coin(uint64(1000 + r.rng.IntN(5000))),
	}
	p := &plannedTx{signer: owner, msgs: []Msg{m}}
	switch {
	case r.chance(4):
		m.Deposit = r.coin(999) // below deployment_min_deposit
		p.pre = CodeInvalidMsg
	case r.chance(3):
		m.Deposit = r.coin(1_000_000) // more than the tenant has
	}
	return p
}

func (r *propRun) genDeposit(v *propSnap) *plannedTx {
	d, ok := pickMostly(r, v.deps, 85, func(d Deployment) bool { return d.State == DeploymentActive })
	if !ok {
		return nil
	}
	depositor := r.nameOf[d.ID.Owner]
	if r.chance(25) {
		depositor = r.otherTenant(depositor)
	}
	m := &MsgDepositDeployment{ID: d.ID, Depositor: r.h.addr(depositor), Amount: r.coin(uint64(1 + r.rng.IntN(5000)))}
	p := &plannedTx{signer: depositor, msgs: []Msg{m}}
	if r.chance(4) {
		m.Amount.Amount = 0
		p.pre = CodeInvalidMsg
	}
	return p
}

func (r *propRun) genBid(v *propSnap) *plannedTx {
	lo, ok := pickMostly(r, v.orders, 85, func(o propOrder) bool { return o.State == OrderOpen })
	if !ok {
		return nil
	}
	if r.chance(40) {
		// An open order that has bids already, so that orders fill up.
		if o, ok := pickMostly(r, v.orders, 100, func(o propOrder) bool {
			return o.State == OrderOpen && slices.ContainsFunc(v.bids, func(b Bid) bool { return b.ID.Order() == o.ID })
		}); ok {
			lo = o
		}
	}
	var o Order
	getJSON(v.v, orderKey(lo.ID), &o)
	// Mostly a provider that has not bid on the order yet, so orders fill up.
	bidder := pick(r.rng, r.providers)
	if r.chance(80) {
		var fresh []string
		for _, p := range r.providers {
			if !slices.ContainsFunc(v.bids, func(b Bid) bool { return b.ID == o.ID.Bid(r.h.addr(p)) }) {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) > 0 {
			bidder = pick(r.rng, fresh)
		}
	}
	if r.chance(4) {
		bidder = r.outsider // not a provider
	}
	limit := groupPrice(o.Spec)
	price := limit.Amount
	switch n := r.rng.IntN(10); {
	case n < 2:
		price = price.Add(dec(r.t, "0.001")) // too high
	case n < 3:
		// exactly the limit
	default:
		f, err := strconv.ParseFloat(price.String(), 64)
		if err != nil {
			r.t.Fatal(err)
		}
		price = dec(r.t, strconv.FormatFloat(f*(0.3+0.7*r.rng.Float64()), 'f', 3, 64))
	}
	if price.Sign() <= 0 {
		price = dec(r.t, "0.001")
	}
	m := &MsgCreateBid{
		OrderID:  o.ID,
		Provider: r.h.addr(bidder),
		Price:    market.DecCoin{Amount: price, Denom: DefaultDenom},
		Deposit:  r.params.BidMinDeposit,
	}
	if r.chance(20) {
		m.Deposit.Amount += market.Uint(r.rng.IntN(1000))
	}
	if r.chance(15) {
		for _, ru := range o.Spec.Resources {
			m.ResourcesOffer = append(m.ResourcesOffer, ResourceOffer{Resources: ru.Resources, Count: ru.Count})
		}
		if r.chance(30) {
			m.ResourcesOffer[0].Count++ // does not match the group: invalid at execution
		}
	}
	p := &plannedTx{signer: bidder, msgs: []Msg{m}}
	if r.chance(3) {
		m.Price.Amount = market.Dec{}
		p.pre = CodeInvalidMsg
	}
	return p
}

func (r *propRun) genLease(v *propSnap) *plannedTx {
	b, ok := pickMostly(r, v.bids, 85, func(b Bid) bool { return b.State == BidOpen })
	if !ok {
		return nil
	}
	if r.chance(50) {
		// Mostly another lease of a deployment that has one, so that accounts paying
		// several leases run out.
		if b2, ok := pickMostly(r, v.bids, 100, func(b Bid) bool {
			return b.State == BidOpen && slices.ContainsFunc(v.leases, func(l Lease) bool {
				return l.State == LeaseActive && l.ID.Deployment() == b.ID.Order().Group().Deployment()
			})
		}); ok {
			b = b2
		}
	}
	owner := r.nameOf[b.ID.Owner]
	m := &MsgCreateLease{BidID: b.ID}
	if r.chance(5) {
		// Signed by someone who is not the message's signer.
		return &plannedTx{signer: r.otherTenant(owner), msgs: []Msg{m}, pre: CodeUnauthorized}
	}
	return &plannedTx{signer: owner, msgs: []Msg{m}}
}

var providerReasonList = []string{ReasonUnstable, ReasonDecommission, ReasonUnspecified, ReasonManifestTimeout}

func (r *propRun) genCloseLease(v *propSnap) *plannedTx {
	l, ok := pickMostly(r, v.leases, 85, func(l Lease) bool { return l.State == LeaseActive })
	if !ok {
		return nil
	}
	owner, prov := r.nameOf[l.ID.Owner], r.nameOf[l.ID.Provider]
	switch n := r.rng.IntN(100); {
	case n < 5:
		stranger := r.outsider
		return &plannedTx{signer: stranger, msgs: []Msg{&MsgCloseLease{ID: l.ID, Sender: r.h.addr(stranger), Reason: ReasonUnstable}}, pre: CodeNotPermitted}
	case n < 8:
		return &plannedTx{signer: owner, msgs: []Msg{&MsgCloseLease{ID: l.ID, Sender: l.ID.Owner, Reason: ReasonUnstable}}, pre: CodeInvalidMsg}
	case n < 50 && l.ID.Owner != l.ID.Provider:
		return &plannedTx{signer: prov, msgs: []Msg{&MsgCloseLease{ID: l.ID, Sender: l.ID.Provider, Reason: pick(r.rng, providerReasonList)}}}
	default:
		return &plannedTx{signer: owner, msgs: []Msg{&MsgCloseLease{ID: l.ID, Sender: l.ID.Owner, Reason: ReasonOwner}}}
	}
}

func (r *propRun) genCloseBid(v *propSnap) *plannedTx {
	b, ok := pickMostly(r, v.bids, 80, func(b Bid) bool { return b.State == BidOpen || b.State == BidActive })
	if !ok {
		return nil
	}
	m := &MsgCloseBid{ID: b.ID}
	if r.chance(50) {
		m.Reason = pick(r.rng, providerReasonList)
	}
	p := &plannedTx{signer: r.nameOf[b.ID.Provider], msgs: []Msg{m}}
	if r.chance(4) {
		m.Reason = ReasonOwner // not a provider's reason
		p.pre = CodeInvalidMsg
	}
	return p
}

func (r *propRun) genGroup(v *propSnap) *plannedTx {
	n := r.rng.IntN(10)
	g, ok := pickMostly(r, v.groups, 85, func(g propGroup) bool {
		switch {
		case n < 3:
			return g.State == GroupOpen
		case n < 8:
			return g.State == GroupPaused || g.State == GroupInsufficientFunds
		}
		return g.State != GroupClosed
	})
	if !ok {
		return nil
	}
	var m Msg
	switch {
	case n < 3:
		m = &MsgPauseGroup{ID: g.ID}
	case n < 8:
		m = &MsgStartGroup{ID: g.ID}
	default:
		m = &MsgCloseGroup{ID: g.ID}
	}
	return &plannedTx{signer: r.nameOf[g.ID.Owner], msgs: []Msg{m}}
}

func (r *propRun) genWithdraw(v *propSnap) *plannedTx {
	l, ok := pickMostly(r, v.leases, 85, func(l Lease) bool { return l.State == LeaseActive })
	if !ok {
		return nil
	}
	return &plannedTx{signer: r.nameOf[l.ID.Provider], msgs: []Msg{&MsgWithdrawLease{ID: l.ID}}}
}

func (r *propRun) genCloseDeployment(v *propSnap) *plannedTx {
	d, ok := pickMostly(r, v.deps, 85, func(d Deployment) bool { return d.State == DeploymentActive })
	if !ok {
		return nil
	}
	return &plannedTx{signer: r.nameOf[d.ID.Owner], msgs: []Msg{&MsgCloseDeployment{ID: d.ID}}}
}

func (r *propRun) genUpdateDeployment(v *propSnap) *plannedTx {
	d, ok := pickMostly(r, v.deps, 85, func(d Deployment) bool { return d.State == DeploymentActive })
	if !ok {
		return nil
	}
	version := sha256.Sum256([]byte(fmt.Sprint(r.rng.Uint64())))
	return &plannedTx{signer: r.nameOf[d.ID.Owner], msgs: []Msg{&MsgUpdateDeployment{ID: d.ID, Version: version[:]}}}
}

func (r *propRun) genSend(*propSnap) *plannedTx {
	all := slices.Concat(r.tenants, r.providers, []string{r.outsider})
	from := pick(r.rng, all)
	to := r.h.addr(pick(r.rng, all))
	if r.chance(15) {
		if len(r.strangers) == 0 || r.chance(50) {
			b := make([]byte, addressLen)
			for i := range b {
				b[i] = byte(r.rng.Uint32())
			}
			a, err := AddressFromBytes(r.params.AddressPrefix, b)
			if err != nil {
				r.t.Fatal(err)
			}
			r.strangers = append(r.strangers, a)
		}
		to = pick(r.rng, r.strangers)
	}
	m := &MsgSend{From: r.h.addr(from), To: to, Amount: []market.Coin{r.coin(uint64(1 + r.rng.IntN(40_000)))}}
	p := &plannedTx{signer: from, msgs: []Msg{m}}
	if r.chance(4) {
		m.Amount[0].Amount = 0
		p.pre = CodeInvalidMsg
	}
	return p
}

func (r *propRun) genProvider(*propSnap) *plannedTx {
	name := pick(r.rng, r.providers)
	attrs := market.Attributes{usWest}
	if r.chance(30) {
		attrs = market.Attributes{{Key: "region", Value: "eu-central"}}
	}
	m := r.providerMsg(name, attrs)
	if r.chance(50) {
		return &plannedTx{signer: name, msgs: []Msg{(*MsgUpdateProvider)(m)}}
	}
	return &plannedTx{signer: name, msgs: []Msg{m}}
}

func (r *propRun) genAudit(*propSnap) *plannedTx {
	owner := r.h.addr(pick(r.rng, r.providers))
	au := r.h.addr(r.auditor)
	if r.chance(60) {
		return &plannedTx{signer: r.auditor, msgs: []Msg{&MsgSignProviderAttributes{Auditor: au, Owner: owner, Attributes: market.Attributes{usWest}}}}
	}
	return &plannedTx{signer: r.auditor, msgs: []Msg{&MsgDeleteProviderAttributes{Auditor: au, Owner: owner}}}
}

// genBundle makes a transaction of several messages, some of which fail late, so that
// the writes of the ones before must be undone.
func (r *propRun) genBundle(v *propSnap) *plannedTx {
	switch r.rng.IntN(4) {
	case 0: // bid, then withdraw its deposit, or fail on a lease that does not exist
		p := r.genBid(v)
		if p == nil || p.pre != 0 || p.signer == r.outsider {
			return p
		}
		bid := p.msgs[0].(*MsgCreateBid)
		if r.chance(50) {
			p.msgs = append(p.msgs, &MsgCloseBid{ID: bid.OrderID.Bid(bid.Provider)})
		} else {
			p.msgs = append(p.msgs, &MsgWithdrawLease{ID: market.LeaseID(bid.OrderID.Bid(bid.Provider))})
		}
		return p
	case 1: // deposit, then start a group
		g, ok := pickMostly(r, v.groups, 80, func(g propGroup) bool {
			return g.State == GroupInsufficientFunds || g.State == GroupPaused
		})
		if !ok {
			return nil
		}
		owner := r.nameOf[g.ID.Owner]
		return &plannedTx{signer: owner, msgs: []Msg{
			&MsgDepositDeployment{ID: g.ID.Deployment(), Depositor: g.ID.Owner, Amount: r.coin(uint64(1 + r.rng.IntN(20_000)))},
			&MsgStartGroup{ID: g.ID},
		}}
	case 2: // accept two bids at once, often of the same order: the second fails
		b1, ok := pickMostly(r, v.bids, 100, func(b Bid) bool { return b.State == BidOpen })
		if !ok {
			return nil
		}
		b2, _ := pickMostly(r, v.bids, 100, func(b Bid) bool { return b.State == BidOpen && b.ID.Owner == b1.ID.Owner })
		return &plannedTx{signer: r.nameOf[b1.ID.Owner], msgs: []Msg{&MsgCreateLease{BidID: b1.ID}, &MsgCreateLease{BidID: b2.ID}}}
	default: // create a deployment, then send more than is left
		p := r.genCreateDeployment(v)
		if p.pre != 0 {
			return p
		}
		from := p.signer
		p.msgs = append(p.msgs, &MsgSend{From: r.h.addr(from), To: r.h.addr(r.outsider), Amount: []market.Coin{r.coin(uint64(1 + r.rng.IntN(300_000)))}})
		return p
	}
}

// genReplay sends again a transaction that was executed before.
func (r *propRun) genReplay(*propSnap) *plannedTx {
	if len(r.consumed) == 0 {
		return nil
	}
	st := pick(r.rng, r.consumed)
	return &plannedTx{signer: st.signer, raw: st.raw}
}

// --- invariants ---

// queryPages reads every page of a list query, limit items at a time, and returns the
// IDs listed, sorted.
func queryPages[Resp any](h *harness, path string, limit uint32, req func(Page) any, ids func(Resp) ([]string, []byte)) []string {
	var out []string
	var key []byte
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			h.t.Fatalf("query %s: the pages do not end", path)
		}
		var resp Resp
		h.mustQuery(path, req(Page{Key: key, Limit: limit}), &resp)
		list, next := ids(resp)
		out = append(out, list...)
		if len(next) == 0 {
			break
		}
		key = next
	}
	sort.Strings(out)
	return out
}

// checkListQuery runs a list query with random filters, page by page, and checks that
// it lists exactly the entries that match.
func (r *propRun) checkListQuery() {
	h, snap := r.h, r.snap
	limit := uint32(1 + r.rng.IntN(4))
	owner, provider := "", ""
	if r.chance(50) {
		owner = h.addr(pick(r.rng, r.tenants))
	}
	if r.chance(50) {
		provider = h.addr(pick(r.rng, r.providers))
	}
	var got, want []string
	var what string
	switch r.rng.IntN(3) {
	case 0:
		req := OrdersRequest{State: pick(r.rng, []string{"", OrderOpen, OrderActive, OrderClosed}), Owner: owner}
		what = fmt.Sprintf("%+v", req)
		got = queryPages(h, QueryOrders, limit, func(p Page) any { req.Page = p; return req }, func(resp OrdersResponse) ([]string, []byte) {
			var ids []string
			for _, o := range resp.Orders {
				ids = append(ids, o.ID.String())
			}
			return ids, resp.NextKey
		})
		for _, o := range snap.orders {
			if (req.State == "" || o.State == req.State) && (owner == "" || o.ID.Owner == owner) {
				want = append(want, o.ID.String())
			}
		}
	case 1:
		req := BidsRequest{State: pick(r.rng, []string{"", BidOpen, BidActive, BidLost, BidClosed})}
		switch {
		case provider != "":
			req.Provider = provider
		case owner != "":
			req.Owner = owner
			if r.chance(50) {
				req.DSeq = uint64(1 + r.rng.IntN(12))
			}
		default:
			if len(snap.orders) == 0 {
				return
			}
			o := pick(r.rng, snap.orders).ID
			req.Order = &o
		}
		what = fmt.Sprintf("%+v", req)
		got = queryPages(h, QueryBids, limit, func(p Page) any { req.Page = p; return req }, func(resp BidsResponse) ([]string, []byte) {
			var ids []string
			for _, b := range resp.Bids {
				ids = append(ids, b.ID.String())
			}
			return ids, resp.NextKey
		})
		for _, b := range snap.bids {
			if (req.State == "" || b.State == req.State) && (req.Provider == "" || b.ID.Provider == req.Provider) &&
				(req.Owner == "" || b.ID.Owner == req.Owner) && (req.DSeq == 0 || b.ID.DSeq == req.DSeq) &&
				(req.Order == nil || b.ID.Order() == *req.Order) {
				want = append(want, b.ID.String())
			}
		}
	default:
		req := LeasesRequest{State: pick(r.rng, []string{"", LeaseActive, LeaseInsufficientFunds, LeaseClosed}), Owner: owner, Provider: provider}
		if owner != "" && r.chance(50) {
			req.DSeq = uint64(1 + r.rng.IntN(12))
		}
		what = fmt.Sprintf("%+v", req)
		got = queryPages(h, QueryLeases, limit, func(p Page) any { req.Page = p; return req }, func(resp LeasesResponse) ([]string, []byte) {
			var ids []string
			for _, l := range resp.Leases {
				ids = append(ids, l.Lease.ID.String())
			}
			return ids, resp.NextKey
		})
		for _, l := range snap.leases {
			if (req.State == "" || l.State == req.State) && (req.Provider == "" || l.ID.Provider == req.Provider) &&
				(req.Owner == "" || l.ID.Owner == req.Owner) && (req.DSeq == 0 || l.ID.DSeq == req.DSeq) {
				want = append(want, l.ID.String())
			}
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		r.t.Fatalf("height %d: query %s (pages of %d) lists %d entries, want %d:\ngot  %v\nwant %v", snap.v.height, what, limit, len(got), len(want), got, want)
	}
}

// checkQueries checks that queries, which settle escrow to the query's height, agree
// with the state: a random lease, a random deployment, a random list; and the supply
// now and then.
func (r *propRun) checkQueries() {
	t, h, snap := r.t, r.h, r.snap
	height := snap.v.height
	if height%10 == 0 {
		var sup SupplyResponse
		h.mustQuery(QuerySupply, nil, &sup)
		if len(sup.Supply) != 1 || sup.Supply[0].Denom != DefaultDenom || sup.Supply[0].Amount.Cmp(market.DecFromUint(r.total)) != 0 {
			t.Fatalf("height %d: supply query %v, want %d%s", height, sup.Supply, r.total, DefaultDenom)
		}
	}
	if len(snap.leases) > 0 {
		l := pick(r.rng, snap.leases)
		var lr LeaseResponse
		h.mustQuery(QueryLease, LeaseRequest{ID: l.ID}, &lr)
		paid := lr.Payment.Balance.Amount.Add(lr.Payment.Withdrawn.Amount)
		if l.State == LeaseActive {
			if want := l.Price.Amount.MulUint(uint64(height - l.CreatedAt)); paid.Cmp(want) != 0 || lr.Payment.State != PaymentOpen {
				t.Fatalf("height %d: lease %s (created at %d) query: %s payment paid %s, want %s", height, l.ID, l.CreatedAt, lr.Payment.State, paid, want)
			}
		} else if !jsonEqual(lr.Lease, l) {
			t.Fatalf("height %d: lease %s query %+v, state %+v", height, l.ID, lr.Lease, l)
		}
	}
	r.checkListQuery()
	if len(snap.escrows) > 0 {
		a := pick(r.rng, snap.escrows)
		var dr DeploymentResponse
		h.mustQuery(QueryDeployment, DeploymentRequest{ID: a.ID}, &dr)
		e := dr.Escrow
		if e.Balance.Amount.Add(e.Transferred.Amount).Cmp(a.Balance.Amount.Add(a.Transferred.Amount)) != 0 || e.Balance.Amount.Sign() < 0 {
			t.Fatalf("height %d: deployment %s query: escrow %s + %s transferred, state %s + %s", height, a.ID, e.Balance, e.Transferred, a.Balance, a.Transferred)
		}
		if e.State == EscrowOpen && e.SettledAt != height {
			t.Fatalf("height %d: deployment %s query: open escrow settled to %d", height, a.ID, e.SettledAt)
		}
	}
}

// checkInvariants checks the committed state.
func (r *propRun) checkInvariants() {
	t := r.t
	v := r.h.app.s.committed()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("height %d: "+format, append([]any{v.height}, args...)...)
	}

	// 1. Supply.
	if sup := Supply(v); len(sup) != 1 || sup[DefaultDenom].Cmp(market.DecFromUint(r.total)) != 0 {
		fail("supply %v, want %d%s", sup, r.total, DefaultDenom)
	}

	snap := newPropSnap(v, r.cache)
	r.snap = snap
	deps := map[market.DeploymentID]Deployment{}
	for _, d := range snap.deps {
		deps[d.ID] = d
	}
	groups := map[market.GroupID]propGroup{}
	groupsOf := map[market.DeploymentID][]propGroup{}
	for _, g := range snap.groups {
		groups[g.ID] = g
		groupsOf[g.ID.Deployment()] = append(groupsOf[g.ID.Deployment()], g)
	}
	orders := map[market.OrderID]propOrder{}
	ordersOf := map[market.GroupID][]propOrder{}
	for _, o := range snap.orders {
		orders[o.ID] = o
		ordersOf[o.ID.Group()] = append(ordersOf[o.ID.Group()], o)
	}
	bids := map[market.BidID]Bid{}
	bidsOf := map[market.OrderID][]Bid{}
	for _, b := range snap.bids {
		bids[b.ID] = b
		bidsOf[b.ID.Order()] = append(bidsOf[b.ID.Order()], b)
		if _, ok := v.get(bidProviderKey(b.ID)); !ok {
			fail("bid %s is missing from the provider index", b.ID)
		}
	}
	leases := map[market.LeaseID]Lease{}
	leasesOf := map[market.OrderID][]Lease{}
	for _, l := range snap.leases {
		leases[l.ID] = l
		leasesOf[l.ID.Order()] = append(leasesOf[l.ID.Order()], l)
		if _, ok := v.get(leaseProviderKey(l.ID)); !ok {
			fail("lease %s is missing from the provider index", l.ID)
		}
	}
	escrows := map[market.DeploymentID]EscrowAccount{}
	for _, a := range snap.escrows {
		escrows[a.ID] = a
	}
	pays := map[market.LeaseID]Payment{}
	paysOf := map[market.DeploymentID][]Payment{}
	for _, p := range snap.pays {
		pays[p.ID] = p
		paysOf[p.ID.Deployment()] = append(paysOf[p.ID.Deployment()], p)
	}
	if len(escrows) != len(deps) {
		fail("%d escrow accounts for %d deployments", len(escrows), len(deps))
	}
	if len(pays) != len(leases) {
		fail("%d payments for %d leases", len(pays), len(leases))
	}

	// 2. No negative balances; the accounts' books balance.
	depletions := 0
	v.ascend(depletionPrefix(), "", func(string, []byte) bool { depletions++; return true })
	scheduled := 0
	for id, a := range escrows {
		if a.Balance.Amount.Sign() < 0 || a.Transferred.Amount.Sign() < 0 {
			fail("escrow of %s: balance %s, transferred %s", id, a.Balance, a.Transferred)
		}
		rate, paid := market.Dec{}, market.Dec{}
		for _, p := range paysOf[id] {
			if p.State == PaymentOpen {
				rate = rate.Add(p.Rate.Amount)
			}
			paid = paid.Add(p.Balance.Amount).Add(p.Withdrawn.Amount)
		}
		if a.Rate.Cmp(rate) != 0 {
			fail("escrow of %s: rate %s, its open payments' rates add up to %s", id, a.Rate, rate)
		}
		if a.Transferred.Amount.Cmp(paid) != 0 {
			fail("escrow of %s: transferred %s, its payments were paid %s", id, a.Transferred.Amount, paid)
		}
		switch a.State {
		case EscrowOpen:
			if a.Rate.Sign() > 0 && a.DepletesAt < v.height {
				fail("escrow of %s is open at rate %s but depleted at %d", id, a.Rate, a.DepletesAt)
			}
		case EscrowOverdrawn, EscrowClosed:
			if a.Rate.Sign() != 0 || a.DepletesAt != 0 {
				fail("escrow of %s is %s with rate %s, depletes at %d", id, a.State, a.Rate, a.DepletesAt)
			}
		default:
			fail("escrow of %s is %q", id, a.State)
		}
		if a.DepletesAt != 0 {
			scheduled++
			if _, ok := v.get(depletionKey(a.DepletesAt, id)); !ok {
				fail("escrow of %s depletes at %d but is not scheduled", id, a.DepletesAt)
			}
		}
	}
	if depletions != scheduled {
		fail("%d depletions scheduled for %d accounts with a depletion height", depletions, scheduled)
	}
	for id, p := range pays {
		if p.Balance.Amount.Sign() < 0 || p.Withdrawn.Amount.Sign() < 0 {
			fail("payment %s: balance %s, withdrawn %s", id, p.Balance, p.Withdrawn)
		}
		l, ok := leases[id]
		if !ok {
			fail("payment %s has no lease", id)
		}
		a := escrows[id.Deployment()]
		// The payment has been paid its rate for every block from its lease's creation to
		// the last block paid for: the account's settlement height while the lease runs,
		// the block it closed in, or the block before when its account could not pay
		// that one.
		var to int64
		switch {
		case l.State == LeaseActive && p.State == PaymentOpen:
			to = a.SettledAt
		case l.State == LeaseClosed && p.State == PaymentClosed:
			to = l.ClosedOn
		case l.State == LeaseInsufficientFunds && p.State == PaymentOverdrawn:
			to = l.ClosedOn - 1
		default:
			fail("lease %s is %s with a %s payment", id, l.State, p.State)
		}
		if want := p.Rate.Amount.MulUint(uint64(to - l.CreatedAt)); p.Balance.Amount.Add(p.Withdrawn.Amount).Cmp(want) != 0 {
			fail("lease %s (%s, created at %d, closed on %d) at %s per block was paid %s + %s withdrawn, want %s for the blocks to %d",
				id, l.State, l.CreatedAt, l.ClosedOn, p.Rate, p.Balance.Amount, p.Withdrawn.Amount, want, to)
		}
		if p.State != PaymentOpen && !p.Balance.Amount.IsZero() {
			if n, _ := p.Balance.Amount.TruncateUint(); n != 0 {
				fail("payment %s is %s with %s not paid out", id, p.State, p.Balance)
			}
		}
	}

	// 3 and 4. Bids and leases per order; orders and their groups.
	inIndex := 0
	for _, st := range []string{OrderOpen, OrderActive, OrderClosed} {
		v.ascend(orderStatePrefix(st), "", func(k string, _ []byte) bool {
			inIndex++
			id, ok := decodeOrderIDKey(k, orderStatePrefix(st))
			if o, found := orders[id]; !ok || !found || o.State != st {
				fail("order index %s says %s, the order is %q", id, st, o.State)
			}
			return true
		})
	}
	if inIndex != len(orders) {
		fail("order index has %d entries for %d orders", inIndex, len(orders))
	}
	for id, o := range orders {
		obids := bidsOf[id]
		if len(obids) > int(r.params.MaxBidsPerOrder) {
			fail("order %s has %d bids, max_bids_per_order is %d", id, len(obids), r.params.MaxBidsPerOrder)
		}
		var activeBids, openBids []Bid
		for _, b := range obids {
			switch b.State {
			case BidActive:
				activeBids = append(activeBids, b)
			case BidOpen:
				openBids = append(openBids, b)
			}
		}
		var active []Lease
		for _, l := range leasesOf[id] {
			if l.State == LeaseActive {
				active = append(active, l)
			}
		}
		if len(active) > 1 {
			fail("order %s has %d active leases", id, len(active))
		}
		g, ok := groups[id.Group()]
		if !ok {
			fail("order %s has no group", id)
		}
		switch o.State {
		case OrderOpen:
			if len(active) != 0 || len(activeBids) != 0 {
				fail("open order %s has %d active leases and %d active bids", id, len(active), len(activeBids))
			}
			if g.State != GroupOpen {
				fail("order %s is open, its group is %s", id, g.State)
			}
		case OrderActive:
			if len(active) != 1 || len(activeBids) != 1 || active[0].ID.Bid() != activeBids[0].ID || len(openBids) != 0 {
				fail("active order %s has %d active leases, %d active bids, %d open bids", id, len(active), len(activeBids), len(openBids))
			}
			if g.State != GroupOpen {
				fail("order %s is active, its group is %s", id, g.State)
			}
		case OrderClosed:
			if len(active) != 0 || len(activeBids) != 0 || len(openBids) != 0 {
				fail("closed order %s has %d active leases, %d active bids, %d open bids", id, len(active), len(activeBids), len(openBids))
			}
		default:
			fail("order %s is %q", id, o.State)
		}
	}
	for id, g := range groups {
		if g.LastOSeq == 0 {
			fail("group %s has no order", id)
		}
		for _, o := range ordersOf[id] {
			if o.ID.OSeq > g.LastOSeq {
				fail("group %s has order %s after its last %d", id, o.ID, g.LastOSeq)
			}
			if o.ID.OSeq < g.LastOSeq && o.State != OrderClosed {
				fail("group %s: order %s is %s, its newest is %d", id, o.ID, o.State, g.LastOSeq)
			}
		}
		last := orders[id.Order(g.LastOSeq)]
		if open := last.State == OrderOpen || last.State == OrderActive; open != (g.State == GroupOpen) {
			fail("group %s is %s, its order %s is %s", id, g.State, last.ID, last.State)
		}
		d := deps[id.Deployment()]
		if d.State == DeploymentClosed && g.State != GroupClosed {
			fail("deployment %s is closed, its group %s is %s", d.ID, id, g.State)
		}
	}
	for id, d := range deps {
		a := escrows[id]
		if (d.State == DeploymentClosed) != (a.State == EscrowClosed) {
			fail("deployment %s is %s, its escrow %s", id, d.State, a.State)
		}
		if len(groupsOf[id]) == 0 {
			fail("deployment %s has no groups", id)
		}
	}
	for id, b := range bids {
		o := orders[id.Order()]
		l, hasLease := leases[id.Lease()]
		switch b.State {
		case BidOpen:
			if o.State != OrderOpen || hasLease && l.State == LeaseActive {
				fail("bid %s is open, its order is %s", id, o.State)
			}
		case BidActive:
			if !hasLease || l.State != LeaseActive {
				fail("bid %s is active without an active lease", id)
			}
		case BidLost, BidClosed:
			if hasLease && l.State == LeaseActive {
				fail("bid %s is %s, its lease active", id, b.State)
			}
		default:
			fail("bid %s is %q", id, b.State)
		}
	}
	for id, l := range leases {
		if l.State == LeaseActive && deps[id.Deployment()].State != DeploymentActive {
			fail("lease %s is active, its deployment %s", id, deps[id.Deployment()].State)
		}
	}
}
