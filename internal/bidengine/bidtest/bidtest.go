// Package bidtest builds what the bid engine's tests and benchmarks bid on: group specs
// and a large simulated inventory. It imports no part of the bid engine, so the
// engine's own tests use it too.
package bidtest

import (
	"fmt"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/gpu"
)

// GiB is a gibibyte.
const GiB = 1 << 30

// Unit is one resource unit of a group: Count replicas of CPU millis, Mem bytes, GPUs
// (with GPUAttrs), 1 GiB of ephemeral storage, and 10 GiB of persistent storage of
// class Persist when set; Price is the most a replica pays per block (default 100000).
type Unit struct {
	Count    uint32
	CPU      uint64
	Mem      uint64
	GPUs     uint64
	GPUAttrs market.Attributes
	Persist  string
	Price    string
}

// Web is two replicas of half a CPU and 512 MiB.
var Web = Unit{Count: 2, CPU: 500, Mem: 512 << 20}

// GroupSpec is group "dc" requiring attrs, with units priced in uakt.
func GroupSpec(attrs market.Attributes, units ...Unit) market.GroupSpec {
	g := market.GroupSpec{Name: "dc", Requirements: market.PlacementRequirements{Attributes: attrs}}
	for i, u := range units {
		res := market.Resources{
			ID:      uint32(i + 1),
			CPU:     &market.CPU{Units: market.ResourceValue{Val: market.Uint(u.CPU)}},
			Memory:  &market.Memory{Size: market.ResourceValue{Val: market.Uint(u.Mem)}},
			Storage: []market.Storage{{Name: "default", Size: market.ResourceValue{Val: GiB}}},
		}
		if u.Persist != "" {
			res.Storage = append(res.Storage, market.Storage{Name: "data", Size: market.ResourceValue{Val: 10 * GiB}, Attributes: market.Attributes{
				{Key: "class", Value: u.Persist}, {Key: "persistent", Value: "true"},
			}})
		}
		if u.GPUs > 0 {
			res.GPU = &market.GPU{Units: market.ResourceValue{Val: market.Uint(u.GPUs)}, Attributes: u.GPUAttrs}
		}
		price := u.Price
		if price == "" {
			price = "100000"
		}
		amount, err := market.ParseDec(price)
		if err != nil {
			panic(fmt.Sprintf("bidtest: price %q: %v", price, err))
		}
		g.Resources = append(g.Resources, market.ResourceUnit{Count: u.Count, Price: market.DecCoin{Denom: "uakt", Amount: amount}, Resources: res})
	}
	return g
}

// Capacity1000 is a 1,000-node cluster: 900 CPU nodes and 100 nodes with 8 A100s, a
// beta3 storage pool and node ports without practical limits.
func Capacity1000() *cluster.Capacity {
	c := cluster.NewCapacity()
	for i := range 900 {
		c.SetNode(cluster.Node{Name: fmt.Sprintf("cpu-%04d", i), Schedulable: true,
			Allocatable: cluster.Amounts{CPU: 32000, Memory: 128 * GiB, EphemeralStorage: 1000 * GiB, Pods: 110}})
	}
	for i := range 100 {
		c.SetNode(cluster.Node{Name: fmt.Sprintf("gpu-%04d", i), Schedulable: true, GPU: gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"},
			Allocatable: cluster.Amounts{CPU: 64000, Memory: 512 * GiB, EphemeralStorage: 2000 * GiB, GPUs: 8, Pods: 110}})
	}
	c.SetPoolCapacity(cluster.StoragePool("beta3"), 1<<50)
	c.SetPoolCapacity(cluster.PoolNodePorts, 1<<20)
	return c
}
