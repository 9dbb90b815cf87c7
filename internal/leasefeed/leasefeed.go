// Package leasefeed is the provider's feed of its own leases, in the ledger's order: a
// lease won (Won) and a lease ended (Closed). The bid engine publishes it; the
// deployment manager, the manifest service and the balance checker each follow it
// (Follower) and act on what concerns them. It is vocabulary only: the bus it travels
// on is internal/bus's.
package leasefeed

import (
	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bus"
)

// Won is a lease of ours begun: a tenant leased one of our bids, or the bid engine
// took on an active lease of ours (at start, or one whose bid it had lost track of).
type Won struct {
	Lease market.LeaseID
	Price market.DecCoin
	// Rebuilt is true for leases found active when the engine started.
	Rebuilt bool
	// CreatedAt is the height the lease was created at.
	CreatedAt int64
}

// Closed is a lease of ours ended (closed by the tenant, by us, or by the ledger for
// insufficient funds), with the ledger's reason.
type Closed struct {
	Lease  market.LeaseID
	Reason string
}

// Event is one step of a lease of ours: Won or Closed (one is set). A subscriber sees
// a lease won before it sees it closed.
type Event struct {
	Won    *Won
	Closed *Closed
}

// Feed is the bus the events travel on.
type Feed = bus.Bus[Event]

// Follower is one consumer's hold on the feed (Feed.Follow, before the bid engine
// starts publishing).
type Follower = bus.Follower[Event]

// Buffer is how many events a follower may fall behind before it is cut off and
// catches up from the ledger.
const Buffer = 1024

// New makes the feed, its metrics (berth_bus_…{bus="leases"}) registered with reg.
func New(reg prometheus.Registerer) (*Feed, error) { return bus.New[Event]("leases", reg) }
