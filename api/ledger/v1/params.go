package ledger

import (
	"encoding/json"
	"fmt"
	"slices"

	"berth.dev/berth/api/market/v1"
)

// Params are the chain's rules, fixed in genesis.
type Params struct {
	// AddressPrefix is the bech32 prefix of account addresses.
	AddressPrefix string `json:"address_prefix"`
	// Denoms are the denominations deployments may be paid in.
	Denoms []string `json:"denoms"`
	// DeploymentMinDeposit is the least a deployment must deposit, per denomination.
	DeploymentMinDeposit []market.Coin `json:"deployment_min_deposit"`
	// BidMinDeposit is the deposit a provider locks with each bid until it closes.
	BidMinDeposit market.Coin `json:"bid_min_deposit"`
	// MaxBidsPerOrder caps the bids one order can receive.
	MaxBidsPerOrder uint32 `json:"max_bids_per_order"`
	// MaxGroupsPerDeployment caps the groups of one deployment.
	MaxGroupsPerDeployment uint32 `json:"max_groups_per_deployment"`
	// MaxTxBytes and MaxMsgsPerTx bound one transaction.
	MaxTxBytes   uint32 `json:"max_tx_bytes"`
	MaxMsgsPerTx uint32 `json:"max_msgs_per_tx"`
}

// The denominations Akash's market takes since its burn-mint equilibrium (BME): tenants
// price and pay in ACT (uact, pegged to 1 USD), in AKT (uakt), or in USDC bridged over
// IBC from Noble (the denomination below, as on Akash mainnet).
const (
	DenomAKT  = "uakt"
	DenomACT  = "uact"
	DenomUSDC = "ibc/170C677610AC31DF0904FFE09CD3B5C657492170E7E52372E48756B71E56F2F1"
	// DefaultDenom is the denomination of the bid deposit and of fees-like amounts
	// that have one denomination only.
	DefaultDenom = DenomAKT
)

// DefaultDenoms are the denominations deployments may be paid in by default, in the
// order genesis lists them.
func DefaultDenoms() []string { return []string{DenomAKT, DenomACT, DenomUSDC} }

// DefaultParams are Akash's market defaults where Akash has one (5 AKT deposits, 20
// bids per order): deployments may be paid in each of DefaultDenoms, with a minimum
// deposit of 5 units (5,000,000 micro-units) in each.
func DefaultParams() Params {
	denoms := DefaultDenoms()
	minDeposit := make([]market.Coin, 0, len(denoms))
	for _, d := range denoms {
		minDeposit = append(minDeposit, market.Coin{Amount: 5_000_000, Denom: d})
	}
	return Params{
		AddressPrefix:          DefaultAddressPrefix,
		Denoms:                 denoms,
		DeploymentMinDeposit:   minDeposit,
		BidMinDeposit:          market.Coin{Amount: 5_000_000, Denom: DefaultDenom},
		MaxBidsPerOrder:        20,
		MaxGroupsPerDeployment: 20,
		MaxTxBytes:             1 << 20,
		MaxMsgsPerTx:           100,
	}
}

// Validate reports the first invalid parameter.
func (p Params) Validate() error {
	if p.AddressPrefix == "" || len(p.AddressPrefix) > 20 {
		return fmt.Errorf("params.address_prefix %q: want 1 to 20 characters", p.AddressPrefix)
	}
	for i := 0; i < len(p.AddressPrefix); i++ {
		if c := p.AddressPrefix[i]; c < 'a' || c > 'z' {
			return fmt.Errorf("params.address_prefix %q: want lower-case letters", p.AddressPrefix)
		}
	}
	if len(p.Denoms) == 0 {
		return fmt.Errorf("params.denoms: at least one denomination is required")
	}
	for i, d := range p.Denoms {
		if !market.ValidDenom(d) {
			return fmt.Errorf("params.denoms[%d] %q: not a valid denomination", i, d)
		}
		if slices.Contains(p.Denoms[:i], d) {
			return fmt.Errorf("params.denoms[%d] %q: listed twice", i, d)
		}
	}
	for i, c := range p.DeploymentMinDeposit {
		if !slices.Contains(p.Denoms, c.Denom) {
			return fmt.Errorf("params.deployment_min_deposit[%d]: denomination %q is not in params.denoms", i, c.Denom)
		}
	}
	if !market.ValidDenom(p.BidMinDeposit.Denom) {
		return fmt.Errorf("params.bid_min_deposit: denomination %q is not valid", p.BidMinDeposit.Denom)
	}
	if p.MaxBidsPerOrder == 0 {
		return fmt.Errorf("params.max_bids_per_order: must be at least 1")
	}
	if p.MaxGroupsPerDeployment == 0 {
		return fmt.Errorf("params.max_groups_per_deployment: must be at least 1")
	}
	if p.MaxTxBytes < 1024 {
		return fmt.Errorf("params.max_tx_bytes %d: must be at least 1024", p.MaxTxBytes)
	}
	if p.MaxMsgsPerTx == 0 {
		return fmt.Errorf("params.max_msgs_per_tx: must be at least 1")
	}
	return nil
}

// MinDeployDeposit is the least deposit a deployment in denom takes (false: none set).
func (p Params) MinDeployDeposit(denom string) (market.Coin, bool) {
	for _, c := range p.DeploymentMinDeposit {
		if c.Denom == denom {
			return c, true
		}
	}
	return market.Coin{}, false
}

// GenesisAccount is an account funded at genesis.
type GenesisAccount struct {
	Address  string        `json:"address"`
	Balances []market.Coin `json:"balances"`
}

// GenesisState is the app_state of the genesis document.
type GenesisState struct {
	Params   Params           `json:"params"`
	Accounts []GenesisAccount `json:"accounts"`
	// Audits are attributes auditors have signed for providers from the start, as
	// MsgSignProviderAttributes would record them: a chain's history carried into a new
	// genesis, or (berth dev) the auditors tenants' files require.
	Audits []AuditedAttributes `json:"audits,omitempty"`
}

// ParseGenesis reads and validates an app_state.
func ParseGenesis(b []byte) (GenesisState, error) {
	var g GenesisState
	if len(b) == 0 {
		return g, fmt.Errorf("genesis app_state is empty")
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("genesis app_state: %w", err)
	}
	return g, g.Validate()
}

// Validate checks the params and that each account is valid and listed once.
func (g GenesisState) Validate() error {
	if err := g.Params.Validate(); err != nil {
		return fmt.Errorf("genesis: %w", err)
	}
	seen := map[string]bool{}
	for i, a := range g.Accounts {
		if err := CheckAddress(a.Address, g.Params.AddressPrefix); err != nil {
			return fmt.Errorf("genesis: accounts[%d]: %w", i, err)
		}
		if seen[a.Address] {
			return fmt.Errorf("genesis: accounts[%d]: %s is listed twice", i, a.Address)
		}
		seen[a.Address] = true
		denoms := map[string]bool{}
		for j, c := range a.Balances {
			if !market.ValidDenom(c.Denom) {
				return fmt.Errorf("genesis: accounts[%d].balances[%d]: denomination %q is not valid", i, j, c.Denom)
			}
			if denoms[c.Denom] {
				return fmt.Errorf("genesis: accounts[%d].balances[%d]: %s listed twice", i, j, c.Denom)
			}
			denoms[c.Denom] = true
		}
	}
	audited := map[[2]string]bool{}
	for i, a := range g.Audits {
		f := fmt.Sprintf("genesis: audits[%d]", i)
		if err := CheckAddress(a.Owner, g.Params.AddressPrefix); err != nil {
			return fmt.Errorf("%s.owner: %w", f, err)
		}
		if err := CheckAddress(a.Auditor, g.Params.AddressPrefix); err != nil {
			return fmt.Errorf("%s.auditor: %w", f, err)
		}
		if audited[[2]string{a.Owner, a.Auditor}] {
			return fmt.Errorf("%s: %s's attributes signed by %s are listed twice", f, a.Owner, a.Auditor)
		}
		audited[[2]string{a.Owner, a.Auditor}] = true
		if len(a.Attributes) == 0 {
			return fmt.Errorf("%s.attributes: none", f)
		}
		if err := checkAttributes(f+".attributes", a.Attributes); err != nil {
			return err
		}
	}
	return nil
}
