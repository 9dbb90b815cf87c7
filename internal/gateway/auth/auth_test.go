package auth_test

import (
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

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newAuth(t *testing.T) (*auth.Authenticator, *authtest.Ledger, *time.Time) {
	t.Helper()
	l := authtest.NewLedger()
	a, err := auth.NewAuthenticator(l, authtest.Prefix, "akash1provider")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.SetClock(func() time.Time { return now })
	return a, l, &now
}

func x509Of(t *testing.T, c auth.Certificate) *x509.Certificate {
	t.Helper()
	x, err := c.X509()
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestClientCertificate(t *testing.T) {
	a, f, now := newAuth(t)
	ctx := t.Context()
	tk := authtest.NewTenant(t, f)
	cert := x509Of(t, tk.Register(t, f))
	id, err := a.ClientCertificate(ctx, cert)
	if err != nil || id.Owner != tk.Address || id.Method != "mtls" {
		t.Fatalf("registered certificate: %+v %v", id, err)
	}
	lease := market.LeaseID{Owner: tk.Address, DSeq: 1, GSeq: 1, OSeq: 1}
	if !id.Allows(auth.ScopeShell, lease) || id.Allows(auth.ScopeShell, market.LeaseID{Owner: "akash1other", DSeq: 1}) {
		t.Fatal("a certificate gives full access to the owner's leases only")
	}

	// Cached: no second ledger read within auth.CacheTTL.
	calls := f.Calls()
	if _, err := a.ClientCertificate(ctx, cert); err != nil || f.Calls() != calls {
		t.Fatalf("second use: %v, %d ledger calls", err, f.Calls()-calls)
	}
	// Revoked: refused once the cache entry is older than auth.CacheTTL.
	serial := cert.SerialNumber.String()
	f.Revoke(tk.Address, serial)
	*now = now.Add(auth.CacheTTL)
	if _, err := a.ClientCertificate(ctx, cert); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked: %v", err)
	}

	// Not registered; registered under that serial but a different certificate.
	other := authtest.NewTenant(t, f)
	unregistered, err := auth.NewCertificate(other.Address, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ux, _ := unregistered.X509()
	if _, err := a.ClientCertificate(ctx, ux); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("unregistered: %v", err)
	}
	impostor := x509Of(t, other.Register(t, f))
	forged, err := auth.NewCertificate(other.Address, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fx, _ := forged.X509()
	fx.SerialNumber = impostor.SerialNumber
	if _, err := a.ClientCertificate(ctx, fx); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "not the one registered") {
		t.Fatalf("same serial, other certificate: %v", err)
	}
	// Expired; CN not an address; the ledger down (503, not 401).
	*now = now.Add(2 * time.Hour)
	if _, err := a.ClientCertificate(ctx, impostor); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "validity") {
		t.Fatalf("expired: %v", err)
	}
	*now = time.Now()
	bad, _ := auth.NewCertificate("not-an-address", nil, time.Hour)
	bx, _ := bad.X509()
	if _, err := a.ClientCertificate(ctx, bx); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("CN not an address: %v", err)
	}
	f.Fail(errors.New("connection refused"))
	if _, err := a.ClientCertificate(ctx, x509Of(t, tk.Register(t, f))); !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("ledger down: %v", err)
	}
}

func claims(iss string, now time.Time, leases auth.Leases) auth.Claims {
	return auth.Claims{Issuer: iss, IssuedAt: now.Unix(), NotBefore: now.Unix(), ExpiresAt: now.Add(15 * time.Minute).Unix(), Version: auth.TokenVersion, Leases: leases}
}

func sign(t *testing.T, c auth.Claims, k ledger.PrivKey) string {
	t.Helper()
	tok, err := auth.SignToken(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestToken(t *testing.T) {
	a, f, now := newAuth(t)
	ctx := t.Context()
	tk := authtest.NewTenant(t, f)
	mine := market.LeaseID{Owner: tk.Address, DSeq: 5, GSeq: 1, OSeq: 1}

	id, err := a.Token(ctx, sign(t, claims(tk.Address, *now, auth.Leases{Access: auth.AccessFull}), tk.Key))
	if err != nil || id.Owner != tk.Address || !id.Allows(auth.ScopeShell, mine) {
		t.Fatalf("full token: %+v %v", id, err)
	}
	// Scoped: only the listed scopes.
	id, err = a.Token(ctx, sign(t, claims(tk.Address, *now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeStatus, auth.ScopeLogs}}), tk.Key))
	if err != nil || !id.Allows(auth.ScopeStatus, mine) || !id.Allows(auth.ScopeLogs, mine) || id.Allows(auth.ScopeShell, mine) {
		t.Fatalf("scoped token: %+v %v", id, err)
	}
	// Akash's attestation scope is known (no route uses it): the token stays valid.
	id, err = a.Token(ctx, sign(t, claims(tk.Address, *now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeAttestation, auth.ScopeLogs}}), tk.Key))
	if err != nil || !id.Allows(auth.ScopeLogs, mine) || id.Allows(auth.ScopeShell, mine) {
		t.Fatalf("a token with the attestation scope: %+v %v", id, err)
	}
	// Granular: this provider's permissions only, per deployment or lease.
	g := auth.Leases{Access: auth.AccessGranular, Permissions: []auth.Permission{
		{Provider: "akash1else", Access: auth.AccessFull},
		{Provider: "akash1provider", Access: auth.AccessGranular, Deployments: []auth.LeaseRef{
			{DSeq: 5, GSeq: 1, OSeq: 1, Scope: []auth.Scope{auth.ScopeShell}},
			{DSeq: 6, Scope: []auth.Scope{auth.ScopeStatus}},
		}},
	}}
	id, err = a.Token(ctx, sign(t, claims(tk.Address, *now, g), tk.Key))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scope auth.Scope
		lease market.LeaseID
		want  bool
	}{
		{auth.ScopeShell, mine, true},
		{auth.ScopeStatus, mine, false}, // the lease entry grants shell only
		{auth.ScopeShell, market.LeaseID{Owner: tk.Address, DSeq: 5, GSeq: 2, OSeq: 1}, false},
		{auth.ScopeShell, market.LeaseID{Owner: tk.Address, DSeq: 5}, false}, // a lease grant is not the deployment
		{auth.ScopeStatus, market.LeaseID{Owner: tk.Address, DSeq: 6, GSeq: 3, OSeq: 1}, true},
		{auth.ScopeStatus, market.LeaseID{Owner: tk.Address, DSeq: 6}, true},
		{auth.ScopeStatus, market.LeaseID{Owner: tk.Address, DSeq: 7, GSeq: 1, OSeq: 1}, false},
		{auth.ScopeStatus, market.LeaseID{Owner: "akash1other", DSeq: 6, GSeq: 1, OSeq: 1}, false},
	} {
		if got := id.Allows(c.scope, c.lease); got != c.want {
			t.Errorf("granular Allows(%s, %v) = %v, want %v", c.scope, c.lease, got, c.want)
		}
	}

	other := authtest.NewTenant(t, f)
	expired := claims(tk.Address, now.Add(-time.Hour), auth.Leases{Access: auth.AccessFull})
	future := claims(tk.Address, now.Add(time.Hour), auth.Leases{Access: auth.AccessFull})
	noExp := claims(tk.Address, *now, auth.Leases{Access: auth.AccessFull})
	noExp.ExpiresAt = 0
	v2 := claims(tk.Address, *now, auth.Leases{Access: auth.AccessFull})
	v2.Version = "v2"
	aud := claims(tk.Address, *now, auth.Leases{Access: auth.AccessFull})
	aud.Audience = []string{"akash1else"}
	badScope := claims(tk.Address, *now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{"root"}})
	unknownAccess := claims(tk.Address, *now, auth.Leases{Access: "admin"})
	stranger := authtest.NewTenant(t, f)
	f.Forget(stranger.Address)
	noKey := claims(stranger.Address, *now, auth.Leases{Access: auth.AccessFull})
	for _, c := range []struct {
		name, token, want string
	}{
		{"expired", sign(t, expired, tk.Key), "expired"},
		{"not yet valid", sign(t, future, tk.Key), "not valid yet"},
		{"no expiry", sign(t, noExp, tk.Key), "iat, nbf and exp"},
		{"version", sign(t, v2, tk.Key), "version"},
		{"audience", sign(t, aud, tk.Key), "another provider"},
		{"unknown scope", sign(t, badScope, tk.Key), "unknown"},
		{"unknown access", sign(t, unknownAccess, tk.Key), "access"},
		{"signed by another key", sign(t, claims(tk.Address, *now, auth.Leases{Access: auth.AccessFull}), other.Key), "does not verify"},
		{"tampered", tamper(t, sign(t, claims(tk.Address, *now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeStatus}}), tk.Key), tk.Address), "does not verify"},
		{"not a JWT", "abc", "header.claims.signature"},
		{"alg none", "eyJhbGciOiJub25lIn0.e30.", "algorithm"},
		{"no account", sign(t, noKey, stranger.Key), "no account"},
	} {
		if _, err := a.Token(ctx, c.token); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// tamper swaps the claims for full access, keeping the signature.
func tamper(t *testing.T, tok, iss string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := json.Marshal(claims(iss, time.Now(), auth.Leases{Access: auth.AccessFull}))
	if err != nil {
		t.Fatal(err)
	}
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

func TestAuthenticateRequest(t *testing.T) {
	a, f, now := newAuth(t)
	tk := authtest.NewTenant(t, f)
	r := httptest.NewRequest(http.MethodGet, "/lease/1/1/1/status", http.NoBody)
	if _, err := a.Authenticate(r); !errors.Is(err, auth.ErrNoCredentials) {
		t.Fatalf("no credentials: %v", err)
	}
	r.Header.Set("Authorization", "Basic abc")
	if _, err := a.Authenticate(r); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("basic auth: %v", err)
	}
	r.Header.Set("Authorization", "Bearer "+sign(t, claims(tk.Address, *now, auth.Leases{Access: auth.AccessFull}), tk.Key))
	if id, err := a.Authenticate(r); err != nil || id.Owner != tk.Address {
		t.Fatalf("bearer: %+v %v", id, err)
	}
	cert := x509Of(t, tk.Register(t, f))
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if _, err := a.Authenticate(r); !errors.Is(err, auth.ErrAmbiguous) {
		t.Fatalf("certificate and bearer: %v", err)
	}
	r.Header.Del("Authorization")
	if id, err := a.Authenticate(r); err != nil || id.Method != "mtls" {
		t.Fatalf("certificate: %+v %v", id, err)
	}
	r.TLS.PeerCertificates = append(r.TLS.PeerCertificates, cert)
	if _, err := a.Authenticate(r); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("a chain of certificates: %v", err)
	}
}
