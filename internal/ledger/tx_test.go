package ledger

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// signBody signs body bytes as given, so a test can sign bodies SignTx would not make.
func signBody(t *testing.T, body []byte, k api.PrivKey) []byte {
	t.Helper()
	sig, err := k.Sign(append([]byte(api.SignDomain), body...))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(api.Tx{Body: body, PubKey: k.PubKey(), Signature: sig})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// withField adds a field to a JSON object.
func withField(t *testing.T, obj []byte, key string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = value
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Transactions that are not valid are rejected with their own code before any message
// runs: they change nothing, not even the signer's sequence, in the mempool or in a
// block.
func TestRejectedTransactions(t *testing.T) {
	h := newHarness(t, fund, "alice", "bob")
	alice, bob := h.addr("alice"), h.addr("bob")
	key := h.keys[alice]
	send := func(from, to string, amount uint64) *api.MsgSend {
		return &api.MsgSend{From: from, To: to, Amount: []market.Coin{{Amount: market.Uint(amount), Denom: api.DefaultDenom}}}
	}
	encode := func(msgs ...api.Msg) []api.EncodedMsg {
		var out []api.EncodedMsg
		for _, m := range msgs {
			em, err := api.EncodeMsg(m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, em)
		}
		return out
	}
	sign := func(body api.TxBody, k api.PrivKey) []byte {
		raw, err := api.SignTx(body, k)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	first := h.tx("alice", send(alice, bob, 1))
	if r := h.block(first)[0]; r.Code != 0 {
		t.Fatal(r.Log)
	}
	// From here on alice's account has its key and expects sequence 1.
	body := func(msgs ...api.Msg) api.TxBody {
		return api.TxBody{ChainID: h.chain, Signer: alice, Sequence: 1, Msgs: encode(msgs...)}
	}
	valid := sign(body(send(alice, bob, 1)), key)

	badSig := func() []byte {
		var tx api.Tx
		if err := json.Unmarshal(valid, &tx); err != nil {
			t.Fatal(err)
		}
		tx.Signature[len(tx.Signature)/2] ^= 0x01
		b, err := json.Marshal(tx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	wrongSeq := body(send(alice, bob, 1))
	wrongSeq.Sequence = 6
	wrongChain := body(send(alice, bob, 1))
	wrongChain.ChainID = "other-chain"
	bobsBody := body(send(bob, alice, 1))
	bobsBody.Signer = bob
	unknownType := body(send(alice, bob, 1))
	unknownType.Msgs = []api.EncodedMsg{{Type: "bank/mint", Value: json.RawMessage(`{"to":"` + alice + `"}`)}}
	bodyBytes, err := json.Marshal(body(send(alice, bob, 1)))
	if err != nil {
		t.Fatal(err)
	}
	extraInMsg := body(send(alice, bob, 1))
	extraInMsg.Msgs[0].Value = withField(t, extraInMsg.Msgs[0].Value, "memo", "hi")
	var tooMany []api.Msg
	for range api.DefaultParams().MaxMsgsPerTx + 1 {
		tooMany = append(tooMany, send(alice, bob, 1))
	}
	oversized := body(send(alice, bob, 1))
	oversized.Memo = strings.Repeat("x", int(api.DefaultParams().MaxTxBytes))
	strangerKey, err := api.NewPrivKey(api.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := strangerKey.PubKey().Address(api.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	strangers := api.TxBody{ChainID: h.chain, Signer: stranger, Msgs: encode(send(stranger, alice, 1))}

	for _, c := range []struct {
		name string
		raw  []byte
		code api.Code
		log  string
	}{
		{"bad signature", badSig, api.CodeUnauthorized, "signature does not verify"},
		{"wrong sequence", sign(wrongSeq, key), api.CodeWrongSequence, "expected sequence 1, got 6"},
		{"replayed", first, api.CodeWrongSequence, "expected sequence 1, got 0"},
		{"wrong chain", sign(wrongChain, key), api.CodeWrongChain, `signed for chain "other-chain"`},
		{"message of another signer", sign(body(send(bob, alice, 1)), key), api.CodeUnauthorized, "must be signed by " + bob},
		{"signed with another's key", sign(bobsBody, key), api.CodeUnauthorized, "pub_key is the key of " + alice},
		{"malformed JSON", []byte(`{"body": {"chain_id": "berth-test"`), api.CodeTxDecode, "transaction:"},
		{"not JSON", []byte("\x00\x01\x02"), api.CodeTxDecode, "transaction:"},
		{"data after the transaction", append(bytes.Clone(valid), " {}"...), api.CodeTxDecode, "data after"},
		{"unknown message type", sign(unknownType, key), api.CodeTxDecode, `unknown message type "bank/mint"`},
		{"unknown field in the transaction", withField(t, valid, "fee", "1uakt"), api.CodeTxDecode, `unknown field "fee"`},
		{"unknown field in the body", signBody(t, withField(t, bodyBytes, "gas", 1), key), api.CodeTxDecode, `unknown field "gas"`},
		{"unknown field in a message", sign(extraInMsg, key), api.CodeTxDecode, `unknown field "memo"`},
		{"no messages", sign(body(), key), api.CodeTxDecode, "no messages"},
		{"too many messages", sign(body(tooMany...), key), api.CodeTxTooLarge, "max_msgs_per_tx"},
		{"oversized", sign(oversized, key), api.CodeTxTooLarge, "max_tx_bytes"},
		{"invalid message", sign(body(send(alice, bob, 0)), key), api.CodeInvalidMsg, "amount must be positive"},
		{"unknown account", sign(strangers, strangerKey), api.CodeUnknownAccount, stranger + " does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			defer func() { h.t = nil }()
			info, err := h.app.Info(t.Context(), &abci.RequestInfo{})
			if err != nil {
				t.Fatal(err)
			}
			check := func(where string, code uint32, codespace, log string) {
				t.Helper()
				if api.Code(code) != c.code || codespace != api.Codespace || !strings.Contains(log, c.log) {
					t.Fatalf("%s: code %s (%s) %q, want %s with %q", where, api.Code(code), codespace, log, c.code, c.log)
				}
				if c.code == api.CodeWrongSequence {
					if seq, ok := api.ExpectedSequence(api.ErrorFromCode(code, codespace, log)); !ok || seq != 1 {
						t.Fatalf("%s: ExpectedSequence(%q) = %d, %v, want 1", where, log, seq, ok)
					}
				}
			}
			ct, err := h.app.CheckTx(t.Context(), &abci.RequestCheckTx{Tx: c.raw})
			if err != nil {
				t.Fatal(err)
			}
			check("CheckTx", ct.Code, ct.Codespace, ct.Log)
			r := h.block(c.raw)[0]
			check("FinalizeBlock", r.Code, r.Codespace, r.Log)
			if len(r.Events) != 0 || len(h.last.Events) != 0 {
				t.Fatalf("events %v, block events %v", r.Events, h.last.Events)
			}
			after, err := h.app.Info(t.Context(), &abci.RequestInfo{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(h.last.AppHash, info.LastBlockAppHash) || !bytes.Equal(after.LastBlockAppHash, info.LastBlockAppHash) {
				t.Fatalf("app hash %X → %X (block %X): a rejected transaction changed state", info.LastBlockAppHash, after.LastBlockAppHash, h.last.AppHash)
			}
			if after.LastBlockHeight != info.LastBlockHeight+1 {
				t.Fatalf("height %d → %d", info.LastBlockHeight, after.LastBlockHeight)
			}
		})
	}
	h.t = t

	// Nothing used alice's sequence: her next transaction still carries 1.
	var acc api.AccountResponse
	h.mustQuery(api.QueryAccount.Path, api.AccountRequest{Address: alice}, &acc)
	if acc.Account.Sequence != 1 {
		t.Fatalf("alice's sequence %d, want 1", acc.Account.Sequence)
	}
	if r := h.block(valid)[0]; r.Code != 0 {
		t.Fatalf("alice's next transaction: %s", r.Log)
	}
	h.seq[alice]++ // valid was signed by hand with sequence 1
	if got := h.balance("bob"); got != fund+2 {
		t.Fatalf("bob has %d, want %d", got, fund+2)
	}
	// A transaction whose message fails uses its sequence and changes nothing else.
	before, err := h.app.Info(t.Context(), &abci.RequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	h.fail(api.CodeInsufficientFunds, "alice", send(alice, bob, 2*fund))
	h.mustQuery(api.QueryAccount.Path, api.AccountRequest{Address: alice}, &acc)
	if acc.Account.Sequence != 3 {
		t.Fatalf("alice's sequence %d after a failed message, want 3", acc.Account.Sequence)
	}
	if got := h.balance("alice"); got != fund-2 {
		t.Fatalf("alice has %d, want %d", got, fund-2)
	}
	after, err := h.app.Info(t.Context(), &abci.RequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before.LastBlockAppHash, after.LastBlockAppHash) {
		t.Fatal("the used sequence did not change the app hash")
	}
}

// A chain whose genesis starts at a later height commits its blocks at their heights,
// so that CometBFT's handshake finds the application where its block store is.
func TestInitialHeight(t *testing.T) {
	db := dbm.NewMemDB()
	app, err := NewApp(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := json.Marshal(api.GenesisState{Params: api.DefaultParams()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.InitChain(t.Context(), &abci.RequestInitChain{ChainId: testChain, AppStateBytes: g, InitialHeight: 100}); err != nil {
		t.Fatal(err)
	}
	for h := int64(100); h < 103; h++ {
		resp, err := app.FinalizeBlock(t.Context(), &abci.RequestFinalizeBlock{Height: h})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := app.Commit(t.Context(), &abci.RequestCommit{}); err != nil {
			t.Fatal(err)
		}
		reopened, err := NewApp(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []*App{app, reopened} {
			info, err := a.Info(t.Context(), &abci.RequestInfo{})
			if err != nil {
				t.Fatal(err)
			}
			if info.LastBlockHeight != h || !bytes.Equal(info.LastBlockAppHash, resp.AppHash) {
				t.Fatalf("after block %d: Info says height %d hash %X, want %X", h, info.LastBlockHeight, info.LastBlockAppHash, resp.AppHash)
			}
		}
		q, err := app.Query(t.Context(), &abci.RequestQuery{Path: api.QueryParams.Path})
		if err != nil || q.Code != 0 || q.Height != h {
			t.Fatalf("query after block %d: %v %+v", h, err, q)
		}
	}
	if _, err := app.Commit(t.Context(), &abci.RequestCommit{}); err == nil {
		t.Fatal("a second Commit of the same block succeeded")
	}
}
