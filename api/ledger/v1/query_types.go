package ledger

import (
	"berth.dev/berth/api/market/v1"
)

// The ledger's queries. Requests and answers are JSON; list requests take a Page and
// their answers carry NextKey (empty on the last page): List walks them.
var (
	QueryParams       = Query[NoRequest, ParamsResponse]{"/params"}
	QueryAccount      = Query[AccountRequest, AccountResponse]{"/account"}
	QueryProvider     = Query[ProviderRequest, Provider]{"/provider"}
	QueryProviders    = Query[ProvidersRequest, ProvidersResponse]{"/providers"}
	QueryAudit        = Query[AuditRequest, AuditResponse]{"/audit"}
	QueryCertificates = Query[CertificatesRequest, CertificatesResponse]{"/certificates"}
	QueryDeployment   = Query[DeploymentRequest, DeploymentResponse]{"/deployment"}
	QueryDeployments  = Query[DeploymentsRequest, DeploymentsResponse]{"/deployments"}
	QueryOrder        = Query[OrderRequest, Order]{"/order"}
	QueryOrders       = Query[OrdersRequest, OrdersResponse]{"/orders"}
	QueryBid          = Query[BidRequest, Bid]{"/bid"}
	QueryBids         = Query[BidsRequest, BidsResponse]{"/bids"}
	QueryLease        = Query[LeaseRequest, LeaseResponse]{"/lease"}
	QueryLeases       = Query[LeasesRequest, LeasesResponse]{"/leases"}
	QuerySupply       = Query[NoRequest, SupplyResponse]{"/supply"}
)

// Page selects one page of a list: up to Limit items (default 100, at most 1000)
// starting at Key, the NextKey of the previous page. A filtered list reads a bounded
// number of entries per page, so a page may hold fewer items than the limit, even none,
// and still have a NextKey: the list ends only when NextKey is empty.
type Page struct {
	Key   []byte `json:"key,omitempty"`
	Limit uint32 `json:"limit,omitempty"`
}

// ParamsResponse is the chain's identity and rules.
type ParamsResponse struct {
	ChainID string `json:"chain_id"`
	Params  Params `json:"params"`
}

// AccountRequest names an account.
type AccountRequest struct {
	Address string `json:"address"`
}

// AccountResponse is an account and its balances.
type AccountResponse struct {
	Account  Account       `json:"account"`
	Balances []market.Coin `json:"balances"`
}

// Balance is the account's balance in denom (0 when it holds none).
func (a AccountResponse) Balance(denom string) market.Uint {
	for _, c := range a.Balances {
		if c.Denom == denom {
			return c.Amount
		}
	}
	return 0
}

// ProviderRequest names a provider.
type ProviderRequest struct {
	Owner string `json:"owner"`
}

// ProvidersRequest lists providers.
type ProvidersRequest struct {
	Page Page `json:"page"`
}

// ProvidersResponse is a page of providers.
type ProvidersResponse struct {
	Providers []Provider `json:"providers"`
	NextKey   []byte     `json:"next_key,omitempty"`
}

// AuditRequest lists the attributes auditors signed for a provider (one auditor's when
// Auditor is set).
type AuditRequest struct {
	Owner   string `json:"owner"`
	Auditor string `json:"auditor,omitempty"`
}

// AuditResponse lists signed attributes, one entry per auditor.
type AuditResponse struct {
	Attributes []AuditedAttributes `json:"attributes"`
}

// CertificatesRequest lists an owner's certificates, optionally one serial or state.
type CertificatesRequest struct {
	Owner  string `json:"owner"`
	Serial string `json:"serial,omitempty"`
	State  string `json:"state,omitempty"`
	Page   Page   `json:"page"`
}

// CertificatesResponse is a page of certificates.
type CertificatesResponse struct {
	Certificates []Certificate `json:"certificates"`
	NextKey      []byte        `json:"next_key,omitempty"`
}

// DeploymentRequest names a deployment.
type DeploymentRequest struct {
	ID market.DeploymentID `json:"id"`
}

// DeploymentResponse is a deployment with its groups, its escrow account and the
// account's lease payments, settled to the query's height.
type DeploymentResponse struct {
	Deployment Deployment    `json:"deployment"`
	Groups     []Group       `json:"groups"`
	Escrow     EscrowAccount `json:"escrow_account"`
	Payments   []Payment     `json:"escrow_payments"`
}

// DeploymentsRequest lists an owner's deployments, optionally in one state.
type DeploymentsRequest struct {
	Owner string `json:"owner"`
	State string `json:"state,omitempty"`
	Page  Page   `json:"page"`
}

// DeploymentsResponse is a page of deployments.
type DeploymentsResponse struct {
	Deployments []DeploymentResponse `json:"deployments"`
	NextKey     []byte               `json:"next_key,omitempty"`
}

// OrderRequest names an order.
type OrderRequest struct {
	ID market.OrderID `json:"id"`
}

// OrdersRequest lists orders, optionally by state and owner; or, with IDs, reads those
// orders (at most MaxOrderIDs, no other filter; absent ones are left out).
type OrdersRequest struct {
	IDs   []market.OrderID `json:"ids,omitempty"`
	State string           `json:"state,omitempty"`
	Owner string           `json:"owner,omitempty"`
	Page  Page             `json:"page"`
}

// MaxOrderIDs bounds the orders one query reads by ID.
const MaxOrderIDs = 1000

// OrdersResponse is a page of orders.
type OrdersResponse struct {
	Orders  []Order `json:"orders"`
	NextKey []byte  `json:"next_key,omitempty"`
}

// BidRequest names a bid.
type BidRequest struct {
	ID market.BidID `json:"id"`
}

// BidsRequest lists the bids of an order, or of a provider, or of an owner's
// deployments; optionally in one state.
type BidsRequest struct {
	Order    *market.OrderID `json:"order,omitempty"`
	Provider string          `json:"provider,omitempty"`
	Owner    string          `json:"owner,omitempty"`
	DSeq     uint64          `json:"dseq,string,omitempty"`
	State    string          `json:"state,omitempty"`
	Page     Page            `json:"page"`
}

// BidsResponse is a page of bids.
type BidsResponse struct {
	Bids    []Bid  `json:"bids"`
	NextKey []byte `json:"next_key,omitempty"`
}

// LeaseRequest names a lease.
type LeaseRequest struct {
	ID market.LeaseID `json:"id"`
}

// LeaseResponse is a lease and its payment settled to the query's height.
type LeaseResponse struct {
	Lease   Lease   `json:"lease"`
	Payment Payment `json:"escrow_payment"`
}

// LeasesRequest lists leases of a provider or an owner (and deployment), optionally in
// one state.
type LeasesRequest struct {
	Provider string `json:"provider,omitempty"`
	Owner    string `json:"owner,omitempty"`
	DSeq     uint64 `json:"dseq,string,omitempty"`
	State    string `json:"state,omitempty"`
	Page     Page   `json:"page"`
}

// LeasesResponse is a page of leases.
type LeasesResponse struct {
	Leases  []LeaseResponse `json:"leases"`
	NextKey []byte          `json:"next_key,omitempty"`
}

// SupplyResponse is the total of each denomination (see Supply).
type SupplyResponse struct {
	Supply []market.DecCoin `json:"supply"`
}

// WithKey is the request for the page at k (PagedRequest).
func (r ProvidersRequest) WithKey(k []byte) ProvidersRequest { r.Page.Key = k; return r }

// Next is the next page's key (PagedResponse).
func (r ProvidersResponse) Next() []byte { return r.NextKey }

// WithKey is the request for the page at k (PagedRequest).
func (r CertificatesRequest) WithKey(k []byte) CertificatesRequest { r.Page.Key = k; return r }

// Next is the next page's key (PagedResponse).
func (r CertificatesResponse) Next() []byte { return r.NextKey }

// WithKey is the request for the page at k (PagedRequest).
func (r DeploymentsRequest) WithKey(k []byte) DeploymentsRequest { r.Page.Key = k; return r }

// Next is the next page's key (PagedResponse).
func (r DeploymentsResponse) Next() []byte { return r.NextKey }

// WithKey is the request for the page at k (PagedRequest).
func (r OrdersRequest) WithKey(k []byte) OrdersRequest { r.Page.Key = k; return r }

// Next is the next page's key (PagedResponse).
func (r OrdersResponse) Next() []byte { return r.NextKey }

// WithKey is the request for the page at k (PagedRequest).
func (r BidsRequest) WithKey(k []byte) BidsRequest { r.Page.Key = k; return r }

// Next is the next page's key (PagedResponse).
func (r BidsResponse) Next() []byte { return r.NextKey }

// WithKey is the request for the page at k (PagedRequest).
func (r LeasesRequest) WithKey(k []byte) LeasesRequest { r.Page.Key = k; return r }

// Next is the next page's key (PagedResponse).
func (r LeasesResponse) Next() []byte { return r.NextKey }
