// Package status holds the provider's status as the gateway serves it: a snapshot
// collected (Collect) from the components' in-memory state and published on a Board,
// so that reading it (GET /status, gRPC GetStatus and StreamStatus) never calls
// Kubernetes or the ledger. A Board is safe for concurrent use.
package status

import (
	"encoding/json"
	"reflect"
	"sync"
	"time"
)

// Status is the provider's status in the shape of Akash's REST /status, plus berth's
// own section.
type Status struct {
	Cluster               Cluster   `json:"cluster"`
	BidEngine             BidEngine `json:"bidengine"`
	Manifest              Manifest  `json:"manifest"`
	ClusterPublicHostname string    `json:"cluster_public_hostname,omitempty"`
	Address               string    `json:"address"`
	Berth                 Berth     `json:"berth"`
	// Timestamp is when the snapshot was taken (not compared for changes).
	Timestamp time.Time `json:"timestamp"`
}

// Cluster is the leases and inventory.
type Cluster struct {
	Leases    uint32    `json:"leases"`
	Inventory Inventory `json:"inventory"`
}

// Inventory is what is reserved and what is left. Active and Pending list the
// requests of reservations with and without pods, one entry per reservation as Akash
// lists them (all its replicas; persistent storage in Storage, by class).
type Inventory struct {
	Active    []Metrics `json:"active,omitempty"`
	Pending   []Metrics `json:"pending,omitempty"`
	Available Available `json:"available"`
}

// Metrics are amounts of resources: CPU in millicores, the rest in bytes or units.
type Metrics struct {
	CPU              int64            `json:"cpu"`
	GPU              int64            `json:"gpu"`
	Memory           int64            `json:"memory"`
	StorageEphemeral int64            `json:"storage_ephemeral"`
	Storage          map[string]int64 `json:"storage,omitempty"`
}

// Available is what each node and storage class has left, and the leased IP pool.
type Available struct {
	Nodes     []Node    `json:"nodes,omitempty"`
	Storage   []Storage `json:"storage,omitempty"`
	LeasedIPs *Pool     `json:"leased_ips,omitempty"`
}

// Pool is a counted pool: how many there are, and how many are free.
type Pool struct {
	Total     int64 `json:"total"`
	Available int64 `json:"available"`
}

// GPUModel is the model of a node's GPUs, as its labels say.
type GPUModel struct {
	Vendor    string `json:"vendor"`
	Model     string `json:"model"`
	RAM       string `json:"ram,omitempty"`
	Interface string `json:"interface,omitempty"`
}

// Node is one node's allocatable and available resources. A node that takes no new
// pods (not Ready, cordoned, tainted NoSchedule or NoExecute) is Unschedulable, with
// nothing available.
type Node struct {
	Name          string    `json:"name"`
	Allocatable   Metrics   `json:"allocatable"`
	Available     Metrics   `json:"available"`
	Unschedulable bool      `json:"unschedulable,omitempty"`
	GPU           *GPUModel `json:"gpu_model,omitempty"` // nodes with GPUs
}

// Storage is a storage class's free bytes (Size, as Akash reports it) and its total.
type Storage struct {
	Class       string `json:"class"`
	Size        int64  `json:"size"`
	Allocatable int64  `json:"allocatable"`
}

// BidEngine counts the orders the bid engine holds a bid or lease on.
type BidEngine struct {
	Orders uint32 `json:"orders"`
}

// Manifest counts the leases running a manifest.
type Manifest struct {
	Deployments uint32 `json:"deployments"`
}

// Berth is what berth reports beyond Akash's fields.
type Berth struct {
	Version string `json:"version"`
	// Orders by the bid engine's state (pricing, sending, open, won).
	Orders map[string]int `json:"orders,omitempty"`
	// Deployments by the deployment manager's phase (deploying, deployed, closing).
	Deployments map[string]int `json:"deployments,omitempty"`
	// ManifestsWaiting: won leases without a manifest yet.
	ManifestsWaiting int `json:"manifests_waiting"`
	// ReservationsActive and ReservationsPending count reservations.
	ReservationsActive  int `json:"reservations_active"`
	ReservationsPending int `json:"reservations_pending"`
	// Hostnames counts the leases' hostnames by the hostname operator's phase
	// (Routed, Ready, Unready, Conflict, Failed; "pending" until it has seen one).
	Hostnames map[string]int `json:"hostnames,omitempty"`
	// LeasesReady and LeasesNotReady count leases by readiness.
	LeasesReady    int `json:"leases_ready"`
	LeasesNotReady int `json:"leases_not_ready"`
	// Balance is the balance checker's view (nil when it has not checked yet).
	Balance *Balance `json:"balance,omitempty"`
	// Ledger is the provider's connection to its ledger node.
	Ledger *Ledger `json:"ledger,omitempty"`
	// NotBidding, when set, says why the bid engine places no order whatever it asks
	// for (the inventory operator's report is missing or older than inventory.max_age).
	NotBidding string `json:"not_bidding,omitempty"`
	// Starting, when set, says what the provider waits for before it serves (the
	// gateway then answers 503).
	Starting string `json:"starting,omitempty"`
}

// Ledger is whether the provider's ledger node answers: checked every few seconds
// (bids, leases, withdrawals and the gateway's checks all need it).
type Ledger struct {
	Node      string `json:"node"`
	Reachable bool   `json:"reachable"`
	// Error is why the last check failed (empty when Reachable).
	Error string `json:"error,omitempty"`
	// Since is when Reachable last changed (or the provider started).
	Since time.Time `json:"since"`
}

// Balance is the provider's account and earnings, as its balance checker last saw
// them (all of it public on the ledger).
type Balance struct {
	// Account is the provider account's balances; Low says the bid-deposit reserve
	// (MinBalance) is not covered.
	Account    []string `json:"account"`
	MinBalance string   `json:"min_balance"`
	Low        bool     `json:"low"`
	// Earnings are the totals paid out to the provider by its leases.
	Earnings []string `json:"earnings"`
	// Leases watched, and those whose deployment's escrow runs low.
	Leases         int `json:"leases"`
	LowFundsLeases int `json:"low_funds_leases"`
	// LastWithdrawalHeight is the block of the last withdrawal (0: none yet).
	LastWithdrawalHeight int64 `json:"last_withdrawal_height,omitempty"`
	// LastError is the last check's error, if it failed.
	LastError string `json:"last_error,omitempty"`
}

// Board holds the latest status and tells watchers when it changes.
type Board struct {
	mu      sync.Mutex
	cur     Status
	json    []byte
	seq     uint64
	changed chan struct{}
}

// NewBoard returns a board holding s.
func NewBoard(s Status) *Board {
	b := &Board{changed: make(chan struct{})}
	b.store(s)
	return b
}

func (b *Board) store(s Status) {
	data, err := json.Marshal(s)
	if err != nil {
		data = []byte(`{}`) // every field of Status encodes; unreachable
	}
	b.cur, b.json = s, data
	b.seq++
}

// Publish stores s if it differs from the current status (the timestamp aside) and
// wakes the watchers. It reports whether it changed.
func (b *Board) Publish(s Status) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev, next := b.cur, s
	prev.Timestamp, next.Timestamp = time.Time{}, time.Time{}
	if reflect.DeepEqual(prev, next) {
		return false
	}
	b.store(s)
	close(b.changed)
	b.changed = make(chan struct{})
	return true
}

// Get returns the current status, its JSON encoding (shared: do not modify it), and
// a channel closed at the next change.
func (b *Board) Get() (Status, []byte, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur, b.json, b.changed
}

// StatusJSON is the current status's JSON encoding (shared: do not modify it).
func (b *Board) StatusJSON() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.json
}
