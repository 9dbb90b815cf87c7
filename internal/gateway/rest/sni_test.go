package rest

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"
	"time"

	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

// TestMTLSServerName: a tenant's tool that asks for mtls.<host> (as Akash's and
// berth's do when they authenticate with a client certificate) is served the
// provider's own certificate and authenticated by its registered client certificate,
// whether the provider serves only its self-made certificate or also one from
// gateway.cert_file; asking for <host> gets the configured certificate, which a
// client trusting its CA verifies, and the client certificate still authenticates.
func TestMTLSServerName(t *testing.T) {
	const host = "provider.example.com"
	ca := authtest.NewCAFiles(t, host)
	certs := func(configured bool) func(tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return func(own tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			var r *auth.Reloader
			if configured {
				var err error
				if r, err = auth.NewReloader(ca.CertFile, ca.KeyFile); err != nil {
					t.Fatal(err)
				}
			}
			s, err := auth.NewServerCertificates(own, r)
			if err != nil {
				t.Fatal(err)
			}
			return s.GetCertificate
		}
	}
	for _, tt := range []struct {
		name       string
		configured bool
		serverName string
		roots      *x509.CertPool // nil: the test compares the served certificate itself
		wantCA     bool
	}{
		{"self-made certificate, mtls.<host>", false, "mtls." + host, nil, false},
		{"gateway.cert_file, mtls.<host>", true, "mtls." + host, nil, false},
		{"gateway.cert_file, <host> verified by its CA", true, host, ca.Pool, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, certs(tt.configured))
			own, err := x509.ParseCertificate(e.ca.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			clientCert := authtest.TLS(t, e.owner.Register(t, e.ledger))
			get := func(withCert bool) (*x509.Certificate, int) {
				t.Helper()
				cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: tt.serverName, RootCAs: tt.roots, InsecureSkipVerify: tt.roots == nil}
				if withCert {
					cfg.Certificates = []tls.Certificate{clientCert}
				}
				c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
				defer c.CloseIdleConnections()
				req, err := http.NewRequestWithContext(t.Context(), "GET", e.url+"/lease/7/1/1/status", http.NoBody)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.TLS.PeerCertificates[0], resp.StatusCode
			}
			served, code := get(true)
			switch {
			case tt.wantCA && !served.Equal(ca.Leaf):
				t.Fatalf("served %q, want the configured certificate", served.Subject.CommonName)
			case !tt.wantCA && !served.Equal(own):
				t.Fatalf("served %q (serial %s), want the provider's own certificate", served.Subject.CommonName, served.SerialNumber)
			case code != http.StatusOK:
				t.Fatalf("with the registered client certificate: %d, want 200", code)
			}
			if _, code := get(false); code != http.StatusUnauthorized {
				t.Fatalf("without credentials: %d, want 401", code)
			}
		})
	}
}
