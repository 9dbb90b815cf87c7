package ledger

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// A signed transaction has exactly one encoding: the same content written any other
// way (spacing, field order, name case, a field twice, a number in another form) is
// refused, so no one can change a transaction's bytes and hash without its signer.
func TestNonCanonicalTransactionsAreRefused(t *testing.T) {
	h := newHarness(t, fund, "alice", "bob")
	alice, bob := h.addr("alice"), h.addr("bob")
	key := h.keys[alice]
	em, err := api.EncodeMsg(&api.MsgSend{From: alice, To: bob, Amount: []market.Coin{{Amount: 5, Denom: api.DefaultDenom}}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(api.TxBody{ChainID: testChain, Signer: alice, Msgs: []api.EncodedMsg{em}})
	if err != nil {
		t.Fatal(err)
	}
	params := api.DefaultParams()
	if _, err := api.DecodeTx(signBody(t, body, key), testChain, &params); err != nil {
		t.Fatalf("the canonical form: %v", err)
	}
	variants := map[string]string{
		"spaces":          strings.Replace(string(body), `,"signer"`, `, "signer"`, 1),
		"field order":     `{"signer":"` + alice + `","chain_id":"` + testChain + `","sequence":"0","msgs":` + msgsJSON(t, body) + `}`,
		"name case":       strings.Replace(string(body), `"chain_id"`, `"Chain_ID"`, 1),
		"field twice":     strings.Replace(string(body), `{"chain_id":"`+testChain+`"`, `{"chain_id":"other","chain_id":"`+testChain+`"`, 1),
		"number form":     strings.Replace(string(body), `"amount":"5"`, `"amount":"05"`, 1),
		"message spacing": strings.Replace(string(body), `"value":{"from"`, `"value":{ "from"`, 1),
		"escaped ascii":   strings.Replace(string(body), `"bank/send"`, `"bank\/send"`, 1),
	}
	for name, v := range variants {
		if v == string(body) {
			t.Fatalf("%s: the variant did not change the body", name)
		}
		_, err := api.DecodeTx(envelope(t, []byte(v), key), testChain, &params)
		if api.CodeOf(err) != api.CodeTxDecode {
			t.Errorf("%s: %v, want a tx_decode error", name, err)
		}
	}
	// The envelope too.
	good := signBody(t, body, key)
	spaced := bytes.Replace(good, []byte(`,"pub_key"`), []byte(`, "pub_key"`), 1)
	if _, err := api.DecodeTx(spaced, testChain, &params); api.CodeOf(err) != api.CodeTxDecode || !strings.Contains(err.Error(), "canonical") {
		t.Errorf("spaced envelope: %v", err)
	}
}

// envelope signs body and wraps it without re-encoding it (json.Marshal would compact a
// RawMessage).
func envelope(t *testing.T, body []byte, k api.PrivKey) []byte {
	t.Helper()
	sig, err := k.Sign(append([]byte(api.SignDomain), body...))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := json.Marshal(k.PubKey())
	if err != nil {
		t.Fatal(err)
	}
	s, err := json.Marshal(sig)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"body":` + string(body) + `,"pub_key":` + string(pk) + `,"signature":` + string(s) + `}`)
}

func msgsJSON(t *testing.T, body []byte) string {
	t.Helper()
	var m struct {
		Msgs json.RawMessage `json:"msgs"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return string(m.Msgs)
}

// A list whose filter skips most entries stops after a bounded scan and says where
// to continue; following next_key still yields every match exactly once.
func TestFilteredListIsBoundedAndComplete(t *testing.T) {
	h := newHarness(t, 10_000_000_000_000, "tenant")
	r := webDeployment(t)
	const n = 1200 // more than one page's scan bound
	per := int(api.DefaultParams().MaxMsgsPerTx)
	for start := 0; start < n; start += per {
		var msgs []api.Msg
		for i := start; i < min(start+per, n); i++ {
			msgs = append(msgs, &api.MsgCreateDeployment{ID: market.DeploymentID{Owner: h.addr("tenant"), DSeq: uint64(i + 1)}, Groups: r.Groups, Version: r.Version,
				Deposit: market.Coin{Amount: 5_000_000, Denom: api.DefaultDenom}})
		}
		h.ok("tenant", msgs...)
	}
	// Close all but the last: listing active deployments must skip the others.
	for start := 0; start < n-1; start += per {
		var msgs []api.Msg
		for i := start; i < min(start+per, n-1); i++ {
			msgs = append(msgs, &api.MsgCloseDeployment{ID: market.DeploymentID{Owner: h.addr("tenant"), DSeq: uint64(i + 1)}})
		}
		h.ok("tenant", msgs...)
	}
	q := &querier{r: h.app.s.committed(), height: h.height, params: &h.app.params}
	var found []uint64
	var p api.Page
	p.Limit = 1
	pages := 0
	for {
		pages++
		req, err := json.Marshal(api.DeploymentsRequest{Owner: h.addr("tenant"), State: api.DeploymentActive, Page: p})
		if err != nil {
			t.Fatal(err)
		}
		out, err := q.deployments(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range out.Deployments {
			found = append(found, d.Deployment.ID.DSeq)
		}
		if len(out.NextKey) == 0 {
			break
		}
		p.Key = out.NextKey
	}
	if len(found) != 1 || found[0] != n {
		t.Fatalf("active deployments %v, want [%d]", found, n)
	}
	if pages < 2 {
		t.Fatalf("one page scanned %d entries for 1 item; the scan bound (%d) did not apply", n, scanPerItem+scanBase)
	}
}

// Blocks must follow the last committed height.
func TestFinalizeRefusesAHeightGap(t *testing.T) {
	h := newHarness(t, fund, "a")
	h.block()
	if _, err := h.app.FinalizeBlock(t.Context(), &abci.RequestFinalizeBlock{Height: h.height + 2}); err == nil {
		t.Fatal("a block two heights ahead was executed")
	}
}
