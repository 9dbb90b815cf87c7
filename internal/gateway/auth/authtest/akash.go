package authtest

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/cometbft/cometbft/crypto/secp256k1"

	"berth.dev/berth/api/ledger/v1"
)

// AkashOptions change a certificate file from what Akash's tools write.
type AkashOptions struct {
	// NotBefore and NotAfter bound the validity (default: from a minute ago for a
	// year).
	NotBefore, NotAfter time.Time
	// CN is the subject (and issuer) CN (default: the signer's address).
	CN string
	// Issuer, when set, is the issuer CN (the certificate stays signed by its own key).
	Issuer string
	// Key is the certificate's key (default: a new P-256 key).
	Key crypto.Signer
	// SignedBy signs the certificate instead of Key (a certificate that is not
	// self-signed).
	SignedBy crypto.Signer
	// Edit changes the template before it is signed.
	Edit func(*x509.Certificate)
	// Legacy writes the key as Akash's tools did in 2022: an EC PRIVATE KEY block with
	// "Proc-Type: 4,ENCRYPTED" (PKCS#8 inside), the password the signature of the
	// address's bytes.
	Legacy bool
	// Plain writes the key unencrypted (as an EC PRIVATE KEY, as OpenSSL does).
	Plain bool
	// NoKey leaves the key out.
	NoKey bool
	// Iterations is PBKDF2's iteration count (default 100,000, as Akash's tools).
	Iterations int
	// Encrypt, when set, is the password instead of the account key's signature.
	Encrypt []byte
}

// AuthVersionOID is the attribute Akash's tools add to the subject ("v0.0.1").
var AuthVersionOID = asn1.ObjectIdentifier{2, 23, 133, 2, 6}

// AkashPEM writes a client certificate file for the account of s as `akash tx cert
// generate client` does (chain-sdk go/util/tls KeyPairManager.Generate): a
// self-signed P-256 certificate (serial the time in nanoseconds, subject CN the address
// and the auth version attribute, issuer CN the address, key usage data and key
// encipherment, extended key usage client auth), then its PKCS#8 key as an ENCRYPTED
// PRIVATE KEY (PBES2: PBKDF2-HMAC-SHA256, 100,000 iterations, 16-byte salt,
// AES-256-CBC) whose password is s's signature of the address.
func AkashPEM(t testing.TB, s ledger.Signer, prefix string, o AkashOptions) []byte {
	t.Helper()
	pk := s.PubKey()
	addr, err := pk.Address(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if o.CN == "" {
		o.CN = addr
	}
	if o.Key == nil {
		if o.Key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Minute).Truncate(time.Second)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = o.NotBefore.Add(365 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject: pkix.Name{CommonName: o.CN, ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: AuthVersionOID, Value: "v0.0.1"},
		}},
		Issuer:                pkix.Name{CommonName: o.CN},
		NotBefore:             o.NotBefore,
		NotAfter:              o.NotAfter,
		KeyUsage:              x509.KeyUsageDataEncipherment | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	if o.Edit != nil {
		o.Edit(tmpl)
	}
	parent := tmpl
	if o.Issuer != "" {
		p := *tmpl
		p.Subject = pkix.Name{CommonName: o.Issuer}
		parent = &p
	}
	signer := o.Key
	if o.SignedBy != nil {
		signer = o.SignedBy
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, o.Key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if o.NoKey {
		return out
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(o.Key)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	switch {
	case o.Plain:
		ec, ok := o.Key.(*ecdsa.PrivateKey)
		if !ok {
			block = &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}
			break
		}
		sec1, err := x509.MarshalECPrivateKey(ec)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}
	case o.Legacy:
		sig, err := s.Sign(secp256k1.PubKey(pk.Key).Address())
		if err != nil {
			t.Fatal(err)
		}
		block, err = x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", keyDER, sig, x509.PEMCipherAES256) //nolint:staticcheck // the legacy format Akash's tools wrote, reproduced for tests
		if err != nil {
			t.Fatal(err)
		}
	default:
		password := o.Encrypt
		if password == nil {
			if password, err = s.Sign([]byte(addr)); err != nil {
				t.Fatal(err)
			}
		}
		block = &pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: EncryptPKCS8(t, keyDER, password, o.Iterations)}
	}
	return append(out, pem.EncodeToMemory(block)...)
}

// EncryptPKCS8 encrypts a PKCS#8 key as Akash's tools do (go.step.sm/crypto pemutil
// EncryptPKCS8PrivateKey): PBES2 with PBKDF2-HMAC-SHA256 (iterations; 0: 100,000) and
// a 16-byte salt, AES-256-CBC; it returns the EncryptedPrivateKeyInfo DER.
func EncryptPKCS8(t testing.TB, keyDER, password []byte, iterations int) []byte {
	t.Helper()
	if iterations == 0 {
		iterations = 100000
	}
	salt, iv := make([]byte, 16), make([]byte, aes.BlockSize)
	if _, err := rand.Read(salt); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(iv); err != nil {
		t.Fatal(err)
	}
	key, err := pbkdf2.Key(sha256.New, string(password), salt, iterations, 32)
	if err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(keyDER)%aes.BlockSize
	data := append(append([]byte{}, keyDER...), make([]byte, pad)...)
	for i := len(keyDER); i < len(data); i++ {
		data[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(data, data)
	mustMarshal := func(v any) asn1.RawValue {
		t.Helper()
		b, err := asn1.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return asn1.RawValue{FullBytes: b}
	}
	kdf := mustMarshal(struct {
		Salt       []byte
		Iterations int
		PRF        pkix.AlgorithmIdentifier
	}{salt, iterations, pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}, Parameters: asn1.NullRawValue}})
	pbes2 := mustMarshal(struct{ KDF, Enc pkix.AlgorithmIdentifier }{
		pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}, Parameters: kdf},
		pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}, Parameters: mustMarshal(iv)},
	})
	return mustMarshal(struct {
		Algo pkix.AlgorithmIdentifier
		Data []byte
	}{pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}, Parameters: pbes2}, data}).FullBytes
}
