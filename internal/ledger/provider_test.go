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

	"berth.dev/berth/internal/market"
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
	h.ok("tenant", &MsgCreateCertificate{Owner: owner, Cert: cert, PubKey: pub})
	if ev := h.events(EventCertCreated); len(ev) != 1 || ev[0][AttrSerial] != "7" {
		t.Fatalf("cert.created %v", ev)
	}
	h.fail(CodeAlreadyExists, "tenant", &MsgCreateCertificate{Owner: owner, Cert: cert, PubKey: pub})

	// Rejected before execution: the certificate names someone else, or the key does
	// not match it.
	otherCert, otherPub := selfSigned(t, h.addr("other"), 8)
	for name, m := range map[string]*MsgCreateCertificate{
		"CN is not the owner": {Owner: owner, Cert: otherCert, PubKey: otherPub},
		"key mismatch":        {Owner: owner, Cert: cert, PubKey: otherPub},
		"not PEM":             {Owner: owner, Cert: []byte("hello"), PubKey: pub},
	} {
		if log := h.fail(CodeInvalidMsg, "tenant", m); log == "" {
			t.Errorf("%s: refused without a message", name)
		}
		h.seq[owner]--
	}

	var resp CertificatesResponse
	h.mustQuery(QueryCertificates.Path, CertificatesRequest{Owner: owner, State: CertValid}, &resp)
	if len(resp.Certificates) != 1 || resp.Certificates[0].Serial != "7" {
		t.Fatalf("valid certificates %+v", resp)
	}
	h.fail(CodeNotFound, "tenant", &MsgRevokeCertificate{Owner: owner, Serial: "8"})
	h.ok("tenant", &MsgRevokeCertificate{Owner: owner, Serial: "7"})
	h.fail(CodeInvalidState, "tenant", &MsgRevokeCertificate{Owner: owner, Serial: "7"})
	h.mustQuery(QueryCertificates.Path, CertificatesRequest{Owner: owner, State: CertValid}, &resp)
	if len(resp.Certificates) != 0 {
		t.Fatalf("valid certificates after revoke %+v", resp)
	}
	h.mustQuery(QueryCertificates.Path, CertificatesRequest{Owner: owner, State: CertRevoked}, &resp)
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
	h.ok("tenant", &MsgCreateDeployment{ID: id, Groups: groups, Version: r.Version, Deposit: market.Coin{Amount: 5_000_000, Denom: DefaultDenom}})
	oid := id.Group(1).Order(1)
	bid := func() *MsgCreateBid {
		return &MsgCreateBid{OrderID: oid, Provider: h.addr("p1"), Price: market.DecCoin{Amount: market.NewDec(1), Denom: DefaultDenom}, Deposit: DefaultParams().BidMinDeposit}
	}
	h.fail(CodeRequirements, "p1", bid())
	h.ok("aud1", &MsgSignProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("p1"), Attributes: market.Attributes{usWest}})
	log := h.fail(CodeRequirements, "p1", bid())
	if want := "none of the auditors"; !strings.Contains(log, want) {
		t.Fatalf("log %q lacks %q", log, want)
	}
	h.ok("aud2", &MsgSignProviderAttributes{Auditor: h.addr("aud2"), Owner: h.addr("p1"), Attributes: market.Attributes{usWest, {Key: "tier", Value: "gold"}}})
	var audit AuditResponse
	h.mustQuery(QueryAudit.Path, AuditRequest{Owner: h.addr("p1")}, &audit)
	if len(audit.Attributes) != 2 {
		t.Fatalf("audit records %+v", audit)
	}
	h.ok("p1", bid())
	// Withdrawing a signature does not touch bids already made, but blocks new ones.
	h.ok("aud1", &MsgDeleteProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("p1")})
	h.mustQuery(QueryAudit.Path, AuditRequest{Owner: h.addr("p1"), Auditor: h.addr("aud1")}, &audit)
	if len(audit.Attributes) != 0 {
		t.Fatalf("aud1 still has %+v", audit)
	}
	h.fail(CodeNotFound, "aud1", &MsgDeleteProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("p1")})
	// Auditing an unregistered provider is refused.
	h.fail(CodeNotFound, "aud1", &MsgSignProviderAttributes{Auditor: h.addr("aud1"), Owner: h.addr("tenant"), Attributes: market.Attributes{usWest}})
}
