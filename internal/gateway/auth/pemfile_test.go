package auth_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

// fixturePassword encrypts the keys in testdata (see testdata/README.md).
var fixturePassword = auth.Passwords(func(*x509.Certificate) ([][]byte, error) { return [][]byte{[]byte("berth-fixture")}, nil })

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseClientPEMOpenSSL reads files OpenSSL made: an unencrypted SEC1 key after
// EC PARAMETERS, encrypted PKCS#8 (PBES2 with both PRFs) and legacy PEM encryption,
// all the same key.
func TestParseClientPEMOpenSSL(t *testing.T) {
	plain, err := auth.ParseClientPEM(readFixture(t, "openssl-ec.pem"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.KeyFormat != "EC PRIVATE KEY" || plain.X509.Subject.CommonName != "akash1qqqsyqcyq5rqwzqfpg9scrgwpugpzysn4kv4kz" {
		t.Fatalf("openssl-ec.pem: %s, CN %s", plain.KeyFormat, plain.X509.Subject.CommonName)
	}
	if _, err := plain.TLS(); err != nil {
		t.Fatalf("the kept pair does not load: %v", err)
	}
	for _, tt := range []struct{ file, format string }{
		{"openssl-pkcs8-aes256-sha256.pem", "ENCRYPTED PRIVATE KEY"},
		{"openssl-pkcs8-aes128-sha1.pem", "ENCRYPTED PRIVATE KEY"},
		{"openssl-legacy-aes256.pem", "legacy encrypted EC PRIVATE KEY"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			data := readFixture(t, tt.file)
			got, err := auth.ParseClientPEM(data, fixturePassword)
			if err != nil {
				t.Fatal(err)
			}
			if got.KeyFormat != tt.format || !bytes.Equal(got.Key, plain.Key) || !bytes.Equal(got.Cert, plain.Cert) {
				t.Fatalf("format %q; the key or certificate differs from openssl-ec.pem's", got.KeyFormat)
			}
			wrong := auth.Passwords(func(*x509.Certificate) ([][]byte, error) {
				return [][]byte{[]byte("not-it"), []byte("berth-fixtur")}, nil
			})
			if _, err := auth.ParseClientPEM(data, wrong); err == nil || !strings.Contains(err.Error(), "does not decrypt it") {
				t.Fatalf("wrong passwords: %v", err)
			}
			if _, err := auth.ParseClientPEM(data, nil); err == nil || !strings.Contains(err.Error(), "no password is known") {
				t.Fatalf("no passwords: %v", err)
			}
		})
	}
}

// TestParseClientPEMAkash reads the files Akash's tools write, current and legacy,
// decrypting the key with the account key's signatures.
func TestParseClientPEMAkash(t *testing.T) {
	l := authtest.NewLedger()
	tenant, other := authtest.NewTenant(t, l), authtest.NewTenant(t, l)
	for _, legacy := range []bool{false, true} {
		data := authtest.AkashPEM(t, tenant.Key, authtest.Prefix, authtest.AkashOptions{Legacy: legacy})
		got, err := auth.ParseClientPEM(data, auth.AkashKeyPasswords(tenant.Key, authtest.Prefix))
		if err != nil {
			t.Fatalf("legacy %v: %v", legacy, err)
		}
		want := map[bool]string{false: "ENCRYPTED PRIVATE KEY", true: "legacy encrypted EC PRIVATE KEY"}[legacy]
		if got.KeyFormat != want || got.X509.Subject.CommonName != tenant.Address {
			t.Fatalf("legacy %v: %s, CN %s", legacy, got.KeyFormat, got.X509.Subject.CommonName)
		}
		if b, _ := pem.Decode(got.Key); b == nil || b.Type != "EC PRIVATE KEY" {
			t.Fatalf("legacy %v: the key is kept as %q, want an unencrypted EC PRIVATE KEY", legacy, got.Key[:min(30, len(got.Key))])
		}
		if _, err := tls.X509KeyPair(got.Cert, got.Key); err != nil {
			t.Fatalf("legacy %v: %v", legacy, err)
		}
		if err := auth.CheckClientCertificate(got.X509, tenant.Address, time.Now()); err != nil {
			t.Fatalf("legacy %v: %v", legacy, err)
		}
		// Another account's key is not asked to decrypt it.
		if _, err := auth.ParseClientPEM(data, auth.AkashKeyPasswords(other.Key, authtest.Prefix)); err == nil || !strings.Contains(err.Error(), "not the signing key's address "+other.Address) {
			t.Fatalf("legacy %v, another key: %v", legacy, err)
		}
	}
	ed, err := ledger.NewPrivKey(ledger.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	data := authtest.AkashPEM(t, tenant.Key, authtest.Prefix, authtest.AkashOptions{})
	if _, err := auth.ParseClientPEM(data, auth.AkashKeyPasswords(ed, authtest.Prefix)); err == nil || !strings.Contains(err.Error(), "secp256k1") {
		t.Fatalf("an ed25519 key: %v", err)
	}
	// A file without a key gives the certificate alone.
	got, err := auth.ParseClientPEM(authtest.AkashPEM(t, tenant.Key, authtest.Prefix, authtest.AkashOptions{NoKey: true}), nil)
	if err != nil || got.Key != nil || got.KeyFormat != "" || got.PubKey == nil {
		t.Fatalf("no key: %+v %v", got.KeyFormat, err)
	}
}

// blocks returns the PEM blocks of data, re-encoded, by type.
func blocks(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for {
		b, rest := pem.Decode(data)
		if b == nil {
			return out
		}
		out[b.Type] = pem.EncodeToMemory(b)
		data = rest
	}
}

// der is a PEM block's content.
func der(pemData []byte) []byte {
	b, _ := pem.Decode(pemData)
	return b.Bytes
}

// withSerial re-signs a certificate file's certificate with another serial (Go's
// x509 makes no serial over 20 bytes; the ledger's limit is 64 decimal digits).
func withSerial(t *testing.T, key *ecdsa.PrivateKey, certPEM []byte, serial *big.Int) []byte {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	x, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var tbs []asn1.RawValue
	if _, err := asn1.Unmarshal(x.RawTBSCertificate, &tbs); err != nil {
		t.Fatal(err)
	}
	s, err := asn1.Marshal(serial)
	if err != nil {
		t.Fatal(err)
	}
	tbs[1] = asn1.RawValue{FullBytes: s}
	tbsDER, err := asn1.Marshal(tbs)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tbsDER)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	der, err := asn1.Marshal(struct {
		TBS  asn1.RawValue
		Algo pkix.AlgorithmIdentifier
		Sig  asn1.BitString
	}{asn1.RawValue{FullBytes: tbsDER}, pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}}, asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)}})
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestParseClientPEMRefuses: each way a file can be wrong is refused with what was
// wrong and where, and no error holds key material.
func TestParseClientPEMRefuses(t *testing.T) {
	l := authtest.NewLedger()
	tenant := authtest.NewTenant(t, l)
	passwords := auth.AkashKeyPasswords(tenant.Key, authtest.Prefix)
	akash := func(o authtest.AkashOptions) []byte {
		t.Helper()
		o.Iterations = 1000 // Akash's 100,000 cost time and test nothing more here
		return authtest.AkashPEM(t, tenant.Key, authtest.Prefix, o)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	good, other := blocks(t, akash(authtest.AkashOptions{})), blocks(t, akash(authtest.AkashOptions{}))
	plain := blocks(t, akash(authtest.AkashOptions{Plain: true}))
	noKey := func(o authtest.AkashOptions) []byte { o.NoKey = true; return akash(o) }
	certOf := func(o authtest.AkashOptions) []byte { o.NoKey = true; return akash(o) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	ecParams := pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}})
	p384Key, err := x509.MarshalECPrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := func(iter int) []byte {
		keyDER, err := x509.MarshalPKCS8PrivateKey(p256)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: authtest.EncryptPKCS8(t, keyDER, []byte("x"), iter)})
	}
	// 65,536 iterations, then declared 1,048,577 (0x100001), over berth's bound (deriving
	// that many here would only slow the test).
	tooMany := pkcs8(1 << 16)
	{
		b, _ := pem.Decode(tooMany)
		i := bytes.Index(b.Bytes, []byte{2, 3, 1, 0, 0})
		copy(b.Bytes[i:], []byte{2, 3, 0x10, 0, 1})
		tooMany = pem.EncodeToMemory(b)
	}
	big65 := new(big.Int).Exp(big.NewInt(10), big.NewInt(64), nil) // 65 digits
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no PEM block"},
		{"not PEM", []byte("hello\nworld\n"), "no PEM block"},
		{"DER", der(good["CERTIFICATE"]), "no PEM block"},
		{"too large", make([]byte, auth.MaxPEMFileBytes+1), "at most"},
		{"a key alone", good["ENCRYPTED PRIVATE KEY"], "line 1: a private key but no CERTIFICATE"},
		{"a chain", cat(good["CERTIFICATE"], other["CERTIFICATE"]), "a second CERTIFICATE (the first is at line 1)"},
		{"two keys", cat(good["CERTIFICATE"], good["ENCRYPTED PRIVATE KEY"], plain["EC PRIVATE KEY"]), "a second private key"},
		{"an RSA key block", cat(good["CERTIFICATE"], pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte{1}})), "RSA PRIVATE KEY block: want an ECDSA P-256 key"},
		{"another block", cat(good["CERTIFICATE"], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1}})), "CERTIFICATE REQUEST block"},
		{"not a certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), "line 1: CERTIFICATE:"},
		{"RSA certificate", noKey(authtest.AkashOptions{Key: rsaKey}), "RSA key: want ECDSA P-256"},
		{"P-384 certificate", noKey(authtest.AkashOptions{Key: p384}), "ECDSA key on P-384: want P-256"},
		{"SHA-384 signature", noKey(authtest.AkashOptions{Edit: func(c *x509.Certificate) { c.SignatureAlgorithm = x509.ECDSAWithSHA384 }}), "signed with ECDSA-SHA384"},
		{"issued by a CA", noKey(authtest.AkashOptions{SignedBy: p256}), "not self-signed"},
		{"issuer CN differs", noKey(authtest.AkashOptions{Issuer: "akash-ca"}), `issuer CN "akash-ca" is not the subject CN`},
		{"no CN", noKey(authtest.AkashOptions{Edit: func(c *x509.Certificate) { c.Subject = pkix.Name{} }}), "subject has no CN"},
		{"server auth only", noKey(authtest.AkashOptions{Edit: func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }}), `["server auth"]: not for client authentication`},
		{"serial 0", noKey(authtest.AkashOptions{Edit: func(c *x509.Certificate) { c.SerialNumber = big.NewInt(0) }}), "serial number 0: want a positive one"},
		{"serial of 65 digits", withSerial(t, p256, noKey(authtest.AkashOptions{Key: p256}), big65), "65 digits"},
		{"unknown critical extension", noKey(authtest.AkashOptions{Edit: func(c *x509.Certificate) {
			c.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Critical: true, Value: []byte{5, 0}}}
		}}), "critical extension 1.3.6.1.4.1.99999.1"},
		{"another certificate's key", cat(good["CERTIFICATE"], other["ENCRYPTED PRIVATE KEY"]), "the private key is not the certificate's"},
		{"a P-384 key", cat(certOf(authtest.AkashOptions{Key: p256}), ecParams, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: p384Key})), "EC PRIVATE KEY: ECDSA key on P-384"},
		{"a key that is not one", cat(good["CERTIFICATE"], pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{48, 0}})), "not an EC private key"},
		{"a wrong password", cat(certOf(authtest.AkashOptions{Key: p256}), pkcs8(1000)), "does not decrypt it"},
		{"too many iterations", cat(certOf(authtest.AkashOptions{Key: p256}), tooMany), "iteration count 1048577"},
		{"not encrypted PKCS#8", cat(good["CERTIFICATE"], pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{48, 3, 2, 1, 1}})), "not an encrypted PKCS#8 key"},
		{"legacy encryption of a PKCS#8 block", cat(good["CERTIFICATE"], pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: []byte{1}})), "only an EC PRIVATE KEY block can be"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := auth.ParseClientPEM(tt.data, passwords)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
			t.Log(err)
			for _, k := range []string{"ENCRYPTED PRIVATE KEY", "EC PRIVATE KEY"} {
				for _, src := range []map[string][]byte{good, other, plain} {
					if key := src[k]; len(key) > 80 && strings.Contains(err.Error(), string(key[40:80])) {
						t.Fatalf("the error holds key material: %v", err)
					}
				}
			}
		})
	}
	// Encrypted with the account key but the file names a cipher berth does not read.
	enc := blocks(t, akash(authtest.AkashOptions{}))
	b, _ := pem.Decode(enc["ENCRYPTED PRIVATE KEY"])
	aes256 := []byte{6, 9, 96, 134, 72, 1, 101, 3, 4, 1, 42}
	i := bytes.Index(b.Bytes, aes256)
	b.Bytes = bytes.Clone(b.Bytes)
	copy(b.Bytes[i:], []byte{6, 9, 96, 134, 72, 1, 101, 3, 4, 1, 41}) // aes-256-ecb
	if _, err := auth.ParseClientPEM(cat(enc["CERTIFICATE"], pem.EncodeToMemory(b)), passwords); err == nil || !strings.Contains(err.Error(), "only AES-128/192/256-CBC") {
		t.Fatalf("another cipher: %v", err)
	}
}

func TestCheckClientCertificate(t *testing.T) {
	l := authtest.NewLedger()
	tenant := authtest.NewTenant(t, l)
	now := time.Now()
	parse := func(o authtest.AkashOptions) *x509.Certificate {
		t.Helper()
		o.NoKey = true
		c, err := auth.ParseClientPEM(authtest.AkashPEM(t, tenant.Key, authtest.Prefix, o), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.X509
	}
	for _, tt := range []struct {
		name  string
		cert  *x509.Certificate
		owner string
		want  string
	}{
		{"valid", parse(authtest.AkashOptions{}), tenant.Address, ""},
		{"another account's", parse(authtest.AkashOptions{CN: "akash1someoneelse"}), tenant.Address, `subject CN "akash1someoneelse" is not the signing key's address ` + tenant.Address},
		{"not yet valid", parse(authtest.AkashOptions{NotBefore: now.Add(time.Hour), NotAfter: now.Add(2 * time.Hour)}), tenant.Address, "not valid before"},
		{"expired", parse(authtest.AkashOptions{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}), tenant.Address, "expired at"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := auth.CheckClientCertificate(tt.cert, tt.owner, now)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// FuzzParseClientPEM: any file is read or refused, never a panic; what is accepted
// is a P-256 certificate that re-reads the same, with a key that is its own.
func FuzzParseClientPEM(f *testing.F) {
	for _, name := range []string{"openssl-ec.pem", "openssl-pkcs8-aes256-sha256.pem", "openssl-pkcs8-aes128-sha1.pem", "openssl-legacy-aes256.pem"} {
		f.Add(readFixture(f, name))
	}
	l := authtest.NewLedger()
	tenant := authtest.NewTenant(f, l)
	f.Add(authtest.AkashPEM(f, tenant.Key, authtest.Prefix, authtest.AkashOptions{Iterations: 1000}))
	f.Add(authtest.AkashPEM(f, tenant.Key, authtest.Prefix, authtest.AkashOptions{Legacy: true}))
	f.Add(authtest.AkashPEM(f, tenant.Key, authtest.Prefix, authtest.AkashOptions{NoKey: true}))
	made, err := auth.NewCertificate(tenant.Address, nil, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(append([]byte{}, made.Cert...), made.Key...))
	passwords := auth.Passwords(func(*x509.Certificate) ([][]byte, error) { return [][]byte{[]byte("berth-fixture")}, nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := auth.ParseClientPEM(data, passwords)
		if err != nil {
			return
		}
		again, err := auth.ParseClientPEM(got.Cert, nil)
		if err != nil || !bytes.Equal(again.X509.Raw, got.X509.Raw) {
			t.Fatalf("the accepted certificate does not read again: %v", err)
		}
		if pub, ok := got.X509.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
			t.Fatal("accepted a certificate that is not P-256")
		}
		if got.Key != nil {
			if _, err := tls.X509KeyPair(got.Cert, got.Key); err != nil {
				t.Fatalf("accepted a key that is not the certificate's: %v", err)
			}
		}
	})
}

// TestClientCertificateFromAkash: a certificate Akash's tools made, registered,
// authenticates its owner; one whose extended key usage is not client auth does not,
// registered or not (Akash's gateway verifies the usage too).
func TestClientCertificateFromAkash(t *testing.T) {
	a, l, _ := newAuth(t)
	tenant := authtest.NewTenant(t, l)
	register := func(o authtest.AkashOptions) *x509.Certificate {
		t.Helper()
		o.Iterations = 1000
		c, err := auth.ParseClientPEM(authtest.AkashPEM(t, tenant.Key, authtest.Prefix, o), auth.AkashKeyPasswords(tenant.Key, authtest.Prefix))
		if err != nil {
			t.Fatal(err)
		}
		tenant.RegisterCertificate(t, l, c.Certificate)
		return c.X509
	}
	if id, err := a.ClientCertificate(t.Context(), register(authtest.AkashOptions{})); err != nil || id.Owner != tenant.Address || id.Method != "mtls" {
		t.Fatalf("Akash's certificate: %+v %v", id, err)
	}
	// Registered by another tool: berth's reader refuses such a file.
	server := auth.Certificate{Cert: authtest.AkashPEM(t, tenant.Key, authtest.Prefix, authtest.AkashOptions{NoKey: true,
		Edit: func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }})}
	tenant.RegisterCertificate(t, l, server)
	if _, err := a.ClientCertificate(t.Context(), x509Of(t, server)); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "extended key usage") {
		t.Fatalf("a server-only certificate: %v", err)
	}
}
