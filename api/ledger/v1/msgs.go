package ledger

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"slices"

	"berth.dev/berth/api/market/v1"
)

// Msg is one instruction of a transaction. Every message has one signer, who must be
// the transaction's signer.
type Msg interface {
	// Type is the message's name on the wire ("deployment/create").
	Type() string
	// Signer is the address that must sign the message.
	Signer() string
	// ValidateBasic checks what can be checked without state.
	ValidateBasic(p *Params) error
}

// Message type names.
const (
	TypeSend                    = "bank/send"
	TypeCreateProvider          = "provider/create"
	TypeUpdateProvider          = "provider/update"
	TypeSignProviderAttributes  = "audit/sign"
	TypeDeleteProviderAttribute = "audit/delete"
	TypeCreateCertificate       = "cert/create"
	TypeRevokeCertificate       = "cert/revoke"
	TypeCreateDeployment        = "deployment/create"
	TypeUpdateDeployment        = "deployment/update"
	TypeDepositDeployment       = "deployment/deposit"
	TypeCloseDeployment         = "deployment/close"
	TypeCloseGroup              = "group/close"
	TypePauseGroup              = "group/pause"
	TypeStartGroup              = "group/start"
	TypeCreateBid               = "market/create-bid"
	TypeCloseBid                = "market/close-bid"
	TypeCreateLease             = "market/create-lease"
	TypeCloseLease              = "market/close-lease"
	TypeWithdrawLease           = "market/withdraw-lease"
)

// msgTypes builds an empty message of each type, for decoding.
var msgTypes = map[string]func() Msg{
	TypeSend:                    func() Msg { return &MsgSend{} },
	TypeCreateProvider:          func() Msg { return &MsgCreateProvider{} },
	TypeUpdateProvider:          func() Msg { return &MsgUpdateProvider{} },
	TypeSignProviderAttributes:  func() Msg { return &MsgSignProviderAttributes{} },
	TypeDeleteProviderAttribute: func() Msg { return &MsgDeleteProviderAttributes{} },
	TypeCreateCertificate:       func() Msg { return &MsgCreateCertificate{} },
	TypeRevokeCertificate:       func() Msg { return &MsgRevokeCertificate{} },
	TypeCreateDeployment:        func() Msg { return &MsgCreateDeployment{} },
	TypeUpdateDeployment:        func() Msg { return &MsgUpdateDeployment{} },
	TypeDepositDeployment:       func() Msg { return &MsgDepositDeployment{} },
	TypeCloseDeployment:         func() Msg { return &MsgCloseDeployment{} },
	TypeCloseGroup:              func() Msg { return &MsgCloseGroup{} },
	TypePauseGroup:              func() Msg { return &MsgPauseGroup{} },
	TypeStartGroup:              func() Msg { return &MsgStartGroup{} },
	TypeCreateBid:               func() Msg { return &MsgCreateBid{} },
	TypeCloseBid:                func() Msg { return &MsgCloseBid{} },
	TypeCreateLease:             func() Msg { return &MsgCreateLease{} },
	TypeCloseLease:              func() Msg { return &MsgCloseLease{} },
	TypeWithdrawLease:           func() Msg { return &MsgWithdrawLease{} },
}

// MsgSend moves coins between accounts.
type MsgSend struct {
	From   string        `json:"from"`
	To     string        `json:"to"`
	Amount []market.Coin `json:"amount"`
}

// MsgCreateProvider registers the signer as a provider.
type MsgCreateProvider struct {
	Owner      string            `json:"owner"`
	HostURI    string            `json:"host_uri"`
	Attributes market.Attributes `json:"attributes"`
	Info       ProviderInfo      `json:"info"`
}

// MsgUpdateProvider replaces a provider's host URI, attributes and info.
type MsgUpdateProvider MsgCreateProvider

// MsgSignProviderAttributes records that an auditor vouches for provider attributes;
// they are merged with the ones the auditor signed before.
type MsgSignProviderAttributes struct {
	Auditor    string            `json:"auditor"`
	Owner      string            `json:"owner"`
	Attributes market.Attributes `json:"attributes"`
}

// MsgDeleteProviderAttributes withdraws an auditor's signature from attributes (all of
// them when Keys is empty).
type MsgDeleteProviderAttributes struct {
	Auditor string   `json:"auditor"`
	Owner   string   `json:"owner"`
	Keys    []string `json:"keys"`
}

// MsgCreateCertificate binds an x509 certificate (PEM) to the signer's account.
type MsgCreateCertificate struct {
	Owner  string `json:"owner"`
	Cert   []byte `json:"cert"`
	PubKey []byte `json:"pubkey"`
}

// MsgRevokeCertificate revokes one of the signer's certificates by serial number.
type MsgRevokeCertificate struct {
	Owner  string `json:"owner"`
	Serial string `json:"serial"`
}

// MsgCreateDeployment creates a deployment with its groups (one order each) and its
// escrow account funded with Deposit from the owner's balance.
type MsgCreateDeployment struct {
	ID      market.DeploymentID `json:"id"`
	Groups  []market.GroupSpec  `json:"groups"`
	Version []byte              `json:"version"`
	Deposit market.Coin         `json:"deposit"`
}

// MsgUpdateDeployment records a new manifest version for a deployment.
type MsgUpdateDeployment struct {
	ID      market.DeploymentID `json:"id"`
	Version []byte              `json:"version"`
}

// MsgDepositDeployment adds to a deployment's escrow from the depositor's balance.
type MsgDepositDeployment struct {
	ID        market.DeploymentID `json:"id"`
	Amount    market.Coin         `json:"amount"`
	Depositor string              `json:"depositor"`
}

// MsgCloseDeployment closes a deployment, its groups, orders, bids and leases, and
// returns what is left in escrow to the owner.
type MsgCloseDeployment struct {
	ID market.DeploymentID `json:"id"`
}

// MsgCloseGroup closes one group for good.
type MsgCloseGroup struct {
	ID market.GroupID `json:"id"`
}

// MsgPauseGroup closes a group's order and lease, keeping the group to start again.
type MsgPauseGroup struct {
	ID market.GroupID `json:"id"`
}

// MsgStartGroup reopens a paused (or unfunded) group with a new order.
type MsgStartGroup struct {
	ID market.GroupID `json:"id"`
}

// MsgCreateBid is a provider's offer on an order.
type MsgCreateBid struct {
	OrderID        market.OrderID  `json:"order_id"`
	Provider       string          `json:"provider"`
	Price          market.DecCoin  `json:"price"`
	Deposit        market.Coin     `json:"deposit"`
	ResourcesOffer []ResourceOffer `json:"resources_offer"`
}

// MsgCloseBid withdraws a bid; on an active bid it closes the lease as well.
type MsgCloseBid struct {
	ID     market.BidID `json:"id"`
	Reason string       `json:"reason,omitempty"`
}

// MsgCreateLease is the tenant accepting a bid.
type MsgCreateLease struct {
	BidID market.BidID `json:"bid_id"`
}

// MsgCloseLease ends a lease, by its tenant (reason owner) or its provider.
type MsgCloseLease struct {
	ID     market.LeaseID `json:"id"`
	Sender string         `json:"sender"`
	Reason string         `json:"reason"`
}

// MsgWithdrawLease pays a lease's accrued amount to its provider.
type MsgWithdrawLease struct {
	ID market.LeaseID `json:"id"`
}

// Type implements Msg.
func (m *MsgSend) Type() string { return TypeSend }

// Type implements Msg.
func (m *MsgCreateProvider) Type() string { return TypeCreateProvider }

// Type implements Msg.
func (m *MsgUpdateProvider) Type() string { return TypeUpdateProvider }

// Type implements Msg.
func (m *MsgSignProviderAttributes) Type() string { return TypeSignProviderAttributes }

// Type implements Msg.
func (m *MsgDeleteProviderAttributes) Type() string { return TypeDeleteProviderAttribute }

// Type implements Msg.
func (m *MsgCreateCertificate) Type() string { return TypeCreateCertificate }

// Type implements Msg.
func (m *MsgRevokeCertificate) Type() string { return TypeRevokeCertificate }

// Type implements Msg.
func (m *MsgCreateDeployment) Type() string { return TypeCreateDeployment }

// Type implements Msg.
func (m *MsgUpdateDeployment) Type() string { return TypeUpdateDeployment }

// Type implements Msg.
func (m *MsgDepositDeployment) Type() string { return TypeDepositDeployment }

// Type implements Msg.
func (m *MsgCloseDeployment) Type() string { return TypeCloseDeployment }

// Type implements Msg.
func (m *MsgCloseGroup) Type() string { return TypeCloseGroup }

// Type implements Msg.
func (m *MsgPauseGroup) Type() string { return TypePauseGroup }

// Type implements Msg.
func (m *MsgStartGroup) Type() string { return TypeStartGroup }

// Type implements Msg.
func (m *MsgCreateBid) Type() string { return TypeCreateBid }

// Type implements Msg.
func (m *MsgCloseBid) Type() string { return TypeCloseBid }

// Type implements Msg.
func (m *MsgCreateLease) Type() string { return TypeCreateLease }

// Type implements Msg.
func (m *MsgCloseLease) Type() string { return TypeCloseLease }

// Type implements Msg.
func (m *MsgWithdrawLease) Type() string { return TypeWithdrawLease }

// Signer implements Msg.
func (m *MsgSend) Signer() string { return m.From }

// Signer implements Msg.
func (m *MsgCreateProvider) Signer() string { return m.Owner }

// Signer implements Msg.
func (m *MsgUpdateProvider) Signer() string { return m.Owner }

// Signer implements Msg.
func (m *MsgSignProviderAttributes) Signer() string { return m.Auditor }

// Signer implements Msg.
func (m *MsgDeleteProviderAttributes) Signer() string { return m.Auditor }

// Signer implements Msg.
func (m *MsgCreateCertificate) Signer() string { return m.Owner }

// Signer implements Msg.
func (m *MsgRevokeCertificate) Signer() string { return m.Owner }

// Signer implements Msg.
func (m *MsgCreateDeployment) Signer() string { return m.ID.Owner }

// Signer implements Msg.
func (m *MsgUpdateDeployment) Signer() string { return m.ID.Owner }

// Signer implements Msg.
func (m *MsgDepositDeployment) Signer() string { return m.Depositor }

// Signer implements Msg.
func (m *MsgCloseDeployment) Signer() string { return m.ID.Owner }

// Signer implements Msg.
func (m *MsgCloseGroup) Signer() string { return m.ID.Owner }

// Signer implements Msg.
func (m *MsgPauseGroup) Signer() string { return m.ID.Owner }

// Signer implements Msg.
func (m *MsgStartGroup) Signer() string { return m.ID.Owner }

// Signer implements Msg.
func (m *MsgCreateBid) Signer() string { return m.Provider }

// Signer implements Msg.
func (m *MsgCloseBid) Signer() string { return m.ID.Provider }

// Signer implements Msg.
func (m *MsgCreateLease) Signer() string { return m.BidID.Owner }

// Signer implements Msg.
func (m *MsgCloseLease) Signer() string { return m.Sender }

// Signer implements Msg.
func (m *MsgWithdrawLease) Signer() string { return m.ID.Provider }

func invalid(format string, args ...any) error { return Errorf(CodeInvalidMsg, format, args...) }

func checkAddr(field, addr string, p *Params) error {
	if err := CheckAddress(addr, p.AddressPrefix); err != nil {
		return invalid("%s: %v", field, err)
	}
	return nil
}

func checkCoin(field string, c market.Coin, positive bool) error {
	if !market.ValidDenom(c.Denom) {
		return invalid("%s: denomination %q is not valid", field, c.Denom)
	}
	if positive && c.Amount == 0 {
		return invalid("%s: amount must be positive", field)
	}
	return nil
}

func checkDeploymentID(field string, id market.DeploymentID, p *Params) error {
	if err := checkAddr(field+".owner", id.Owner, p); err != nil {
		return err
	}
	if id.DSeq == 0 {
		return invalid("%s.dseq: must be positive", field)
	}
	return nil
}

func checkGroupID(field string, id market.GroupID, p *Params) error {
	if err := checkDeploymentID(field, id.Deployment(), p); err != nil {
		return err
	}
	if id.GSeq == 0 {
		return invalid("%s.gseq: must be positive", field)
	}
	return nil
}

func checkOrderID(field string, id market.OrderID, p *Params) error {
	if err := checkGroupID(field, id.Group(), p); err != nil {
		return err
	}
	if id.OSeq == 0 {
		return invalid("%s.oseq: must be positive", field)
	}
	return nil
}

func checkBidID(field string, id market.BidID, p *Params) error {
	if err := checkOrderID(field, id.Order(), p); err != nil {
		return err
	}
	return checkAddr(field+".provider", id.Provider, p)
}

// MaxAttributes bounds the attributes of a provider, a group or an auditor's signature.
const MaxAttributes = 64

const (
	maxAttributeBytes = 256
	maxInfoBytes      = 256
	maxCertBytes      = 8 << 10
)

func checkAttributes(field string, attrs market.Attributes) error {
	if len(attrs) > MaxAttributes {
		return invalid("%s: %d attributes, at most %d", field, len(attrs), MaxAttributes)
	}
	seen := make(map[string]bool, len(attrs))
	for i, a := range attrs {
		if a.Key == "" || len(a.Key) > maxAttributeBytes || len(a.Value) > maxAttributeBytes {
			return invalid("%s[%d]: key must be 1 to %d bytes and value at most %d", field, i, maxAttributeBytes, maxAttributeBytes)
		}
		if seen[a.Key] {
			return invalid("%s[%d]: key %q is listed twice", field, i, a.Key)
		}
		seen[a.Key] = true
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgSend) ValidateBasic(p *Params) error {
	if err := checkAddr("from", m.From, p); err != nil {
		return err
	}
	if err := checkAddr("to", m.To, p); err != nil {
		return err
	}
	if len(m.Amount) == 0 {
		return invalid("amount: nothing to send")
	}
	for i, c := range m.Amount {
		if err := checkCoin(fmt.Sprintf("amount[%d]", i), c, true); err != nil {
			return err
		}
		for _, o := range m.Amount[:i] {
			if o.Denom == c.Denom {
				return invalid("amount[%d]: %s listed twice", i, c.Denom)
			}
		}
	}
	return nil
}

func validateProvider(m *MsgCreateProvider, p *Params) error {
	if err := checkAddr("owner", m.Owner, p); err != nil {
		return err
	}
	u, err := url.Parse(m.HostURI)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return invalid("host_uri %q: want https://HOST[:PORT]", m.HostURI)
	}
	if len(m.HostURI) > maxInfoBytes || len(m.Info.EMail) > maxInfoBytes || len(m.Info.Website) > maxInfoBytes {
		return invalid("host_uri and info fields: at most %d bytes each", maxInfoBytes)
	}
	return checkAttributes("attributes", m.Attributes)
}

// ValidateBasic implements Msg.
func (m *MsgCreateProvider) ValidateBasic(p *Params) error { return validateProvider(m, p) }

// ValidateBasic implements Msg.
func (m *MsgUpdateProvider) ValidateBasic(p *Params) error {
	return validateProvider((*MsgCreateProvider)(m), p)
}

// ValidateBasic implements Msg.
func (m *MsgSignProviderAttributes) ValidateBasic(p *Params) error {
	if err := checkAddr("auditor", m.Auditor, p); err != nil {
		return err
	}
	if err := checkAddr("owner", m.Owner, p); err != nil {
		return err
	}
	if len(m.Attributes) == 0 {
		return invalid("attributes: nothing to sign")
	}
	return checkAttributes("attributes", m.Attributes)
}

// ValidateBasic implements Msg.
func (m *MsgDeleteProviderAttributes) ValidateBasic(p *Params) error {
	if err := checkAddr("auditor", m.Auditor, p); err != nil {
		return err
	}
	if err := checkAddr("owner", m.Owner, p); err != nil {
		return err
	}
	if len(m.Keys) > MaxAttributes {
		return invalid("keys: %d, at most %d", len(m.Keys), MaxAttributes)
	}
	for i, k := range m.Keys {
		if k == "" {
			return invalid("keys[%d]: empty", i)
		}
	}
	return nil
}

// ParseCert reads a certificate and its public key, both PEM; the certificate's subject
// common name must be its owner's address, as Akash requires.
func ParseCert(certPEM, pubPEM []byte, owner string) (*x509.Certificate, error) {
	if len(certPEM) == 0 || len(certPEM) > maxCertBytes || len(pubPEM) == 0 || len(pubPEM) > maxCertBytes {
		return nil, invalid("cert and pubkey: PEM of 1 to %d bytes each", maxCertBytes)
	}
	blk, rest := pem.Decode(certPEM)
	if blk == nil || blk.Type != "CERTIFICATE" || len(rest) != 0 {
		return nil, invalid("cert: want exactly one PEM CERTIFICATE block")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, invalid("cert: %v", err)
	}
	if c.Subject.CommonName != owner {
		return nil, invalid("cert: subject CN %q is not the owner %s", c.Subject.CommonName, owner)
	}
	pb, rest := pem.Decode(pubPEM)
	if pb == nil || (pb.Type != "PUBLIC KEY" && pb.Type != "EC PUBLIC KEY") || len(rest) != 0 {
		return nil, invalid("pubkey: want exactly one PEM PUBLIC KEY block")
	}
	pub, err := x509.ParsePKIXPublicKey(pb.Bytes)
	if err != nil {
		return nil, invalid("pubkey: %v", err)
	}
	type equaler interface{ Equal(x crypto.PublicKey) bool }
	if e, ok := pub.(equaler); !ok || !e.Equal(c.PublicKey) {
		return nil, invalid("pubkey: does not match the certificate's key")
	}
	return c, nil
}

// ValidateBasic implements Msg.
func (m *MsgCreateCertificate) ValidateBasic(p *Params) error {
	if err := checkAddr("owner", m.Owner, p); err != nil {
		return err
	}
	_, err := ParseCert(m.Cert, m.PubKey, m.Owner)
	return err
}

// ValidateBasic implements Msg.
func (m *MsgRevokeCertificate) ValidateBasic(p *Params) error {
	if err := checkAddr("owner", m.Owner, p); err != nil {
		return err
	}
	if m.Serial == "" || len(m.Serial) > 64 {
		return invalid("serial: want 1 to 64 characters")
	}
	return nil
}

const (
	versionLen        = 32
	maxResourceUnits  = 64
	maxGroupNameBytes = 256
)

func checkVersion(v []byte) error {
	if len(v) != versionLen {
		return invalid("version: %d bytes, want the %d-byte sha256 of the manifest", len(v), versionLen)
	}
	return nil
}

// checkGroups validates group specs and returns their common price denomination.
func checkGroups(groups []market.GroupSpec, p *Params) (string, error) {
	if len(groups) == 0 {
		return "", invalid("groups: a deployment needs at least one group")
	}
	if len(groups) > int(p.MaxGroupsPerDeployment) {
		return "", invalid("groups: %d, at most %d (max_groups_per_deployment)", len(groups), p.MaxGroupsPerDeployment)
	}
	denom := ""
	for gi, g := range groups {
		f := fmt.Sprintf("groups[%d]", gi)
		if g.Name == "" || len(g.Name) > maxGroupNameBytes {
			return "", invalid("%s.name: want 1 to %d bytes", f, maxGroupNameBytes)
		}
		for _, o := range groups[:gi] {
			if o.Name == g.Name {
				return "", invalid("%s.name: %q is used by another group", f, g.Name)
			}
		}
		if err := checkAttributes(f+".requirements.attributes", g.Requirements.Attributes); err != nil {
			return "", err
		}
		if len(g.Resources) == 0 || len(g.Resources) > maxResourceUnits {
			return "", invalid("%s.resources: want 1 to %d resource units", f, maxResourceUnits)
		}
		for ri, ru := range g.Resources {
			rf := fmt.Sprintf("%s.resources[%d]", f, ri)
			if ru.Count == 0 {
				return "", invalid("%s.count: must be positive", rf)
			}
			if ru.Price.Amount.Sign() < 0 {
				return "", invalid("%s.price: negative", rf)
			}
			if !slices.Contains(p.Denoms, ru.Price.Denom) {
				return "", invalid("%s.price: denomination %q is not accepted here (params.denoms: %v)", rf, ru.Price.Denom, p.Denoms)
			}
			if denom == "" {
				denom = ru.Price.Denom
			} else if ru.Price.Denom != denom {
				return "", invalid("%s.price: denomination %q, but other units use %q", rf, ru.Price.Denom, denom)
			}
			if ru.Resources.CPU == nil || ru.Resources.CPU.Units.Val == 0 {
				return "", invalid("%s.resource.cpu: must be positive", rf)
			}
			if ru.Resources.Memory == nil || ru.Resources.Memory.Size.Val == 0 {
				return "", invalid("%s.resource.memory: must be positive", rf)
			}
		}
	}
	return denom, nil
}

// ValidateBasic implements Msg.
func (m *MsgCreateDeployment) ValidateBasic(p *Params) error {
	if err := checkDeploymentID("id", m.ID, p); err != nil {
		return err
	}
	if err := checkVersion(m.Version); err != nil {
		return err
	}
	denom, err := checkGroups(m.Groups, p)
	if err != nil {
		return err
	}
	if err := checkCoin("deposit", m.Deposit, false); err != nil {
		return err
	}
	if m.Deposit.Denom != denom {
		return invalid("deposit: denomination %q, but the groups are priced in %q", m.Deposit.Denom, denom)
	}
	if least, ok := p.MinDeployDeposit(denom); ok && m.Deposit.Amount < least.Amount {
		return invalid("deposit: %s is less than the minimum %s", m.Deposit, least)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgUpdateDeployment) ValidateBasic(p *Params) error {
	if err := checkDeploymentID("id", m.ID, p); err != nil {
		return err
	}
	return checkVersion(m.Version)
}

// ValidateBasic implements Msg.
func (m *MsgDepositDeployment) ValidateBasic(p *Params) error {
	if err := checkDeploymentID("id", m.ID, p); err != nil {
		return err
	}
	if err := checkAddr("depositor", m.Depositor, p); err != nil {
		return err
	}
	return checkCoin("amount", m.Amount, true)
}

// ValidateBasic implements Msg.
func (m *MsgCloseDeployment) ValidateBasic(p *Params) error { return checkDeploymentID("id", m.ID, p) }

// ValidateBasic implements Msg.
func (m *MsgCloseGroup) ValidateBasic(p *Params) error { return checkGroupID("id", m.ID, p) }

// ValidateBasic implements Msg.
func (m *MsgPauseGroup) ValidateBasic(p *Params) error { return checkGroupID("id", m.ID, p) }

// ValidateBasic implements Msg.
func (m *MsgStartGroup) ValidateBasic(p *Params) error { return checkGroupID("id", m.ID, p) }

// ValidateBasic implements Msg.
func (m *MsgCreateBid) ValidateBasic(p *Params) error {
	if err := checkOrderID("order_id", m.OrderID, p); err != nil {
		return err
	}
	if err := checkAddr("provider", m.Provider, p); err != nil {
		return err
	}
	if !market.ValidDenom(m.Price.Denom) {
		return invalid("price: denomination %q is not valid", m.Price.Denom)
	}
	if m.Price.Amount.Sign() <= 0 {
		return invalid("price: must be positive")
	}
	if err := checkCoin("deposit", m.Deposit, false); err != nil {
		return err
	}
	if m.Deposit.Denom != p.BidMinDeposit.Denom || m.Deposit.Amount < p.BidMinDeposit.Amount {
		return invalid("deposit: %s, want at least %s (params.bid_min_deposit)", m.Deposit, p.BidMinDeposit)
	}
	if len(m.ResourcesOffer) > maxResourceUnits {
		return invalid("resources_offer: %d entries, at most %d", len(m.ResourcesOffer), maxResourceUnits)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgCloseBid) ValidateBasic(p *Params) error {
	if err := checkBidID("id", m.ID, p); err != nil {
		return err
	}
	if m.Reason != "" && !providerReasons[m.Reason] {
		return invalid("reason %q: a provider closes with unstable, decommission, unspecified or manifest_timeout", m.Reason)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgCreateLease) ValidateBasic(p *Params) error { return checkBidID("bid_id", m.BidID, p) }

// ValidateBasic implements Msg.
func (m *MsgCloseLease) ValidateBasic(p *Params) error {
	if err := checkBidID("id", market.BidID(m.ID), p); err != nil {
		return err
	}
	switch m.Sender {
	case m.ID.Owner:
		if m.Reason != ReasonOwner {
			return invalid("reason %q: a tenant closes with reason owner", m.Reason)
		}
	case m.ID.Provider:
		if !providerReasons[m.Reason] {
			return invalid("reason %q: a provider closes with unstable, decommission, unspecified or manifest_timeout", m.Reason)
		}
	default:
		return Errorf(CodeNotPermitted, "sender %s is neither the lease's owner nor its provider", m.Sender)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgWithdrawLease) ValidateBasic(p *Params) error {
	return checkBidID("id", market.BidID(m.ID), p)
}
