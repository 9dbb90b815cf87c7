package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/httpjson"
)

// Token access kinds.
const (
	AccessFull     = "full"
	AccessScoped   = "scoped"
	AccessGranular = "granular"
)

// TokenVersion is the claims version tokens carry.
const TokenVersion = "v1"

// MaxTokenBytes bounds a bearer token.
const MaxTokenBytes = 16 << 10

// clockSkew is how far a token's times may be off the provider's clock.
const clockSkew = 30 * time.Second

// Claims are a bearer token's claims, as Akash's tenant tools write them.
type Claims struct {
	Issuer    string   `json:"iss"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	ExpiresAt int64    `json:"exp"`
	Audience  audience `json:"aud,omitempty"`
	Version   string   `json:"version"`
	Leases    Leases   `json:"leases"`
}

// Leases says what the token grants.
type Leases struct {
	Access      string       `json:"access"`
	Scope       []Scope      `json:"scope,omitempty"`
	Permissions []Permission `json:"permissions,omitempty"`
}

// Permission grants access with one provider: full, scoped (Scope on every lease), or
// granular (per deployment or lease, Deployments).
type Permission struct {
	Provider    string     `json:"provider"`
	Access      string     `json:"access"`
	Scope       []Scope    `json:"scope,omitempty"`
	Deployments []LeaseRef `json:"deployments,omitempty"`
}

// LeaseRef grants Scope on a deployment (DSeq), or on one lease of it (GSeq, OSeq;
// 0 for any). Services is recorded but, as on Akash, not enforced.
type LeaseRef struct {
	Scope    []Scope  `json:"scope"`
	DSeq     uint64   `json:"dseq"`
	GSeq     uint32   `json:"gseq,omitempty"`
	OSeq     uint32   `json:"oseq,omitempty"`
	Services []string `json:"services,omitempty"`
}

// audience accepts a string or a list of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud: want a string or a list of strings")
	}
	*a = many
	return nil
}

type tokenHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ,omitempty"`
}

// Token signing algorithms: the same secp256k1 account key and 64-byte R‖S signature
// (SHA-256, low S), over different bytes.
const (
	// AlgES256K signs the token's signing input, header.claims (RFC 8812).
	AlgES256K = "ES256K"
	// AlgES256KADR36 signs an ADR-36 sign doc that carries header.claims: what a
	// browser wallet's signArbitrary signs (Akash's name for it; see adr36.go).
	AlgES256KADR36 = "ES256KADR36"
)

// ParsedToken is a bearer token split and decoded; its signature is not checked.
type ParsedToken struct {
	// Alg is AlgES256K or AlgES256KADR36.
	Alg    string
	Claims Claims
	// SigningInput is header.claims exactly as the token carries them.
	SigningInput []byte
	// Signature is 64 bytes R‖S.
	Signature []byte
}

// SignedMessage is what the issuer's key signed: the signing input for ES256K; for
// ES256KADR36, the ADR-36 sign doc with the issuer as signer and the signing input as
// data.
func (t ParsedToken) SignedMessage() ([]byte, error) {
	switch t.Alg {
	case AlgES256K:
		return t.SigningInput, nil
	case AlgES256KADR36:
		return adr36SignDoc(t.Claims.Issuer, t.SigningInput)
	}
	return nil, fmt.Errorf("token algorithm %q: want %s or %s", t.Alg, AlgES256K, AlgES256KADR36)
}

// ParseToken splits and decodes a token without checking its signature: the header
// (alg must be ES256K or ES256KADR36), the claims, the signing input and the signature.
func ParseToken(token string) (ParsedToken, error) {
	if len(token) > MaxTokenBytes {
		return ParsedToken{}, fmt.Errorf("%w: token longer than %d bytes", ErrInvalid, MaxTokenBytes)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ParsedToken{}, fmt.Errorf("%w: token is not header.claims.signature", ErrInvalid)
	}
	var h tokenHeader
	if err := decodeSegment(parts[0], &h); err != nil {
		return ParsedToken{}, fmt.Errorf("%w: token header: %w", ErrInvalid, err)
	}
	if h.Alg != AlgES256K && h.Alg != AlgES256KADR36 {
		return ParsedToken{}, fmt.Errorf("%w: token algorithm %q: want %s or %s", ErrInvalid, h.Alg, AlgES256K, AlgES256KADR36)
	}
	var c Claims
	if err := decodeSegment(parts[1], &c); err != nil {
		return ParsedToken{}, fmt.Errorf("%w: token claims: %w", ErrInvalid, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return ParsedToken{}, fmt.Errorf("%w: token signature: want 64 bytes R‖S, base64url", ErrInvalid)
	}
	return ParsedToken{Alg: h.Alg, Claims: c, SigningInput: []byte(parts[0] + "." + parts[1]), Signature: sig}, nil
}

func decodeSegment(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return errors.New("not base64url")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("not the expected JSON: %s", httpjson.DecodeProblem(err))
	}
	return nil
}

// Token checks a bearer token: signed by the issuer's account key on the ledger
// (ES256K over header.claims, or ES256KADR36 over the ADR-36 sign doc of a browser
// wallet), version v1, within its times (iat, nbf, exp; exp required), for this
// provider when it names an audience; and turns its grants into an Identity.
func (a *Authenticator) Token(ctx context.Context, token string) (Identity, error) {
	t, err := ParseToken(token)
	if err != nil {
		return Identity{}, err
	}
	c := t.Claims
	if err := ledger.CheckAddress(c.Issuer, a.prefix); err != nil {
		return Identity{}, fmt.Errorf("%w: token issuer is not an account address", ErrInvalid)
	}
	if c.Version != TokenVersion {
		return Identity{}, fmt.Errorf("%w: token version %q: want %q", ErrInvalid, c.Version, TokenVersion)
	}
	now := a.now()
	switch {
	case c.ExpiresAt == 0 || c.IssuedAt == 0 || c.NotBefore == 0:
		return Identity{}, fmt.Errorf("%w: token must carry iat, nbf and exp", ErrInvalid)
	case now.After(time.Unix(c.ExpiresAt, 0).Add(clockSkew)):
		return Identity{}, fmt.Errorf("%w: token expired", ErrInvalid)
	case now.Add(clockSkew).Before(time.Unix(c.NotBefore, 0)):
		return Identity{}, fmt.Errorf("%w: token not valid yet (nbf)", ErrInvalid)
	case now.Add(clockSkew).Before(time.Unix(c.IssuedAt, 0)):
		return Identity{}, fmt.Errorf("%w: token issued in the future (iat)", ErrInvalid)
	case len(c.Audience) > 0 && !contains(c.Audience, a.provider):
		return Identity{}, fmt.Errorf("%w: token is for another provider (aud)", ErrInvalid)
	}
	msg, err := t.SignedMessage()
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	acct, err := a.account(ctx, c.Issuer)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return Identity{}, fmt.Errorf("%w: token issuer has no account on the ledger", ErrInvalid)
	case err != nil:
		return Identity{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case acct.PubKey == nil:
		return Identity{}, fmt.Errorf("%w: token issuer's public key is not on the ledger yet (send a transaction first)", ErrInvalid)
	case acct.PubKey.Type != ledger.KeySecp256k1:
		return Identity{}, fmt.Errorf("%w: token issuer's key is %s; %s needs secp256k1", ErrInvalid, acct.PubKey.Type, t.Alg)
	case !acct.PubKey.Verify(msg, t.Signature):
		if t.Alg == AlgES256KADR36 {
			return Identity{}, fmt.Errorf("%w: token signature does not verify with the issuer's key (%s: over the ADR-36 sign doc of header.claims, signer = iss, chain_id \"\")", ErrInvalid, t.Alg)
		}
		return Identity{}, fmt.Errorf("%w: token signature does not verify with the issuer's key (%s: over header.claims)", ErrInvalid, t.Alg)
	}
	return a.grants(c)
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// grants turns the token's leases claim into an Identity.
func (a *Authenticator) grants(c Claims) (Identity, error) {
	id := Identity{Owner: c.Issuer, Method: "jwt", scopes: map[Scope]bool{}}
	scopes := func(list []Scope) (map[Scope]bool, error) {
		m := make(map[Scope]bool, len(list))
		for _, s := range list {
			if !knownScopes[s] {
				return nil, fmt.Errorf("%w: token scope %q is unknown", ErrInvalid, s)
			}
			m[s] = true
		}
		return m, nil
	}
	switch c.Leases.Access {
	case AccessFull:
		id.full = true
	case AccessScoped:
		m, err := scopes(c.Leases.Scope)
		if err != nil {
			return Identity{}, err
		}
		if len(m) == 0 {
			return Identity{}, fmt.Errorf("%w: scoped token lists no scope", ErrInvalid)
		}
		id.scopes = m
	case AccessGranular:
		if len(c.Leases.Permissions) == 0 {
			return Identity{}, fmt.Errorf("%w: granular token lists no permissions", ErrInvalid)
		}
		for _, p := range c.Leases.Permissions {
			if p.Provider != a.provider {
				continue
			}
			switch p.Access {
			case AccessFull:
				id.full = true
			case AccessScoped:
				ps, err := scopes(p.Scope)
				if err != nil {
					return Identity{}, err
				}
				for s := range ps {
					id.scopes[s] = true
				}
			case AccessGranular:
				for _, d := range p.Deployments {
					ds, err := scopes(d.Scope)
					if err != nil {
						return Identity{}, err
					}
					if d.DSeq == 0 || (d.OSeq != 0 && d.GSeq == 0) {
						return Identity{}, fmt.Errorf("%w: token permission names no deployment (dseq), or an order without its group", ErrInvalid)
					}
					id.grants = append(id.grants, grant{dseq: d.DSeq, gseq: d.GSeq, oseq: d.OSeq, scopes: ds})
				}
			default:
				return Identity{}, fmt.Errorf("%w: token permission access %q: want full, scoped or granular", ErrInvalid, p.Access)
			}
		}
	default:
		return Identity{}, fmt.Errorf("%w: token access %q: want full, scoped or granular", ErrInvalid, c.Leases.Access)
	}
	return id, nil
}

// SignToken makes a token for the signer's account (secp256k1 ledger key): ES256K
// over header.claims.
func SignToken(c Claims, s ledger.Signer) (string, error) {
	return signToken(AlgES256K, c, s)
}

// SignTokenADR36 makes the token a browser wallet makes for its account: ES256KADR36,
// the signature of the ADR-36 sign doc of header.claims. As a wallet signs only as
// itself, the claims' issuer must be the signer's address.
func SignTokenADR36(c Claims, s ledger.Signer) (string, error) {
	i := strings.LastIndexByte(c.Issuer, '1')
	if i < 1 {
		return "", fmt.Errorf("sign token: issuer %q is not an account address", c.Issuer)
	}
	addr, err := s.PubKey().Address(c.Issuer[:i])
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	if addr != c.Issuer {
		return "", fmt.Errorf("sign token: issuer %s is not the signer's address %s", c.Issuer, addr)
	}
	return signToken(AlgES256KADR36, c, s)
}

func signToken(alg string, c Claims, s ledger.Signer) (string, error) {
	if s.PubKey().Type != ledger.KeySecp256k1 {
		return "", fmt.Errorf("sign token: key type %s; %s needs secp256k1", s.PubKey().Type, alg)
	}
	h, err := json.Marshal(tokenHeader{Alg: alg, Typ: "JWT"})
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b)
	msg, err := ParsedToken{Alg: alg, Claims: c, SigningInput: []byte(input)}.SignedMessage()
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	sig, err := s.Sign(msg)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
