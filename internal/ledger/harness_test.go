package ledger

import (
	"encoding/json"
	"slices"
	"testing"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// harness drives an App directly, block by block, the way CometBFT does: InitChain,
// then FinalizeBlock and Commit per block. It keeps each account's sequence.
type harness struct {
	t      testing.TB
	app    *App
	db     dbm.DB
	chain  string
	height int64
	keys   map[string]api.PrivKey // address → key
	seq    map[string]uint64
	names  map[string]string // name → address
	last   *abci.ResponseFinalizeBlock
}

const testChain = "berth-test"

// newHarness starts a chain with the named accounts, each funded with fund uakt.
func newHarness(t testing.TB, fund uint64, names ...string) *harness {
	t.Helper()
	return newHarnessParams(t, api.DefaultParams(), fund, names...)
}

func newHarnessParams(t testing.TB, params api.Params, fund uint64, names ...string) *harness {
	t.Helper()
	return newHarnessFunded(t, params, []market.Coin{{Amount: market.Uint(fund), Denom: api.DefaultDenom}}, names...)
}

// newHarnessFunded starts a chain with the named accounts, each holding coins.
func newHarnessFunded(t testing.TB, params api.Params, coins []market.Coin, names ...string) *harness {
	t.Helper()
	return newHarnessGenesis(t, params, coins, nil, names...)
}

// newHarnessGenesis is newHarnessFunded with edit applied to the genesis state (the
// named accounts are known to h by then) before the chain starts.
func newHarnessGenesis(t testing.TB, params api.Params, coins []market.Coin, edit func(*harness, *api.GenesisState), names ...string) *harness {
	t.Helper()
	h := &harness{t: t, db: dbm.NewMemDB(), chain: testChain, keys: map[string]api.PrivKey{}, seq: map[string]uint64{}, names: map[string]string{}}
	g := api.GenesisState{Params: params}
	for _, n := range names {
		k, err := api.NewPrivKey(api.KeySecp256k1)
		if err != nil {
			t.Fatal(err)
		}
		addr, err := k.PubKey().Address(api.DefaultAddressPrefix)
		if err != nil {
			t.Fatal(err)
		}
		h.keys[addr], h.names[n] = k, addr
		g.Accounts = append(g.Accounts, api.GenesisAccount{Address: addr, Balances: slices.Clone(coins)})
	}
	if edit != nil {
		edit(h, &g)
	}
	h.open()
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.app.InitChain(t.Context(), &abci.RequestInitChain{ChainId: h.chain, AppStateBytes: b, InitialHeight: 1}); err != nil {
		t.Fatalf("InitChain: %v", err)
	}
	return h
}

func (h *harness) open() {
	h.t.Helper()
	app, err := NewApp(h.db, nil)
	if err != nil {
		h.t.Fatalf("NewApp: %v", err)
	}
	h.app = app
}

func (h *harness) addr(name string) string {
	a, ok := h.names[name]
	if !ok {
		h.t.Fatalf("no account %q", name)
	}
	return a
}

// tx signs msgs as signer with its next sequence.
func (h *harness) tx(signer string, msgs ...api.Msg) []byte {
	h.t.Helper()
	addr := h.addr(signer)
	body := api.TxBody{ChainID: h.chain, Signer: addr, Sequence: h.seq[addr]}
	for _, m := range msgs {
		em, err := api.EncodeMsg(m)
		if err != nil {
			h.t.Fatal(err)
		}
		body.Msgs = append(body.Msgs, em)
	}
	raw, err := api.SignTx(body, h.keys[addr])
	if err != nil {
		h.t.Fatal(err)
	}
	h.seq[addr]++
	return raw
}

// block executes and commits one block and returns its tx results.
func (h *harness) block(txs ...[]byte) []*abci.ExecTxResult {
	h.t.Helper()
	h.height++
	resp, err := h.app.FinalizeBlock(h.t.Context(), &abci.RequestFinalizeBlock{Height: h.height, Txs: txs})
	if err != nil {
		h.t.Fatalf("FinalizeBlock %d: %v", h.height, err)
	}
	if _, err := h.app.Commit(h.t.Context(), &abci.RequestCommit{}); err != nil {
		h.t.Fatalf("Commit %d: %v", h.height, err)
	}
	h.last = resp
	return resp.TxResults
}

// ok runs msgs in one tx in one block and fails the test unless it succeeds.
func (h *harness) ok(signer string, msgs ...api.Msg) {
	h.t.Helper()
	r := h.block(h.tx(signer, msgs...))[0]
	if r.Code != 0 {
		h.t.Fatalf("height %d: %s's tx failed: %s", h.height, signer, r.Log)
	}
}

// fail runs msgs in one tx and checks it fails with code; the signer's sequence is
// consumed when the failure is in the messages (code is not a tx-level code).
func (h *harness) fail(code api.Code, signer string, msgs ...api.Msg) string {
	h.t.Helper()
	r := h.block(h.tx(signer, msgs...))[0]
	if api.Code(r.Code) != code {
		h.t.Fatalf("height %d: want code %s, got %s: %s", h.height, code, api.Code(r.Code), r.Log)
	}
	return r.Log
}

func (h *harness) query(path string, req, resp any) error {
	h.t.Helper()
	var data []byte
	if req != nil {
		var err error
		if data, err = json.Marshal(req); err != nil {
			h.t.Fatal(err)
		}
	}
	r, err := h.app.Query(h.t.Context(), &abci.RequestQuery{Path: path, Data: data})
	if err != nil {
		h.t.Fatal(err)
	}
	if r.Code != 0 {
		return api.ErrorFromCode(r.Code, r.Codespace, r.Log)
	}
	if err := json.Unmarshal(r.Value, resp); err != nil {
		h.t.Fatalf("query %s: %v", path, err)
	}
	return nil
}

func (h *harness) mustQuery(path string, req, resp any) {
	h.t.Helper()
	if err := h.query(path, req, resp); err != nil {
		h.t.Fatalf("query %s: %v", path, err)
	}
}

func (h *harness) balance(name string) uint64 {
	h.t.Helper()
	var r api.AccountResponse
	h.mustQuery(api.QueryAccount.Path, api.AccountRequest{Address: h.addr(name)}, &r)
	for _, c := range r.Balances {
		if c.Denom == api.DefaultDenom {
			return uint64(c.Amount)
		}
	}
	return 0
}

// events lists the block's events of a type, block-level first, then per tx.
func (h *harness) events(typ string) []map[string]string {
	var out []map[string]string
	add := func(evs []abci.Event) {
		for _, e := range evs {
			if e.Type != typ {
				continue
			}
			m := map[string]string{}
			for _, a := range e.Attributes {
				m[a.Key] = a.Value
			}
			out = append(out, m)
		}
	}
	add(h.last.Events)
	for _, r := range h.last.TxResults {
		add(r.Events)
	}
	return out
}

// checkSupply fails the test unless total supply is what genesis created.
func (h *harness) checkSupply(want uint64) {
	h.t.Helper()
	got := Supply(h.app.s.committed())
	if len(got) != 1 || got[api.DefaultDenom].Cmp(market.DecFromUint(want)) != 0 {
		h.t.Fatalf("height %d: supply %v, want %d%s", h.height, got, want, api.DefaultDenom)
	}
}

func dec(t testing.TB, s string) market.Dec {
	t.Helper()
	d, err := market.ParseDec(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
