package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// AppVersion is the version of the state machine's rules, reported to CometBFT.
const AppVersion = 1

// App is the marketplace state machine as a CometBFT ABCI application.
//
// CometBFT calls it on four connections. Consensus calls (InitChain, FinalizeBlock,
// Commit) come one at a time and are the only writers. CheckTx (mempool) runs
// concurrently with them; it reads the last committed state and a map of pending
// sequence numbers guarded by mu. Query and Info read the last committed view, an
// immutable snapshot, and are safe from any goroutine.
type App struct {
	abci.BaseApplication
	log *slog.Logger
	s   *store

	// Set at InitChain or read from state at start; fixed for the chain's life.
	chainID string
	params  api.Params

	// finalized is the height of the block FinalizeBlock executed, which Commit
	// commits. Blocks start at the genesis initial height, not necessarily at 1.
	finalized int64

	mu         sync.Mutex
	pendingSeq map[string]uint64 // next sequence per signer including mempool txs
}

var _ abci.Application = (*App)(nil)

// Key of the chain's identity in state.
const chainKey = "chain/"

type chainRecord struct {
	ChainID string     `json:"chain_id"`
	Params  api.Params `json:"params"`
}

// NewApp opens the application state in db (empty for a new chain).
func NewApp(db dbm.DB, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := openStore(db)
	if err != nil {
		return nil, err
	}
	a := &App{log: log, s: s, pendingSeq: map[string]uint64{}}
	var rec chainRecord
	if getJSON(s, chainKey, &rec) {
		a.chainID, a.params = rec.ChainID, rec.Params
	}
	return a, nil
}

// Height is the last committed height.
func (a *App) Height() int64 { return a.s.committed().height }

// Info tells CometBFT where the application's state is, so it replays the blocks the
// application has not committed.
func (a *App) Info(context.Context, *abci.RequestInfo) (*abci.ResponseInfo, error) {
	v := a.s.committed()
	return &abci.ResponseInfo{
		Data:             "berth ledger",
		Version:          strconv.Itoa(AppVersion),
		AppVersion:       AppVersion,
		LastBlockHeight:  v.height,
		LastBlockAppHash: v.appHash,
	}, nil
}

// InitChain loads the genesis state: params and funded accounts.
func (a *App) InitChain(ctx context.Context, req *abci.RequestInitChain) (*abci.ResponseInitChain, error) {
	g, err := api.ParseGenesis(req.AppStateBytes)
	if err != nil {
		return nil, err
	}
	supply := map[string]uint64{}
	for _, acc := range g.Accounts {
		for _, c := range acc.Balances {
			if supply[c.Denom] > math.MaxUint64-uint64(c.Amount) {
				return nil, fmt.Errorf("genesis: total supply of %s exceeds 2^64-1", c.Denom)
			}
			supply[c.Denom] += uint64(c.Amount)
		}
	}
	a.chainID, a.params = req.ChainId, g.Params
	a.s.setJSON(chainKey, chainRecord{ChainID: req.ChainId, Params: g.Params})
	x := &execCtx{s: a.s, p: &a.params, height: req.InitialHeight, ev: &events{}}
	for _, acc := range g.Accounts {
		x.s.setJSON(accountKey(acc.Address), api.Account{Address: acc.Address})
		for _, c := range acc.Balances {
			x.setBalance(acc.Address, c.Denom, uint64(c.Amount))
		}
	}
	for _, au := range g.Audits {
		x.s.setJSON(auditKey(au.Owner, au.Auditor), api.AuditedAttributes{Owner: au.Owner, Auditor: au.Auditor, Attributes: sortedAttributes(au.Attributes)})
	}
	a.log.InfoContext(ctx, "ledger genesis", slog.String("chain_id", req.ChainId), slog.Int("accounts", len(g.Accounts)), slog.Int("audits", len(g.Audits)))
	return &abci.ResponseInitChain{AppHash: a.s.hash.sum()}, nil
}

// CheckTx admits a transaction to the mempool when it decodes, is signed by an
// existing account, and carries that account's next sequence number (counting the
// account's transactions already in the mempool).
func (a *App) CheckTx(_ context.Context, req *abci.RequestCheckTx) (*abci.ResponseCheckTx, error) {
	t, err := api.DecodeTx(req.Tx, a.chainID, &a.params)
	if err != nil {
		return checkErr(err), nil
	}
	var acc api.Account
	if !getJSON(a.s.committed(), accountKey(t.Signer), &acc) {
		return checkErr(api.Errorf(api.CodeUnknownAccount, "account %s does not exist: it must receive funds first", t.Signer)), nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	want := acc.Sequence
	if p, ok := a.pendingSeq[t.Signer]; ok && p > want {
		want = p
	}
	if t.Sequence != want {
		return checkErr(wrongSequence(t.Signer, want, t.Sequence)), nil
	}
	a.pendingSeq[t.Signer] = want + 1
	return &abci.ResponseCheckTx{Code: abci.CodeTypeOK, GasWanted: 1}, nil
}

func wrongSequence(signer string, want, got uint64) error {
	return api.Errorf(api.CodeWrongSequence, "account %s: expected sequence %d, got %d", signer, want, got)
}

func checkErr(err error) *abci.ResponseCheckTx {
	return &abci.ResponseCheckTx{Code: uint32(api.CodeOf(err)), Codespace: api.Codespace, Log: err.Error()}
}

// FinalizeBlock executes a decided block: first the escrow accounts that cannot pay
// for this block (block events), then each transaction in order.
func (a *App) FinalizeBlock(_ context.Context, req *abci.RequestFinalizeBlock) (*abci.ResponseFinalizeBlock, error) {
	if last := a.s.committed().height; last > 0 && req.Height != last+1 {
		return nil, fmt.Errorf("finalize height %d: the last committed height is %d", req.Height, last)
	}
	ev := &events{}
	x := &execCtx{s: a.s, p: &a.params, height: req.Height, ev: ev}
	a.finalized = req.Height
	a.s.begin()
	if err := x.processDepletions(); err != nil {
		a.s.rollback()
		return nil, fmt.Errorf("height %d: escrow depletions: %w", req.Height, err)
	}
	a.s.keep()
	resp := &abci.ResponseFinalizeBlock{Events: ev.list, TxResults: make([]*abci.ExecTxResult, len(req.Txs))}
	for i, raw := range req.Txs {
		resp.TxResults[i] = a.deliver(raw, req.Height)
	}
	resp.AppHash = a.s.hash.sum()
	return resp, nil
}

// deliver executes one transaction. A transaction that is not valid changes nothing;
// one whose messages fail still consumes its sequence number, and its messages' writes
// are undone.
func (a *App) deliver(raw []byte, height int64) *abci.ExecTxResult {
	t, err := api.DecodeTx(raw, a.chainID, &a.params)
	if err != nil {
		return txErr(err)
	}
	x := &execCtx{s: a.s, p: &a.params, height: height, ev: &events{}}
	acc, ok := x.account(t.Signer)
	if !ok {
		return txErr(api.Errorf(api.CodeUnknownAccount, "account %s does not exist: it must receive funds first", t.Signer))
	}
	if t.Sequence != acc.Sequence {
		return txErr(wrongSequence(t.Signer, acc.Sequence, t.Sequence))
	}
	acc.Sequence++
	if acc.PubKey == nil {
		pk := t.PubKey
		acc.PubKey = &pk
	}
	a.s.setJSON(accountKey(t.Signer), acc)
	a.s.begin()
	for i, m := range t.Msgs {
		if err := x.run(m); err != nil {
			a.s.rollback()
			return txErr(api.Within(err, "msgs[%d] (%s)", i, m.Type()))
		}
	}
	a.s.keep()
	return &abci.ExecTxResult{Code: abci.CodeTypeOK, Events: x.ev.list, GasWanted: 1, GasUsed: 1}
}

func txErr(err error) *abci.ExecTxResult {
	return &abci.ExecTxResult{Code: uint32(api.CodeOf(err)), Codespace: api.Codespace, Log: err.Error()}
}

func (x *execCtx) run(m api.Msg) error {
	switch m := m.(type) {
	case *api.MsgSend:
		return x.send(m)
	case *api.MsgCreateProvider:
		return x.createProvider(m)
	case *api.MsgUpdateProvider:
		return x.updateProvider(m)
	case *api.MsgSignProviderAttributes:
		return x.signAttributes(m)
	case *api.MsgDeleteProviderAttributes:
		return x.deleteAttributes(m)
	case *api.MsgCreateCertificate:
		return x.createCertificate(m)
	case *api.MsgRevokeCertificate:
		return x.revokeCertificate(m)
	case *api.MsgCreateDeployment:
		return x.createDeployment(m)
	case *api.MsgUpdateDeployment:
		return x.updateDeployment(m)
	case *api.MsgDepositDeployment:
		return x.depositDeployment(m)
	case *api.MsgCloseDeployment:
		return x.closeDeployment(m)
	case *api.MsgCloseGroup:
		return x.closeGroup(m)
	case *api.MsgPauseGroup:
		return x.pauseGroup(m)
	case *api.MsgStartGroup:
		return x.startGroup(m)
	case *api.MsgCreateBid:
		return x.createBid(m)
	case *api.MsgCloseBid:
		return x.closeBid(m)
	case *api.MsgCreateLease:
		return x.createLease(m)
	case *api.MsgCloseLease:
		return x.closeLeaseMsg(m)
	case *api.MsgWithdrawLease:
		return x.withdrawLease(m)
	}
	return api.Errorf(api.CodeTxDecode, "message type %T has no handler", m)
}

// Commit writes the block's state to disk and publishes it to queries.
func (a *App) Commit(_ context.Context, _ *abci.RequestCommit) (*abci.ResponseCommit, error) {
	if last := a.s.committed().height; a.finalized <= last {
		return nil, fmt.Errorf("commit: no block was finalized after height %d", last)
	}
	if err := a.s.commit(a.finalized); err != nil {
		return nil, err
	}
	a.mu.Lock()
	clear(a.pendingSeq)
	a.mu.Unlock()
	return &abci.ResponseCommit{}, nil
}

// Query answers a read-only query from the last committed state.
func (a *App) Query(_ context.Context, req *abci.RequestQuery) (*abci.ResponseQuery, error) {
	v := a.s.committed()
	if req.Height != 0 && req.Height != v.height {
		return queryErr(api.Errorf(api.CodeBadQuery, "height %d: only the latest height (%d) can be queried", req.Height, v.height), v.height), nil
	}
	q := &querier{r: v, height: v.height, params: &a.params, chainID: a.chainID}
	out, err := q.query(req.Path, req.Data)
	if err != nil {
		return queryErr(err, v.height), nil
	}
	return &abci.ResponseQuery{Code: abci.CodeTypeOK, Value: out, Height: v.height}, nil
}

func queryErr(err error, h int64) *abci.ResponseQuery {
	return &abci.ResponseQuery{Code: uint32(api.CodeOf(err)), Codespace: api.Codespace, Log: err.Error(), Height: h}
}

// Supply is the total of every denomination held anywhere: balances, escrow accounts,
// unpaid lease payments and bid deposits. It never changes after genesis.
func Supply(r reader) map[string]market.Dec {
	out := map[string]market.Dec{}
	addDec := func(d market.DecCoin) { out[d.Denom] = out[d.Denom].Add(d.Amount) }
	r.ascend(table(tBalance).String(), "", func(k string, v []byte) bool {
		var c market.Coin
		decodeEntry(k, v, &c)
		addDec(market.DecCoin{Amount: market.DecFromUint(uint64(c.Amount)), Denom: c.Denom})
		return true
	})
	r.ascend(table(tEscrow).String(), "", func(k string, v []byte) bool {
		var e api.EscrowAccount
		decodeEntry(k, v, &e)
		addDec(e.Balance)
		return true
	})
	r.ascend(table(tPayment).String(), "", func(k string, v []byte) bool {
		var p api.Payment
		decodeEntry(k, v, &p)
		addDec(p.Balance)
		return true
	})
	r.ascend(table(tBid).String(), "", func(k string, v []byte) bool {
		var b api.Bid
		decodeEntry(k, v, &b)
		if b.State == api.BidOpen || b.State == api.BidActive {
			addDec(market.DecCoin{Amount: market.DecFromUint(uint64(b.Deposit.Amount)), Denom: b.Deposit.Denom})
		}
		return true
	})
	return out
}
