package balance

import (
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/market/v1"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.Provider, c.EarningsFile = "akash1provider", "/var/lib/berth/earnings.json"
		return c
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // "" valid, else a part of the error
	}{
		{"defaults", func(*Config) {}, ""},
		{"threshold only", func(c *Config) { c.WithdrawPeriod = 0 }, ""},
		{"low funds off", func(c *Config) { c.LowFundsBlocks = 0 }, ""},
		{"min balance set", func(c *Config) { c.MinBalance = market.Coin{Amount: 10, Denom: "uakt"} }, ""},
		{"min balance off", func(c *Config) { c.MinBalance = market.Coin{Denom: "uakt"} }, ""},
		{"no provider", func(c *Config) { c.Provider = "" }, "provider"},
		{"no check interval", func(c *Config) { c.CheckInterval = 0 }, "check_interval 0s"},
		{"negative check interval", func(c *Config) { c.CheckInterval = -time.Second }, "check_interval -1s"},
		{"negative period", func(c *Config) { c.WithdrawPeriod = -time.Hour }, "withdraw_period -1h0m0s"},
		{"period under interval", func(c *Config) { c.WithdrawPeriod = time.Second }, "withdraw_period 1s: shorter than check_interval 1m0s"},
		{"negative low funds", func(c *Config) { c.LowFundsBlocks = -1 }, "low_funds_blocks -1"},
		{"min balance without denom", func(c *Config) { c.MinBalance = market.Coin{Amount: 5} }, "min_balance 5: needs a denomination"},
		{"min balance bad denom", func(c *Config) { c.MinBalance = market.Coin{Amount: 5, Denom: "1x"} }, `"1x" is not a valid denomination`},
		{"no earnings file", func(c *Config) { c.EarningsFile = "" }, "earnings_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
