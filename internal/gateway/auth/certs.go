package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Certificate is a PEM certificate with its key, as registered on the ledger
// (MsgCreateCertificate takes Cert and PubKey).
type Certificate struct {
	Cert   []byte // PEM CERTIFICATE
	Key    []byte // PEM EC PRIVATE KEY
	PubKey []byte // PEM PUBLIC KEY
}

// Serial is the certificate's serial number as the ledger records it (decimal).
func (c Certificate) Serial() (string, error) {
	x, err := c.X509()
	if err != nil {
		return "", err
	}
	return x.SerialNumber.String(), nil
}

// X509 parses the certificate.
func (c Certificate) X509() (*x509.Certificate, error) {
	b, _ := pem.Decode(c.Cert)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("certificate: no PEM CERTIFICATE block")
	}
	return x509.ParseCertificate(b.Bytes)
}

// TLS is the certificate for a tls.Config.
func (c Certificate) TLS() (tls.Certificate, error) {
	return tls.X509KeyPair(c.Cert, c.Key)
}

// NewCertificate makes a self-signed P-256 certificate for an account, as Akash's
// tools do: subject CN the account address, usable for client and server auth, valid
// from now for validFor. hosts (DNS names or IP addresses) become its subject
// alternative names; a tenant's certificate needs none.
func NewCertificate(owner string, hosts []string, validFor time.Duration) (Certificate, error) {
	if owner == "" {
		return Certificate{}, errors.New("certificate: owner address is required")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: owner},
		Issuer:                pkix.Name{CommonName: owner},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageKeyAgreement | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate public key: %w", err)
	}
	return Certificate{
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		PubKey: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	}, nil
}

// File names of a certificate kept in a directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Save writes the certificate and key into dir (key readable by the owner only). Both
// are written aside first and then renamed into place, so a failure to write leaves
// the previous pair (or none), never a key without its certificate.
func (c Certificate) Save(dir string) error {
	if len(c.Cert) == 0 || len(c.Key) == 0 {
		return errors.New("certificate: saving needs both the certificate and its key")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certificate dir %s: %w", dir, err)
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{{filepath.Join(dir, KeyFile), c.Key, 0o600}, {filepath.Join(dir, CertFile), c.Cert, 0o644}}
	for i, f := range files {
		if err := writeTemp(f.path, f.data, f.mode); err != nil {
			for _, w := range files[:i] {
				_ = os.Remove(w.path + ".tmp")
			}
			return err
		}
	}
	for i, f := range files {
		if err := os.Rename(f.path+".tmp", f.path); err != nil {
			for _, w := range files[i:] {
				_ = os.Remove(w.path + ".tmp")
			}
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return nil
}

// writeTemp writes data to path.tmp with mode (a stale one is replaced, so the mode
// is the one asked for).
func writeTemp(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(tmp, data, mode); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// LoadCertificate reads a certificate and key saved by Save (or any PEM pair).
func LoadCertificate(certFile, keyFile string) (Certificate, error) {
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate key: %w", err)
	}
	c := Certificate{Cert: cert, Key: key}
	x, err := c.X509()
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate %s: %w", certFile, err)
	}
	if _, err := c.TLS(); err != nil {
		return Certificate{}, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(x.PublicKey)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate %s: %w", certFile, err)
	}
	c.PubKey = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return c, nil
}

// Reloader serves a certificate from files and reloads it when they change (checked
// at most once a second, on a handshake), so a renewed certificate takes effect
// without a restart. A change that does not load keeps the previous certificate.
type Reloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
	err     error
}

// NewReloader loads the files once (failing if they do not load).
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) load() error {
	st, err := os.Stat(r.certFile)
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	kst, err := os.Stat(r.keyFile)
	if err != nil {
		return fmt.Errorf("certificate key: %w", err)
	}
	mod := st.ModTime()
	if kst.ModTime().After(mod) {
		mod = kst.ModTime()
	}
	if r.cert != nil && mod.Equal(r.modTime) {
		return nil
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("certificate %s with key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.modTime = &c, mod
	return nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		r.err = r.load()
	}
	return r.cert, nil
}

// Err is the last reload's error (nil when the files loaded).
func (r *Reloader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
