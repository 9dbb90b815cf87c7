package bidengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/leasefeed"
)

// Capacity is the cluster inventory the engine reserves from (cluster.Capacity).
type Capacity interface {
	Reserve(order market.OrderID, d cluster.Demand) ([]cluster.Placement, error)
	Adopt(order market.OrderID, d cluster.Demand) ([]cluster.Placement, error)
	Unreserve(order market.OrderID) bool
	// Fit says where d would go, reserving nothing (Screen).
	Fit(d cluster.Demand) ([]cluster.Placement, error)
	// Unavailable is why nothing can be reserved now ("" when capacity is known).
	Unavailable() string
}

// Reasons for not bidding that capacity gives, one per exhausted resource.
const (
	ReasonCapacityNodes     = "capacity_nodes"
	ReasonCapacityGPU       = "capacity_gpu"
	ReasonCapacityStorage   = "capacity_storage"
	ReasonCapacityLeasedIPs = "capacity_leased_ips"
	ReasonCapacityNodePorts = "capacity_node_ports"
	// ReasonInventoryStale: the provider's view of the cluster is too old to bid on
	// (the inventory operator has not reported within inventory.max_age).
	ReasonInventoryStale = "inventory_stale"
)

// EngineConfig configures the decision core.
type EngineConfig struct {
	// Provider is our address.
	Provider string
	Policy   Policy
	// BidsPerHour and TenantBidsPerHour cap bids (0: no cap).
	BidsPerHour, TenantBidsPerHour uint32
	Pricer                         Pricer
	// Deposit goes with each bid (the ledger's bid_min_deposit).
	Deposit market.Coin
	// BidTimeout is how long a bid waits for a lease before we close it.
	BidTimeout time.Duration
	// Overcommit is how much the cluster may promise beyond what it has; the cluster
	// service requests resources the same way.
	Overcommit cluster.Overcommit
	// Log, when set, receives each declined order with its reason (at info level), so
	// an operator sees why a tenant got no bid.
	Log *slog.Logger
}

// ActionKind says what the run loop must do.
type ActionKind int

// Actions.
const (
	// ActDecide: an order was created, or one declined while the inventory was not
	// known may now be bid on; fetch it and call Decide.
	ActDecide ActionKind = iota + 1
	// ActCloseBid: send MsgCloseBid for Bid.
	ActCloseBid
	// ActPublishWon: publish Won on the bus.
	ActPublishWon
	// ActAdopt: a lease of ours the engine does not know (its bid was made before a
	// crash that lost it); fetch its order and call Adopt.
	ActAdopt
	// ActRestoreBid: a bid of ours the engine does not know; fetch it and its order
	// and call RestoreBid.
	ActRestoreBid
	// ActRefreshAudits: auditor signatures on our attributes changed; reload them.
	ActRefreshAudits
	// ActRefreshProvider: our provider record changed; reload its attributes.
	ActRefreshProvider
	// ActPublishClosed: publish Closed on the bus.
	ActPublishClosed
)

// Action is one thing the engine asks the run loop to do.
type Action struct {
	Kind   ActionKind
	Order  market.OrderID
	Bid    market.BidID
	Won    *leasefeed.Won
	Closed *leasefeed.Closed
}

type bidState int

const (
	statePricing bidState = iota + 1 // reserved, price being computed
	stateSending                     // bid handed to the broadcaster
	stateOpen                        // bid on the ledger
	stateWon                         // our lease is active
)

type tracked struct {
	state     bidState
	owner     string
	spec      market.GroupSpec
	price     market.DecCoin
	deadline  time.Time
	cancelled bool // the order closed while it was being priced
}

// Engine is the bid engine's decision core: which orders to bid on, at what price,
// and what follows from ledger events. It holds the reservations of our open bids and
// active leases. Time is passed in. Safe for concurrent use: Decide may run for many
// orders at once (pricing scripts run outside the lock).
type Engine struct {
	cfg     EngineConfig
	cap     Capacity
	history *History

	mu     sync.Mutex
	orders map[market.OrderID]*tracked
	// done remembers the orders we bid on and are finished with (FIFO, bounded), so a
	// replayed order.created never brings a second bid.
	done   map[market.OrderID]struct{}
	doneQ  []market.OrderID
	doneAt int
	// deferred holds the orders declined because the cluster's inventory was not
	// known (inventory_stale): they are decided again once it is (Tick), bounded.
	deferred map[market.OrderID]time.Time
	budget   *Budget
	audits   Audits
	// started and stopped count orders taken on and let go (Akash's order handlers).
	started, stopped uint64
}

// doneSize bounds the memory of finished orders: far more than one feed replay holds.
const doneSize = 1 << 16

// deferredSize bounds the orders kept to decide again once the inventory is known;
// past it, later ones keep their decline (the next start's catch-up decides them).
const deferredSize = 1 << 12

// NewEngine returns an engine. It validates the configuration.
func NewEngine(cfg EngineConfig, capacity Capacity, history *History) (*Engine, error) {
	switch {
	case cfg.Provider == "":
		return nil, errors.New("bid engine: no provider address")
	case cfg.Pricer == nil:
		return nil, errors.New("bid engine: no pricing strategy")
	case cfg.BidTimeout <= 0:
		return nil, errors.New("bid engine: the bid timeout must be positive")
	case capacity == nil || history == nil:
		return nil, errors.New("bid engine: capacity and history are required")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	return &Engine{
		cfg: cfg, cap: capacity, history: history,
		orders:   map[market.OrderID]*tracked{},
		done:     map[market.OrderID]struct{}{},
		deferred: map[market.OrderID]time.Time{},
		budget:   NewBudget(cfg.BidsPerHour, cfg.TenantBidsPerHour),
	}, nil
}

// SetAudits replaces the auditor signatures on our attributes.
func (e *Engine) SetAudits(a Audits) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.audits = a
}

// SetAttributes replaces our attributes (as registered on the ledger).
func (e *Engine) SetAttributes(a market.Attributes) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cfg.Policy.Attributes = a
}

// Provider is the address the engine bids as.
func (e *Engine) Provider() string { return e.cfg.Provider }

// History returns the decision history.
func (e *Engine) History() *History { return e.history }

// Decide evaluates an order: eligibility, budget, reservation, price. It returns the
// bid to send, or nil when we do not bid (the decision and its reason are recorded), or
// when the order is not open or already handled. An error is returned only when ctx
// ended during pricing.
func (e *Engine) Decide(ctx context.Context, o ledger.Order, now time.Time) (*ledger.MsgCreateBid, error) {
	if o.State != ledger.OrderOpen {
		return nil, nil
	}
	e.mu.Lock()
	if _, ok := e.orders[o.ID]; ok {
		e.mu.Unlock()
		return nil, nil
	}
	if _, ok := e.done[o.ID]; ok {
		e.mu.Unlock()
		return nil, nil
	}
	placements, err := e.admitLocked(o, now)
	if err != nil {
		e.mu.Unlock()
		e.declined(o.ID, now, err)
		return nil, nil
	}
	t := &tracked{state: statePricing, owner: o.ID.Owner, spec: o.Spec}
	e.trackLocked(o.ID, t)
	e.mu.Unlock()

	price, err := e.price(ctx, o, placements)

	e.mu.Lock()
	defer e.mu.Unlock()
	if ctx.Err() != nil || err != nil || t.cancelled {
		e.cap.Unreserve(o.ID)
		e.budget.Refund(o.ID.Owner, now)
		e.untrackLocked(o.ID)
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("price order %s: %w", o.ID, ctx.Err())
		case t.cancelled:
			e.record(o.ID, now, ResultClosed, ReasonOrderClosed, "the order closed while it was being priced", nil)
		default:
			e.declinedLocked(o.ID, now, err)
		}
		return nil, nil
	}
	t.state, t.price = stateSending, price
	e.record(o.ID, now, ResultBid, ReasonPriced, "", &price)
	offer := make([]ledger.ResourceOffer, len(o.Spec.Resources))
	for i, ru := range o.Spec.Resources {
		offer[i] = ledger.ResourceOffer{Resources: ru.Resources, Count: ru.Count}
	}
	return &ledger.MsgCreateBid{OrderID: o.ID, Provider: e.cfg.Provider, Price: price, Deposit: e.cfg.Deposit, ResourcesOffer: offer}, nil
}

// admitLocked runs every check that needs no pricing and reserves the capacity.
func (e *Engine) admitLocked(o ledger.Order, now time.Time) ([]cluster.Placement, error) {
	if err := e.cfg.Policy.Eligible(o.ID.Owner, o.Spec, e.audits); err != nil {
		return nil, err
	}
	if err := e.budget.Allow(o.ID.Owner, now); err != nil {
		return nil, err
	}
	d, err := cluster.DemandOf(o.Spec, e.cfg.Overcommit)
	if err != nil {
		return nil, noBid(ReasonInvalidOrder, "%v", err)
	}
	placements, err := e.cap.Reserve(o.ID, d)
	var ins *cluster.Insufficient
	if errors.As(err, &ins) {
		return nil, noBid(capacityReason(ins.Resource), "%s", ins.Detail)
	}
	if err == nil {
		// Spent now, while the lock is held, so that orders priced concurrently cannot
		// all pass the budget; refunded if pricing says no.
		e.budget.Spend(o.ID.Owner, now)
	}
	return placements, err
}

func capacityReason(resource string) string {
	switch resource {
	case "gpu":
		return ReasonCapacityGPU
	case "storage":
		return ReasonCapacityStorage
	case "leased_ips":
		return ReasonCapacityLeasedIPs
	case "node_ports":
		return ReasonCapacityNodePorts
	case "inventory":
		return ReasonInventoryStale
	}
	return ReasonCapacityNodes
}

func (e *Engine) price(ctx context.Context, o ledger.Order, placements []cluster.Placement) (market.DecCoin, error) {
	gpus := map[uint32]GPU{}
	for _, p := range placements {
		if p.GPU.Model != "" {
			gpus[p.UnitID] = GPU{Vendor: p.GPU.Vendor, Model: p.GPU.Model, RAM: p.GPU.RAM, Interface: p.GPU.Interface}
		}
	}
	req, err := NewRequest(o.ID.Owner, o.Spec, gpus)
	if err != nil {
		return market.DecCoin{}, noBid(ReasonInvalidOrder, "%v", err)
	}
	return e.cfg.Pricer.Price(ctx, req)
}

func (e *Engine) declined(id market.OrderID, now time.Time, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.declinedLocked(id, now, err)
}

func (e *Engine) declinedLocked(id market.OrderID, now time.Time, err error) {
	reason, detail := ReasonError, err.Error()
	var nb *NoBid
	if errors.As(err, &nb) {
		reason, detail = nb.Reason, nb.Detail
	}
	e.record(id, now, ResultNoBid, reason, detail, nil)
	if reason == ReasonInventoryStale {
		e.deferLocked(id, now)
	}
	if e.cfg.Log != nil {
		e.cfg.Log.Info("order declined", slog.String("order", id.String()), slog.String("reason", reason), slog.String("detail", detail))
	}
}

func (e *Engine) record(id market.OrderID, now time.Time, result, reason, detail string, price *market.DecCoin) {
	e.history.Record(Decision{Time: now, Order: id, Result: result, Reason: reason, Detail: detail, Price: price})
}

// BidSent reports the outcome of sending a bid Decide returned: on success (or when
// the ledger already has it) the bid is open until the bid timeout; on failure the
// reservation is released.
func (e *Engine) BidSent(id market.OrderID, err error, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.orders[id]
	if !ok || t.state != stateSending {
		return // events overtook the broadcaster's answer
	}
	if err == nil {
		t.state, t.deadline = stateOpen, now.Add(e.cfg.BidTimeout)
		return
	}
	// Failed, or the ledger already has a bid of ours on the order: one from before a
	// restart that has closed since (an open one would have been restored, or its
	// bid.created event would have been seen).
	e.finishLocked(id)
	reason := "tx_error"
	switch {
	case ledger.CodeOf(err) != 0:
		reason = "tx_" + ledger.CodeOf(err).String()
	case errors.Is(err, ErrNotIncluded):
		reason = "tx_timeout"
	}
	e.record(id, now, ResultFailed, reason, err.Error(), nil)
}

// ErrNotIncluded marks a bid sent but not seen in a block in time (the broadcaster's
// timeout, chain.ErrTimeout): BidSent records it as tx_timeout.
var ErrNotIncluded = errors.New("bid not included in time")

// Apply handles one block's events and returns what to do, in order.
func (e *Engine) Apply(b ledger.Block, now time.Time) []Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	var acts []Action
	for _, ev := range b.Events {
		acts = append(acts, e.applyLocked(ev, b.Height, now)...)
	}
	return acts
}

func (e *Engine) applyLocked(ev ledger.Event, height int64, now time.Time) []Action {
	a := ev.Attrs
	ours := a[ledger.AttrProvider] == e.cfg.Provider
	switch ev.Type {
	case ledger.EventOrderCreated:
		if id, err := ledger.OrderOfEvent(a); err == nil {
			return []Action{{Kind: ActDecide, Order: id}}
		}
	case ledger.EventBidCreated:
		if id, err := ledger.OrderOfEvent(a); err == nil && ours {
			switch t := e.orders[id]; {
			case t == nil:
				// A bid sent before a restart, included after it.
				return []Action{{Kind: ActRestoreBid, Order: id, Bid: id.Bid(e.cfg.Provider)}}
			case t.state == stateSending:
				t.state, t.deadline = stateOpen, now.Add(e.cfg.BidTimeout)
			}
		}
	case ledger.EventBidClosed:
		if id, err := ledger.OrderOfEvent(a); err == nil && ours {
			if t := e.orders[id]; t != nil && t.state != stateWon && t.state != statePricing {
				result, reason := ResultClosed, ReasonOrderClosed
				if a[ledger.AttrState] == ledger.BidLost {
					result, reason = ResultLost, ReasonAnotherProvider
				}
				e.dropLocked(id, now, result, reason, "")
			}
		}
	case ledger.EventLeaseCreated:
		id, err := ledger.OrderOfEvent(a)
		if err != nil {
			return nil
		}
		t := e.orders[id]
		if !ours {
			if t != nil && t.state != stateWon && t.state != statePricing {
				e.dropLocked(id, now, ResultLost, ReasonAnotherProvider, "leased to "+a[ledger.AttrProvider])
			}
			return nil
		}
		lease := id.Bid(e.cfg.Provider).Lease()
		if t == nil || t.state == statePricing {
			return []Action{{Kind: ActAdopt, Order: id}}
		}
		t.state = stateWon
		e.record(id, now, ResultWon, ReasonLeased, "", &t.price)
		return []Action{{Kind: ActPublishWon, Order: id, Won: &leasefeed.Won{Lease: lease, Price: t.price, CreatedAt: height}}}
	case ledger.EventLeaseClosed:
		if id, err := ledger.OrderOfEvent(a); err == nil && ours {
			if t := e.orders[id]; t != nil && t.state == stateWon {
				e.dropLocked(id, now, ResultClosed, ReasonLeaseClosed, a[ledger.AttrReason])
			}
			// Whether or not the engine tracked it: the cluster must let it go.
			return []Action{{Kind: ActPublishClosed, Order: id, Closed: &leasefeed.Closed{Lease: id.Bid(e.cfg.Provider).Lease(), Reason: a[ledger.AttrReason]}}}
		}
	case ledger.EventOrderClosed, ledger.EventGroupClosed, ledger.EventGroupPaused, ledger.EventGroupUnfunded, ledger.EventDeploymentClosed:
		return e.closedLocked(ev, now)
	case ledger.EventAuditSigned, ledger.EventAuditDeleted:
		if a[ledger.AttrOwner] == e.cfg.Provider {
			return []Action{{Kind: ActRefreshAudits}}
		}
	case ledger.EventProviderUpdated:
		if a[ledger.AttrOwner] == e.cfg.Provider {
			return []Action{{Kind: ActRefreshProvider}}
		}
	}
	return nil
}

// closedLocked: an order, group or deployment closed. The ledger closes open bids
// itself (bid.closed); a bid still tracked here as open is closed explicitly, and an
// order being priced is cancelled.
func (e *Engine) closedLocked(ev ledger.Event, now time.Time) []Action {
	a := ev.Attrs
	owner := a[ledger.AttrOwner]
	dseq, err := strconv.ParseUint(a[ledger.AttrDSeq], 10, 64)
	if owner == "" || err != nil {
		return nil
	}
	gseq, hasGroup := a[ledger.AttrGSeq]
	oseq, hasOrder := a[ledger.AttrOSeq]
	var acts []Action
	for id, t := range e.orders {
		if id.Owner != owner || id.DSeq != dseq ||
			(hasGroup && strconv.FormatUint(uint64(id.GSeq), 10) != gseq) ||
			(hasOrder && strconv.FormatUint(uint64(id.OSeq), 10) != oseq) {
			continue
		}
		switch t.state {
		case statePricing:
			t.cancelled = true
		case stateSending, stateOpen:
			e.dropLocked(id, now, ResultClosed, ReasonOrderClosed, ev.Type)
			acts = append(acts, Action{Kind: ActCloseBid, Order: id, Bid: id.Bid(e.cfg.Provider)})
		}
	}
	return acts
}

func (e *Engine) dropLocked(id market.OrderID, now time.Time, result, reason, detail string) {
	e.finishLocked(id)
	e.record(id, now, result, reason, detail, nil)
}

// finishLocked releases a bid's order for good: reservation, tracking, and no bid on
// it again.
func (e *Engine) finishLocked(id market.OrderID) {
	e.cap.Unreserve(id)
	e.untrackLocked(id)
	if _, ok := e.done[id]; ok {
		return
	}
	if len(e.doneQ) < doneSize {
		e.doneQ = append(e.doneQ, id)
	} else {
		delete(e.done, e.doneQ[e.doneAt])
		e.doneQ[e.doneAt] = id
		e.doneAt = (e.doneAt + 1) % doneSize
	}
	e.done[id] = struct{}{}
}

// Tick closes the bids that waited longer than the bid timeout and, once the
// cluster's inventory is known again, asks for the orders declined while it was not
// to be decided again (ActDecide; the orders closed since are skipped by Decide).
func (e *Engine) Tick(now time.Time) []Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	var acts []Action
	for id, t := range e.orders {
		if t.state == stateOpen && !now.Before(t.deadline) {
			e.dropLocked(id, now, ResultClosed, ReasonBidTimeout, fmt.Sprintf("no lease within %s", e.cfg.BidTimeout))
			acts = append(acts, Action{Kind: ActCloseBid, Order: id, Bid: id.Bid(e.cfg.Provider)})
		}
	}
	return append(acts, e.redecideLocked()...)
}

// redecideLocked asks, once the cluster's inventory is known, for the orders declined
// while it was not to be decided again, oldest decline first (with bid caps, the
// longest waiting order goes first).
func (e *Engine) redecideLocked() []Action {
	if len(e.deferred) == 0 || e.cap.Unavailable() != "" {
		return nil
	}
	ids := slices.Collect(maps.Keys(e.deferred))
	slices.SortFunc(ids, func(a, b market.OrderID) int { return e.deferred[a].Compare(e.deferred[b]) })
	acts := make([]Action, len(ids))
	for i, id := range ids {
		acts[i] = Action{Kind: ActDecide, Order: id}
	}
	clear(e.deferred)
	return acts
}

// Defer keeps orders to decide again at a Tick once the inventory is known (their
// decision could not be made: the ledger could not be read).
func (e *Engine) Defer(now time.Time, ids ...market.OrderID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, id := range ids {
		e.deferLocked(id, now.Add(time.Duration(i))) // keeps their order
	}
}

func (e *Engine) deferLocked(id market.OrderID, at time.Time) {
	if _, ok := e.deferred[id]; ok || len(e.deferred) < deferredSize {
		e.deferred[id] = at
	}
}

// NextDeadline is when the earliest open bid times out (zero: none open).
func (e *Engine) NextDeadline() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var next time.Time
	for _, t := range e.orders {
		if t.state == stateOpen && (next.IsZero() || t.deadline.Before(next)) {
			next = t.deadline
		}
	}
	return next
}

// RestoreBid takes back an open bid of ours found on the ledger at start: its capacity
// is reserved again (adopted: it holds what still fits) and its timeout runs from its
// creation time.
func (e *Engine) RestoreBid(b ledger.Bid, spec market.GroupSpec, created time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := b.ID.Order()
	if _, ok := e.orders[id]; ok {
		return nil
	}
	if err := e.adoptLocked(id, spec); err != nil {
		return err
	}
	e.trackLocked(id, &tracked{state: stateOpen, owner: id.Owner, spec: spec, price: b.Price, deadline: created.Add(e.cfg.BidTimeout)})
	return nil
}

// Adopt takes on an active lease of ours: at start, or when a lease appears for a bid
// the engine lost track of. It returns the Won to publish.
func (e *Engine) Adopt(l ledger.Lease, spec market.GroupSpec, rebuilt bool, now time.Time) (*leasefeed.Won, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := l.ID.Order()
	if t, ok := e.orders[id]; ok && t.state == stateWon {
		return nil, nil
	} else if ok {
		e.cap.Unreserve(id)
		e.untrackLocked(id)
	}
	if err := e.adoptLocked(id, spec); err != nil {
		return nil, err
	}
	e.trackLocked(id, &tracked{state: stateWon, owner: id.Owner, spec: spec, price: l.Price})
	if !rebuilt {
		e.record(id, now, ResultWon, ReasonLeased, "adopted", &l.Price)
	}
	return &leasefeed.Won{Lease: l.ID, Price: l.Price, Rebuilt: rebuilt, CreatedAt: l.CreatedAt}, nil
}

func (e *Engine) adoptLocked(id market.OrderID, spec market.GroupSpec) error {
	d, err := cluster.DemandOf(spec, e.cfg.Overcommit)
	if err != nil {
		return fmt.Errorf("order %s: %w", id, err)
	}
	_, err = e.cap.Adopt(id, d)
	return err
}

func (e *Engine) trackLocked(id market.OrderID, t *tracked) {
	if _, ok := e.orders[id]; !ok {
		e.started++
	}
	e.orders[id] = t
}

func (e *Engine) untrackLocked(id market.OrderID) {
	if _, ok := e.orders[id]; ok {
		e.stopped++
		delete(e.orders, id)
	}
}

// Handlers reports the orders handled now (a bid being priced, sent, open, or a lease),
// and how many were ever taken on and let go.
func (e *Engine) Handlers() (active int, started, stopped uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.orders), e.started, e.stopped
}

// Tracked reports the number of orders we hold a bid or lease on, by state name.
func (e *Engine) Tracked() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for _, t := range e.orders {
		out[t.state.String()]++
	}
	return out
}

func (s bidState) String() string {
	switch s {
	case statePricing:
		return "pricing"
	case stateSending:
		return "sending"
	case stateOpen:
		return "open"
	case stateWon:
		return "won"
	}
	return "unknown"
}
