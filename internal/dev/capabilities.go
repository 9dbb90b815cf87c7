package dev

import (
	"fmt"
	"slices"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
)

// capabilities are the capability attributes berth dev's provider must register for
// the bid engine to take orders with persistent storage or GPUs (docs/bidding.md,
// step 3): each persistent storage class the cluster offers, as
// capabilities/storage/<n>/{class,persistent}, and the GPU model of each GPU node as
// the inventory will see it, as capabilities/gpu/vendor/<v>/model/<m> with its memory
// and interface (the forms Akash providers declare).
func (c Config) capabilities(storageClasses []string) (market.Attributes, error) {
	var attrs market.Attributes
	for i, class := range storageClasses {
		prefix := fmt.Sprintf("capabilities/storage/%d/", i+1)
		attrs = append(attrs, market.Attribute{Key: prefix + "class", Value: class}, market.Attribute{Key: prefix + "persistent", Value: "true"})
	}
	var models []gpu.Model
	for _, spec := range c.nodes() {
		if spec.GPUs == 0 {
			continue
		}
		n, err := spec.Object()
		if err != nil {
			return nil, err
		}
		// As the inventory operator will name them (and label the node for).
		if d := inventory.DescribeGPU(n.Labels, n.Status.Allocatable, inventory.GPUOptions{}); d != nil && d.Offered > 0 {
			if g := inventory.Model(d); !slices.Contains(models, g) {
				models = append(models, g)
			}
		}
	}
	for _, g := range models {
		keys := []string{"/model/" + g.Model}
		if g.RAM != "" {
			keys = append(keys, keys[0]+"/ram/"+g.RAM)
		}
		if g.Interface != "" {
			keys = append(keys, keys[0]+"/interface/"+g.Interface)
		}
		if g.RAM != "" && g.Interface != "" {
			keys = append(keys, keys[0]+"/ram/"+g.RAM+"/interface/"+g.Interface)
		}
		for _, k := range keys {
			a := market.Attribute{Key: "capabilities/gpu/vendor/" + g.Vendor + k, Value: "true"}
			if !slices.Contains(attrs, a) { // models of one name with other memory sizes share it
				attrs = append(attrs, a)
			}
		}
	}
	return attrs, nil
}
