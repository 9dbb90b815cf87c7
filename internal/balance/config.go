package balance

import (
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/api/market/v1"
)

// Defaults of Config.
const (
	DefaultWithdrawPeriod = time.Hour
	DefaultCheckInterval  = time.Minute
	// DefaultLowFundsBlocks is about 10 minutes at one block a second.
	DefaultLowFundsBlocks = 600
)

// Config tunes a Checker. Start from DefaultConfig.
type Config struct {
	// Provider is this provider's address: only its leases are watched.
	Provider string
	// WithdrawPeriod is how often every lease is withdrawn. 0 withdraws only when a
	// threshold (LowFundsBlocks, MinBalance) is crossed, or on WithdrawAll.
	WithdrawPeriod time.Duration
	// CheckInterval is how often escrows and the provider's balance are read again.
	CheckInterval time.Duration
	// LowFundsBlocks: a deployment whose escrow pays its leases for fewer blocks than
	// this has our leases withdrawn at once. 0 turns the threshold off.
	LowFundsBlocks int64
	// MinBalance is the balance the provider keeps for bid deposits: below it, every
	// lease is withdrawn at once. The zero value means the ledger's bid_min_deposit (one
	// more bid); an amount of 0 with a denomination ("0uakt") turns the threshold off.
	MinBalance market.Coin
	// EarningsFile is where the earnings record is kept (created when missing).
	EarningsFile string
}

// DefaultConfig is the configuration with every default set; Provider and
// EarningsFile remain to be filled in.
func DefaultConfig() Config {
	return Config{
		WithdrawPeriod: DefaultWithdrawPeriod,
		CheckInterval:  DefaultCheckInterval,
		LowFundsBlocks: DefaultLowFundsBlocks,
	}
}

// Validate reports the first invalid setting, by its configuration name.
func (c Config) Validate() error {
	switch {
	case c.Provider == "":
		return errors.New("balance: provider: the provider's address is required")
	case c.CheckInterval <= 0:
		return fmt.Errorf("balance: check_interval %s: must be positive", c.CheckInterval)
	case c.WithdrawPeriod < 0:
		return fmt.Errorf("balance: withdraw_period %s: must be positive, or 0 to withdraw only on thresholds", c.WithdrawPeriod)
	case c.WithdrawPeriod > 0 && c.WithdrawPeriod < c.CheckInterval:
		return fmt.Errorf("balance: withdraw_period %s: shorter than check_interval %s (withdrawals happen on checks)", c.WithdrawPeriod, c.CheckInterval)
	case c.LowFundsBlocks < 0:
		return fmt.Errorf("balance: low_funds_blocks %d: must be positive, or 0 to turn the threshold off", c.LowFundsBlocks)
	case c.MinBalance.Denom == "" && c.MinBalance.Amount != 0:
		return fmt.Errorf("balance: min_balance %d: needs a denomination, like %duakt", c.MinBalance.Amount, c.MinBalance.Amount)
	case c.MinBalance.Denom != "" && !market.ValidDenom(c.MinBalance.Denom):
		return fmt.Errorf("balance: min_balance %s: %q is not a valid denomination", c.MinBalance, c.MinBalance.Denom)
	case c.EarningsFile == "":
		return errors.New("balance: earnings_file: a path is required")
	}
	return nil
}
