package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"berth.dev/berth/internal/ledger"
	"berth.dev/berth/internal/market"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const prefix = "akash"

type fakeLedger struct {
	certs map[string]ledger.Certificate
	accts map[string]ledger.Account
	calls int
	fail  error
}

func (f *fakeLedger) Certificate(_ context.Context, owner, serial string) (ledger.Certificate, error) {
	f.calls++
	if f.fail != nil {
		return ledger.Certificate{}, f.fail
	}
	c, ok := f.certs[owner+"/"+serial]
	if !ok {
		return c, ledger.ErrNotFound
	}
	return c, nil
}

func (f *fakeLedger) Account(_ context.Context, addr string) (ledger.Account, error) {
	f.calls++
	if f.fail != nil {
		return ledger.Account{}, f.fail
	}
	a, ok := f.accts[addr]
	if !ok {
		return a, ledger.ErrNotFound
	}
	return a, nil
}

type tenantKey struct {
	key  ledger.PrivKey
	addr string
}

func newTenant(t *testing.T, f *fakeLedger) tenantKey {
	t.Helper()
	k, err := ledger.NewPrivKey(ledger.KeySecp256k1)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := k.PubKey().Address(prefix)
	if err != nil {
		t.Fatal(err)
	}
	pk := k.PubKey()
	f.accts[addr] = ledger.Account{Address: addr, PubKey: &pk}
	return tenantKey{key: k, addr: addr}
}

func (tk tenantKey) register(t *testing.T, f *fakeLedger) *x509.Certificate {
	t.Helper()
	c, err := NewCertificate(tk.addr, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := c.Serial()
	if err != nil {
		t.Fatal(err)
	}
	f.certs[tk.addr+"/"+serial] = ledger.Certificate{Owner: tk.addr, Serial: serial, State: ledger.CertValid, Cert: c.Cert, PubKey: c.PubKey}
	x, err := c.X509()
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func newAuth(t *testing.T) (*Authenticator, *fakeLedger, *time.Time) {
	t.Helper()
	f := &fakeLedger{certs: map[string]ledger.Certificate{}, accts: map[string]ledger.Account{}}
	a, err := NewAuthenticator(f, prefix, "akash1provider")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.now = func() time.Time { return now }
	return a, f, &now
}

func TestClientCertificate(t *testing.T) {
	a, f, now := newAuth(t)
	ctx := t.Context()
	tk := newTenant(t, f)
	cert := tk.register(t, f)
	id, err := a.ClientCertificate(ctx, cert)
	if err != nil || id.Owner != tk.addr || id.Method != "mtls" {
		t.Fatalf("registered certificate: %+v %v", id, err)
	}
	lease := market.LeaseID{Owner: tk.addr, DSeq: 1, GSeq: 1, OSeq: 1}
	if !id.Allows(ScopeShell, lease) || id.Allows(ScopeShell, market.LeaseID{Owner: "akash1other", DSeq: 1}) {
		t.Fatal("a certificate gives full access to the owner's leases only")
	}

	// Cached: no second ledger read within CacheTTL.
	calls := f.calls
	if _, err := a.ClientCertificate(ctx, cert); err != nil || f.calls != calls {
		t.Fatalf("second use: %v, %d ledger calls", err, f.calls-calls)
	}
	// Revoked: refused once the cache entry is older than CacheTTL.
	serial := cert.SerialNumber.String()
	c := f.certs[tk.addr+"/"+serial]
	c.State = ledger.CertRevoked
	f.certs[tk.addr+"/"+serial] = c
	*now = now.Add(CacheTTL)
	if _, err := a.ClientCertificate(ctx, cert); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked: %v", err)
	}

	// Not registered; registered under that serial but a different certificate.
	other := newTenant(t, f)
	unregistered, err := NewCertificate(other.addr, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ux, _ := unregistered.X509()
	if _, err := a.ClientCertificate(ctx, ux); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("unregistered: %v", err)
	}
	impostor := other.register(t, f)
	forged, err := NewCertificate(other.addr, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fx, _ := forged.X509()
	fx.SerialNumber = impostor.SerialNumber
	if _, err := a.ClientCertificate(ctx, fx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not the one registered") {
		t.Fatalf("same serial, other certificate: %v", err)
	}
	// Expired; CN not an address; the ledger down (503, not 401).
	*now = now.Add(2 * time.Hour)
	if _, err := a.ClientCertificate(ctx, impostor); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "validity") {
		t.Fatalf("expired: %v", err)
	}
	*now = time.Now()
	bad, _ := NewCertificate("not-an-address", nil, time.Hour)
	bx, _ := bad.X509()
	if _, err := a.ClientCertificate(ctx, bx); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CN not an address: %v", err)
	}
	f.fail = errors.New("connection refused")
	if _, err := a.ClientCertificate(ctx, tk.register(t, f)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ledger down: %v", err)
	}
}

func claims(iss string, now time.Time, leases Leases) Claims {
	return Claims{Issuer: iss, IssuedAt: now.Unix(), NotBefore: now.Unix(), ExpiresAt: now.Add(15 * time.Minute).Unix(), Version: TokenVersion, Leases: leases}
}

func sign(t *testing.T, c Claims, k ledger.PrivKey) string {
	t.Helper()
	tok, err := SignToken(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestToken(t *testing.T) {
	a, f, now := newAuth(t)
	ctx := t.Context()
	tk := newTenant(t, f)
	mine := market.LeaseID{Owner: tk.addr, DSeq: 5, GSeq: 1, OSeq: 1}

	id, err := a.Token(ctx, sign(t, claims(tk.addr, *now, Leases{Access: AccessFull}), tk.key))
	if err != nil || id.Owner != tk.addr || !id.Allows(ScopeShell, mine) {
		t.Fatalf("full token: %+v %v", id, err)
	}
	// Scoped: only the listed scopes.
	id, err = a.Token(ctx, sign(t, claims(tk.addr, *now, Leases{Access: AccessScoped, Scope: []Scope{ScopeStatus, ScopeLogs}}), tk.key))
	if err != nil || !id.Allows(ScopeStatus, mine) || !id.Allows(ScopeLogs, mine) || id.Allows(ScopeShell, mine) {
		t.Fatalf("scoped token: %+v %v", id, err)
	}
	// Granular: this provider's permissions only, per deployment or lease.
	g := Leases{Access: AccessGranular, Permissions: []Permission{
		{Provider: "akash1else", Access: AccessFull},
		{Provider: "akash1provider", Access: AccessGranular, Deployments: []LeaseRef{
			{DSeq: 5, GSeq: 1, OSeq: 1, Scope: []Scope{ScopeShell}},
			{DSeq: 6, Scope: []Scope{ScopeStatus}},
		}},
	}}
	id, err = a.Token(ctx, sign(t, claims(tk.addr, *now, g), tk.key))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scope Scope
		lease market.LeaseID
		want  bool
	}{
		{ScopeShell, mine, true},
		{ScopeStatus, mine, false}, // the lease entry grants shell only
		{ScopeShell, market.LeaseID{Owner: tk.addr, DSeq: 5, GSeq: 2, OSeq: 1}, false},
		{ScopeShell, market.LeaseID{Owner: tk.addr, DSeq: 5}, false}, // a lease grant is not the deployment
		{ScopeStatus, market.LeaseID{Owner: tk.addr, DSeq: 6, GSeq: 3, OSeq: 1}, true},
		{ScopeStatus, market.LeaseID{Owner: tk.addr, DSeq: 6}, true},
		{ScopeStatus, market.LeaseID{Owner: tk.addr, DSeq: 7, GSeq: 1, OSeq: 1}, false},
		{ScopeStatus, market.LeaseID{Owner: "akash1other", DSeq: 6, GSeq: 1, OSeq: 1}, false},
	} {
		if got := id.Allows(c.scope, c.lease); got != c.want {
			t.Errorf("granular Allows(%s, %v) = %v, want %v", c.scope, c.lease, got, c.want)
		}
	}

	other := newTenant(t, f)
	expired := claims(tk.addr, now.Add(-time.Hour), Leases{Access: AccessFull})
	future := claims(tk.addr, now.Add(time.Hour), Leases{Access: AccessFull})
	noExp := claims(tk.addr, *now, Leases{Access: AccessFull})
	noExp.ExpiresAt = 0
	v2 := claims(tk.addr, *now, Leases{Access: AccessFull})
	v2.Version = "v2"
	aud := claims(tk.addr, *now, Leases{Access: AccessFull})
	aud.Audience = audience{"akash1else"}
	badScope := claims(tk.addr, *now, Leases{Access: AccessScoped, Scope: []Scope{"root"}})
	unknownAccess := claims(tk.addr, *now, Leases{Access: "admin"})
	stranger := newTenant(t, f)
	delete(f.accts, stranger.addr)
	noKey := claims(stranger.addr, *now, Leases{Access: AccessFull})
	for _, c := range []struct {
		name, token, want string
	}{
		{"expired", sign(t, expired, tk.key), "expired"},
		{"not yet valid", sign(t, future, tk.key), "not valid yet"},
		{"no expiry", sign(t, noExp, tk.key), "iat, nbf and exp"},
		{"version", sign(t, v2, tk.key), "version"},
		{"audience", sign(t, aud, tk.key), "another provider"},
		{"unknown scope", sign(t, badScope, tk.key), "unknown"},
		{"unknown access", sign(t, unknownAccess, tk.key), "access"},
		{"signed by another key", sign(t, claims(tk.addr, *now, Leases{Access: AccessFull}), other.key), "does not verify"},
		{"tampered", tamper(t, sign(t, claims(tk.addr, *now, Leases{Access: AccessScoped, Scope: []Scope{ScopeStatus}}), tk.key), tk.addr), "does not verify"},
		{"not a JWT", "abc", "header.claims.signature"},
		{"alg none", "eyJhbGciOiJub25lIn0.e30.", "algorithm"},
		{"no account", sign(t, noKey, stranger.key), "no account"},
	} {
		if _, err := a.Token(ctx, c.token); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// tamper swaps the claims for full access, keeping the signature.
func tamper(t *testing.T, tok, iss string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := json.Marshal(claims(iss, time.Now(), Leases{Access: AccessFull}))
	if err != nil {
		t.Fatal(err)
	}
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

func TestAuthenticateRequest(t *testing.T) {
	a, f, now := newAuth(t)
	tk := newTenant(t, f)
	r := httptest.NewRequest(http.MethodGet, "/lease/1/1/1/status", http.NoBody)
	if _, err := a.Authenticate(r); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no credentials: %v", err)
	}
	r.Header.Set("Authorization", "Basic abc")
	if _, err := a.Authenticate(r); !errors.Is(err, ErrInvalid) {
		t.Fatalf("basic auth: %v", err)
	}
	r.Header.Set("Authorization", "Bearer "+sign(t, claims(tk.addr, *now, Leases{Access: AccessFull}), tk.key))
	if id, err := a.Authenticate(r); err != nil || id.Owner != tk.addr {
		t.Fatalf("bearer: %+v %v", id, err)
	}
	cert := tk.register(t, f)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if _, err := a.Authenticate(r); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("certificate and bearer: %v", err)
	}
	r.Header.Del("Authorization")
	if id, err := a.Authenticate(r); err != nil || id.Method != "mtls" {
		t.Fatalf("certificate: %+v %v", id, err)
	}
	r.TLS.PeerCertificates = append(r.TLS.PeerCertificates, cert)
	if _, err := a.Authenticate(r); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a chain of certificates: %v", err)
	}
}
