// Package inventory is the inventory operator: it watches the cluster's nodes, pods,
// claims and storage capacity, describes GPUs from GPU feature discovery and node
// feature discovery labels, keeps capability labels on the nodes, and publishes all of
// it as a cluster-scoped Inventory resource (and on the bus topics inventory.cluster,
// inventory.nodes and inventory.storage) for the providers on the cluster to bid on.
package inventory

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/yaml"
)

// GPUConfig is the gpu section.
type GPUConfig struct {
	// Models names cards by GFD product name or PCI id "10de:XXXX".
	Models map[string]inventory.GPUModelOverride `yaml:"models"`
	// OfferShared offers time-sliced or MPS-shared GPUs' replicas as GPUs.
	OfferShared bool `yaml:"offer_shared"`
}

// Config is the inventory operator's configuration (inventory-operator.yaml).
type Config struct {
	// Name is the Inventory resource it writes (default "cluster"); providers name it
	// in inventory.operator. Two operators on one cluster need two names.
	Name string `yaml:"name"`
	// Kubeconfig is the cluster's ("": in-cluster).
	Kubeconfig string `yaml:"kubeconfig"`
	// Listen is the address of /healthz, /readyz, /metrics and /inventory ("": none).
	Listen         string                  `yaml:"listen"`
	LeaderElection operator.LeaderElection `yaml:"leader_election"`
	GPU            GPUConfig               `yaml:"gpu"`
	// Storage are the storage classes offered, with where their capacity comes from;
	// classes not listed are not offered.
	Storage []inventory.StorageClass `yaml:"storage"`
	// LabelNodes keeps berth.dev/capabilities.* labels on nodes (default true).
	LabelNodes bool `yaml:"label_nodes"`
	// Heartbeat is how often the report is written even when nothing changed, so that
	// providers can tell a live operator from a gone one (default 30s).
	Heartbeat time.Duration `yaml:"heartbeat"`
	// MinInterval is the least time between two writes of the report: changes within
	// it are written together (default 1s).
	MinInterval time.Duration `yaml:"min_interval"`
	// Resync is how often the informers list everything again (default 10m).
	Resync time.Duration `yaml:"resync"`
	// Bus, when its redis URL is set, carries the inventory.* topics to other
	// processes over Redis (the leader publishes).
	Bus redisbus.Config `yaml:"bus"`
}

// DefaultConfig is the configuration a file's keys are read over.
func DefaultConfig() Config {
	return Config{Name: "cluster", Listen: "127.0.0.1:8087", LabelNodes: true, Heartbeat: 30 * time.Second, MinInterval: time.Second, Resync: 10 * time.Minute}
}

// DecodeConfig reads inventory-operator.yaml's bytes over DefaultConfig.
func DecodeConfig(b []byte) (Config, error) {
	c := DefaultConfig()
	if err := yaml.Decode(b, &c); err != nil {
		return c, err
	}
	return c, nil
}

// Validate checks every setting and names the one that is wrong.
func (c *Config) Validate() error {
	if len(validation.IsDNS1123Subdomain(c.Name)) > 0 {
		return fmt.Errorf("name %q: not a valid resource name", c.Name)
	}
	if err := operator.CheckRuntime(c.LeaderElection, c.Listen, 1, c.Resync); err != nil {
		return err
	}
	if err := (inventory.GPUOptions{Models: c.GPU.Models}).Validate(); err != nil {
		return err
	}
	var classes []string
	for i, s := range c.Storage {
		where := fmt.Sprintf("storage[%d]", i)
		if err := s.Validate(where); err != nil {
			return err
		}
		if slices.Contains(classes, s.Class) {
			return fmt.Errorf("%s.class %q: listed twice", where, s.Class)
		}
		classes = append(classes, s.Class)
	}
	if err := c.Bus.Validate(); err != nil {
		return err
	}
	switch {
	case c.Heartbeat < time.Second || c.Heartbeat > 10*time.Minute:
		return fmt.Errorf("heartbeat %s: want 1s to 10m", c.Heartbeat)
	case c.MinInterval < 0 || c.MinInterval > c.Heartbeat:
		return fmt.Errorf("min_interval %s: want 0 to heartbeat (%s)", c.MinInterval, c.Heartbeat)
	}
	return nil
}

// GPUOptions are the GPU settings as package inventory takes them.
func (c *Config) GPUOptions() inventory.GPUOptions {
	return inventory.GPUOptions{Models: c.GPU.Models, OfferShared: c.GPU.OfferShared}
}
