package ledger

import (
	"berth.dev/berth/api/market/v1"
)

// Account is a key's account: its public key (known once it has signed a transaction)
// and the sequence number its next transaction must carry.
type Account struct {
	Address  string  `json:"address"`
	PubKey   *PubKey `json:"pub_key,omitempty"`
	Sequence uint64  `json:"sequence,string"`
}

// ProviderInfo is a provider's contact details.
type ProviderInfo struct {
	EMail   string `json:"email,omitempty"`
	Website string `json:"website,omitempty"`
}

// Provider is a registered provider: where its gateway listens and what it offers.
type Provider struct {
	Owner      string            `json:"owner"`
	HostURI    string            `json:"host_uri"`
	Attributes market.Attributes `json:"attributes"`
	Info       ProviderInfo      `json:"info"`
}

// AuditedAttributes are the provider attributes one auditor vouches for.
type AuditedAttributes struct {
	Owner      string            `json:"owner"`
	Auditor    string            `json:"auditor"`
	Attributes market.Attributes `json:"attributes"`
}

// Certificate states.
const (
	CertValid   = "valid"
	CertRevoked = "revoked"
)

// Certificate is an x509 certificate bound to an account, for mTLS between tenants and
// providers.
type Certificate struct {
	Owner  string `json:"owner"`
	Serial string `json:"serial"`
	State  string `json:"state"`
	Cert   []byte `json:"cert"`   // PEM
	PubKey []byte `json:"pubkey"` // PEM
}

// Deployment states.
const (
	DeploymentActive = "active"
	DeploymentClosed = "closed"
)

// Deployment is a tenant's deployment: the manifest version its groups are for.
type Deployment struct {
	ID        market.DeploymentID `json:"id"`
	State     string              `json:"state"`
	Version   []byte              `json:"version"`
	CreatedAt int64               `json:"created_at,string"`
}

// Group states.
const (
	GroupOpen              = "open"
	GroupPaused            = "paused"
	GroupInsufficientFunds = "insufficient_funds"
	GroupClosed            = "closed"
)

// Group is one group of a deployment: its spec and its current order.
type Group struct {
	ID        market.GroupID   `json:"id"`
	State     string           `json:"state"`
	Spec      market.GroupSpec `json:"group_spec"`
	CreatedAt int64            `json:"created_at,string"`
	// LastOSeq is the sequence of the group's newest order (0 before the first).
	LastOSeq uint32 `json:"last_oseq"`
}

// Order states.
const (
	OrderOpen   = "open"
	OrderActive = "active"
	OrderClosed = "closed"
)

// Order is a group put up for bids.
type Order struct {
	ID        market.OrderID   `json:"id"`
	State     string           `json:"state"`
	Spec      market.GroupSpec `json:"spec"`
	CreatedAt int64            `json:"created_at,string"`
}

// Bid states.
const (
	BidOpen   = "open"
	BidActive = "active"
	BidLost   = "lost"
	BidClosed = "closed"
)

// ResourceOffer is what a provider offers for one resource unit of the group.
type ResourceOffer struct {
	Resources market.Resources `json:"resources"`
	Count     uint32           `json:"count"`
}

// Bid is a provider's offer to run an order at a price per block.
type Bid struct {
	ID             market.BidID    `json:"id"`
	State          string          `json:"state"`
	Price          market.DecCoin  `json:"price"`
	Deposit        market.Coin     `json:"deposit"`
	ResourcesOffer []ResourceOffer `json:"resources_offer"`
	CreatedAt      int64           `json:"created_at,string"`
}

// Lease states.
const (
	LeaseActive            = "active"
	LeaseInsufficientFunds = "insufficient_funds"
	LeaseClosed            = "closed"
)

// Lease close reasons, Akash's names.
const (
	ReasonOwner             = "owner"
	ReasonUnstable          = "unstable"
	ReasonDecommission      = "decommission"
	ReasonUnspecified       = "unspecified"
	ReasonManifestTimeout   = "manifest_timeout"
	ReasonInsufficientFunds = "insufficient_funds"
)

// providerReasons are the reasons a provider may give for closing a lease.
var providerReasons = map[string]bool{
	ReasonUnstable: true, ReasonDecommission: true, ReasonUnspecified: true, ReasonManifestTimeout: true,
}

// Lease is an accepted bid: the provider runs the group and is paid Price per block.
type Lease struct {
	ID        market.LeaseID `json:"id"`
	State     string         `json:"state"`
	Price     market.DecCoin `json:"price"`
	CreatedAt int64          `json:"created_at,string"`
	ClosedOn  int64          `json:"closed_on,string,omitempty"`
	Reason    string         `json:"reason,omitempty"`
}

// Escrow account states.
const (
	EscrowOpen      = "open"
	EscrowOverdrawn = "overdrawn"
	EscrowClosed    = "closed"
)

// EscrowAccount holds a deployment's deposit and pays its leases. Payments are settled
// lazily: the account records the last height paid for (SettledAt), and every read or
// write first settles to the current height, which gives exactly what paying every
// lease every block would, at O(1) per block. DepletesAt is the last height the balance
// can pay in full; the block after it closes the leases for insufficient funds.
type EscrowAccount struct {
	ID          market.DeploymentID `json:"id"`
	Owner       string              `json:"owner"`
	State       string              `json:"state"`
	Balance     market.DecCoin      `json:"balance"`
	Transferred market.DecCoin      `json:"transferred"`
	Rate        market.Dec          `json:"rate"`
	SettledAt   int64               `json:"settled_at,string"`
	DepletesAt  int64               `json:"depletes_at,string,omitempty"`
}

// Payment states.
const (
	PaymentOpen      = "open"
	PaymentOverdrawn = "overdrawn"
	PaymentClosed    = "closed"
)

// Payment is a lease's share of its deployment's escrow account: what has accrued to
// the provider and not yet been withdrawn.
type Payment struct {
	ID        market.LeaseID `json:"id"`
	State     string         `json:"state"`
	Rate      market.DecCoin `json:"rate"`
	Balance   market.DecCoin `json:"balance"`
	Withdrawn market.DecCoin `json:"withdrawn"`
}
