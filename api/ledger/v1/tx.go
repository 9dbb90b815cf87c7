package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/crypto/secp256k1"
)

// A transaction on the wire is JSON:
//
//	{"body": {"chain_id": …, "signer": …, "sequence": "7", "memo": …,
//	          "msgs": [{"type": "deployment/create", "value": {…}}]},
//	 "pub_key": {"type": "secp256k1", "key": "<base64>"},
//	 "signature": "<base64>"}
//
// The signature covers signDomain followed by the body's bytes exactly as they appear
// in the transaction, so no canonical re-encoding is needed to verify it. The body names
// the chain and the signer's sequence number, so a transaction cannot be replayed on
// another chain or twice on this one.

// SignDomain separates berth transaction signatures from anything else a key signs.
const SignDomain = "berth/tx/v1\n"

// TxBody is what the signer signs.
type TxBody struct {
	ChainID  string       `json:"chain_id"`
	Signer   string       `json:"signer"`
	Sequence uint64       `json:"sequence,string"`
	Memo     string       `json:"memo,omitempty"`
	Msgs     []EncodedMsg `json:"msgs"`
}

// EncodedMsg is a message with its type name.
type EncodedMsg struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// Tx is a signed transaction.
type Tx struct {
	Body      json.RawMessage `json:"body"`
	PubKey    PubKey          `json:"pub_key"`
	Signature []byte          `json:"signature"`
}

// DecodedTx is a transaction whose body and messages are decoded (not yet verified).
type DecodedTx struct {
	Tx
	TxBody
	Msgs []Msg
}

const maxMemoBytes = 256

// EncodeMsg wraps a message with its type name.
func EncodeMsg(m Msg) (EncodedMsg, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return EncodedMsg{}, fmt.Errorf("encode %s: %w", m.Type(), err)
	}
	return EncodedMsg{Type: m.Type(), Value: b}, nil
}

// Signer signs transaction bytes. PrivKey wraps a key for it.
type Signer interface {
	PubKey() PubKey
	Sign(msg []byte) ([]byte, error)
}

// PrivKey is an account's private key.
type PrivKey struct {
	key crypto.PrivKey
}

// NewPrivKey returns a fresh key of the type (KeySecp256k1 or KeyEd25519).
func NewPrivKey(typ string) (PrivKey, error) {
	switch typ {
	case KeySecp256k1:
		return PrivKey{secp256k1.GenPrivKey()}, nil
	case KeyEd25519:
		return PrivKey{ed25519.GenPrivKey()}, nil
	}
	return PrivKey{}, fmt.Errorf("key type %q: want %s or %s", typ, KeySecp256k1, KeyEd25519)
}

// PrivKeyFromBytes rebuilds a key exported by Bytes.
func PrivKeyFromBytes(typ string, b []byte) (PrivKey, error) {
	switch typ {
	case KeySecp256k1:
		if len(b) != secp256k1.PrivKeySize {
			return PrivKey{}, fmt.Errorf("secp256k1 private key is %d bytes, want %d", len(b), secp256k1.PrivKeySize)
		}
		return PrivKey{secp256k1.PrivKey(bytes.Clone(b))}, nil
	case KeyEd25519:
		if len(b) != ed25519.PrivateKeySize {
			return PrivKey{}, fmt.Errorf("ed25519 private key is %d bytes, want %d", len(b), ed25519.PrivateKeySize)
		}
		return PrivKey{ed25519.PrivKey(bytes.Clone(b))}, nil
	}
	return PrivKey{}, fmt.Errorf("key type %q: want %s or %s", typ, KeySecp256k1, KeyEd25519)
}

// Type is KeySecp256k1 or KeyEd25519.
func (k PrivKey) Type() string {
	if _, ok := k.key.(ed25519.PrivKey); ok {
		return KeyEd25519
	}
	return KeySecp256k1
}

// Bytes is the raw private key, for export.
func (k PrivKey) Bytes() []byte { return k.key.Bytes() }

// PubKey is the key's public half.
func (k PrivKey) PubKey() PubKey { return PubKey{Type: k.Type(), Key: k.key.PubKey().Bytes()} }

// Sign signs msg: secp256k1 signs sha256(msg) as 64-byte R‖S with low S; ed25519
// signs msg.
func (k PrivKey) Sign(msg []byte) ([]byte, error) { return k.key.Sign(msg) }

// SignTx encodes and signs a transaction.
func SignTx(body TxBody, s Signer) ([]byte, error) {
	bb, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode tx body: %w", err)
	}
	sig, err := s.Sign(append([]byte(SignDomain), bb...))
	if err != nil {
		return nil, fmt.Errorf("sign tx: %w", err)
	}
	return json.Marshal(Tx{Body: bb, PubKey: s.PubKey(), Signature: sig})
}

// UnmarshalStrict decodes exactly one JSON value, rejecting unknown fields.
func UnmarshalStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// canonical requires raw to be exactly how encoding/json writes the value it decoded
// to: compact, fields in declared order with their exact names, each once, numbers in
// their canonical form. So a transaction has one encoding: no one can alter a signed
// transaction's bytes (and its hash) without changing its meaning, and no other JSON
// reader can see in it a field this one ignored.
func canonical(raw []byte, v any, what string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return Errorf(CodeTxDecode, "%s: %v", what, err)
	}
	if !bytes.Equal(b, raw) {
		return Errorf(CodeTxDecode, "%s is not in canonical form (compact JSON, fields in order, each once, as berth's encoder writes it)", what)
	}
	return nil
}

// DecodeTx decodes a transaction and its messages, and checks everything that needs no
// state: size, chain, message shapes, signer, signature.
func DecodeTx(raw []byte, chainID string, p *Params) (*DecodedTx, error) {
	if len(raw) > int(p.MaxTxBytes) {
		return nil, Errorf(CodeTxTooLarge, "%d bytes, more than max_tx_bytes %d", len(raw), p.MaxTxBytes)
	}
	var t DecodedTx
	if err := UnmarshalStrict(raw, &t.Tx); err != nil {
		return nil, Errorf(CodeTxDecode, "transaction: %v", err)
	}
	if err := UnmarshalStrict(t.Body, &t.TxBody); err != nil {
		return nil, Errorf(CodeTxDecode, "transaction body: %v", err)
	}
	if err := canonical(raw, t.Tx, "transaction"); err != nil {
		return nil, err
	}
	if err := canonical(t.Body, t.TxBody, "transaction body"); err != nil {
		return nil, err
	}
	if t.ChainID != chainID {
		return nil, Errorf(CodeWrongChain, "signed for chain %q, this is %q", t.ChainID, chainID)
	}
	if len(t.Memo) > maxMemoBytes {
		return nil, Errorf(CodeTxDecode, "memo: %d bytes, at most %d", len(t.Memo), maxMemoBytes)
	}
	if len(t.TxBody.Msgs) == 0 {
		return nil, Errorf(CodeTxDecode, "no messages")
	}
	if len(t.TxBody.Msgs) > int(p.MaxMsgsPerTx) {
		return nil, Errorf(CodeTxTooLarge, "%d messages, more than max_msgs_per_tx %d", len(t.TxBody.Msgs), p.MaxMsgsPerTx)
	}
	if err := CheckAddress(t.Signer, p.AddressPrefix); err != nil {
		return nil, Errorf(CodeTxDecode, "signer: %v", err)
	}
	t.Msgs = make([]Msg, len(t.TxBody.Msgs))
	for i, em := range t.TxBody.Msgs {
		mk, ok := msgTypes[em.Type]
		if !ok {
			return nil, Errorf(CodeTxDecode, "msgs[%d]: unknown message type %q", i, em.Type)
		}
		m := mk()
		if err := UnmarshalStrict(em.Value, m); err != nil {
			return nil, Errorf(CodeTxDecode, "msgs[%d] (%s): %v", i, em.Type, err)
		}
		if err := canonical(em.Value, m, fmt.Sprintf("msgs[%d] (%s)", i, em.Type)); err != nil {
			return nil, err
		}
		if err := m.ValidateBasic(p); err != nil {
			return nil, Within(err, "msgs[%d] (%s)", i, em.Type)
		}
		if m.Signer() != t.Signer {
			return nil, Errorf(CodeUnauthorized, "msgs[%d] (%s): must be signed by %s, the transaction is signed by %s", i, em.Type, m.Signer(), t.Signer)
		}
		t.Msgs[i] = m
	}
	addr, err := t.PubKey.Address(p.AddressPrefix)
	if err != nil {
		return nil, Errorf(CodeUnauthorized, "pub_key: %v", err)
	}
	if addr != t.Signer {
		return nil, Errorf(CodeUnauthorized, "pub_key is the key of %s, not of the signer %s", addr, t.Signer)
	}
	if !t.PubKey.Verify(append([]byte(SignDomain), t.Body...), t.Signature) {
		return nil, Errorf(CodeUnauthorized, "signature does not verify")
	}
	return &t, nil
}
