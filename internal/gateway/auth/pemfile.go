package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/cometbft/cometbft/crypto/secp256k1"

	"berth.dev/berth/api/ledger/v1"
)

// A client certificate made elsewhere, as a PEM file. Akash's tools (`akash tx cert
// generate client`, chain-sdk go/util/tls KeyPairManager) write HOME/<address>.pem:
// a CERTIFICATE block, then the key as an ENCRYPTED PRIVATE KEY (PKCS#8, PBES2),
// whose password is the account key's signature of the address (the bech32 string);
// files from 2022 hold an EC PRIVATE KEY block with "Proc-Type: 4,ENCRYPTED"
// (PKCS#8 inside, AES-256-CBC) whose password is the signature of the address's 20
// bytes. The certificate is self-signed P-256 ECDSA-SHA256, subject and issuer CN
// the address, extended key usage client auth (and server auth when made for hosts).
// OpenSSL and other tools write unencrypted EC PRIVATE KEY (SEC1) or PRIVATE KEY
// (PKCS#8) blocks, and sometimes an EC PARAMETERS block.

// MaxPEMFileBytes bounds a certificate file (a certificate and key are ~1 KiB).
const MaxPEMFileBytes = 64 << 10

// maxSerialDigits is the longest serial the ledger can revoke (MsgRevokeCertificate
// takes 1 to 64 characters).
const maxSerialDigits = 64

// ClientPEM is a client certificate read from a PEM file, with its key when the file
// has one.
type ClientPEM struct {
	// Certificate is ready to register and keep: Cert the CERTIFICATE block alone,
	// Key the private key as an unencrypted EC PRIVATE KEY (nil when the file has no
	// key), PubKey the certificate's public key.
	Certificate
	// X509 is the parsed certificate.
	X509 *x509.Certificate
	// KeyFormat says how the file held the key: "" (no key), "EC PRIVATE KEY",
	// "PRIVATE KEY", "ENCRYPTED PRIVATE KEY" or "legacy encrypted EC PRIVATE KEY".
	KeyFormat string
}

// Passwords yields the passwords to try on an encrypted key, in order. It is called
// only when the file's key is encrypted, with the file's certificate (already checked
// by ParseClientPEM), so that it can refuse one it has no password for.
type Passwords func(cert *x509.Certificate) ([][]byte, error)

// ParseClientPEM reads a PEM file holding one client certificate and at most one
// private key, and checks what does not depend on who registers it or when: a
// self-signed P-256 ECDSA-SHA256 certificate (Akash's ledger checks the
// self-signature with the certificate's key over SHA-256), subject CN equal to issuer
// CN (Akash's gateway requires it), usable for client authentication, a positive
// serial the ledger can revoke, no critical extension x509 does not know, and a key
// (when present) that is the certificate's. passwords (nil: encrypted keys are
// refused) decrypts an encrypted key. Errors name the PEM block's line; they never
// hold key material.
func ParseClientPEM(data []byte, passwords Passwords) (ClientPEM, error) {
	if len(data) > MaxPEMFileBytes {
		return ClientPEM{}, fmt.Errorf("%d bytes: a certificate file is at most %d", len(data), MaxPEMFileBytes)
	}
	var (
		certBlock, keyBlock *pem.Block
		certLine, keyLine   int
	)
	rest := data
	for {
		b, next := pem.Decode(rest)
		if b == nil {
			break
		}
		line := blockLine(data, len(data)-len(rest), len(data)-len(next), b.Type)
		rest = next
		switch b.Type {
		case "CERTIFICATE":
			if certBlock != nil {
				return ClientPEM{}, fmt.Errorf("line %d: a second CERTIFICATE (the first is at line %d): want one self-signed certificate, not a chain", line, certLine)
			}
			certBlock, certLine = b, line
		case "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			if keyBlock != nil {
				return ClientPEM{}, fmt.Errorf("line %d: a second private key (the first is at line %d)", line, keyLine)
			}
			keyBlock, keyLine = b, line
		case "EC PARAMETERS": // OpenSSL's `ecparam -genkey` writes the curve before the key
		case "RSA PRIVATE KEY", "DSA PRIVATE KEY", "OPENSSH PRIVATE KEY":
			return ClientPEM{}, fmt.Errorf("line %d: %s block: want an ECDSA P-256 key", line, b.Type)
		default:
			return ClientPEM{}, fmt.Errorf("line %d: %s block: want a CERTIFICATE and optionally its private key", line, b.Type)
		}
	}
	if certBlock == nil {
		if keyBlock != nil {
			return ClientPEM{}, fmt.Errorf("line %d: a private key but no CERTIFICATE block", keyLine)
		}
		return ClientPEM{}, errors.New("no PEM block: want a PEM file with a CERTIFICATE block and optionally its private key (as `akash tx cert generate client` writes)")
	}
	x, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return ClientPEM{}, fmt.Errorf("line %d: CERTIFICATE: %w", certLine, err)
	}
	if err := checkCertificateShape(x); err != nil {
		return ClientPEM{}, fmt.Errorf("line %d: certificate: %w", certLine, err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(x.PublicKey)
	if err != nil {
		return ClientPEM{}, fmt.Errorf("line %d: certificate public key: %w", certLine, err)
	}
	out := ClientPEM{X509: x, Certificate: Certificate{
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw}),
		PubKey: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	}}
	if keyBlock == nil {
		return out, nil
	}
	key, format, err := readPrivateKey(keyBlock, x, passwords)
	if err != nil {
		return ClientPEM{}, fmt.Errorf("line %d: %s: %w", keyLine, keyBlock.Type, err)
	}
	if err := checkKey(key, x); err != nil {
		return ClientPEM{}, fmt.Errorf("line %d: %s: %w", keyLine, keyBlock.Type, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return ClientPEM{}, fmt.Errorf("line %d: %s: %w", keyLine, keyBlock.Type, err)
	}
	out.Key = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	out.KeyFormat = format
	return out, nil
}

// blockLine is the line (from 1) where a block of type begins within data[from:to].
func blockLine(data []byte, from, to int, typ string) int {
	at := from
	if i := bytes.LastIndex(data[from:to], []byte("-----BEGIN "+typ+"-----")); i >= 0 {
		at += i
	}
	return 1 + bytes.Count(data[:at], []byte("\n"))
}

// checkCertificateShape checks what a client certificate must be whoever registers it.
func checkCertificateShape(x *x509.Certificate) error {
	pub, ok := x.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return fmt.Errorf("%s key: want ECDSA P-256 (as Akash's tools make)", x.PublicKeyAlgorithm)
	}
	if pub.Curve != elliptic.P256() {
		return fmt.Errorf("ECDSA key on %s: want P-256", pub.Curve.Params().Name)
	}
	if x.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		return fmt.Errorf("signed with %s: want ECDSA-SHA256 (Akash's ledger checks the signature over SHA-256)", x.SignatureAlgorithm)
	}
	if err := x.CheckSignature(x.SignatureAlgorithm, x.RawTBSCertificate, x.Signature); err != nil {
		return fmt.Errorf("not self-signed (its own key does not verify its signature): want the self-signed certificate the ledger registers, not one issued by a CA: %w", err)
	}
	if x.Subject.CommonName == "" {
		return errors.New("subject has no CN: want the account address")
	}
	if x.Issuer.CommonName != x.Subject.CommonName {
		return fmt.Errorf("issuer CN %q is not the subject CN %q (Akash's gateways refuse it)", x.Issuer.CommonName, x.Subject.CommonName)
	}
	if !ClientAuthUsage(x) {
		return fmt.Errorf("extended key usage %s: not for client authentication", ekuNames(x))
	}
	if x.SerialNumber.Sign() <= 0 {
		return fmt.Errorf("serial number %s: want a positive one", x.SerialNumber)
	}
	if n := len(x.SerialNumber.String()); n > maxSerialDigits {
		return fmt.Errorf("serial number has %d digits: the ledger revokes serials of at most %d", n, maxSerialDigits)
	}
	if len(x.UnhandledCriticalExtensions) > 0 {
		return fmt.Errorf("critical extension %s is not understood (gateways would refuse it)", x.UnhandledCriticalExtensions[0])
	}
	return nil
}

// ClientAuthUsage reports whether a certificate may authenticate a TLS client: its
// extended key usage names client auth or any usage, or it has none (which x509
// verification takes as any, as Akash's gateway does).
func ClientAuthUsage(x *x509.Certificate) bool {
	if len(x.ExtKeyUsage) == 0 && len(x.UnknownExtKeyUsage) == 0 {
		return true
	}
	for _, u := range x.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func ekuNames(x *x509.Certificate) string {
	names := map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "server auth", x509.ExtKeyUsageCodeSigning: "code signing",
		x509.ExtKeyUsageEmailProtection: "email protection", x509.ExtKeyUsageTimeStamping: "time stamping", x509.ExtKeyUsageOCSPSigning: "OCSP signing"}
	var out []string
	for _, u := range x.ExtKeyUsage {
		if n, ok := names[u]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("usage %d", u))
		}
	}
	for _, oid := range x.UnknownExtKeyUsage {
		out = append(out, oid.String())
	}
	return fmt.Sprintf("%q", out)
}

// readPrivateKey decodes a key block, decrypting it when it is encrypted.
func readPrivateKey(b *pem.Block, x *x509.Certificate, passwords Passwords) (*ecdsa.PrivateKey, string, error) {
	legacy := b.Headers["Proc-Type"] == "4,ENCRYPTED"
	switch {
	case b.Type == "ENCRYPTED PRIVATE KEY":
		c, err := parseEncryptedPKCS8(b.Bytes)
		if err != nil {
			return nil, "", err
		}
		key, err := tryPasswords(passwords, x, c.decrypt)
		return key, b.Type, err
	case legacy && b.Type == "EC PRIVATE KEY":
		key, err := tryPasswords(passwords, x, func(pw []byte) ([]byte, error) {
			der, err := x509.DecryptPEMBlock(b, pw) //nolint:staticcheck // Akash's tools wrote this legacy PEM encryption (2022); berth only reads it
			if errors.Is(err, x509.IncorrectPasswordError) {
				return nil, errWrongPassword
			}
			return der, err
		})
		return key, "legacy encrypted EC PRIVATE KEY", err
	case legacy:
		return nil, "", errors.New("encrypted with legacy PEM encryption: only an EC PRIVATE KEY block can be")
	case len(b.Headers) > 0:
		return nil, "", errors.New("unexpected PEM headers")
	}
	key, err := parseECKey(b.Bytes)
	if err != nil {
		return nil, "", err
	}
	return key, b.Type, nil
}

// tryPasswords decrypts with each password in turn until one yields a key.
func tryPasswords(passwords Passwords, x *x509.Certificate, decrypt func(password []byte) ([]byte, error)) (*ecdsa.PrivateKey, error) {
	if passwords == nil {
		return nil, errors.New("the key is encrypted and no password is known for it")
	}
	pws, err := passwords(x)
	if err != nil {
		return nil, fmt.Errorf("the key is encrypted: %w", err)
	}
	for _, pw := range pws {
		der, err := decrypt(pw)
		if errors.Is(err, errWrongPassword) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if key, err := parseECKey(der); err == nil {
			return key, nil
		}
	}
	return nil, errors.New("the key is encrypted and the signing key does not decrypt it (Akash's tools encrypt it with the account key's signature of its address: use the key of the account that made it)")
}

// parseECKey reads an ECDSA key as SEC1 or PKCS#8 (Akash's legacy files label PKCS#8
// as EC PRIVATE KEY).
func parseECKey(der []byte) (*ecdsa.PrivateKey, error) {
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("not an EC private key (SEC1 or PKCS#8)")
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T key: want ECDSA P-256", k)
	}
	return ec, nil
}

// checkKey checks that key is the certificate's.
func checkKey(key *ecdsa.PrivateKey, x *x509.Certificate) error {
	if key.Curve != elliptic.P256() {
		return fmt.Errorf("ECDSA key on %s: want P-256", key.Curve.Params().Name)
	}
	if !key.PublicKey.Equal(x.PublicKey) {
		return errors.New("the private key is not the certificate's (its public key differs)")
	}
	return nil
}

// CheckClientCertificate checks that a certificate read by ParseClientPEM is owner's
// (subject CN its address, which Akash's ledger and berth's require) and valid at now.
func CheckClientCertificate(x *x509.Certificate, owner string, now time.Time) error {
	if x.Subject.CommonName != owner {
		return fmt.Errorf("subject CN %q is not the signing key's address %s: a certificate can only be registered by the account it names", x.Subject.CommonName, owner)
	}
	if now.Before(x.NotBefore) {
		return fmt.Errorf("not valid before %s (now %s)", x.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if now.After(x.NotAfter) {
		return fmt.Errorf("expired at %s (now %s)", x.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// AkashKeyPasswords are the passwords Akash's tools encrypt a certificate's key with,
// made with the account's key: its signature of the address as text (current tools),
// then of the address's 20 bytes (files from 2022). Akash accounts are secp256k1; a
// key of another type, or a certificate for another account, yields none. The
// signatures are deterministic (RFC 6979), so the same key gives the same passwords
// wherever it signs.
func AkashKeyPasswords(s ledger.Signer, prefix string) Passwords {
	return func(cert *x509.Certificate) ([][]byte, error) {
		pk := s.PubKey()
		if pk.Type != ledger.KeySecp256k1 {
			return nil, fmt.Errorf("the signing key is %s; Akash's tools encrypt with a secp256k1 account key", pk.Type)
		}
		addr, err := pk.Address(prefix)
		if err != nil {
			return nil, err
		}
		if cert.Subject.CommonName != addr {
			return nil, fmt.Errorf("the certificate is for %q, not the signing key's address %s, whose signature would decrypt it", cert.Subject.CommonName, addr)
		}
		var out [][]byte
		for _, msg := range [][]byte{[]byte(addr), secp256k1.PubKey(pk.Key).Address()} {
			sig, err := s.Sign(msg)
			if err != nil {
				return nil, fmt.Errorf("sign the key's password: %w", err)
			}
			out = append(out, sig)
		}
		return out, nil
	}
}
