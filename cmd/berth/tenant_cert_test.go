package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
	"berth.dev/berth/internal/testenv"
)

// TestTenantCertFromPEM registers certificates made elsewhere through the CLI against
// an in-process ledger node: each bad file is refused with what was wrong and where,
// before anything is sent and with nothing kept; a file Akash's tools wrote is
// registered and kept with its decrypted key like a made one; a file without a key is
// registered only; running again is safe.
func TestTenantCertFromPEM(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	cli, must := cliWith(t, "--home", l.Home(), "--node", l.RPC())
	tenantKey, err := l.Keys.Signer("tenant")
	if err != nil {
		t.Fatal(err)
	}
	providerKey, err := l.Keys.Signer("provider")
	if err != nil {
		t.Fatal(err)
	}
	tenant := l.Address(t, "tenant")
	files := t.TempDir()
	n := 0
	write := func(data []byte) string {
		t.Helper()
		n++
		name := filepath.Join(files, fmt.Sprintf("cert-%d.pem", n))
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return name
	}
	akash := func(s ledger.Signer, o authtest.AkashOptions) []byte {
		t.Helper()
		return authtest.AkashPEM(t, s, ledger.DefaultAddressPrefix, o)
	}
	kept := certDir(l.Home(), "tenant")
	nothingKept := func(t *testing.T, dir string) {
		t.Helper()
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v, want nothing kept", dir, err)
		}
	}
	registered := func() string { return must("tenant", "cert", "list") }
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	good, other := akash(tenantKey, authtest.AkashOptions{}), akash(tenantKey, authtest.AkashOptions{})
	splitAt, otherAt := bytes.Index(good, []byte("-----BEGIN ENCRYPTED")), bytes.Index(other, []byte("-----BEGIN ENCRYPTED"))
	if splitAt < 0 || otherAt < 0 {
		t.Fatal("Akash's file has no ENCRYPTED PRIVATE KEY block")
	}
	now := time.Now()

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no such file", []string{"--from-pem", filepath.Join(files, "missing.pem")}, 1, "--from-pem: open"},
		{"not PEM", []string{"--from-pem", write([]byte("just text\n"))}, 1, "no PEM block"},
		{"another account's certificate", []string{"--from-pem", write(akash(providerKey, authtest.AkashOptions{}))}, 1,
			"the certificate is for \"" + l.Address(t, "provider") + "\", not the signing key's address " + tenant},
		{"a key the account's key does not decrypt", []string{"--from-pem", write(akash(tenantKey, authtest.AkashOptions{Encrypt: []byte("another password")}))}, 1,
			"line 13: ENCRYPTED PRIVATE KEY: the key is encrypted and the signing key does not decrypt it"},
		{"another account's certificate, key unencrypted", []string{"--from-pem", write(akash(providerKey, authtest.AkashOptions{Plain: true}))}, 1,
			"certificate: subject CN \"" + l.Address(t, "provider") + "\" is not the signing key's address " + tenant},
		{"expired", []string{"--from-pem", write(akash(tenantKey, authtest.AkashOptions{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}))}, 1, "certificate: expired at"},
		{"not yet valid", []string{"--from-pem", write(akash(tenantKey, authtest.AkashOptions{NotBefore: now.Add(24 * time.Hour)}))}, 1, "certificate: not valid before"},
		{"not for client auth", []string{"--from-pem", write(akash(tenantKey, authtest.AkashOptions{Edit: func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}}))}, 1, "line 1: certificate: extended key usage [\"server auth\"]: not for client authentication"},
		{"wrong curve", []string{"--from-pem", write(akash(tenantKey, authtest.AkashOptions{Key: p384}))}, 1, "line 1: certificate: ECDSA key on P-384: want P-256"},
		{"key of another certificate", []string{"--from-pem", write(append(good[:splitAt:splitAt], other[otherAt:]...))}, 1,
			"ENCRYPTED PRIVATE KEY: the private key is not the certificate's"},
		{"--valid", []string{"--from-pem", write(good), "--valid", "1h"}, 2, "--valid is for a certificate berth makes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := cli(append([]string{"tenant", "cert", "create"}, tt.args...)...)
			if got := exitCode(err); got != tt.code || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("exit %d, error %v (output %q); want exit %d with %q", got, err, out, tt.code, tt.want)
			}
			t.Log(err)
			if tt.code == 1 && tt.name != "no such file" && !strings.Contains(err.Error(), files) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			nothingKept(t, kept)
		})
	}
	if out := registered(); strings.Contains(out, "valid") {
		t.Fatalf("refused files registered certificates:\n%s", out)
	}

	// A key the ledger does not know (never funded): the ledger refuses the
	// transaction and nothing is kept.
	if out, err := run(t, "keys", "add", "newcomer", "--home", l.Home()); err != nil {
		t.Fatalf("keys add: %v\n%s", err, out)
	}
	newcomerKey, err := l.Keys.Signer("newcomer")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cli("tenant", "cert", "create", "--from", "newcomer", "--from-pem", write(akash(newcomerKey, authtest.AkashOptions{}))); exitCode(err) != 1 ||
		!strings.Contains(err.Error(), "register certificate") || !strings.Contains(err.Error(), "nothing was kept") {
		t.Fatalf("refused by the ledger: %v\n%s", err, out)
	} else {
		t.Log(err)
	}
	nothingKept(t, certDir(l.Home(), "newcomer"))

	// The file Akash's tools write: registered, kept with the key decrypted.
	goodFile := write(good)
	out := must("tenant", "cert", "create", "--from-pem", goodFile)
	serial := strings.Fields(out)[1]
	if !strings.Contains(out, "registered in block") || !strings.Contains(out, "saved in "+kept) {
		t.Fatalf("create --from-pem: %s", out)
	}
	if out := registered(); !strings.Contains(out, serial) || !strings.Contains(out, "valid") {
		t.Fatalf("not on the ledger:\n%s", out)
	}
	for name, mode := range map[string]os.FileMode{"": 0o700, auth.CertFile: 0o644, auth.KeyFile: 0o600} {
		if st, err := os.Stat(filepath.Join(kept, name)); err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v %v, want mode %o (as for a made certificate)", name, st, err, mode)
		}
	}
	c, err := auth.LoadCertificate(filepath.Join(kept, auth.CertFile), filepath.Join(kept, auth.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if x, err := c.X509(); err != nil || x.SerialNumber.String() != serial || !bytes.Equal(x.Raw, derOf(t, good)) {
		t.Fatalf("kept certificate: %v", err)
	}
	if b, _ := pem.Decode(c.Key); b == nil || b.Type != "EC PRIVATE KEY" || len(b.Headers) != 0 {
		t.Fatal("the key is not kept as an unencrypted EC PRIVATE KEY")
	}

	// Again: nothing new to do, said so.
	if out := must("tenant", "cert", "create", "--from-pem", goodFile); !strings.Contains(out, "certificate "+serial+" was already registered, saved in") {
		t.Fatalf("second run: %s", out)
	}
	// Another certificate (a 2022 file) does not replace the kept one without --force.
	legacy := write(akash(tenantKey, authtest.AkashOptions{Legacy: true}))
	if out, err := cli("tenant", "cert", "create", "--from-pem", legacy); exitCode(err) != 2 || !strings.Contains(err.Error(), "already holds another certificate") {
		t.Fatalf("replace without --force: %v\n%s", err, out)
	}
	var res struct {
		Serial            string
		Height            int64
		AlreadyRegistered bool `json:"already_registered"`
		Dir               string
	}
	if err := json.Unmarshal([]byte(must("tenant", "cert", "create", "--from-pem", legacy, "--force", "-o", "json")), &res); err != nil ||
		res.Height == 0 || res.AlreadyRegistered || res.Dir != kept || res.Serial == serial {
		t.Fatalf("replace with --force: %+v %v", res, err)
	}

	// A file with the certificate alone: registered, nothing kept (the kept one stays).
	certOnly := akash(tenantKey, authtest.AkashOptions{})
	certOnlyAt := bytes.Index(certOnly, []byte("-----BEGIN ENCRYPTED"))
	out = must("tenant", "cert", "create", "--from-pem", write(certOnly[:certOnlyAt]))
	if !strings.Contains(out, "has no private key, so nothing is kept") {
		t.Fatalf("no key: %s", out)
	}
	if c2, err := auth.LoadCertificate(filepath.Join(kept, auth.CertFile), filepath.Join(kept, auth.KeyFile)); err != nil {
		t.Fatal(err)
	} else if s2, _ := c2.Serial(); s2 != res.Serial {
		t.Fatalf("kept %s, want %s still", s2, res.Serial)
	}
	// The same certificate with its key later (a run whose save failed, run again):
	// kept without registering it twice.
	if out := must("tenant", "cert", "create", "--from-pem", write(certOnly), "--force"); !strings.Contains(out, "was already registered, saved in") {
		t.Fatalf("the key after the certificate: %s", out)
	}
	// A revoked certificate cannot come back.
	must("tenant", "cert", "revoke", res.Serial)
	if out, err := cli("tenant", "cert", "create", "--from-pem", legacy, "--force"); exitCode(err) != 1 || !strings.Contains(err.Error(), "is revoked on the ledger") {
		t.Fatalf("revoked: %v\n%s", err, out)
	}
}

// derOf is the first PEM block's content.
func derOf(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	return b.Bytes
}

// TestGatewayCertFileMTLS runs a provider whose gateway serves a CA's certificate
// (gateway.cert_file): a client asking for mtls.<host> gets the provider's own
// certificate, registered on the ledger all the same, and one asking for <host> the
// configured one; the tenant CLI, which asks for mtls.<host> with a client
// certificate, trusts the gateway and is authenticated with a certificate Akash's
// tools made, registered with --from-pem.
func TestGatewayCertFileMTLS(t *testing.T) {
	k, l, dir, sdlFile := gatewayTestbed(t, "cli-certfile-1")
	attrFile := filepath.Join(dir, "attributes.yaml")
	if err := os.WriteFile(attrFile, []byte("attributes:\n  - key: region\n    value: us-west\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli, must := cliWith(t, "--home", l.Home(), "--node", l.RPC())
	must("provider", "register", "--host-uri", "https://127.0.0.1:1", "--attributes-file", attrFile)
	const host = "provider.test"
	ca := authtest.NewCAFiles(t, host)
	p := runProvider(t, l, k, dir, fmt.Sprintf(", cert_file: %q, key_file: %q", ca.CertFile, ca.KeyFile))
	must("provider", "register", "--host-uri", "https://"+p.Gateway(), "--attributes-file", attrFile)
	providerReady(t, p)
	provider := l.Address(t, "provider")

	served := func(serverName string, roots *x509.CertPool) (*x509.Certificate, error) {
		t.Helper()
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: serverName, RootCAs: roots, InsecureSkipVerify: roots == nil}
		conn, err := (&tls.Dialer{Config: cfg}).DialContext(t.Context(), "tcp", p.Gateway())
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		tc, ok := conn.(*tls.Conn)
		if !ok {
			return nil, fmt.Errorf("a %T", conn)
		}
		return tc.ConnectionState().PeerCertificates[0], nil
	}
	own, err := served("mtls."+host, nil)
	if err != nil || own.Subject.CommonName != provider {
		t.Fatalf("mtls.%s: served %v (%v), want the provider's own certificate", host, own.Subject, err)
	}
	testenv.Eventually(t, 30*time.Second, "the provider's own certificate on the ledger", func() bool {
		out, err := cli("tenant", "cert", "list", "--from", "provider")
		return err == nil && strings.Contains(out, own.SerialNumber.String()) && strings.Contains(out, "valid")
	})
	if c, err := served(host, ca.Pool); err != nil || !c.Equal(ca.Leaf) {
		t.Fatalf("%s: %v, want the configured certificate, verified by its CA", host, err)
	}
	if c, err := served("", nil); err != nil || !c.Equal(own) {
		t.Fatalf("no server name: %v, want the provider's own certificate", err)
	}

	tenantKey, err := l.Keys.Signer("tenant")
	if err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(dir, l.Address(t, "tenant")+".pem")
	if err := os.WriteFile(pemFile, authtest.AkashPEM(t, tenantKey, ledger.DefaultAddressPrefix, authtest.AkashOptions{}), 0o600); err != nil {
		t.Fatal(err)
	}
	must("tenant", "cert", "create", "--from-pem", pemFile)
	must("tenant", "deployment", "create", sdlFile, "--dseq", "9")
	testenv.Eventually(t, 30*time.Second, "the provider's bid", func() bool {
		out, err := cli("tenant", "bids", "9")
		return err == nil && strings.Contains(out, provider)
	})
	must("tenant", "lease", "create", "9/1/1", "--provider", provider)
	if out := must("tenant", "send-manifest", sdlFile, "9", "--auth", "cert"); !strings.Contains(out, "manifest sent to "+provider) {
		t.Fatalf("send-manifest with the certificate: %s", out)
	}
	if out := must("tenant", "lease", "status", "9", "--auth", "cert"); !strings.Contains(out, "lease 9/1/1 on "+provider) {
		t.Fatalf("lease status with the certificate: %s", out)
	}
	must("tenant", "deployment", "close", "9")
}
