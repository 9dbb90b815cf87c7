package localenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is a throwaway certificate authority for one control plane: it signs the API
// server's serving certificate, kwok's kubelet serving certificate and client
// certificates for each component.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	// CAFile is the PEM file of the CA certificate.
	CAFile string
}

// certPair names the PEM files of a certificate and its key.
type certPair struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
}

const certValidity = 7 * 24 * time.Hour

func newPKI(dir string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "berth-testenv-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	p := &pki{dir: dir, caCert: cert, caKey: key, CAFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(p.CAFile, pemBlock("CERTIFICATE", der), 0o600); err != nil {
		return nil, fmt.Errorf("write CA: %w", err)
	}
	return p, nil
}

// in is p issuing into dir (the CA's files stay where they are).
func (p *pki) in(dir string) *pki {
	c := *p
	c.dir = dir
	return &c
}

// serving issues a TLS server certificate for the given DNS names and IPs.
func (p *pki) serving(name string, dnsNames []string, ips []net.IP) (certPair, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client issues a client certificate; Kubernetes reads the user from CN and groups from O.
func (p *pki) client(name, user string, groups ...string) (certPair, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (p *pki) issue(name string, tmpl *x509.Certificate) (certPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certPair{}, fmt.Errorf("generate key for %s: %w", name, err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return certPair{}, fmt.Errorf("sign %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certPair{}, fmt.Errorf("marshal key for %s: %w", name, err)
	}
	cp := certPair{
		CertFile: filepath.Join(p.dir, name+".crt"),
		KeyFile:  filepath.Join(p.dir, name+".key"),
		CertPEM:  pemBlock("CERTIFICATE", der),
		KeyPEM:   pemBlock("PRIVATE KEY", keyDER),
	}
	if err := os.WriteFile(cp.CertFile, cp.CertPEM, 0o600); err != nil {
		return certPair{}, fmt.Errorf("write %s: %w", cp.CertFile, err)
	}
	if err := os.WriteFile(cp.KeyFile, cp.KeyPEM, 0o600); err != nil {
		return certPair{}, fmt.Errorf("write %s: %w", cp.KeyFile, err)
	}
	return cp, nil
}

// serviceAccountKeys writes the RSA key pair the API server signs and verifies
// service-account tokens with (with reuse, keeps the pair already in dir, so tokens
// issued before a restart stay valid), and returns (private key file, public key file).
func serviceAccountKeys(dir string, reuse bool) (string, string, error) {
	priv := filepath.Join(dir, "sa.key")
	pubFile := filepath.Join(dir, "sa.pub")
	if reuse {
		_, errPriv := os.Stat(priv)
		_, errPub := os.Stat(pubFile)
		if errPriv == nil && errPub == nil {
			return priv, pubFile, nil
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := os.WriteFile(priv, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", priv, err)
	}
	if err := os.WriteFile(pubFile, pemBlock("PUBLIC KEY", pub), 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", pubFile, err)
	}
	return priv, pubFile, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		// crypto/rand never fails on Linux; a constant serial would still work for a test CA.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
