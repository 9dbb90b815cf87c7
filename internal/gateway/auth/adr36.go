package auth

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// ES256KADR36 tokens are what browser wallets (Keplr, Leap, Akash Console) can make: a
// wallet's signArbitrary does not sign the data it is given but an ADR-36 (cosmos-sdk
// ADR 036) amino sign doc that looks like a transaction no chain would accept, and that
// carries the data in one sign/MsgSignData message. For a token the data is the JWT
// signing input, header.claims, and the signer is the issuer. The signature is the
// ordinary secp256k1 one (SHA-256 of the doc, 64 bytes R‖S, low S), base64url in the
// token as for ES256K.
//
// The doc is amino JSON as the wallet serialises it (cosmjs serializeSignDoc, and the
// cosmos-sdk's StdSignBytes that Akash's verifier uses): keys sorted, no spaces, the
// numbers as strings, chain_id, memo empty, account_number, sequence and gas "0", no
// fee amount, no timeout_height, data as standard padded base64:
//
//	{"account_number":"0","chain_id":"","fee":{"amount":[],"gas":"0"},"memo":"",
//	 "msgs":[{"type":"sign/MsgSignData","value":{"data":"<base64>","signer":"<iss>"}}],
//	 "sequence":"0"}
//
// (one line). Both serialisers write <, > and & in strings as \u003c, \u003e, \u0026,
// as encoding/json does; an address and base64 never contain them.

// adr36SignDoc is the ADR-36 sign doc a wallet signs for signer and data. The struct
// fields are in the order of their JSON keys, which is the sorted order.
func adr36SignDoc(signer string, data []byte) ([]byte, error) {
	b, err := json.Marshal(adr36Doc{
		AccountNumber: "0",
		Fee:           adr36Fee{Gas: "0"},
		Msgs: [1]adr36Msg{{Type: "sign/MsgSignData", Value: adr36SignData{
			Data:   base64.StdEncoding.EncodeToString(data),
			Signer: signer,
		}}},
		Sequence: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("ADR-36 sign doc: %w", err)
	}
	return b, nil
}

type adr36Doc struct {
	AccountNumber string      `json:"account_number"`
	ChainID       string      `json:"chain_id"`
	Fee           adr36Fee    `json:"fee"`
	Memo          string      `json:"memo"`
	Msgs          [1]adr36Msg `json:"msgs"`
	Sequence      string      `json:"sequence"`
}

type adr36Fee struct {
	Amount [0]struct{} `json:"amount"`
	Gas    string      `json:"gas"`
}

type adr36Msg struct {
	Type  string        `json:"type"`
	Value adr36SignData `json:"value"`
}

type adr36SignData struct {
	Data   string `json:"data"`
	Signer string `json:"signer"`
}
