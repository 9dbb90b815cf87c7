// Package authtest provides an in-memory ledger of accounts and certificates and
// tenant keys, for testing code that authenticates tenants without a ledger node.
// Tests of the ledger adapter itself use the real node.
package authtest

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/gateway/auth"
)

// Prefix is the address prefix of the keys made here.
const Prefix = "akash"

// Ledger is an in-memory auth.Ledger. Fail, when set, fails every query.
type Ledger struct {
	mu    sync.Mutex
	certs map[string]ledger.Certificate
	accts map[string]ledger.Account
	calls int
	fail  error
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{certs: map[string]ledger.Certificate{}, accts: map[string]ledger.Account{}}
}

// Certificate implements auth.Ledger.
func (l *Ledger) Certificate(_ context.Context, owner, serial string) (ledger.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.fail != nil {
		return ledger.Certificate{}, l.fail
	}
	c, ok := l.certs[owner+"/"+serial]
	if !ok {
		return c, ledger.ErrNotFound
	}
	return c, nil
}

// Account implements auth.Ledger.
func (l *Ledger) Account(_ context.Context, addr string) (ledger.Account, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.fail != nil {
		return ledger.Account{}, l.fail
	}
	a, ok := l.accts[addr]
	if !ok {
		return a, ledger.ErrNotFound
	}
	return a, nil
}

// Calls counts the queries answered.
func (l *Ledger) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// Fail makes every query fail with err (nil: answer again).
func (l *Ledger) Fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// Forget removes an account.
func (l *Ledger) Forget(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.accts, addr)
}

// AddAccount records an account with a known public key (a published test vector's,
// say) and returns its address.
func (l *Ledger) AddAccount(t testing.TB, pk ledger.PubKey) string {
	t.Helper()
	addr, err := pk.Address(Prefix)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.accts[addr] = ledger.Account{Address: addr, PubKey: &pk}
	l.mu.Unlock()
	return addr
}

// Revoke marks a certificate revoked.
func (l *Ledger) Revoke(owner, serial string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.certs[owner+"/"+serial]
	c.State = ledger.CertRevoked
	l.certs[owner+"/"+serial] = c
}

// Tenant is an account with a secp256k1 key, known to a Ledger.
type Tenant struct {
	Key     ledger.PrivKey
	Address string
}

// NewTenant makes an account and records its public key on l.
func NewTenant(t testing.TB, l *Ledger) Tenant {
	t.Helper()
	k, err := ledger.NewPrivKey(ledger.KeySecp256k1)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := k.PubKey().Address(Prefix)
	if err != nil {
		t.Fatal(err)
	}
	pk := k.PubKey()
	l.mu.Lock()
	l.accts[addr] = ledger.Account{Address: addr, PubKey: &pk}
	l.mu.Unlock()
	return Tenant{Key: k, Address: addr}
}

// Register makes a client certificate for the tenant and records it on l.
func (tn Tenant) Register(t testing.TB, l *Ledger) auth.Certificate {
	t.Helper()
	c, err := auth.NewCertificate(tn.Address, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tn.RegisterCertificate(t, l, c)
	return c
}

// RegisterCertificate records c on l as the tenant's (valid), whatever it holds.
func (tn Tenant) RegisterCertificate(t testing.TB, l *Ledger, c auth.Certificate) {
	t.Helper()
	serial, err := c.Serial()
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.certs[tn.Address+"/"+serial] = ledger.Certificate{Owner: tn.Address, Serial: serial, State: ledger.CertValid, Cert: c.Cert, PubKey: c.PubKey}
	l.mu.Unlock()
}

// TLS is the certificate for a client's tls.Config.
func TLS(t testing.TB, c auth.Certificate) tls.Certificate {
	t.Helper()
	tc, err := c.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// Token signs an ES256K token for the tenant, valid from now for 15 minutes, with
// leases.
func (tn Tenant) Token(t testing.TB, now time.Time, leases auth.Leases) string {
	t.Helper()
	tok, err := auth.SignToken(tn.claims(now, leases), tn.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// WalletToken signs the ES256KADR36 token a browser wallet makes for the tenant, valid
// from now for 15 minutes, with leases.
func (tn Tenant) WalletToken(t testing.TB, now time.Time, leases auth.Leases) string {
	t.Helper()
	tok, err := auth.SignTokenADR36(tn.claims(now, leases), tn.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (tn Tenant) claims(now time.Time, leases auth.Leases) auth.Claims {
	return auth.Claims{Issuer: tn.Address, IssuedAt: now.Unix(), NotBefore: now.Unix(),
		ExpiresAt: now.Add(15 * time.Minute).Unix(), Version: auth.TokenVersion, Leases: leases}
}
