package node

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	cfg "github.com/cometbft/cometbft/config"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/types"
	cmttime "github.com/cometbft/cometbft/types/time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/keys"
)

// InitOptions describe a new chain.
type InitOptions struct {
	// ChainID names the chain (default "berth-dev").
	ChainID string
	// Moniker is the node's name among its peers (default "berth-node").
	Moniker string
	// BlockInterval is the pause after each block (CometBFT's timeout_commit); blocks
	// are made even when there are no transactions, so leases are paid as time goes.
	// Default 1 s.
	BlockInterval time.Duration
	// Fast configures a node for tests and benchmarks: no empty blocks and no commit
	// wait, so a transaction is in a block within milliseconds and nothing happens in
	// between. BlockInterval is ignored.
	Fast bool
	// Params are the chain's rules (default ledger.DefaultParams()).
	Params *ledger.Params
	// DevAccounts are key names to create in the home's keyring ("keyring" in the home)
	// and fund with Fund each at genesis.
	DevAccounts []string
	// Fund is each dev account's genesis balance (default 1,000,000,000,000 of each
	// denomination deployments may be paid in).
	Fund []market.Coin
	// Accounts are further accounts funded at genesis.
	Accounts []ledger.GenesisAccount
	// DevAudits are attributes auditors have signed at genesis for dev accounts.
	DevAudits []DevAudit
	// RPCListen and P2PListen are written to config.toml (defaults tcp://127.0.0.1:26657
	// and tcp://127.0.0.1:26656).
	RPCListen string
	P2PListen string
}

// DevAudit is an auditor's signature, in genesis, on a dev account's attributes (the
// account to be registered as a provider): what berth dev uses so that tenants' files
// requiring an auditor's signature (Akash's own, in most published SDLs) get bids.
type DevAudit struct {
	Account    string // a DevAccounts name
	Auditor    string // the auditor's address
	Attributes market.Attributes
}

// DefaultChainID is the chain ID of homes made without one.
const DefaultChainID = "berth-dev"

// KeyringDir is where a home keeps its keys.
func KeyringDir(home string) string { return filepath.Join(home, "keyring") }

// InitResult is what Init made.
type InitResult struct {
	Home     string
	ChainID  string
	NodeID   string
	Accounts []keys.Info
}

var chainIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,49}$`)

func (o *InitOptions) defaults() error {
	if o.ChainID == "" {
		o.ChainID = DefaultChainID
	}
	if !chainIDRe.MatchString(o.ChainID) {
		return fmt.Errorf("chain id %q: want 1 to 50 letters, digits, '_', '.' or '-'", o.ChainID)
	}
	if o.Moniker == "" {
		o.Moniker = "berth-node"
	}
	if o.BlockInterval == 0 {
		o.BlockInterval = time.Second
	}
	if o.BlockInterval < 0 || o.BlockInterval > time.Minute {
		return fmt.Errorf("block interval %s: want more than 0 and at most 1m", o.BlockInterval)
	}
	if o.Params == nil {
		p := ledger.DefaultParams()
		o.Params = &p
	}
	if err := o.Params.Validate(); err != nil {
		return err
	}
	if len(o.Fund) == 0 {
		for _, d := range o.Params.Denoms {
			o.Fund = append(o.Fund, market.Coin{Amount: 1_000_000_000_000, Denom: d})
		}
	}
	seen := map[string]bool{}
	for i, c := range o.Fund {
		switch {
		case !market.ValidDenom(c.Denom):
			return fmt.Errorf("fund[%d]: denomination %q is not valid", i, c.Denom)
		case seen[c.Denom]:
			return fmt.Errorf("fund[%d]: %s listed twice", i, c.Denom)
		case c.Amount == 0:
			return fmt.Errorf("fund[%d]: %s is zero", i, c.Denom)
		}
		seen[c.Denom] = true
	}
	// Checked as genesis will check them, before anything is written: the accounts'
	// addresses do not exist yet, so the auditor's stands in for the owner's.
	audited := map[[2]string]bool{}
	for i, a := range o.DevAudits {
		switch {
		case !slices.Contains(o.DevAccounts, a.Account):
			return fmt.Errorf("dev audit %d: %q is not one of the dev accounts %v", i, a.Account, o.DevAccounts)
		case audited[[2]string{a.Account, a.Auditor}]:
			return fmt.Errorf("dev audit %d: %s's attributes signed by %s are listed twice", i, a.Account, a.Auditor)
		}
		audited[[2]string{a.Account, a.Auditor}] = true
		g := ledger.GenesisState{Params: *o.Params, Audits: []ledger.AuditedAttributes{{Owner: a.Auditor, Auditor: a.Auditor, Attributes: a.Attributes}}}
		if err := g.Validate(); err != nil {
			return fmt.Errorf("dev audit %d (%s by %s): %w", i, a.Account, a.Auditor, err)
		}
	}
	if o.RPCListen == "" {
		o.RPCListen = "tcp://127.0.0.1:26657"
	}
	if o.P2PListen == "" {
		o.P2PListen = "tcp://127.0.0.1:26656"
	}
	return o.Params.Validate()
}

// nodeConfig is the config.toml of a node.
func nodeConfig(home string, o *InitOptions) *cfg.Config {
	c := cfg.DefaultConfig()
	c.SetRoot(home)
	c.Moniker = o.Moniker
	c.RPC.ListenAddress = o.RPCListen
	c.P2P.ListenAddress = o.P2PListen
	c.P2P.AddrBookStrict = false // validators on private or loopback addresses
	c.P2P.AllowDuplicateIP = true
	// Validators are listed as persistent peers, not discovered, so there is no peer
	// exchange and no address book (set pex = true in config.toml to add full nodes
	// that find each other).
	c.P2P.PexReactor = false
	c.TxIndex.Indexer = "kv" // the broadcaster finds transactions by hash
	c.Consensus.CreateEmptyBlocks = true
	c.Consensus.TimeoutCommit = o.BlockInterval
	if o.Fast {
		c.Consensus.CreateEmptyBlocks = false
		c.Consensus.TimeoutCommit = 0
		c.Consensus.SkipTimeoutCommit = true
		// Validators on one machine: gossip without the defaults' 100 ms pauses.
		c.P2P.FlushThrottleTimeout = 10 * time.Millisecond
		c.Consensus.PeerGossipSleepDuration = 10 * time.Millisecond
		c.Consensus.PeerQueryMaj23SleepDuration = 100 * time.Millisecond
	}
	return c
}

// writeHome writes a node's config.toml, node key and validator key into home and
// returns its validator's genesis entry and its node ID.
func writeHome(home string, o *InitOptions) (types.GenesisValidator, p2p.ID, error) {
	if _, err := os.Stat(filepath.Join(home, "config", "genesis.json")); err == nil {
		return types.GenesisValidator{}, "", fmt.Errorf("%s is already a node home (config/genesis.json exists); choose another directory or remove it", home)
	}
	for _, d := range []string{"config", "data"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return types.GenesisValidator{}, "", err
		}
	}
	c := nodeConfig(home, o)
	cfg.WriteConfigFile(filepath.Join(home, "config", "config.toml"), c)
	nk := &p2p.NodeKey{PrivKey: ed25519.GenPrivKey()}
	if err := nk.SaveAs(c.NodeKeyFile()); err != nil {
		return types.GenesisValidator{}, "", fmt.Errorf("node key: %w", err)
	}
	pv := privval.NewFilePV(ed25519.GenPrivKey(), c.PrivValidatorKeyFile(), c.PrivValidatorStateFile())
	pv.Save()
	pub, err := pv.GetPubKey()
	if err != nil {
		return types.GenesisValidator{}, "", err
	}
	return types.GenesisValidator{Address: pub.Address(), PubKey: pub, Power: 10, Name: o.Moniker}, nk.ID(), nil
}

// checkDevKeys refuses names the home's keyring already has, before anything is
// written.
func checkDevKeys(home string, names []string) error {
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(KeyringDir(home), name+".json")); err == nil {
			return fmt.Errorf("key %q already exists in %s: choose other --accounts or another home", name, KeyringDir(home))
		}
	}
	return nil
}

// devAccounts creates the dev keys in the keyring and returns their genesis entries.
func devAccounts(home string, o *InitOptions) ([]keys.Info, []ledger.GenesisAccount, error) {
	if len(o.DevAccounts) == 0 {
		return nil, nil, nil
	}
	kr, err := keys.Open(KeyringDir(home), o.Params.AddressPrefix)
	if err != nil {
		return nil, nil, err
	}
	var infos []keys.Info
	var accts []ledger.GenesisAccount
	for _, name := range o.DevAccounts {
		info, err := kr.Add(name, ledger.KeySecp256k1)
		if err != nil {
			return nil, nil, err
		}
		infos = append(infos, info)
		accts = append(accts, ledger.GenesisAccount{Address: info.Address, Balances: slices.Clone(o.Fund)})
	}
	return infos, accts, nil
}

func genesisDoc(o *InitOptions, vals []types.GenesisValidator, accts []ledger.GenesisAccount, infos []keys.Info) (*types.GenesisDoc, error) {
	app := ledger.GenesisState{Params: *o.Params, Accounts: append(accts, o.Accounts...)}
	for i, a := range o.DevAudits {
		j := slices.IndexFunc(infos, func(k keys.Info) bool { return k.Name == a.Account })
		if j < 0 {
			return nil, fmt.Errorf("dev audit %d: %q is not one of the dev accounts %v", i, a.Account, o.DevAccounts)
		}
		app.Audits = append(app.Audits, ledger.AuditedAttributes{Owner: infos[j].Address, Auditor: a.Auditor, Attributes: slices.Clone(a.Attributes)})
	}
	if err := app.Validate(); err != nil {
		return nil, err
	}
	state, err := json.MarshalIndent(app, "", "  ")
	if err != nil {
		return nil, err
	}
	gd := &types.GenesisDoc{
		ChainID:         o.ChainID,
		GenesisTime:     cmttime.Now(),
		InitialHeight:   1,
		ConsensusParams: types.DefaultConsensusParams(),
		Validators:      vals,
		AppState:        state,
	}
	if err := gd.ValidateAndComplete(); err != nil {
		return nil, err
	}
	return gd, nil
}

// Init makes a single-validator home: config, keys, genesis with the dev accounts.
func Init(home string, o InitOptions) (*InitResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := checkDevKeys(home, o.DevAccounts); err != nil {
		return nil, err
	}
	val, id, err := writeHome(home, &o)
	if err != nil {
		return nil, err
	}
	infos, accts, err := devAccounts(home, &o)
	if err != nil {
		return nil, err
	}
	gd, err := genesisDoc(&o, []types.GenesisValidator{val}, accts, infos)
	if err != nil {
		return nil, err
	}
	if err := gd.SaveAs(filepath.Join(home, "config", "genesis.json")); err != nil {
		return nil, err
	}
	return &InitResult{Home: home, ChainID: o.ChainID, NodeID: string(id), Accounts: infos}, nil
}

// NetworkOptions describe a network of validators.
type NetworkOptions struct {
	InitOptions
	// Validators is the number of validator homes to make (dir/node0, dir/node1, …).
	Validators int
	// Hosts are the validators' addresses as their peers reach them, one per
	// validator (default 127.0.0.1 for all, for a network on one machine).
	Hosts []string
	// P2PPorts are the validators' p2p ports (default 26656 for all when Hosts are
	// distinct machines; 26656, 26666, 26676, … on one machine).
	P2PPorts []int
	// RPCPorts are the validators' RPC ports, on 127.0.0.1 (default 26657, 26667, …).
	RPCPorts []int
}

// InitNetwork makes one home per validator under dir, sharing one genesis and each
// listing the others as persistent peers. Copy node<i> to machine i and start each
// with `berth chain start --home`. The dev keys go to node0's keyring.
func InitNetwork(dir string, o NetworkOptions) ([]*InitResult, error) {
	if o.Validators < 1 || o.Validators > 100 {
		return nil, fmt.Errorf("validators %d: want 1 to 100", o.Validators)
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	n := o.Validators
	if len(o.Hosts) == 0 {
		for range n {
			o.Hosts = append(o.Hosts, "127.0.0.1")
		}
	}
	if len(o.Hosts) != n {
		return nil, fmt.Errorf("%d hosts for %d validators", len(o.Hosts), n)
	}
	local := true
	// Validators sharing a host get ports 10 apart: the k-th on a host uses
	// 26656+10k (p2p) and 26657+10k (RPC).
	nth := make([]int, n)
	seen := map[string]int{}
	for i, h := range o.Hosts {
		if net.ParseIP(h) == nil && !validHostname(h) {
			return nil, fmt.Errorf("host %q: not an IP address or host name", h)
		}
		local = local && h == o.Hosts[0]
		nth[i] = seen[h]
		seen[h]++
	}
	if len(o.P2PPorts) == 0 {
		for i := range n {
			o.P2PPorts = append(o.P2PPorts, 26656+10*nth[i])
		}
	}
	if len(o.RPCPorts) == 0 {
		for i := range n {
			o.RPCPorts = append(o.RPCPorts, 26657+10*nth[i])
		}
	}
	if len(o.P2PPorts) != n || len(o.RPCPorts) != n {
		return nil, fmt.Errorf("want %d p2p and %d rpc ports, got %d and %d", n, n, len(o.P2PPorts), len(o.RPCPorts))
	}
	if err := checkDevKeys(filepath.Join(dir, "node0"), o.DevAccounts); err != nil {
		return nil, err
	}
	vals := make([]types.GenesisValidator, n)
	ids := make([]p2p.ID, n)
	homes := make([]string, n)
	for i := range n {
		oi := o.InitOptions
		oi.Moniker = "node" + strconv.Itoa(i)
		oi.P2PListen = "tcp://0.0.0.0:" + strconv.Itoa(o.P2PPorts[i])
		if local {
			oi.P2PListen = "tcp://" + net.JoinHostPort(o.Hosts[i], strconv.Itoa(o.P2PPorts[i]))
		}
		oi.RPCListen = "tcp://127.0.0.1:" + strconv.Itoa(o.RPCPorts[i])
		homes[i] = filepath.Join(dir, oi.Moniker)
		var err error
		if vals[i], ids[i], err = writeHome(homes[i], &oi); err != nil {
			return nil, err
		}
	}
	infos, accts, err := devAccounts(homes[0], &o.InitOptions)
	if err != nil {
		return nil, err
	}
	gd, err := genesisDoc(&o.InitOptions, vals, accts, infos)
	if err != nil {
		return nil, err
	}
	out := make([]*InitResult, n)
	for i := range n {
		if err := gd.SaveAs(filepath.Join(homes[i], "config", "genesis.json")); err != nil {
			return nil, err
		}
		var peers []string
		for j := range n {
			if j != i {
				peers = append(peers, string(ids[j])+"@"+net.JoinHostPort(o.Hosts[j], strconv.Itoa(o.P2PPorts[j])))
			}
		}
		if err := setPeers(homes[i], strings.Join(peers, ",")); err != nil {
			return nil, err
		}
		out[i] = &InitResult{Home: homes[i], ChainID: o.ChainID, NodeID: string(ids[i])}
	}
	out[0].Accounts = infos
	return out, nil
}

func setPeers(home, peers string) error {
	c, err := LoadConfig(home)
	if err != nil {
		return err
	}
	c.P2P.PersistentPeers = peers
	cfg.WriteConfigFile(filepath.Join(home, "config", "config.toml"), c)
	return nil
}

var hostnameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

func validHostname(h string) bool { return len(h) <= 253 && hostnameRe.MatchString(h) }

// SetListenAddresses records new RPC and p2p listen addresses in the home's config.toml
// (empty: unchanged), so that clients reading the home (`--home`) find the node where it
// now listens.
func SetListenAddresses(home, rpc, p2pAddr string) error {
	c, err := LoadConfig(home)
	if err != nil {
		return err
	}
	if rpc != "" {
		c.RPC.ListenAddress = rpc
	}
	if p2pAddr != "" {
		c.P2P.ListenAddress = p2pAddr
	}
	if err := c.ValidateBasic(); err != nil {
		return fmt.Errorf("node home %s: listen addresses: %w", home, err)
	}
	cfg.WriteConfigFile(filepath.Join(home, "config", "config.toml"), c)
	return nil
}

// HasGenesis reports whether home holds a chain (a genesis file).
func HasGenesis(home string) bool {
	_, err := os.Stat(filepath.Join(home, "config", "genesis.json"))
	return err == nil
}

// LoadGenesisParams reads the ledger's params from the home's genesis.
func LoadGenesisParams(home string) (ledger.Params, error) {
	path := filepath.Join(home, "config", "genesis.json")
	gd, err := types.GenesisDocFromFile(path)
	if err != nil {
		return ledger.Params{}, fmt.Errorf("genesis %s: %w", path, err)
	}
	st, err := ledger.ParseGenesis(gd.AppState)
	if err != nil {
		return ledger.Params{}, fmt.Errorf("genesis %s: %w", path, err)
	}
	return st.Params, nil
}
