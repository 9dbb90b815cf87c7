package balance

import (
	"time"

	"berth.dev/berth/api/market/v1"
)

// Event kinds.
const (
	// KindWithdrawal: leases were withdrawn (Leases, Amount paid, Reason why, Height of
	// the last transaction).
	KindWithdrawal = "withdrawal"
	// KindLowFunds: deployments' escrow pays for fewer than LowFundsBlocks blocks
	// (Leases: ours there). Published when a deployment first falls below.
	KindLowFunds = "low_funds"
	// KindLowBalance: the provider's balance (Balance) fell below MinBalance; every
	// lease is withdrawn. Published when the balance first falls below.
	KindLowBalance = "low_balance"
	// KindLeaseUnfunded: the ledger closed a lease of ours because its deployment ran
	// out of funds (Leases: that one; Amount: all it paid out).
	KindLeaseUnfunded = "lease_unfunded"
)

// Event is what the checker publishes on its bus.
type Event struct {
	Kind string `json:"kind"`
	// Height is the ledger height the event was observed at.
	Height int64     `json:"height"`
	Time   time.Time `json:"time"`
	// Reason says why: a withdrawal's Reason* constant, or a closed lease's reason.
	Reason string           `json:"reason,omitempty"`
	Leases []market.LeaseID `json:"leases,omitempty"`
	// Amount is what the ledger paid out, per denomination.
	Amount []market.Coin `json:"amount,omitempty"`
	// Balance is the provider's balance in MinBalance's denomination (after a
	// withdrawal, when it could be read again).
	Balance market.Coin `json:"balance"`
}
