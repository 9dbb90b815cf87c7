package auth

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// Errors of Authenticate. The gateway answers ErrNoCredentials and ErrInvalid with
// 401, ErrUnavailable with 503.
var (
	ErrNoCredentials = errors.New("no credentials: present a client certificate registered on the ledger, or a bearer token")
	ErrInvalid       = errors.New("invalid credentials")
	// ErrAmbiguous: a request with both a client certificate and a bearer token (as
	// Akash, berth refuses to choose).
	ErrAmbiguous   = errors.New("ambiguous credentials: use a client certificate or a bearer token, not both")
	ErrUnavailable = errors.New("the ledger cannot be asked")
)

// Scope is one kind of access to a lease.
type Scope string

// Scopes, named as Akash's tokens name them.
const (
	ScopeSendManifest    Scope = "send-manifest"
	ScopeGetManifest     Scope = "get-manifest"
	ScopeLogs            Scope = "logs"
	ScopeShell           Scope = "shell"
	ScopeEvents          Scope = "events"
	ScopeStatus          Scope = "status"
	ScopeRestart         Scope = "restart"
	ScopeHostnameMigrate Scope = "hostname-migrate"
	ScopeIPMigrate       Scope = "ip-migrate"
	// ScopeAttestation is Akash's (TEE attestation quotes); berth has no route for it,
	// but a token listing it is valid.
	ScopeAttestation Scope = "attestation"
)

var knownScopes = map[Scope]bool{
	ScopeSendManifest: true, ScopeGetManifest: true, ScopeLogs: true, ScopeShell: true, ScopeEvents: true,
	ScopeStatus: true, ScopeRestart: true, ScopeHostnameMigrate: true, ScopeIPMigrate: true, ScopeAttestation: true,
}

// Identity is an authenticated tenant and what it may do.
type Identity struct {
	// Owner is the tenant's account address.
	Owner string
	// Method is "mtls" or "jwt".
	Method string
	// full: every scope on every lease (a certificate, or a token with full access).
	full bool
	// scopes granted on every lease of the owner with this provider.
	scopes map[Scope]bool
	// grants are scopes on particular deployments or leases.
	grants []grant
}

// grant gives scopes on the leases of a deployment; gseq and oseq, when not 0, narrow
// it to a group or one lease.
type grant struct {
	dseq       uint64
	gseq, oseq uint32
	scopes     map[Scope]bool
}

// Full reports whether the identity holds every scope on every lease of its owner: a
// client certificate, or a token with full access to this provider. Narrower tokens
// (scoped, or granular to leases or to another provider) do not.
func (i Identity) Full() bool { return i.full }

// Allows reports whether the identity may use scope on the owner's lease, or, with
// GSeq and OSeq 0, on the whole deployment (which a grant on one lease or group does
// not give). Only the owner's own leases ever match: the caller builds id with
// Owner = Identity.Owner.
func (i Identity) Allows(scope Scope, id market.LeaseID) bool {
	if id.Owner != i.Owner {
		return false
	}
	if i.full || i.scopes[scope] {
		return true
	}
	for _, g := range i.grants {
		if g.dseq != id.DSeq || !g.scopes[scope] {
			continue
		}
		if (g.gseq == 0 || g.gseq == id.GSeq) && (g.oseq == 0 || g.oseq == id.OSeq) {
			return true
		}
	}
	return false
}

// Ledger is what authentication reads from the ledger.
type Ledger interface {
	// Certificate is the owner's certificate with that serial (ledger.ErrNotFound).
	Certificate(ctx context.Context, owner, serial string) (ledger.Certificate, error)
	// Account is an account with its public key, once it sent a transaction
	// (ledger.ErrNotFound when absent).
	Account(ctx context.Context, address string) (ledger.Account, error)
}

// CacheTTL is how long the ledger's answers are reused: a revoked certificate is
// refused at most this long after the revocation is in a block.
const CacheTTL = 5 * time.Second

// Authenticator checks credentials against the ledger.
type Authenticator struct {
	ledger   Ledger
	prefix   string
	provider string
	now      func() time.Time

	mu    sync.Mutex
	certs map[string]cached[ledger.Certificate] // owner/serial
	accts map[string]cached[ledger.Account]
	// lookups bounds the ledger queries in flight: credentials naming unknown serials
	// or issuers cost a query each, and the ledger serves bidding too.
	lookups chan struct{}
}

// maxLookups bounds the authenticator's ledger queries in flight.
const maxLookups = 16

// lookup runs a ledger query within the bound, or fails as unavailable.
func (a *Authenticator) lookup(ctx context.Context, q func() error) error {
	select {
	case a.lookups <- struct{}{}:
		defer func() { <-a.lookups }()
		return q()
	case <-ctx.Done():
		return ctx.Err()
	default:
		return errors.New("too many credential checks at once")
	}
}

type cached[T any] struct {
	v   T
	err error
	at  time.Time
}

// NewAuthenticator checks credentials for provider (a token's audience, when it
// names one), with addresses of the prefix.
func NewAuthenticator(l Ledger, prefix, provider string) (*Authenticator, error) {
	if l == nil || prefix == "" || provider == "" {
		return nil, errors.New("authenticator: ledger, address prefix and provider are required")
	}
	return &Authenticator{ledger: l, prefix: prefix, provider: provider, now: time.Now, lookups: make(chan struct{}, maxLookups),
		certs: map[string]cached[ledger.Certificate]{}, accts: map[string]cached[ledger.Account]{}}, nil
}

// Authenticate identifies the tenant behind a request: a bearer token when the
// request has an Authorization header, otherwise the TLS client certificate.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	hasCert := r.TLS != nil && len(r.TLS.PeerCertificates) > 0
	if h := r.Header.Get("Authorization"); h != "" {
		f := strings.Fields(h)
		if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
			return Identity{}, fmt.Errorf("%w: Authorization header: want Bearer <token>", ErrInvalid)
		}
		if hasCert {
			return Identity{}, ErrAmbiguous
		}
		return a.Token(r.Context(), f[1])
	}
	if hasCert {
		if len(r.TLS.PeerCertificates) != 1 {
			return Identity{}, fmt.Errorf("%w: present one client certificate, not a chain", ErrInvalid)
		}
		return a.ClientCertificate(r.Context(), r.TLS.PeerCertificates[0])
	}
	return Identity{}, ErrNoCredentials
}

// ClientCertificate checks a client certificate: its subject CN is an address, the
// ledger has this exact certificate for that address under its serial, valid (not
// revoked), it is within its validity period, and its extended key usage allows
// client authentication (as Akash's gateway requires).
func (a *Authenticator) ClientCertificate(ctx context.Context, c *x509.Certificate) (Identity, error) {
	owner := c.Subject.CommonName
	if err := ledger.CheckAddress(owner, a.prefix); err != nil {
		return Identity{}, fmt.Errorf("%w: client certificate subject CN is not an account address", ErrInvalid)
	}
	now := a.now()
	if now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return Identity{}, fmt.Errorf("%w: client certificate is outside its validity period", ErrInvalid)
	}
	if !ClientAuthUsage(c) {
		return Identity{}, fmt.Errorf("%w: client certificate's extended key usage does not allow client authentication", ErrInvalid)
	}
	serial := c.SerialNumber.String()
	reg, err := a.certificate(ctx, owner, serial)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return Identity{}, fmt.Errorf("%w: client certificate %s is not registered on the ledger for %s", ErrInvalid, serial, owner)
	case err != nil:
		return Identity{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case reg.State != ledger.CertValid:
		return Identity{}, fmt.Errorf("%w: client certificate %s is %s", ErrInvalid, serial, reg.State)
	}
	b, _ := pem.Decode(reg.Cert)
	if b == nil || !bytes.Equal(b.Bytes, c.Raw) {
		return Identity{}, fmt.Errorf("%w: client certificate %s is not the one registered under that serial", ErrInvalid, serial)
	}
	return Identity{Owner: owner, Method: "mtls", full: true}, nil
}

func (a *Authenticator) certificate(ctx context.Context, owner, serial string) (ledger.Certificate, error) {
	key := owner + "/" + serial
	a.mu.Lock()
	if c, ok := a.certs[key]; ok && a.now().Sub(c.at) < CacheTTL {
		a.mu.Unlock()
		return c.v, c.err
	}
	a.mu.Unlock()
	var v ledger.Certificate
	err := a.lookup(ctx, func() (err error) {
		v, err = a.ledger.Certificate(ctx, owner, serial)
		return err
	})
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return v, err // not cached: the next request asks again
	}
	a.mu.Lock()
	a.pruneLocked()
	a.certs[key] = cached[ledger.Certificate]{v: v, err: err, at: a.now()}
	a.mu.Unlock()
	return v, err
}

func (a *Authenticator) account(ctx context.Context, addr string) (ledger.Account, error) {
	a.mu.Lock()
	if c, ok := a.accts[addr]; ok && a.now().Sub(c.at) < CacheTTL {
		a.mu.Unlock()
		return c.v, c.err
	}
	a.mu.Unlock()
	var v ledger.Account
	err := a.lookup(ctx, func() (err error) {
		v, err = a.ledger.Account(ctx, addr)
		return err
	})
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return v, err
	}
	a.mu.Lock()
	a.pruneLocked()
	a.accts[addr] = cached[ledger.Account]{v: v, err: err, at: a.now()}
	a.mu.Unlock()
	return v, err
}

// maxCached bounds each cache; past it, expired entries are dropped (and, if none
// expired, everything: the cache is an optimisation only).
const maxCached = 10000

func (a *Authenticator) pruneLocked() {
	now := a.now()
	prune(a.certs, now)
	prune(a.accts, now)
}

func prune[T any](m map[string]cached[T], now time.Time) {
	if len(m) < maxCached {
		return
	}
	for k, c := range m {
		if now.Sub(c.at) >= CacheTTL {
			delete(m, k)
		}
	}
	if len(m) >= maxCached {
		clear(m)
	}
}
