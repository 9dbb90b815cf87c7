package ledger

import (
	"encoding/json"
	"slices"
	"strings"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
	// One page reads at most scanPerItem×limit+scanBase entries.
	scanPerItem = 10
	scanBase    = 1000
)

type querier struct {
	r       reader
	height  int64
	params  *api.Params
	chainID string
}

func badQuery(format string, args ...any) error { return api.Errorf(api.CodeBadQuery, format, args...) }

func decodeReq(data []byte, v any) error {
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := api.UnmarshalStrict(data, v); err != nil {
		return badQuery("request: %v", err)
	}
	return nil
}

func (q *querier) addr(field, a string) error {
	if err := api.CheckAddress(a, q.params.AddressPrefix); err != nil {
		return badQuery("%s: %v", field, err)
	}
	return nil
}

func (q *querier) query(path string, data []byte) ([]byte, error) {
	var out any
	var err error
	switch path {
	case api.QueryParams.Path:
		out = api.ParamsResponse{ChainID: q.chainID, Params: *q.params}
	case api.QueryAccount.Path:
		out, err = q.account(data)
	case api.QueryProvider.Path:
		out, err = q.provider(data)
	case api.QueryProviders.Path:
		out, err = q.providers(data)
	case api.QueryAudit.Path:
		out, err = q.audit(data)
	case api.QueryCertificates.Path:
		out, err = q.certificates(data)
	case api.QueryDeployment.Path:
		out, err = q.deployment(data)
	case api.QueryDeployments.Path:
		out, err = q.deployments(data)
	case api.QueryOrder.Path:
		out, err = q.order(data)
	case api.QueryOrders.Path:
		out, err = q.orders(data)
	case api.QueryBid.Path:
		out, err = q.bid(data)
	case api.QueryBids.Path:
		out, err = q.bids(data)
	case api.QueryLease.Path:
		out, err = q.lease(data)
	case api.QueryLeases.Path:
		out, err = q.leases(data)
	case api.QuerySupply.Path:
		var s api.SupplyResponse
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
func page[T any](r reader, prefix string, p api.Page, load func(k string, v []byte) (T, bool)) ([]T, []byte, error) {
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

func (q *querier) account(data []byte) (api.AccountResponse, error) {
	var req api.AccountRequest
	if err := decodeReq(data, &req); err != nil {
		return api.AccountResponse{}, err
	}
	if err := q.addr("address", req.Address); err != nil {
		return api.AccountResponse{}, err
	}
	var resp api.AccountResponse
	if !getJSON(q.r, accountKey(req.Address), &resp.Account) {
		return resp, api.Errorf(api.CodeNotFound, "account %s does not exist", req.Address)
	}
	resp.Balances = []market.Coin{}
	q.r.ascend(balancePrefix(req.Address), "", func(k string, v []byte) bool {
		resp.Balances = append(resp.Balances, decodeAs[market.Coin](k, v))
		return true
	})
	return resp, nil
}

func (q *querier) provider(data []byte) (api.Provider, error) {
	var req api.ProviderRequest
	if err := decodeReq(data, &req); err != nil {
		return api.Provider{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return api.Provider{}, err
	}
	var p api.Provider
	if !getJSON(q.r, providerKey(req.Owner), &p) {
		return p, api.Errorf(api.CodeNotFound, "provider %s is not registered", req.Owner)
	}
	return p, nil
}

func (q *querier) providers(data []byte) (api.ProvidersResponse, error) {
	var req api.ProvidersRequest
	if err := decodeReq(data, &req); err != nil {
		return api.ProvidersResponse{}, err
	}
	list, next, err := page(q.r, table(tProvider).String(), req.Page, func(k string, v []byte) (api.Provider, bool) {
		return decodeAs[api.Provider](k, v), true
	})
	return api.ProvidersResponse{Providers: list, NextKey: next}, err
}

func (q *querier) audit(data []byte) (api.AuditResponse, error) {
	var req api.AuditRequest
	if err := decodeReq(data, &req); err != nil {
		return api.AuditResponse{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return api.AuditResponse{}, err
	}
	resp := api.AuditResponse{Attributes: []api.AuditedAttributes{}}
	q.r.ascend(auditPrefix(req.Owner), "", func(k string, v []byte) bool {
		a := decodeAs[api.AuditedAttributes](k, v)
		if req.Auditor == "" || a.Auditor == req.Auditor {
			resp.Attributes = append(resp.Attributes, a)
		}
		return true
	})
	return resp, nil
}

func (q *querier) certificates(data []byte) (api.CertificatesResponse, error) {
	var req api.CertificatesRequest
	if err := decodeReq(data, &req); err != nil {
		return api.CertificatesResponse{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return api.CertificatesResponse{}, err
	}
	if req.State != "" && req.State != api.CertValid && req.State != api.CertRevoked {
		return api.CertificatesResponse{}, badQuery("state %q: want valid or revoked", req.State)
	}
	list, next, err := page(q.r, certPrefix(req.Owner), req.Page, func(k string, v []byte) (api.Certificate, bool) {
		c := decodeAs[api.Certificate](k, v)
		return c, (req.Serial == "" || c.Serial == req.Serial) && (req.State == "" || c.State == req.State)
	})
	return api.CertificatesResponse{Certificates: list, NextKey: next}, err
}

// deploymentView builds a deployment's response with its escrow settled to the
// query's height.
func (q *querier) deploymentView(d api.Deployment) api.DeploymentResponse {
	resp := api.DeploymentResponse{Deployment: d, Groups: []api.Group{}}
	q.r.ascend(groupsPrefix(d.ID), "", func(k string, v []byte) bool {
		resp.Groups = append(resp.Groups, decodeAs[api.Group](k, v))
		return true
	})
	getJSON(q.r, escrowKey(d.ID), &resp.Escrow)
	resp.Payments = readPayments(q.r, d.ID)
	if resp.Payments == nil {
		resp.Payments = []api.Payment{}
	}
	accrue(&resp.Escrow, resp.Payments, q.height)
	return resp
}

func (q *querier) deployment(data []byte) (api.DeploymentResponse, error) {
	var req api.DeploymentRequest
	if err := decodeReq(data, &req); err != nil {
		return api.DeploymentResponse{}, err
	}
	var d api.Deployment
	if !getJSON(q.r, deploymentKey(req.ID), &d) {
		return api.DeploymentResponse{}, api.Errorf(api.CodeNotFound, "deployment %s does not exist", req.ID)
	}
	return q.deploymentView(d), nil
}

func (q *querier) deployments(data []byte) (api.DeploymentsResponse, error) {
	var req api.DeploymentsRequest
	if err := decodeReq(data, &req); err != nil {
		return api.DeploymentsResponse{}, err
	}
	if err := q.addr("owner", req.Owner); err != nil {
		return api.DeploymentsResponse{}, err
	}
	if req.State != "" && req.State != api.DeploymentActive && req.State != api.DeploymentClosed {
		return api.DeploymentsResponse{}, badQuery("state %q: want active or closed", req.State)
	}
	list, next, err := page(q.r, deploymentPrefix(req.Owner), req.Page, func(k string, v []byte) (api.DeploymentResponse, bool) {
		d := decodeAs[api.Deployment](k, v)
		if req.State != "" && d.State != req.State {
			return api.DeploymentResponse{}, false
		}
		return q.deploymentView(d), true
	})
	return api.DeploymentsResponse{Deployments: list, NextKey: next}, err
}

func (q *querier) ordersByID(req api.OrdersRequest) (api.OrdersResponse, error) {
	if len(req.IDs) > api.MaxOrderIDs {
		return api.OrdersResponse{}, badQuery("ids: %d orders, at most %d", len(req.IDs), api.MaxOrderIDs)
	}
	if req.State != "" || req.Owner != "" || len(req.Page.Key) > 0 {
		return api.OrdersResponse{}, badQuery("ids cannot be combined with state, owner or page")
	}
	out := api.OrdersResponse{Orders: make([]api.Order, 0, len(req.IDs))}
	for _, id := range req.IDs {
		var o api.Order
		if getJSON(q.r, orderKey(id), &o) {
			out.Orders = append(out.Orders, o)
		}
	}
	return out, nil
}

func (q *querier) order(data []byte) (api.Order, error) {
	var req api.OrderRequest
	if err := decodeReq(data, &req); err != nil {
		return api.Order{}, err
	}
	var o api.Order
	if !getJSON(q.r, orderKey(req.ID), &o) {
		return o, api.Errorf(api.CodeNotFound, "order %s does not exist", req.ID)
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

func (q *querier) orders(data []byte) (api.OrdersResponse, error) {
	var req api.OrdersRequest
	if err := decodeReq(data, &req); err != nil {
		return api.OrdersResponse{}, err
	}
	if len(req.IDs) > 0 {
		return q.ordersByID(req)
	}
	if err := checkState(req.State, api.OrderOpen, api.OrderActive, api.OrderClosed); err != nil {
		return api.OrdersResponse{}, err
	}
	if req.Owner != "" {
		if err := q.addr("owner", req.Owner); err != nil {
			return api.OrdersResponse{}, err
		}
	}
	var prefix string
	var load func(k string, v []byte) (api.Order, bool)
	if req.State != "" {
		// The index key is the state's prefix, then the order ID (owner first): the
		// owner filter below narrows prefix, not the part before the ID.
		statePrefix := orderStatePrefix(req.State)
		prefix = statePrefix
		load = func(k string, _ []byte) (api.Order, bool) {
			id, ok := decodeOrderIDKey(k, statePrefix)
			var o api.Order
			return o, ok && getJSON(q.r, orderKey(id), &o)
		}
	} else {
		prefix = table(tOrder).String()
		load = func(k string, v []byte) (api.Order, bool) { return decodeAs[api.Order](k, v), true }
	}
	if req.Owner != "" {
		prefix += req.Owner + "\x00"
	}
	list, next, err := page(q.r, prefix, req.Page, load)
	return api.OrdersResponse{Orders: list, NextKey: next}, err
}

func (q *querier) bid(data []byte) (api.Bid, error) {
	var req api.BidRequest
	if err := decodeReq(data, &req); err != nil {
		return api.Bid{}, err
	}
	var b api.Bid
	if !getJSON(q.r, bidKey(req.ID), &b) {
		return b, api.Errorf(api.CodeNotFound, "bid %s does not exist", req.ID)
	}
	return b, nil
}

func (q *querier) bids(data []byte) (api.BidsResponse, error) {
	var req api.BidsRequest
	if err := decodeReq(data, &req); err != nil {
		return api.BidsResponse{}, err
	}
	if err := checkState(req.State, api.BidOpen, api.BidActive, api.BidLost, api.BidClosed); err != nil {
		return api.BidsResponse{}, err
	}
	keep := func(b api.Bid) bool { return req.State == "" || b.State == req.State }
	var prefix string
	var load func(k string, v []byte) (api.Bid, bool)
	direct := func(k string, v []byte) (api.Bid, bool) { b := decodeAs[api.Bid](k, v); return b, keep(b) }
	switch {
	case req.Order != nil:
		prefix, load = bidsPrefix(*req.Order), direct
	case req.Provider != "":
		if err := q.addr("provider", req.Provider); err != nil {
			return api.BidsResponse{}, err
		}
		prefix = bidProviderPrefix(req.Provider)
		load = func(k string, _ []byte) (api.Bid, bool) {
			oid, ok := decodeOrderIDKey(k, prefix)
			var b api.Bid
			return b, ok && getJSON(q.r, bidKey(oid.Bid(req.Provider)), &b) && keep(b)
		}
	case req.Owner != "":
		if err := q.addr("owner", req.Owner); err != nil {
			return api.BidsResponse{}, err
		}
		k := table(tBid).str(req.Owner)
		if req.DSeq != 0 {
			k.u64(req.DSeq)
		}
		prefix, load = k.String(), direct
	default:
		return api.BidsResponse{}, badQuery("bids: give order, provider or owner")
	}
	list, next, err := page(q.r, prefix, req.Page, load)
	return api.BidsResponse{Bids: list, NextKey: next}, err
}

func (q *querier) leaseView(l api.Lease) api.LeaseResponse {
	resp := api.LeaseResponse{Lease: l}
	getJSON(q.r, paymentKey(l.ID), &resp.Payment)
	if resp.Payment.State == api.PaymentOpen {
		var a api.EscrowAccount
		if getJSON(q.r, escrowKey(l.ID.Deployment()), &a) {
			pays := []api.Payment{resp.Payment}
			// Settling only this payment gives its exact share; the account copy is
			// discarded.
			accrue(&a, pays, q.height)
			resp.Payment = pays[0]
		}
	}
	return resp
}

func (q *querier) lease(data []byte) (api.LeaseResponse, error) {
	var req api.LeaseRequest
	if err := decodeReq(data, &req); err != nil {
		return api.LeaseResponse{}, err
	}
	var l api.Lease
	if !getJSON(q.r, leaseKey(req.ID), &l) {
		return api.LeaseResponse{}, api.Errorf(api.CodeNotFound, "lease %s does not exist", req.ID)
	}
	return q.leaseView(l), nil
}

func (q *querier) leases(data []byte) (api.LeasesResponse, error) {
	var req api.LeasesRequest
	if err := decodeReq(data, &req); err != nil {
		return api.LeasesResponse{}, err
	}
	if err := checkState(req.State, api.LeaseActive, api.LeaseInsufficientFunds, api.LeaseClosed); err != nil {
		return api.LeasesResponse{}, err
	}
	keep := func(l api.Lease) bool {
		return (req.State == "" || l.State == req.State) &&
			(req.Owner == "" || l.ID.Owner == req.Owner) && (req.DSeq == 0 || l.ID.DSeq == req.DSeq)
	}
	var prefix string
	var load func(k string, v []byte) (api.LeaseResponse, bool)
	switch {
	case req.Provider != "":
		if err := q.addr("provider", req.Provider); err != nil {
			return api.LeasesResponse{}, err
		}
		prefix = leaseProviderPrefix(req.Provider)
		if req.Owner != "" {
			prefix += req.Owner + "\x00"
		}
		load = func(k string, _ []byte) (api.LeaseResponse, bool) {
			oid, ok := decodeOrderIDKey(k, leaseProviderPrefix(req.Provider))
			var l api.Lease
			if !ok || !getJSON(q.r, leaseKey(oid.Bid(req.Provider).Lease()), &l) || !keep(l) {
				return api.LeaseResponse{}, false
			}
			return q.leaseView(l), true
		}
	default:
		prefix = table(tLease).String()
		if req.Owner != "" {
			if err := q.addr("owner", req.Owner); err != nil {
				return api.LeasesResponse{}, err
			}
			k := table(tLease).str(req.Owner)
			if req.DSeq != 0 {
				k.u64(req.DSeq)
			}
			prefix = k.String()
		}
		load = func(k string, v []byte) (api.LeaseResponse, bool) {
			l := decodeAs[api.Lease](k, v)
			if !keep(l) {
				return api.LeaseResponse{}, false
			}
			return q.leaseView(l), true
		}
	}
	list, next, err := page(q.r, prefix, req.Page, load)
	return api.LeasesResponse{Leases: list, NextKey: next}, err
}
