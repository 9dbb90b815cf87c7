package ledger

import (
	"encoding/json"
	"slices"
	"strings"

	"berth.dev/berth/internal/market"
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

const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
	// One page reads at most scanPerItem×limit+scanBase entries.
	scanPerItem = 10
	scanBase    = 1000
)

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

type querier struct {
	r       reader
	height  int64
	params  *Params
	chainID string
}

func badQuery(format string, args ...any) error { return errf(CodeBadQuery, format, args...) }

func decodeReq(data []byte, v any) error {
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := strictUnmarshal(data, v); err != nil {
		return badQuery("request: %v", err)
	}
	return nil
}

func (q *querier) addr(field, a string) error {
	if err := CheckAddress(a, q.params.AddressPrefix); err != nil {
		return badQuery("%s: %v", field, err)
	}
	return nil
}

func (q *querier) query(path string, data []byte) ([]byte, error) {
	var out any
	var err error
	switch path {
	case QueryParams.Path:
		out = ParamsResponse{ChainID: q.chainID, Params: *q.params}
	case QueryAccount.Path:
		out, err = q.account(data)
	case QueryProvider.Path:
		out, err = q.provider(data)
	case QueryProviders.Path:
		out, err = q.providers(data)
	case QueryAudit.Path:
		out, err = q.audit(data)
	case QueryCertificates.Path:
		out, err = q.certificates(data)
	case QueryDeployment.Path:
		out, err = q.deployment(data)
	case QueryDeployments.Path:
		out, err = q.deployments(data)
	case QueryOrder.Path:
		out, err = q.order(data)
	case QueryOrders.Path:
		out, err = q.orders(data)
	case QueryBid.Path:
		out, err = q.bid(data)
	case QueryBids.Path:
		out, err = q.bids(data)
	case QueryLease.Path:
		out, err = q.lease(data)
	case QueryLeases.Path:
		out, err = q.leases(data)
	case QuerySupply.Path:
		var s SupplyResponse
		s.Supply = append(s.Supply, sortedKeys(Supply(q.r))...)
		out = s
	default:
		return nil, badQuery("unknown query path %q", path)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func sortedKeys(m map[string]market.Dec) []market.DecCoin {
	out := make([]market.DecCoin, 0, len(m))
	for d, v := range m {
		out = append(out, market.DecCoin{Amount: v, Denom: d})
	}
	slices.SortFunc(out, func(a, b market.DecCoin) int { return strings.Compare(a.Denom, b.Denom) })
	return out
}

// page walks the keys under prefix from the page's key and collects up to the limit of
// the items load accepts; NextKey is where the next page starts.
func page[T any](r reader, prefix string, p Page, load func(k string, v []byte) (T, bool)) ([]T, []byte, error) {
	limit := int(p.Limit)
	if limit == 0 {
		limit = defaultPageLimit
	}
	if limit > maxPageLimit {
		return nil, nil, badQuery("page.limit %d: at most %d", p.Limit, maxPageLimit)
	}
	from := ""
	if len(p.Key) > 0 {
		if !strings.HasPrefix(string(p.Key), prefix) {
			return nil, nil, badQuery("page.key does not belong to this list (use the next_key of the same query)")
		}
		from = string(p.Key)
	}
	out := []T{}
	var next []byte
	// A filter may skip most entries: bound the work of one page, and let the caller
	// continue from where it stopped (the page then holds fewer items than the limit).
	budget := scanPerItem*limit + scanBase
	r.ascend(prefix, from, func(k string, v []byte) bool {
		if len(out) == limit || budget == 0 {
			next = []byte(k)
			return false
		}
		budget--
		if item, ok := load(k, v); ok {
			out = append(out, item)
		}
		return true
	})
	return out, next, nil
}

func decodeAs[T any](key string, v []byte) T {
	var t T
	decodeEntry(key, v, &t)
	return t
}

func (q *querier) account(data []byte) (AccountResponse, error) {
	var req AccountRequest
	if err := decodeReq(data, &req); err != nil {
		return AccountResponse{}, err
	}
	if err := q.addr("address", req.Address); err != nil {
		return AccountResponse{}, err
	}
	var resp AccountResponse
	if !getJSON(q.r, accountKey(req.Address), &resp.Account) {
		return resp, errf(CodeNotFound, "account %s does not exist", req.Address)
	}
	resp.Balances = []market.Coin{}
	q.r.ascend(balancePrefix(req.Address), "", func(k string, v []byte) bool {
		resp.Balances = append(resp.Balances, decodeAs[market.Coin](k, v))
		return true
	})
	return resp, nil
}

func (q *querier) provider(data []byte) (Provider, error) {
	var req ProviderRequest
	if err := decodeReq(data, &req); err != nil {
		return Provider{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return Provider{}, err
	}
	var p Provider
	if !getJSON(q.r, providerKey(req.Owner), &p) {
		return p, errf(CodeNotFound, "provider %s is not registered", req.Owner)
	}
	return p, nil
}

func (q *querier) providers(data []byte) (ProvidersResponse, error) {
	var req ProvidersRequest
	if err := decodeReq(data, &req); err != nil {
		return ProvidersResponse{}, err
	}
	list, next, err := page(q.r, table(tProvider).String(), req.Page, func(k string, v []byte) (Provider, bool) {
		return decodeAs[Provider](k, v), true
	})
	return ProvidersResponse{Providers: list, NextKey: next}, err
}

func (q *querier) audit(data []byte) (AuditResponse, error) {
	var req AuditRequest
	if err := decodeReq(data, &req); err != nil {
		return AuditResponse{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return AuditResponse{}, err
	}
	resp := AuditResponse{Attributes: []AuditedAttributes{}}
	q.r.ascend(auditPrefix(req.Owner), "", func(k string, v []byte) bool {
		a := decodeAs[AuditedAttributes](k, v)
		if req.Auditor == "" || a.Auditor == req.Auditor {
			resp.Attributes = append(resp.Attributes, a)
		}
		return true
	})
	return resp, nil
}

func (q *querier) certificates(data []byte) (CertificatesResponse, error) {
	var req CertificatesRequest
	if err := decodeReq(data, &req); err != nil {
		return CertificatesResponse{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return CertificatesResponse{}, err
	}
	if req.State != "" && req.State != CertValid && req.State != CertRevoked {
		return CertificatesResponse{}, badQuery("state %q: want valid or revoked", req.State)
	}
	list, next, err := page(q.r, certPrefix(req.Owner), req.Page, func(k string, v []byte) (Certificate, bool) {
		c := decodeAs[Certificate](k, v)
		return c, (req.Serial == "" || c.Serial == req.Serial) && (req.State == "" || c.State == req.State)
	})
	return CertificatesResponse{Certificates: list, NextKey: next}, err
}

// deploymentView builds a deployment's response with its escrow settled to the
// query's height.
func (q *querier) deploymentView(d Deployment) DeploymentResponse {
	resp := DeploymentResponse{Deployment: d, Groups: []Group{}}
	q.r.ascend(groupsPrefix(d.ID), "", func(k string, v []byte) bool {
		resp.Groups = append(resp.Groups, decodeAs[Group](k, v))
		return true
	})
	getJSON(q.r, escrowKey(d.ID), &resp.Escrow)
	resp.Payments = readPayments(q.r, d.ID)
	if resp.Payments == nil {
		resp.Payments = []Payment{}
	}
	accrue(&resp.Escrow, resp.Payments, q.height)
	return resp
}

func (q *querier) deployment(data []byte) (DeploymentResponse, error) {
	var req DeploymentRequest
	if err := decodeReq(data, &req); err != nil {
		return DeploymentResponse{}, err
	}
	var d Deployment
	if !getJSON(q.r, deploymentKey(req.ID), &d) {
		return DeploymentResponse{}, errf(CodeNotFound, "deployment %s does not exist", req.ID)
	}
	return q.deploymentView(d), nil
}

func (q *querier) deployments(data []byte) (DeploymentsResponse, error) {
	var req DeploymentsRequest
	if err := decodeReq(data, &req); err != nil {
		return DeploymentsResponse{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return DeploymentsResponse{}, err
	}
	if req.State != "" && req.State != DeploymentActive && req.State != DeploymentClosed {
		return DeploymentsResponse{}, badQuery("state %q: want active or closed", req.State)
	}
	list, next, err := page(q.r, deploymentPrefix(req.Owner), req.Page, func(k string, v []byte) (DeploymentResponse, bool) {
		d := decodeAs[Deployment](k, v)
		if req.State != "" && d.State != req.State {
			return DeploymentResponse{}, false
		}
		return q.deploymentView(d), true
	})
	return DeploymentsResponse{Deployments: list, NextKey: next}, err
}

func (q *querier) ordersByID(req OrdersRequest) (OrdersResponse, error) {
	if len(req.IDs) > MaxOrderIDs {
		return OrdersResponse{}, badQuery("ids: %d orders, at most %d", len(req.IDs), MaxOrderIDs)
	}
	if req.State != "" || req.Owner != "" || len(req.Page.Key) > 0 {
		return OrdersResponse{}, badQuery("ids cannot be combined with state, owner or page")
	}
	out := OrdersResponse{Orders: make([]Order, 0, len(req.IDs))}
	for _, id := range req.IDs {
		var o Order
		if getJSON(q.r, orderKey(id), &o) {
			out.Orders = append(out.Orders, o)
		}
	}
	return out, nil
}

func (q *querier) order(data []byte) (Order, error) {
	var req OrderRequest
	if err := decodeReq(data, &req); err != nil {
		return Order{}, err
	}
	var o Order
	if !getJSON(q.r, orderKey(req.ID), &o) {
		return o, errf(CodeNotFound, "order %s does not exist", req.ID)
	}
	return o, nil
}

func checkState(state string, allowed ...string) error {
	if state == "" {
		return nil
	}
	for _, a := range allowed {
		if state == a {
			return nil
		}
	}
	return badQuery("state %q: want one of %s", state, strings.Join(allowed, ", "))
}

func (q *querier) orders(data []byte) (OrdersResponse, error) {
	var req OrdersRequest
	if err := decodeReq(data, &req); err != nil {
		return OrdersResponse{}, err
	}
	if len(req.IDs) > 0 {
		return q.ordersByID(req)
	}
	if err := checkState(req.State, OrderOpen, OrderActive, OrderClosed); err != nil {
		return OrdersResponse{}, err
	}
	if req.Owner != "" {
		if err := q.addr("owner", req.Owner); err != nil {
			return OrdersResponse{}, err
		}
	}
	var prefix string
	var load func(k string, v []byte) (Order, bool)
	if req.State != "" {
		// The index key is the state's prefix, then the order ID (owner first): the
		// owner filter below narrows prefix, not the part before the ID.
		statePrefix := orderStatePrefix(req.State)
		prefix = statePrefix
		load = func(k string, _ []byte) (Order, bool) {
			id, ok := decodeOrderIDKey(k, statePrefix)
			var o Order
			return o, ok && getJSON(q.r, orderKey(id), &o)
		}
	} else {
		prefix = table(tOrder).String()
		load = func(k string, v []byte) (Order, bool) { return decodeAs[Order](k, v), true }
	}
	if req.Owner != "" {
		prefix += req.Owner + "\x00"
	}
	list, next, err := page(q.r, prefix, req.Page, load)
	return OrdersResponse{Orders: list, NextKey: next}, err
}

func (q *querier) bid(data []byte) (Bid, error) {
	var req BidRequest
	if err := decodeReq(data, &req); err != nil {
		return Bid{}, err
	}
	var b Bid
	if !getJSON(q.r, bidKey(req.ID), &b) {
		return b, errf(CodeNotFound, "bid %s does not exist", req.ID)
	}
	return b, nil
}

func (q *querier) bids(data []byte) (BidsResponse, error) {
	var req BidsRequest
	if err := decodeReq(data, &req); err != nil {
		return BidsResponse{}, err
	}
	if err := checkState(req.State, BidOpen, BidActive, BidLost, BidClosed); err != nil {
		return BidsResponse{}, err
	}
	keep := func(b Bid) bool { return req.State == "" || b.State == req.State }
	var prefix string
	var load func(k string, v []byte) (Bid, bool)
	direct := func(k string, v []byte) (Bid, bool) { b := decodeAs[Bid](k, v); return b, keep(b) }
	switch {
	case req.Order != nil:
		prefix, load = bidsPrefix(*req.Order), direct
	case req.Provider != "":
		if err := q.addr("provider", req.Provider); err != nil {
			return BidsResponse{}, err
		}
		prefix = bidProviderPrefix(req.Provider)
		load = func(k string, _ []byte) (Bid, bool) {
			oid, ok := decodeOrderIDKey(k, prefix)
			var b Bid
			return b, ok && getJSON(q.r, bidKey(oid.Bid(req.Provider)), &b) && keep(b)
		}
	case req.Owner != "":
		if err := q.addr("owner", req.Owner); err != nil {
			return BidsResponse{}, err
		}
		k := table(tBid).str(req.Owner)
		if req.DSeq != 0 {
			k.u64(req.DSeq)
		}
		prefix, load = k.String(), direct
	default:
		return BidsResponse{}, badQuery("bids: give order, provider or owner")
	}
	list, next, err := page(q.r, prefix, req.Page, load)
	return BidsResponse{Bids: list, NextKey: next}, err
}

func (q *querier) leaseView(l Lease) LeaseResponse {
	resp := LeaseResponse{Lease: l}
	getJSON(q.r, paymentKey(l.ID), &resp.Payment)
	if resp.Payment.State == PaymentOpen {
		var a EscrowAccount
		if getJSON(q.r, escrowKey(l.ID.Deployment()), &a) {
			pays := []Payment{resp.Payment}
			// Settling only this payment gives its exact share; the account copy is
			// discarded.
			accrue(&a, pays, q.height)
			resp.Payment = pays[0]
		}
	}
	return resp
}

func (q *querier) lease(data []byte) (LeaseResponse, error) {
	var req LeaseRequest
	if err := decodeReq(data, &req); err != nil {
		return LeaseResponse{}, err
	}
	var l Lease
	if !getJSON(q.r, leaseKey(req.ID), &l) {
		return LeaseResponse{}, errf(CodeNotFound, "lease %s does not exist", req.ID)
	}
	return q.leaseView(l), nil
}

func (q *querier) leases(data []byte) (LeasesResponse, error) {
	var req LeasesRequest
	if err := decodeReq(data, &req); err != nil {
		return LeasesResponse{}, err
	}
	if err := checkState(req.State, LeaseActive, LeaseInsufficientFunds, LeaseClosed); err != nil {
		return LeasesResponse{}, err
	}
	keep := func(l Lease) bool {
		return (req.State == "" || l.State == req.State) &&
			(req.Owner == "" || l.ID.Owner == req.Owner) && (req.DSeq == 0 || l.ID.DSeq == req.DSeq)
	}
	var prefix string
	var load func(k string, v []byte) (LeaseResponse, bool)
	switch {
	case req.Provider != "":
		if err := q.addr("provider", req.Provider); err != nil {
			return LeasesResponse{}, err
		}
		prefix = leaseProviderPrefix(req.Provider)
		if req.Owner != "" {
			prefix += req.Owner + "\x00"
		}
		load = func(k string, _ []byte) (LeaseResponse, bool) {
			oid, ok := decodeOrderIDKey(k, leaseProviderPrefix(req.Provider))
			var l Lease
			if !ok || !getJSON(q.r, leaseKey(oid.Bid(req.Provider).Lease()), &l) || !keep(l) {
				return LeaseResponse{}, false
			}
			return q.leaseView(l), true
		}
	default:
		prefix = table(tLease).String()
		if req.Owner != "" {
			if err := q.addr("owner", req.Owner); err != nil {
				return LeasesResponse{}, err
			}
			k := table(tLease).str(req.Owner)
			if req.DSeq != 0 {
				k.u64(req.DSeq)
			}
			prefix = k.String()
		}
		load = func(k string, v []byte) (LeaseResponse, bool) {
			l := decodeAs[Lease](k, v)
			if !keep(l) {
				return LeaseResponse{}, false
			}
			return q.leaseView(l), true
		}
	}
	list, next, err := page(q.r, prefix, req.Page, load)
	return LeasesResponse{Leases: list, NextKey: next}, err
}
