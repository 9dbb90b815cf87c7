package dev

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/yaml"
)

// devOwnedKeys are the provider.yaml keys berth dev sets itself: a file given to
// `berth dev --config` may not set them (it is refused, naming each one and why, rather
// than having them ignored).
var devOwnedKeys = []struct{ key, why string }{
	{"home", "berth dev's provider keeps its state in the dev home (--home)"},
	{"from", `berth dev's provider signs with the dev key "provider", funded in the dev chain's genesis`},
	{"node", "berth dev's provider uses the dev ledger node, on a loopback port chosen at each start"},
	{"kubeconfig", "berth dev's provider runs leases on the dev cluster (HOME/cluster/berth.kubeconfig, written anew at each start)"},
	{"host_uri", "berth dev registers the provider with its gateway's loopback address"},
	{"log_level", "berth dev logs everything it runs at info level on standard error"},
	{"gateway.listen", "berth dev's gateway listens on 127.0.0.1, on a port chosen at each start"},
	{"gateway.grpc_listen", "berth dev's gRPC gateway listens on 127.0.0.1, on a port chosen at each start"},
	{"cluster.ingress_http_port", "berth dev sets it to its ingress controller's loopback port (--real-node), chosen at each start"},
	{"cluster.install_crds", "berth dev's provider always installs berth's CRDs on the dev cluster (this berth's, over an earlier run's)"},
	{"inventory.operator", "berth dev's provider bids on the report of the inventory operator berth dev runs (Inventory " + InventoryName + ")"},
	{"inventory.storage", "berth dev's inventory operator sizes the dev storage classes (beta1–beta3, 1Ti each)"},
}

// capabilitiesPrefix starts the attributes that declare what a cluster can do;
// berth dev declares its simulated cluster's own.
const capabilitiesPrefix = "capabilities/"

// devLocationAttributes are the dev provider's attributes besides its capabilities,
// unless a --config file lists attributes of its own: what published SDL files most
// often require.
func devLocationAttributes() []config.AttributeConfig {
	return []config.AttributeConfig{{Key: "host", Value: "akash"}, {Key: "region", Value: "us-west"}, {Key: "tier", Value: "community"}}
}

// devProviderDefaults is berth dev's provider configuration before any --config file:
// provider.yaml's defaults with what berth dev sets (loopback listeners, the dev
// ingress domain and storage classes, dev rates and attributes). Node and Kubeconfig
// are left for Run, which knows them once the ledger and the cluster run.
func devProviderDefaults(cfg Config) config.ProviderConfig {
	pc := config.DefaultProviderConfig()
	pc.Home, pc.From = cfg.Home, DevProviderKey
	pc.Gateway.Listen, pc.Gateway.GRPCListen, pc.Gateway.PublicHostname = "127.0.0.1:0", "127.0.0.1:0", "localhost"
	pc.Cluster.InstallCRDs = true
	pc.Cluster.IngressDomain = IngressDomain
	pc.Build = cfg.Build
	pc.Cluster.OrphanInterval = time.Minute
	check := 10 * time.Second
	if cfg.WithdrawPeriod > 0 {
		check = min(check, cfg.WithdrawPeriod)
	}
	pc.Balance.WithdrawPeriod, pc.Balance.CheckInterval = cfg.WithdrawPeriod, check
	pc.Inventory.Operator = InventoryName
	pc.Inventory.LeasedIPPool = MetalLBNamespace + "/" + MetalLBPool
	pc.Bidding.Pricing.Scale = ScaleRates()
	pc.Attributes = devLocationAttributes()
	return pc
}

// devProviderConfig is the configuration of berth dev's provider: the dev defaults,
// then the keys of cfg.ProviderConfig when set (read as `berth provider run` reads
// it), then --withdraw-period when given. Its Attributes are complete: the file's (or
// the dev location attributes), then the dev cluster's capabilities.
func devProviderConfig(cfg Config) (config.ProviderConfig, error) {
	if cfg.ProviderConfig == "" {
		return parseDevProviderConfig(cfg, "", nil)
	}
	b, err := os.ReadFile(cfg.ProviderConfig)
	if err != nil {
		return config.ProviderConfig{}, fmt.Errorf("--config: %w", err)
	}
	return parseDevProviderConfig(cfg, cfg.ProviderConfig, b)
}

// parseDevProviderConfig is devProviderConfig on the file's contents (data, nil for
// no file), read from path.
func parseDevProviderConfig(cfg Config, path string, data []byte) (config.ProviderConfig, error) {
	pc := devProviderDefaults(cfg)
	where := "berth dev's provider configuration"
	if path != "" {
		where = "config " + path
	}
	if data != nil {
		if err := config.DecodeProviderConfig(path, data, &pc); err != nil {
			return pc, err
		}
		if err := refuseDevOwnedKeys(path, data); err != nil {
			return pc, err
		}
	}
	if cfg.WithdrawPeriodSet {
		// As for provider run: flags beat the file.
		pc.Balance.WithdrawPeriod = cfg.WithdrawPeriod
	}
	if err := pc.Validate(); err != nil {
		return pc, fmt.Errorf("%s: %w", where, err)
	}
	attrs, err := pc.Registered()
	if err != nil {
		return pc, fmt.Errorf("%s: %w", where, err)
	}
	for i, a := range attrs {
		if strings.HasPrefix(a.Key, capabilitiesPrefix) {
			return pc, fmt.Errorf("%s: attributes[%d] %q: berth dev declares its simulated cluster's capabilities itself "+
				"(storage classes %s, the GPU model of --gpu-model); remove it", where, i, a.Key, strings.Join(localenv.DevStorageClasses, ", "))
		}
	}
	caps, err := cfg.capabilities(localenv.DevStorageClasses)
	if err != nil {
		return pc, err
	}
	attrs = append(attrs, caps...)
	// The ledger's own check of a registration, on a placeholder owner and host: only
	// the attributes are in question here (how many, how long, no key twice).
	owner, err := ledger.AddressFromBytes(ledger.DefaultAddressPrefix, make([]byte, 20))
	if err != nil {
		return pc, err
	}
	params := ledger.DefaultParams()
	reg := ledger.MsgCreateProvider{Owner: owner, HostURI: "https://127.0.0.1", Attributes: attrs}
	if err := reg.ValidateBasic(&params); err != nil {
		return pc, fmt.Errorf("%s: the provider's attributes, with the dev cluster's capabilities added: %w", where, err)
	}
	pc.Attributes = pc.Attributes[:0:0]
	for _, a := range attrs {
		pc.Attributes = append(pc.Attributes, config.AttributeConfig{Key: a.Key, Value: a.Value})
	}
	return pc, nil
}

// refuseDevOwnedKeys names every key of devOwnedKeys that data (a provider.yaml that
// decodes) sets, with its line and why berth dev owns it.
func refuseDevOwnedKeys(path string, data []byte) error {
	doc, err := yaml.Parse(data)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	lines := map[string]int{}
	var walk func(n *yaml.Node, prefix string, depth int)
	walk = func(n *yaml.Node, prefix string, depth int) {
		n = derefYAML(n)
		if n == nil || n.Kind != yaml.MappingNode || depth > 2 {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := derefYAML(n.Content[i])
			lines[prefix+k.Value] = k.Line
			walk(n.Content[i+1], prefix+k.Value+".", depth+1)
		}
	}
	walk(doc.Root, "", 1)
	type refused struct {
		line     int
		key, why string
	}
	var found []refused
	for _, o := range devOwnedKeys {
		if line, ok := lines[o.key]; ok {
			found = append(found, refused{line, o.key, o.why})
		}
	}
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b refused) int { return a.line - b.line })
	var b strings.Builder
	fmt.Fprintf(&b, "config %s: berth dev sets these keys itself (remove them, or run the file with `berth provider run`):", path)
	for _, f := range found {
		fmt.Fprintf(&b, "\n  line %d: %s: %s", f.line, f.key, f.why)
	}
	return errors.New(b.String())
}

// derefYAML follows an alias to the node it names.
func derefYAML(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}
