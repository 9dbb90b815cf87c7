package bidengine

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/market/v1"
)

// Results of a decision or of a bid's later life (metric label values: a fixed set).
const (
	ResultBid    = "bid"    // we bid (reason "priced")
	ResultNoBid  = "no_bid" // we decided not to bid (reason: why)
	ResultFailed = "failed" // we decided to bid but the bid did not make it (reason: the ledger's code)
	ResultWon    = "won"    // a tenant leased our bid
	ResultLost   = "lost"   // a tenant leased another provider's bid
	ResultClosed = "closed" // our bid or lease ended (reason: timeout, order_closed, lease_closed, …)
	ReasonPriced = "priced" // the reason of a bid
)

// Reasons of closed bids and leases.
const (
	ReasonBidTimeout  = "bid_timeout"  // no lease within the bid timeout: we closed the bid
	ReasonOrderClosed = "order_closed" // the order, its group or deployment closed
	ReasonLeaseClosed = "lease_closed" // our lease ended
	// ReasonLeased is the reason of a won bid; ReasonAnotherProvider of a lost one.
	ReasonLeased          = "leased"
	ReasonAnotherProvider = "another_provider"
	// ReasonError is a decision that failed for a reason outside the fixed set (the
	// detail says what).
	ReasonError = "error"
)

// Decision is one entry of the history: what happened to an order and why.
type Decision struct {
	Time   time.Time      `json:"time"`
	Order  market.OrderID `json:"order"`
	Result string         `json:"result"`
	Reason string         `json:"reason"`
	Detail string         `json:"detail,omitempty"`
	// Price is our price when we bid.
	Price *market.DecCoin `json:"price,omitempty"`
}

// History keeps the last decisions (a ring) and counts every one in
// berth_bid_decisions_total{result,reason}. Safe for concurrent use.
type History struct {
	mu    sync.Mutex
	ring  []Decision
	next  int
	full  bool
	total *prometheus.CounterVec
}

// NewHistory keeps the last size decisions, registering its metric with reg (nil: not
// registered).
func NewHistory(size int, reg prometheus.Registerer) (*History, error) {
	h := &History{
		ring: make([]Decision, max(size, 1)),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_bid_decisions_total",
			Help: "Bid engine decisions and bid outcomes, by result (bid, no_bid, failed, won, lost, closed) and reason.",
		}, []string{"result", "reason"}),
	}
	if reg != nil {
		if err := reg.Register(h.total); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Record adds a decision.
func (h *History) Record(d Decision) {
	h.total.WithLabelValues(d.Result, d.Reason).Inc()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = d
	h.next++
	if h.next == len(h.ring) {
		h.next, h.full = 0, true
	}
}

// Last returns up to n decisions, newest first (n ≤ 0: all kept).
func (h *History) Last(n int) []Decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	size := h.next
	if h.full {
		size = len(h.ring)
	}
	if n <= 0 || n > size {
		n = size
	}
	out := make([]Decision, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, h.ring[(h.next-i+len(h.ring))%len(h.ring)])
	}
	return out
}
