package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

// handshake runs a TLS 1.3 handshake on loopback between a server choosing its
// certificate with getCert (asking for a client certificate, as the gateway) and a
// client asking for serverName with clientCert; it returns the certificate served and
// how many certificates the client presented.
func handshake(t *testing.T, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), client *tls.Config) (*x509.Certificate, int) {
	t.Helper()
	raw, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: getCert, ClientAuth: tls.RequestClientCert})
	defer func() { _ = ln.Close() }()
	presented := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			presented <- -1
			return
		}
		defer func() { _ = c.Close() }()
		tc, ok := c.(*tls.Conn)
		if !ok {
			presented <- -1
			return
		}
		if err := tc.HandshakeContext(t.Context()); err != nil {
			presented <- -1
			return
		}
		presented <- len(tc.ConnectionState().PeerCertificates)
	}()
	conn, err := (&tls.Dialer{Config: client}).DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	tc, ok := conn.(*tls.Conn)
	if !ok {
		t.Fatalf("a %T from the TLS dialer", conn)
	}
	served := tc.ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	return served, <-presented
}

// TestServerCertificatesBySNI: the provider's own certificate for mtls.<host> (even
// under a configured wildcard), no name or names the configured certificate does not
// cover; the configured one for the names it covers; a client certificate always
// reaches the server.
func TestServerCertificatesBySNI(t *testing.T) {
	ownCert, err := auth.NewCertificate("akash1provider", []string{"provider.example.com", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	own := authtest.TLS(t, ownCert)
	ownX509 := x509Of(t, ownCert)
	l := authtest.NewLedger()
	tenant := authtest.NewTenant(t, l)
	clientCert := authtest.TLS(t, tenant.Register(t, l))
	ca := authtest.NewCAFiles(t, "provider.example.com", "*.provider.example.com")
	reloader, err := auth.NewReloader(ca.CertFile, ca.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	selfOnly, err := auth.NewServerCertificates(own, nil)
	if err != nil {
		t.Fatal(err)
	}
	withCA, err := auth.NewServerCertificates(own, reloader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		certs      *auth.ServerCertificates
		serverName string
		want       *x509.Certificate
	}{
		{"own: mtls.<host>", selfOnly, "mtls.provider.example.com", ownX509},
		{"own: <host>", selfOnly, "provider.example.com", ownX509},
		{"own: no name", selfOnly, "", ownX509},
		{"configured: mtls.<host> gets the ledger's", withCA, "mtls.provider.example.com", ownX509},
		{"configured: MTLS.<HOST> gets the ledger's", withCA, "MTLS.Provider.Example.COM", ownX509},
		{"configured: <host>", withCA, "provider.example.com", ca.Leaf},
		{"configured: <HOST>", withCA, "Provider.Example.com", ca.Leaf},
		{"configured: a name it covers", withCA, "gw.provider.example.com", ca.Leaf},
		{"configured: a name it does not cover", withCA, "other.example.com", ownX509},
		{"configured: no name", withCA, "", ownX509},
	} {
		t.Run(tt.name, func(t *testing.T) {
			served, presented := handshake(t, tt.certs.GetCertificate, &tls.Config{MinVersion: tls.VersionTLS13, ServerName: tt.serverName,
				InsecureSkipVerify: true, Certificates: []tls.Certificate{clientCert}})
			if !served.Equal(tt.want) {
				t.Fatalf("served %q (serial %s), want %q", served.Subject.CommonName, served.SerialNumber, tt.want.Subject.CommonName)
			}
			if presented != 1 {
				t.Fatalf("the server saw %d client certificates, want 1", presented)
			}
		})
	}
	// A client that trusts the CA and asks for <host> verifies the configured
	// certificate, as a browser or any CA-trusting tool does.
	served, _ := handshake(t, withCA.GetCertificate, &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "provider.example.com", RootCAs: ca.Pool})
	if !served.Equal(ca.Leaf) {
		t.Fatal("the CA-verified handshake got another certificate")
	}
	if _, err := auth.NewServerCertificates(tls.Certificate{}, reloader); err == nil {
		t.Fatal("no own certificate: accepted")
	}
}
