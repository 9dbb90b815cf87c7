// Package ip is the IP operator: it turns each ProviderLeasedIP (a port of a lease on
// one of its tenant's leased IPs) into a LoadBalancer Service that MetalLB gives an
// address, shares one address among a tenant's ports of one SDL IP endpoint, and
// reports the address pools' usage.
package ip

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/yaml"
)

// Config is the IP operator's configuration (ip-operator.yaml).
type Config struct {
	// Provider and ChainID are whose ProviderLeasedIPs this operator serves.
	Provider string `yaml:"provider"`
	ChainID  string `yaml:"chain_id"`
	// Kubeconfig is the cluster's ("": in-cluster).
	Kubeconfig string `yaml:"kubeconfig"`
	// Listen is the address of /healthz, /readyz, /metrics and /usage ("": none).
	Listen         string                  `yaml:"listen"`
	LeaderElection operator.LeaderElection `yaml:"leader_election"`
	// Pool is the MetalLB IPAddressPool leased IPs come from (the metallb.io/address-pool
	// annotation; "": MetalLB's auto-assigned pools).
	Pool string `yaml:"pool"`
	// MetalLBNamespace is where MetalLB's IPAddressPools are (default metallb-system).
	MetalLBNamespace string `yaml:"metallb_namespace"`
	// LoadBalancerClass, when set, is the Services' spec.loadBalancerClass (MetalLB
	// started with --lb-class serves only that class).
	LoadBalancerClass string `yaml:"load_balancer_class"`
	// Workers is how many leased IPs are reconciled at once (default 4).
	Workers int `yaml:"workers"`
	// Resync is how often everything is reconciled again (default 10m).
	Resync time.Duration `yaml:"resync"`
}

// DefaultConfig is the configuration a file's keys are read over.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8086", MetalLBNamespace: "metallb-system", Workers: 4, Resync: 10 * time.Minute}
}

// DecodeConfig reads ip-operator.yaml's bytes over DefaultConfig.
func DecodeConfig(b []byte) (Config, error) {
	c := DefaultConfig()
	if err := yaml.Decode(b, &c); err != nil {
		return c, err
	}
	return c, nil
}

// Owner is whose ProviderLeasedIPs the operator serves.
func (c *Config) Owner() ownership.Owner {
	return ownership.Owner{Provider: c.Provider, ChainID: c.ChainID}
}

// Validate checks every setting and names the one that is wrong.
func (c *Config) Validate() error {
	if err := operator.CheckCommon(c.Owner(), c.LeaderElection, c.Listen, c.Workers, c.Resync); err != nil {
		return err
	}
	if c.Pool != "" && len(validation.IsDNS1123Subdomain(c.Pool)) > 0 {
		return fmt.Errorf("pool %q is not a valid IPAddressPool name", c.Pool)
	}
	if len(validation.IsDNS1123Label(c.MetalLBNamespace)) > 0 {
		return fmt.Errorf("metallb_namespace %q is not a valid namespace", c.MetalLBNamespace)
	}
	if l := c.LoadBalancerClass; l != "" && len(validation.IsQualifiedName(l)) > 0 {
		return fmt.Errorf("load_balancer_class %q is not a valid class name", l)
	}
	return nil
}
