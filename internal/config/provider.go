package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/balance"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/internal/yaml"
)

// ProviderConfig is `berth provider run`'s configuration: provider.yaml, then the
// environment (BERTH_HOME, BERTH_NODE, BERTH_FROM, BERTH_KUBECONFIG, BERTH_LOG_LEVEL, BERTH_BUS_REDIS),
// then flags. Keys are documented in docs/bidding.md.
type ProviderConfig struct {
	// Home holds the keyring and the provider's state (the bid engine's cursor).
	Home string `yaml:"home"`
	// From is the provider's key name in the keyring.
	From string `yaml:"from"`
	// Node is the ledger node's RPC address ("" : the home's node, else
	// tcp://127.0.0.1:26657).
	Node string `yaml:"node"`
	// Kubeconfig is the cluster's kubeconfig ("": in-cluster configuration).
	Kubeconfig string `yaml:"kubeconfig"`
	// KubeQPS and KubeBurst rate-limit berth's Kubernetes client.
	KubeQPS   float64 `yaml:"kube_qps"`
	KubeBurst int     `yaml:"kube_burst"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// HostURI and Attributes are what `berth provider register` records; run reads the
	// registration from the ledger.
	HostURI    string            `yaml:"host_uri"`
	Attributes []AttributeConfig `yaml:"attributes"`

	Bidding   BiddingConfig   `yaml:"bidding"`
	Inventory InventoryConfig `yaml:"inventory"`
	Cluster   ClusterConfig   `yaml:"cluster"`
	Gateway   GatewayConfig   `yaml:"gateway"`
	Balance   BalanceConfig   `yaml:"balance"`
	// Bus, when its redis URL is set, publishes the provider's status topics on Redis
	// for other processes (docs/operators.md#the-bus-over-redis).
	Bus redisbus.Config `yaml:"bus"`

	// Build describes the running binary (set by main, reported by GET /version).
	Build rest.BuildInfo `yaml:"-"`
}

// BalanceConfig configures the balance checker (internal/balance).
type BalanceConfig struct {
	// WithdrawPeriod: every lease is withdrawn this often ("0s": only on thresholds).
	WithdrawPeriod time.Duration `yaml:"withdraw_period"`
	// CheckInterval is how often escrows and the provider's balance are read.
	CheckInterval time.Duration `yaml:"check_interval"`
	// LowFundsBlocks: a deployment whose escrow pays for fewer blocks has our leases
	// withdrawn at once (0: never).
	LowFundsBlocks int64 `yaml:"low_funds_blocks"`
	// MinBalance is kept for bid deposits: below it, every lease is withdrawn at once
	// ("": the ledger's bid_min_deposit; "0uakt": never).
	MinBalance Coin `yaml:"min_balance"`
	// EarningsFile is the earnings record ("": HOME/provider/earnings.json).
	EarningsFile string `yaml:"earnings_file"`
}

// CheckerConfig is the balance checker's configuration, for the provider's account.
func (c *ProviderConfig) CheckerConfig(provider string) (balance.Config, error) {
	b := balance.DefaultConfig()
	b.Provider, b.LowFundsBlocks = provider, c.Balance.LowFundsBlocks
	b.EarningsFile = c.Balance.EarningsFile
	if b.EarningsFile == "" {
		b.EarningsFile = filepath.Join(c.Home, "provider", "earnings.json")
	}
	b.WithdrawPeriod, b.CheckInterval = c.Balance.WithdrawPeriod, c.Balance.CheckInterval
	if m, ok := c.Balance.MinBalance.Get(); ok {
		b.MinBalance = m
	}
	if err := b.Validate(); err != nil {
		return b, err
	}
	return b, nil
}

// GatewayConfig configures the tenant gateway and the manifest service.
type GatewayConfig struct {
	// Listen is the HTTPS gateway's address ("": no gateway).
	Listen string `yaml:"listen"`
	// GRPCListen is the gRPC gateway's address ("": none).
	GRPCListen string `yaml:"grpc_listen"`
	// CertFile and KeyFile are a server certificate (e.g. from a CA), reloaded when
	// they change, served to clients that ask for a name it covers. The provider's
	// self-signed certificate for its address, kept in the home and registered on the
	// ledger (what Akash's tenant tools check), is served otherwise: always to
	// mtls.<host> and to clients that send no name; everywhere when these are empty.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// PublicHostname is the host tenants reach forwarded ports on ("": the host of
	// the provider's host URI).
	PublicHostname string `yaml:"public_hostname"`
	// ManifestTimeout: a won lease without a manifest this long has its bid closed
	// (reason manifest_timeout); "0s" never.
	ManifestTimeout time.Duration `yaml:"manifest_timeout"`
	// BlockedHostnames may not be used by tenants: a name, or ".domain" for every
	// name under it.
	BlockedHostnames []string `yaml:"blocked_hostnames"`
}

// ClusterConfig configures how leases run on the cluster.
type ClusterConfig struct {
	// InstallCRDs installs berth's CustomResourceDefinitions at start.
	InstallCRDs bool `yaml:"install_crds"`
	// StorageClasses maps SDL persistent storage classes to the cluster's.
	StorageClasses map[string]string `yaml:"storage_classes"`
	// GPURuntimeClass is the runtimeClassName of GPU pods ("": none).
	GPURuntimeClass string `yaml:"gpu_runtime_class"`
	// IngressNamespace is where the ingress controller runs.
	IngressNamespace string `yaml:"ingress_namespace"`
	// IngressDomain, when set, gives each service's HTTP port (a global port 80) a
	// hostname of the provider's, <26 characters>.<ingress_domain>, as Akash providers
	// do (--deployment-ingress-domain with static hosts); point a wildcard DNS record
	// for it at the ingress. Tenants may not name hosts under it.
	IngressDomain string `yaml:"ingress_domain"`
	// IngressHTTPPort is the port the ingress answers the services' hostnames on
	// when it is not 80 (0: 80); lease status tells tenants, whose tools add it to
	// the URIs. berth dev sets it to its ingress controller's loopback port.
	IngressHTTPPort int `yaml:"ingress_http_port"`
	// EgressDeny lists CIDRs tenants may not reach (empty: the private ranges).
	EgressDeny []string `yaml:"egress_deny"`
	// OrphanInterval is how often lease namespaces are checked against the ledger;
	// FailedPodTTL is how long after it failed a Deployment's pod (evicted, its node
	// lost) is deleted ("0s": never).
	FailedPodTTL time.Duration `yaml:"failed_pod_ttl"`
	// OrphanDryRun only reports what would be removed.
	OrphanInterval time.Duration `yaml:"orphan_interval"`
	OrphanDryRun   bool          `yaml:"orphan_dry_run"`
	// UnhealthyCloseAfter, when set, closes leases (reason unstable) not ready for that
	// long while the cluster is observable ("0s": never, the default).
	UnhealthyCloseAfter time.Duration `yaml:"unhealthy_close_after"`
	// DeployConcurrency is how many leases are applied or torn down at once.
	DeployConcurrency int `yaml:"deploy_concurrency"`
	// Overcommit is in percent per resource: requests (and reservations) are
	// 100/(100+P) of what tenants ask; limits stay what they ask.
	Overcommit struct {
		CPU     uint32 `yaml:"cpu"`
		Memory  uint32 `yaml:"memory"`
		Storage uint32 `yaml:"storage"`
	} `yaml:"overcommit"`
}

// CapacityOvercommit is cluster.overcommit as the capacity bookkeeping takes it.
func (c *ClusterConfig) CapacityOvercommit() cluster.Overcommit {
	return cluster.Overcommit{CPU: c.Overcommit.CPU, Memory: c.Overcommit.Memory, Storage: c.Overcommit.Storage}
}

// KubeSettings are how the deployer builds leases' objects (but for their owner).
func (c *ProviderConfig) KubeSettings() kube.Settings {
	cl := &c.Cluster
	return kube.Settings{StorageClasses: cl.StorageClasses, GPURuntimeClass: cl.GPURuntimeClass,
		IngressNamespace: cl.IngressNamespace, EgressDeny: cl.EgressDeny, Overcommit: cl.CapacityOvercommit(),
		// The inventory operator labels the nodes of each storage class it offers.
		StorageAffinity: c.Inventory.Operator != ""}
}

// EngineConfig is the bid engine's configuration as the provider builds it: provider
// is its account, prefix the ledger's address prefix, and minDeposit the ledger's
// bid_min_deposit (which bidding.deposit may raise, never lower). Its Log is unset.
func (c *ProviderConfig) EngineConfig(provider, prefix string, minDeposit market.Coin) (bidengine.EngineConfig, error) {
	policy, err := c.Policy(prefix)
	if err != nil {
		return bidengine.EngineConfig{}, err
	}
	pricer, err := c.pricer()
	if err != nil {
		return bidengine.EngineConfig{}, err
	}
	deposit := minDeposit
	if d, ok := c.Bidding.Deposit.Get(); ok {
		if d.Denom != deposit.Denom || d.Amount < deposit.Amount {
			return bidengine.EngineConfig{}, fmt.Errorf("bidding.deposit %s: must be at least the ledger's bid_min_deposit %s", d, deposit)
		}
		deposit = d
	}
	b := c.Bidding.Budget
	return bidengine.EngineConfig{
		Provider: provider, Policy: policy, Pricer: pricer, Deposit: deposit, BidTimeout: c.Bidding.Timeout,
		BidsPerHour: b.BidsPerHour, TenantBidsPerHour: b.TenantBidsPerHour, Overcommit: c.Cluster.CapacityOvercommit(),
	}, nil
}

// AttributeConfig is one key/value attribute.
type AttributeConfig struct {
	Key   string `yaml:"key"`
	Value string `yaml:"value"`
}

// BiddingConfig configures the bid engine.
type BiddingConfig struct {
	// Timeout is how long a bid waits for a lease before we close it.
	Timeout time.Duration `yaml:"timeout"`
	// Deposit overrides the ledger's bid_min_deposit (it may only be larger).
	Deposit Coin          `yaml:"deposit"`
	Pricing PricingConfig `yaml:"pricing"`
	Tenants struct {
		Allow []string `yaml:"allow"`
		Deny  []string `yaml:"deny"`
	} `yaml:"tenants"`
	Budget struct {
		BidsPerHour       uint32 `yaml:"bids_per_hour"`
		TenantBidsPerHour uint32 `yaml:"tenant_bids_per_hour"`
	} `yaml:"budget"`
	Limits            LimitsConfig      `yaml:"limits"`
	RequireAttributes []AttributeConfig `yaml:"require_attributes"`
	// History is how many decisions are kept for the status API.
	History int `yaml:"history"`
	// Concurrency bounds orders decided at once.
	Concurrency int `yaml:"concurrency"`
}

// PricingConfig chooses and configures the pricing strategy.
type PricingConfig struct {
	// Strategy is "scale" or "script".
	Strategy string       `yaml:"strategy"`
	Scale    ScaleConfig  `yaml:"scale"`
	Script   ScriptConfig `yaml:"script"`
}

// ScaleConfig holds the scale strategy's rates per block, as decimals in Denom.
type ScaleConfig struct {
	Denom string `yaml:"denom"` // the denomination the rates below are in
	// Exchange prices orders in other denominations: how many units of each one unit
	// of Denom is worth. "0" turns a denomination off (no bids in it).
	Exchange map[string]market.Dec `yaml:"exchange"`
	CPU      market.Dec            `yaml:"cpu"`       // per millicpu
	Memory   market.Dec            `yaml:"memory"`    // per MiB
	Storage  map[string]market.Dec `yaml:"storage"`   // per MiB, by class: ephemeral, ram, or a persistent class
	Endpoint market.Dec            `yaml:"endpoint"`  // per global port
	LeasedIP market.Dec            `yaml:"leased_ip"` // per leased IP
	GPU      map[string]market.Dec `yaml:"gpu"`       // per GPU, by model; "*" for any other model
}

// ScriptConfig configures the script strategy.
type ScriptConfig struct {
	Path          string        `yaml:"path"`
	Timeout       time.Duration `yaml:"timeout"`
	MaxConcurrent int           `yaml:"max_concurrent"`
}

// LimitsConfig bounds orders; sizes are Kubernetes quantities ("16Gi"), CPU in cores
// ("4", "500m"). Empty or zero: no limit.
type LimitsConfig struct {
	CPUPerReplica     Quantity `yaml:"cpu_per_replica"`
	MemoryPerReplica  Quantity `yaml:"memory_per_replica"`
	StoragePerReplica Quantity `yaml:"storage_per_replica"`
	VolumesPerReplica uint32   `yaml:"volumes_per_replica"`
	GPUsPerReplica    uint32   `yaml:"gpus_per_replica"`
	ReplicasPerOrder  uint32   `yaml:"replicas_per_order"`
	EndpointsPerOrder uint32   `yaml:"endpoints_per_order"`
}

// InventoryConfig sizes the cluster-wide pools nodes do not report.
type InventoryConfig struct {
	// Storage is the capacity of each persistent storage class offered ("1Ti").
	Storage map[string]Quantity `yaml:"storage"`
	// LeasedIPs is the size of the leased IP pool, when it is not a MetalLB pool.
	LeasedIPs int64 `yaml:"leased_ips"`
	// LeasedIPPool, NAMESPACE/NAME, is the MetalLB IPAddressPool leased IPs come from
	// (the IP operator's pool): the provider offers as many leased IPs as it has
	// addresses no one else holds, and leased_ips is not used.
	LeasedIPPool string `yaml:"leased_ip_pool"`
	// NodePorts is how many node ports leases may use.
	NodePorts int64 `yaml:"node_ports"`
	// Operator names the Inventory resource of the inventory operator (berth operator
	// inventory; its name setting): the provider then takes the nodes, their GPUs and
	// the storage classes' sizes from it, and storage is not set here. Empty: the
	// provider watches the cluster's nodes, pods and claims itself.
	Operator string `yaml:"operator"`
	// MaxAge is how old the operator's last report may be before the provider stops
	// bidding (with reason inventory_stale) until it reports again (default 2m).
	MaxAge time.Duration `yaml:"max_age"`
}

// dec is a decimal constant of the defaults.
func dec(s string) market.Dec { return market.MustParseDec(s) }

// DefaultProviderConfig returns the defaults every key falls back to.
func DefaultProviderConfig() ProviderConfig {
	home := ".berth"
	if d, err := os.UserHomeDir(); err == nil {
		home = d + "/.berth"
	}
	c := ProviderConfig{Home: home, From: "provider", KubeQPS: 100, KubeBurst: 200, LogLevel: "info"}
	c.Bidding.Timeout = 5 * time.Minute
	c.Bidding.History = 1000
	c.Bidding.Concurrency = 32
	c.Bidding.Pricing = PricingConfig{
		Strategy: "scale",
		Scale: ScaleConfig{
			Denom: ledger.DefaultDenom, CPU: dec("0.01"), Memory: dec("0.002"), Endpoint: dec("1"), LeasedIP: dec("10"),
			// Placeholders, 1 AKT = 1 USD: an operator sets the rates of the day
			// (docs/bidding.md). ACT is pegged to the dollar, as USDC is.
			Exchange: map[string]market.Dec{ledger.DenomACT: dec("1"), ledger.DenomUSDC: dec("1")},
			Storage:  map[string]market.Dec{bidengine.ClassEphemeral: dec("0.0002"), bidengine.ClassRAM: dec("0.002"), market.StorageClassDefault: dec("0.0003")},
			GPU:      map[string]market.Dec{"*": dec("100")},
		},
		Script: ScriptConfig{Timeout: 10 * time.Second, MaxConcurrent: bidengine.DefaultScriptMaxConcurrent},
	}
	c.Inventory.NodePorts = 2768 // 30000–32767, Kubernetes' default range
	c.Inventory.MaxAge = 2 * time.Minute
	c.Gateway = GatewayConfig{Listen: "0.0.0.0:8443", GRPCListen: "0.0.0.0:8444", ManifestTimeout: manifest.DefaultTimeout}
	c.Balance = BalanceConfig{WithdrawPeriod: time.Hour, CheckInterval: time.Minute, LowFundsBlocks: balance.DefaultLowFundsBlocks}
	c.Cluster = ClusterConfig{InstallCRDs: true, IngressNamespace: "ingress-nginx", OrphanInterval: 10 * time.Minute, FailedPodTTL: 10 * time.Minute, DeployConcurrency: deploy.DefaultDeployConcurrency}
	return c
}

// Checked is a provider configuration that passed Validate, as NewProvider takes it:
// validated once, where it is read, before anything is locked or opened. (It shares
// the maps and lists of the configuration it was made from: change neither after.)
type Checked struct{ cfg ProviderConfig }

// Check validates c (an Error says what is wrong) and returns it checked.
func (c ProviderConfig) Check() (Checked, error) {
	if err := c.Validate(); err != nil {
		return Checked{}, Invalid(err)
	}
	return Checked{cfg: c}, nil
}

// Config is the configuration that passed Validate.
func (c Checked) Config() ProviderConfig { return c.cfg }

// LoadProviderConfig reads path over the defaults, then applies the environment. A
// file that cannot be read or is not a provider.yaml is an Error.
func LoadProviderConfig(path string, getenv func(string) string) (ProviderConfig, error) {
	c := DefaultProviderConfig()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, Invalid(fmt.Errorf("config: %w", err))
		}
		if err := DecodeProviderConfig(path, b, &c); err != nil {
			return c, Invalid(err)
		}
	}
	for env, field := range map[string]*string{
		"BERTH_HOME": &c.Home, "BERTH_NODE": &c.Node, "BERTH_FROM": &c.From,
		"BERTH_KUBECONFIG": &c.Kubeconfig, "BERTH_LOG_LEVEL": &c.LogLevel,
		"BERTH_BUS_REDIS": &c.Bus.Redis, // a URL with a password, from a secret
	} {
		if v := getenv(env); v != "" {
			*field = v
		}
	}
	return c, nil
}

// DecodeProviderConfig reads provider.yaml's bytes (from the file path) over c: keys
// the file sets replace c's, the others keep theirs; maps (scale rates by storage class
// and GPU model) merge. Unknown keys and values of the wrong type are errors naming
// their line.
func DecodeProviderConfig(path string, b []byte, c *ProviderConfig) error {
	if err := yaml.Decode(b, c); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// LeasedIPPool reads inventory.leased_ip_pool (ok false: not set).
func (c *ProviderConfig) LeasedIPPool() (kube.MetalLBPool, bool, error) {
	v := c.Inventory.LeasedIPPool
	if v == "" {
		return kube.MetalLBPool{}, false, nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return kube.MetalLBPool{}, false, fmt.Errorf("inventory.leased_ip_pool %q: want NAMESPACE/NAME of a MetalLB IPAddressPool", v)
	}
	return kube.MetalLBPool{Namespace: ns, Name: name}, true, nil
}

// Validate reports the first invalid key by its name in provider.yaml.
func (c *ProviderConfig) Validate() error {
	if _, _, err := c.LeasedIPPool(); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(c.Home) == "":
		return errors.New("home: empty")
	case strings.TrimSpace(c.From) == "":
		return errors.New("from: empty (the provider's key name)")
	case c.KubeQPS <= 0 || c.KubeQPS > 10000:
		return fmt.Errorf("kube_qps: %g is outside (0, 10000]", c.KubeQPS)
	case c.KubeBurst < 1 || c.KubeBurst > 20000:
		return fmt.Errorf("kube_burst: %d is outside 1–20000", c.KubeBurst)
	case !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel):
		return fmt.Errorf("log_level: %q is not debug, info, warn or error", c.LogLevel)
	case c.Bidding.History < 1 || c.Bidding.History > 1_000_000:
		return fmt.Errorf("bidding.history: %d is outside 1–1000000", c.Bidding.History)
	case c.Bidding.Concurrency < 1 || c.Bidding.Concurrency > 1024:
		return fmt.Errorf("bidding.concurrency: %d is outside 1–1024", c.Bidding.Concurrency)
	case c.Inventory.LeasedIPs < 0:
		return errors.New("inventory.leased_ips: negative")
	case c.Inventory.LeasedIPPool != "" && c.Inventory.LeasedIPs != 0:
		return errors.New("inventory: leased_ip_pool and leased_ips both set: the MetalLB pool's size is the number of leased IPs")
	case c.Inventory.NodePorts < 0:
		return errors.New("inventory.node_ports: negative")
	case c.Cluster.DeployConcurrency < 1 || c.Cluster.DeployConcurrency > 1024:
		return fmt.Errorf("cluster.deploy_concurrency: %d is outside 1–1024", c.Cluster.DeployConcurrency)
	}
	if err := c.checkBidTimeout(); err != nil {
		return err
	}
	if _, err := c.CheckerConfig("validating"); err != nil {
		return err
	}
	if p := c.Cluster.IngressHTTPPort; p < 0 || p > 65535 {
		return fmt.Errorf("cluster.ingress_http_port %d: not a port (0 for the standard 80)", p)
	}
	if d := c.Cluster.IngressDomain; d != "" && !market.ValidHostname(d) {
		return fmt.Errorf("cluster.ingress_domain %q: not a lowercase DNS name (like ingress.example.com)", d)
	}
	// The chain's address prefix is known only once connected: here each address is
	// checked against its own prefix, and NewProvider checks the chain's.
	if _, err := c.Policy(""); err != nil {
		return err
	}
	if err := c.checkInventory(); err != nil {
		return err
	}
	if err := c.Bus.Validate(); err != nil {
		return err
	}
	if err := c.checkDurations(); err != nil {
		return err
	}
	if err := c.Gateway.validate(); err != nil {
		return err
	}
	for name, v := range map[string]uint32{"cpu": c.Cluster.Overcommit.CPU, "memory": c.Cluster.Overcommit.Memory, "storage": c.Cluster.Overcommit.Storage} {
		if v > cluster.MaxOvercommit {
			return fmt.Errorf("cluster.overcommit.%s: %d%% is more than %d%%", name, v, cluster.MaxOvercommit)
		}
	}
	for i, cidr := range c.Cluster.EgressDeny {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			return fmt.Errorf("cluster.egress_deny[%d] %q: not a CIDR", i, cidr)
		}
	}
	_, err := c.pricer()
	return err
}

func (c *ProviderConfig) checkBidTimeout() error {
	if d := c.Bidding.Timeout; d < 10*time.Second || d > 24*time.Hour {
		return fmt.Errorf("bidding.timeout %s: want a duration from 10s to 24h (e.g. 5m)", d)
	}
	return nil
}

func (g *GatewayConfig) validate() error {
	for key, addr := range map[string]string{"listen": g.Listen, "grpc_listen": g.GRPCListen} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("gateway.%s %q: want host:port", key, addr)
		}
	}
	if (g.CertFile == "") != (g.KeyFile == "") {
		return errors.New("gateway.cert_file, gateway.key_file: give both or neither")
	}
	for i, h := range g.BlockedHostnames {
		if !market.ValidHostname(strings.TrimPrefix(h, ".")) {
			return fmt.Errorf("gateway.blocked_hostnames[%d] %q: not a lowercase DNS name (or .domain)", i, h)
		}
	}
	return nil
}

// inventoryMaxAge checks inventory.operator with what goes with it, and returns
// inventory.max_age.
func (c *ProviderConfig) checkInventory() error {
	if d := c.Inventory.MaxAge; d < time.Second || d > time.Hour {
		return fmt.Errorf("inventory.max_age %s: want a duration from 1s to 1h (e.g. 2m)", d)
	}
	for class, q := range c.Inventory.Storage {
		if !q.IsSet() {
			return fmt.Errorf("inventory.storage.%s: empty; want the class's size (e.g. 1Ti)", class)
		}
	}
	if name := c.Inventory.Operator; name != "" {
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			return fmt.Errorf("inventory.operator %q: not a resource name (the inventory operator's name setting)", name)
		}
		if len(c.Inventory.Storage) > 0 {
			return errors.New("inventory: storage and operator both set: with the inventory operator, storage classes and their sizes are its storage setting; remove inventory.storage")
		}
	}
	return nil
}

// checkDurations checks the cluster's durations.
func (c *ProviderConfig) checkDurations() error {
	switch cl := c.Cluster; {
	case cl.OrphanInterval < 10*time.Second:
		return fmt.Errorf("cluster.orphan_interval %s: want a duration of at least 10s (e.g. 10m)", cl.OrphanInterval)
	case cl.FailedPodTTL < 0 || cl.FailedPodTTL > 30*24*time.Hour:
		return fmt.Errorf("cluster.failed_pod_ttl %s: want a duration from 0s (never) to 720h (e.g. 10m)", cl.FailedPodTTL)
	case cl.UnhealthyCloseAfter != 0 && cl.UnhealthyCloseAfter < time.Hour:
		return fmt.Errorf("cluster.unhealthy_close_after %s: want a duration of at least 1h (e.g. 6h), or 0s to never close unhealthy leases", cl.UnhealthyCloseAfter)
	case c.Gateway.ManifestTimeout < 0:
		return fmt.Errorf("gateway.manifest_timeout %s: want a duration such as 5m, or 0s for never", c.Gateway.ManifestTimeout)
	}
	return nil
}

// Registered is the attributes the provider registers on the ledger (attributes),
// checked.
func (c *ProviderConfig) Registered() (market.Attributes, error) {
	return attributes("attributes", c.Attributes)
}

func attributes(field string, in []AttributeConfig) (market.Attributes, error) {
	out := make(market.Attributes, 0, len(in))
	for i, a := range in {
		if strings.TrimSpace(a.Key) == "" {
			return nil, fmt.Errorf("%s[%d].key: empty", field, i)
		}
		out = append(out, market.Attribute{Key: a.Key, Value: a.Value})
	}
	return out, nil
}

// Policy builds the bid engine's policy; addresses are checked against prefix (""
// accepts any prefix, for validation before the chain is known).
func (c *ProviderConfig) Policy(prefix string) (bidengine.Policy, error) {
	var p bidengine.Policy
	var err error
	if p.RequireAttributes, err = attributes("bidding.require_attributes", c.Bidding.RequireAttributes); err != nil {
		return p, err
	}
	for _, l := range []struct {
		name string
		in   []string
		out  *[]string
	}{{"bidding.tenants.allow", c.Bidding.Tenants.Allow, &p.Allow}, {"bidding.tenants.deny", c.Bidding.Tenants.Deny, &p.Deny}} {
		for i, a := range l.in {
			want := prefix
			if j := strings.LastIndex(a, "1"); want == "" && j > 0 {
				want = a[:j] // bech32: the prefix is what comes before the last "1"
			}
			if err := ledger.CheckAddress(a, want); err != nil {
				return p, fmt.Errorf("%s[%d] %q: %w", l.name, i, a, err)
			}
			*l.out = append(*l.out, a)
		}
	}
	l := c.Bidding.Limits // never negative (Quantity)
	p.Limits.CPUMillis = uint64(max(l.CPUPerReplica.MilliValue(), 0))
	p.Limits.MemoryBytes = uint64(max(l.MemoryPerReplica.Value(), 0))
	p.Limits.StorageBytes = uint64(max(l.StoragePerReplica.Value(), 0))
	p.Limits.Volumes, p.Limits.GPUs = l.VolumesPerReplica, l.GPUsPerReplica
	p.Limits.Replicas, p.Limits.Endpoints = l.ReplicasPerOrder, l.EndpointsPerOrder
	return p, nil
}

// InventoryPools are the storage classes' sizes in bytes.
func (c *ProviderConfig) InventoryPools() map[string]int64 {
	out := map[string]int64{}
	for class, q := range c.Inventory.Storage {
		out[class] = q.Value()
	}
	return out
}

// pricer builds the configured pricing strategy.
func (c *ProviderConfig) pricer() (bidengine.Pricer, error) {
	p := c.Bidding.Pricing
	switch p.Strategy {
	case "scale":
		r := bidengine.ScaleRates{Denom: p.Scale.Denom, CPU: p.Scale.CPU, Memory: p.Scale.Memory, Endpoint: p.Scale.Endpoint, LeasedIP: p.Scale.LeasedIP,
			Exchange: map[string]market.Dec{}, Storage: maps.Clone(p.Scale.Storage), GPU: maps.Clone(p.Scale.GPU)}
		for denom, d := range p.Scale.Exchange {
			if !d.IsZero() { // "0" turns a denomination off
				r.Exchange[denom] = d
			}
		}
		if r.Storage == nil {
			r.Storage = map[string]market.Dec{}
		}
		if r.GPU == nil {
			r.GPU = map[string]market.Dec{}
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("bidding.%w", err)
		}
		return &bidengine.ScalePricer{Rates: r}, nil
	case "script":
		sc := bidengine.ScriptConfig{Path: p.Script.Path, MaxConcurrent: p.Script.MaxConcurrent, Timeout: p.Script.Timeout}
		pr, err := bidengine.NewScriptPricer(sc)
		if err != nil {
			return nil, fmt.Errorf("bidding.%w", err)
		}
		return pr, nil
	}
	return nil, fmt.Errorf("bidding.pricing.strategy %q: want scale or script", p.Strategy)
}
