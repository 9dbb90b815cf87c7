package ledger

import (
	"encoding/json"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// FuzzDecodeTx feeds arbitrary bytes to the transaction decoder, which every validator
// runs on whatever a client sends: it must not panic, and what it accepts must be
// signed by the signer every message names.
func FuzzDecodeTx(f *testing.F) {
	key, err := api.NewPrivKey(api.KeySecp256k1)
	if err != nil {
		f.Fatal(err)
	}
	addr, err := key.PubKey().Address(api.DefaultAddressPrefix)
	if err != nil {
		f.Fatal(err)
	}
	m, err := api.EncodeMsg(&api.MsgSend{From: addr, To: addr, Amount: []market.Coin{{Amount: 1, Denom: api.DefaultDenom}}})
	if err != nil {
		f.Fatal(err)
	}
	valid, err := api.SignTx(api.TxBody{ChainID: testChain, Signer: addr, Sequence: 3, Msgs: []api.EncodedMsg{m}}, key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{"body":{"chain_id":"berth-test","signer":"x","sequence":"1","msgs":[{"type":"bank/send","value":{}}]},"pub_key":{"type":"ed25519","key":""},"signature":""}`))
	f.Add([]byte(`{}`))
	params := api.DefaultParams()
	f.Fuzz(func(t *testing.T, raw []byte) {
		tx, err := api.DecodeTx(raw, testChain, &params)
		if err != nil {
			if api.CodeOf(err) == api.CodeOK || api.CodeOf(err) == api.CodeInternal {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		got, err := tx.PubKey.Address(params.AddressPrefix)
		if err != nil || got != tx.Signer {
			t.Fatalf("accepted a tx whose key (%s, %v) is not the signer %s", got, err, tx.Signer)
		}
		for _, m := range tx.Msgs {
			if m.Signer() != tx.Signer {
				t.Fatalf("accepted %s signed by %s for %s", m.Type(), tx.Signer, m.Signer())
			}
		}
	})
}

// FuzzQuery sends arbitrary paths and request bodies to the query handler of a chain
// with some state: answers are JSON or a coded error, never a panic.
func FuzzQuery(f *testing.F) {
	h := newHarness(f, fund, "tenant", "p1")
	h.registerProvider("p1", usWest)
	id := h.createDeployment("tenant", 5, 10_000_000)
	h.bid("p1", id.Group(1).Order(1), "1000")
	for _, p := range []string{api.QueryParams.Path, api.QueryAccount.Path, api.QueryDeployment.Path, api.QueryDeployments.Path, api.QueryOrders.Path, api.QueryBids.Path, api.QueryLeases.Path, api.QuerySupply.Path, api.QueryCertificates.Path} {
		f.Add(p, []byte(`{}`))
	}
	owner, _ := json.Marshal(map[string]string{"owner": h.addr("tenant")})
	f.Add(api.QueryDeployments.Path, owner)
	f.Add(api.QueryBids.Path, []byte(`{"provider":"`+h.addr("p1")+`","page":{"limit":1}}`))
	f.Add(api.QueryOrders.Path, []byte(`{"state":"open","page":{"key":"b3JkZXIv"}}`))
	f.Fuzz(func(t *testing.T, path string, data []byte) {
		r, err := h.app.Query(t.Context(), &abci.RequestQuery{Path: path, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		if r.Code == 0 && !json.Valid(r.Value) {
			t.Fatalf("query %s answered invalid JSON %q", path, r.Value)
		}
		if r.Code != 0 && r.Log == "" {
			t.Fatalf("query %s failed with code %d and no message", path, r.Code)
		}
	})
}
