package ledger

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// selfSigned makes a P-256 certificate for cn, as Akash tenant tools make theirs.
func selfSigned(t *testing.T, cn string, serial int64) (certPEM, pubPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
}

func TestCertificates(t *testing.T) {
	h := newHarness(t, fund, "tenant", "other")
	owner := h.addr("tenant")
	cert, pub := selfSigned(t, owner, 7)
	h.ok("tenant", &api.MsgCreateCertificate{Owner: owner, Cert: cert, PubKey: pub})
	if ev := h.events(api.EventCertCreated); len(ev) != 1 || ev[0][api.AttrSerial] != "7" {
		t.Fatalf("cert.created %v", ev)
	}
	h.fail(api.CodeAlreadyExists, "tenant", &api.MsgCreateCertificate{Owner: owner, Cert: cert, PubKey: pub})

	// Rejected before execution: the certificate names someone else, or the key does
	// not match it.
	otherCert, otherPub := selfSigned(t, h.addr("other"), 8)
	for name, m := range map[string]*api.MsgCreateCertificate{
		"CN is not the owner": {Owner: owner, Cert: otherCert, PubKey: otherPub},
		"key mismatch":        {Owner: owner, Cert: cert, PubKey: otherPub},
		"not PEM":             {Owner: owner, Cert: []byte("hello"), PubKey: pub},
	} {
		if log := h.fail(api.CodeInvalidMsg, "tenant", m); log == "" {
			t.Errorf("%s: refused without a message", name)
		}
		h.seq[owner]--
	}

	var resp api.CertificatesResponse
	h.mustQuery(api.QueryCertificates.Path, api.CertificatesRequest{Owner: owner, State: api.CertValid}, &resp)
	if len(resp.Certificates) != 1 || resp.Certificates[0].Serial != "7" {
		t.Fatalf("valid certificates %+v", resp)
	}
	h.fail(api.CodeNotFound, "tenant", &api.MsgRevokeCertificate{Owner: owner, Serial: "8"})
	h.ok("tenant", &api.MsgRevokeCertificate{Owner: owner, Serial: "7"})
	h.fail(api.CodeInvalidState, "tenant", &api.MsgRevokeCertificate{Owner: owner, Serial: "7"})
	h.mustQuery(api.QueryCertificates.Path, api.CertificatesRequest{Owner: owner, State: api.CertValid}, &resp)
	if len(resp.Certificates) != 0 {
		t.Fatalf("valid certificates after revoke %+v", resp)
	}
	h.mustQuery(api.QueryCertificates.Path, api.CertificatesRequest{Owner: owner, State: api.CertRevoked}, &resp)
	if len(resp.Certificates) != 1 {
		t.Fatalf("revoked certificates %+v", resp)
	}
}

// A group may require attributes signed by auditors: all of all_of, and one of any_of.
func TestAuditedRequirements(t *testing.T) {
	h := newHarness(t, fund, "tenant", "p1", "aud1", "aud2")
	h.registerProvider("p1", usWest)
	r := webDeployment(t)
	groups := r.Groups
	groups[0].Requirements.SignedBy = market.SignedBy{AllOf: []string{h.addr("aud1")}, AnyOf: []string{h.addr("aud2")}}
	id := market.DeploymentID{Owner: h.addr("tenant"), DSeq: 1}
	h.ok("tenant", &api.MsgCreateDeployment{ID: id, Groups: groups, Version: r.Version, Deposit: market.Coin{Amount: 5_000_000, Denom: api.DefaultDenom}})
	oid := id.Group(1).Order(1)
	bid := func() *api.MsgCreateBid {
		return &api.MsgCreateBid{OrderID: oid, Provider: h.addr("p1"), Price: market.DecCoin{Amount: market.NewDec(1), Denom: api.DefaultDenom}, Deposit: api.DefaultParams().BidMinDeposit}
	}
	h.fail(api.CodeRequirements, "p1", bid())
	h.ok("aud1", &api.MsgSignProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("p1"), Attributes: market.Attributes{usWest}})
	log := h.fail(api.CodeRequirements, "p1", bid())
	if want := "none of the auditors"; !strings.Contains(log, want) {
		t.Fatalf("log %q lacks %q", log, want)
	}
	h.ok("aud2", &api.MsgSignProviderAttributes{Auditor: h.addr("aud2"), Owner: h.addr("p1"), Attributes: market.Attributes{usWest, {Key: "tier", Value: "gold"}}})
	var audit api.AuditResponse
	h.mustQuery(api.QueryAudit.Path, api.AuditRequest{Owner: h.addr("p1")}, &audit)
	if len(audit.Attributes) != 2 {
		t.Fatalf("audit records %+v", audit)
	}
	h.ok("p1", bid())
	// Withdrawing a signature does not touch bids already made, but blocks new ones.
	h.ok("aud1", &api.MsgDeleteProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("p1")})
	h.mustQuery(api.QueryAudit.Path, api.AuditRequest{Owner: h.addr("p1"), Auditor: h.addr("aud1")}, &audit)
	if len(audit.Attributes) != 0 {
		t.Fatalf("aud1 still has %+v", audit)
	}
	h.fail(api.CodeNotFound, "aud1", &api.MsgDeleteProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("p1")})
	// Auditing an unregistered provider is refused.
	h.fail(api.CodeNotFound, "aud1", &api.MsgSignProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("tenant"), Attributes: market.Attributes{usWest}})
}
