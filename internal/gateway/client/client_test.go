package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const provider = "akash1provider"

// server serves cert and answers every request with code and body, recording the
// Authorization header.
func server(t *testing.T, cert auth.Certificate, code int, body string, gotAuth *string) *httptest.Server {
	t.Helper()
	tc := authtest.TLS(t, cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*gotAuth = r.Header.Get("Authorization")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{tc}, MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// parties are a tenant (on a ledger of the test's) and the provider's own certificate
// (for 127.0.0.1) with its serial.
func parties(t *testing.T) (authtest.Tenant, auth.Certificate, string) {
	t.Helper()
	tenant := authtest.NewTenant(t, authtest.NewLedger())
	own, err := auth.NewCertificate(provider, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := own.Serial()
	return tenant, own, serial
}

func TestProviderCertificateChecks(t *testing.T) {
	tenant, own, serial := parties(t)
	registered := map[string]ledger.Certificate{serial: {Owner: provider, Serial: serial, State: ledger.CertValid, Cert: own.Cert}}
	lookup := func(_ context.Context, owner, s string) (ledger.Certificate, error) {
		c, ok := registered[s]
		if !ok || owner != provider {
			return ledger.Certificate{}, ledger.ErrNotFound
		}
		return c, nil
	}
	var gotAuth string
	newClient := func(srv *httptest.Server) *Client {
		c, err := New(Options{HostURI: srv.URL, Provider: provider, Certs: lookup, Signer: tenant.Key, Tenant: tenant.Address})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.http.CloseIdleConnections)
		return c
	}

	// The provider's registered certificate: accepted, with a bearer token sent.
	ok := newClient(server(t, own, 200, `{"address":"akash1provider"}`, &gotAuth))
	if _, err := ok.Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tok, found := strings.CutPrefix(gotAuth, "Bearer "); !found {
		t.Fatalf("authorization %q", gotAuth)
	} else if pt, err := auth.ParseToken(tok); err != nil || pt.Claims.Issuer != tenant.Address || pt.Claims.ExpiresAt-pt.Claims.IssuedAt != int64(TokenTTL/time.Second) ||
		len(pt.Claims.Audience) != 1 || pt.Claims.Audience[0] != provider {
		t.Fatalf("token claims %+v %v", pt.Claims, err)
	}

	// A certificate for another address, one not registered, one revoked: refused.
	other, _ := auth.NewCertificate("akash1someoneelse", []string{"127.0.0.1"}, time.Hour)
	unregistered, _ := auth.NewCertificate(provider, []string{"127.0.0.1"}, time.Hour)
	for name, cert := range map[string]auth.Certificate{"another address": other, "unregistered": unregistered} {
		c := newClient(server(t, cert, 200, `{}`, &gotAuth))
		if _, err := c.Status(t.Context()); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	revoked := registered[serial]
	revoked.State = ledger.CertRevoked
	registered[serial] = revoked
	if _, err := newClient(server(t, own, 200, `{}`, &gotAuth)).Status(t.Context()); err == nil || !strings.Contains(err.Error(), "not the valid certificate") {
		t.Fatalf("revoked: %v", err)
	}
	revoked.State = ledger.CertValid
	registered[serial] = revoked

	// A refusal carries the status and the gateway's message.
	c := newClient(server(t, own, 422, `{"message":"[0].name: bad"}`, &gotAuth))
	err := c.SendManifest(t.Context(), 5, market.Manifest{})
	var re *ResponseError
	if !errors.As(err, &re) || re.Status != 422 || re.Message != "[0].name: bad" {
		t.Fatalf("refusal: %v", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	lookup := func(context.Context, string, string) (ledger.Certificate, error) { return ledger.Certificate{}, nil }
	for _, o := range []Options{
		{HostURI: "http://p:8443", Provider: provider, Certs: lookup, ClientCert: &tls.Certificate{}},
		{HostURI: "https://p:8443", Certs: lookup, ClientCert: &tls.Certificate{}},
		{HostURI: "https://p:8443", Provider: provider, Certs: lookup},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// newRetryClient returns a client of a TLS server answering with handle, and the
// failed attempts its OnRetry was told of.
func newRetryClient(t *testing.T, handle http.HandlerFunc) (*Client, *atomic.Int32) {
	t.Helper()
	tenant, own, serial := parties(t)
	srv := httptest.NewUnstartedServer(handle)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{authtest.TLS(t, own)}, MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	var retries atomic.Int32
	c, err := New(Options{HostURI: srv.URL, Provider: provider, Signer: tenant.Key, Tenant: tenant.Address,
		Certs: func(context.Context, string, string) (ledger.Certificate, error) {
			return ledger.Certificate{Owner: provider, Serial: serial, State: ledger.CertValid, Cert: own.Cert}, nil
		},
		OnRetry: func(int, error, time.Duration) { retries.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	c.pauseFirst, c.pauseLongest = time.Millisecond, 10*time.Millisecond
	t.Cleanup(c.http.CloseIdleConnections)
	return c, &retries
}

// TestRequestsRetried: a provider that cannot answer — 500, 502, 503, 504, a
// connection cut before the answer — is asked again, the manifest and status alike;
// a 4xx is the tenant's error, returned at once.
func TestRequestsRetried(t *testing.T) {
	failures := []func(w http.ResponseWriter){
		// The connection closed, no answer. (First, on a new connection: Go's transport
		// itself makes a GET again when a reused connection fails this way.)
		func(http.ResponseWriter) { panic(http.ErrAbortHandler) },
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) },
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout) },
	}
	for _, call := range []struct {
		name string
		do   func(*Client) error
	}{
		{"manifest", func(c *Client) error { return c.SendManifest(t.Context(), 5, market.Manifest{}) }},
		{"status", func(c *Client) error {
			_, err := c.LeaseStatus(t.Context(), market.LeaseID{Owner: "akash1tenant", DSeq: 5, GSeq: 1, OSeq: 1, Provider: provider})
			return err
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			var calls atomic.Int32
			c, retries := newRetryClient(t, func(w http.ResponseWriter, _ *http.Request) {
				if n := int(calls.Add(1)); n <= len(failures) {
					failures[n-1](w)
					return
				}
				_, _ = w.Write([]byte(`{}`))
			})
			if err := call.do(c); err != nil || calls.Load() != int32(len(failures)+1) || retries.Load() != int32(len(failures)) {
				t.Fatalf("after %d failures: %v (%d calls, %d retries)", len(failures), err, calls.Load(), retries.Load())
			}
		})
	}
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity} {
		var calls atomic.Int32
		c, retries := newRetryClient(t, func(w http.ResponseWriter, _ *http.Request) {
			calls.Add(1)
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"message":"refused"}`))
		})
		err := c.SendManifest(t.Context(), 5, market.Manifest{})
		var re *ResponseError
		if !errors.As(err, &re) || re.Status != code || calls.Load() != 1 || retries.Load() != 0 {
			t.Fatalf("%d: %v (%d calls, %d retries)", code, err, calls.Load(), retries.Load())
		}
	}
}

// TestRetriesEndWithTheContext: retries stop when the caller's context ends, with
// the provider's last answer in the error.
func TestRetriesEndWithTheContext(t *testing.T) {
	c, retries := newRetryClient(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"message":"the provider is starting; try again shortly"}`))
	})
	ctx, cancel := context.WithCancel(t.Context())
	c.opts.OnRetry = func(n int, _ error, _ time.Duration) {
		retries.Add(1)
		if n == 3 {
			cancel()
		}
	}
	err := c.SendManifest(ctx, 5, market.Manifest{})
	var re *ResponseError
	if !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable || !errors.Is(err, context.Canceled) || retries.Load() != 3 {
		t.Fatalf("%v (%d retries)", err, retries.Load())
	}
}
