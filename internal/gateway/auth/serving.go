package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// MTLSPrefix starts the server name (SNI) Akash's tenant tools, and berth's, ask for
// when they authenticate with a client certificate: "mtls." + the provider's host.
const MTLSPrefix = "mtls."

// ServerCertificates chooses the certificate the gateway presents in a handshake, as
// Akash's provider does (gateway/utils NewServerTLSConfig): the provider's own
// certificate — self-signed, subject CN the provider's address, registered on the
// ledger — unless a certificate is configured (gateway.cert_file, e.g. from a CA) and
// the client asked for a name it is valid for. So a client that asks for
// mtls.<host> gets the provider's own certificate even when the configured one is for
// <host> (or *.<host>): Akash's tools check that name against the CA roots, which a
// certificate for <host> does not pass, and then the certificate against the ledger.
// A client that sends no name (an IP address) gets it too. The configured
// certificate is served for the names it covers, e.g. <host> for tools that
// authenticate with a bearer token and trust CAs. Which certificate is served does not
// change authentication: the gateway asks every client for a certificate.
type ServerCertificates struct {
	own        *tls.Certificate
	configured func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// NewServerCertificates serves own, and configured (nil: none) for the names it
// covers.
func NewServerCertificates(own tls.Certificate, configured *Reloader) (*ServerCertificates, error) {
	if len(own.Certificate) == 0 || own.PrivateKey == nil {
		return nil, errors.New("gateway certificates: the provider's own certificate and key are required")
	}
	if own.Leaf == nil {
		leaf, err := x509.ParseCertificate(own.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("gateway certificate: %w", err)
		}
		own.Leaf = leaf
	}
	s := &ServerCertificates{own: &own}
	if configured != nil {
		s.configured = configured.GetCertificate
	}
	return s, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (s *ServerCertificates) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if s.configured == nil || name == "" || strings.HasPrefix(name, MTLSPrefix) {
		return s.own, nil
	}
	c, err := s.configured(hello)
	if err != nil || c == nil || !covers(c, name) {
		return s.own, nil //nolint:nilerr // the configured certificate cannot serve this name: the provider's own does
	}
	return c, nil
}

// covers reports whether c's leaf is valid for name.
func covers(c *tls.Certificate, name string) bool {
	leaf := c.Leaf
	if leaf == nil {
		if len(c.Certificate) == 0 {
			return false
		}
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return false
		}
	}
	return leaf.VerifyHostname(name) == nil
}
