package ledger

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/crypto/secp256k1"
)

// Key types an account may sign with.
const (
	KeySecp256k1 = "secp256k1"
	KeyEd25519   = "ed25519"
)

// DefaultAddressPrefix is the bech32 prefix of account addresses. It is Akash's, so the
// keys and tokens of Akash tenant tools name the same accounts here.
const DefaultAddressPrefix = "akash"

// AddressLen is the length of an account address: RIPEMD160(SHA256(key)) for secp256k1
// keys and the first 20 bytes of SHA256(key) for ed25519, as on Cosmos chains.
const AddressLen = 20

// PubKey is an account's public key as transactions and queries carry it.
type PubKey struct {
	Type string `json:"type"`
	Key  []byte `json:"key"`
}

// ErrAddress reports an address that is not a bech32 account address of this chain.
var ErrAddress = errors.New("invalid address")

func (p PubKey) crypto() (crypto.PubKey, error) {
	switch p.Type {
	case KeySecp256k1:
		if len(p.Key) != secp256k1.PubKeySize {
			return nil, fmt.Errorf("secp256k1 public key is %d bytes, want %d", len(p.Key), secp256k1.PubKeySize)
		}
		if p.Key[0] != 2 && p.Key[0] != 3 {
			return nil, errors.New("secp256k1 public key is not in compressed form")
		}
		return secp256k1.PubKey(p.Key), nil
	case KeyEd25519:
		if len(p.Key) != ed25519.PubKeySize {
			return nil, fmt.Errorf("ed25519 public key is %d bytes, want %d", len(p.Key), ed25519.PubKeySize)
		}
		return ed25519.PubKey(p.Key), nil
	default:
		return nil, fmt.Errorf("key type %q: want %s or %s", p.Type, KeySecp256k1, KeyEd25519)
	}
}

// Address is the bech32 address of the key under prefix.
func (p PubKey) Address(prefix string) (string, error) {
	k, err := p.crypto()
	if err != nil {
		return "", err
	}
	return bech32Encode(prefix, k.Address())
}

// Verify reports whether sig is the key's signature of msg.
func (p PubKey) Verify(msg, sig []byte) bool {
	k, err := p.crypto()
	return err == nil && k.VerifySignature(msg, sig)
}

// CheckAddress reports whether addr is an account address with the prefix.
func CheckAddress(addr, prefix string) error {
	if addr == "" {
		return fmt.Errorf("%w: empty", ErrAddress)
	}
	hrp, data, err := bech32Decode(addr)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrAddress, addr, err)
	}
	if hrp != prefix {
		return fmt.Errorf("%w %q: prefix %q, want %q", ErrAddress, addr, hrp, prefix)
	}
	if len(data) != AddressLen {
		return fmt.Errorf("%w %q: %d bytes, want %d", ErrAddress, addr, len(data), AddressLen)
	}
	if addr != strings.ToLower(addr) {
		return fmt.Errorf("%w %q: not in lower case", ErrAddress, addr)
	}
	return nil
}

// AddressFromBytes encodes 20 address bytes under prefix.
func AddressFromBytes(prefix string, b []byte) (string, error) {
	if len(b) != AddressLen {
		return "", fmt.Errorf("%w: %d bytes, want %d", ErrAddress, len(b), AddressLen)
	}
	return bech32Encode(prefix, b)
}
