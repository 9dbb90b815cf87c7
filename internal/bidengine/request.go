// Package bidengine decides which orders the provider bids on and at what price. This
// first part holds the pricing: what a price is computed from (Request, built from an
// order's group with the GPU models a reservation resolved) and two strategies behind
// the Pricer interface: the scale strategy (fixed rates per resource, exact decimals;
// pure) and the script strategy (an operator's program run per decision with Akash's
// pricing-script contract; at most a configured number of processes at a time).
// Everything here is safe for concurrent use.
package bidengine

import (
	"fmt"
	"strings"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

// Storage classes as prices name them: "ephemeral" (not persistent), "ram" (memory
// backed), or a persistent class ("default", "beta2", …).
const (
	ClassEphemeral = "ephemeral"
	ClassRAM       = market.StorageClassRAM
)

// GPU describes GPUs by vendor, model, memory and interface: the model a reservation
// placed a resource unit's GPUs on, or the order's entry that accepted it.
type GPU struct {
	Vendor    string `json:"vendor"`
	Model     string `json:"model"`
	RAM       string `json:"ram,omitempty"`
	Interface string `json:"interface,omitempty"`
}

// Storage is one volume of a replica.
type Storage struct {
	Class string `json:"class"`
	Bytes uint64 `json:"size"`
}

// Unit is one resource unit of an order, per replica, with its replica count.
type Unit struct {
	Count       uint32
	CPUMillis   uint64
	MemoryBytes uint64
	Storage     []Storage
	// Endpoints are the replica's global ports (shared HTTP or random port);
	// IPEndpoints its ports on leased IPs, and LeasedIPs how many distinct IPs those
	// are (as Akash counts ip_lease_quantity).
	Endpoints   uint32
	IPEndpoints uint32
	LeasedIPs   uint32
	GPUs        uint32
	// GPU is the reserved model when GPUs > 0, as the node has it: vendor, model,
	// memory and interface.
	GPU GPU
	// GPUAsked is the order's entry that accepted GPU: its model ("*" for any), and
	// the memory and interface only where the order asked for them.
	GPUAsked GPU
}

// Request is what a price is computed from.
type Request struct {
	// Owner is the tenant's address.
	Owner string
	Units []Unit
	// MaxPrice is the order's price: the most the tenant pays per block, for the group.
	MaxPrice market.DecCoin
}

// StorageClass is the price class of a volume from its attributes.
func StorageClass(attrs market.Attributes) string {
	class, _ := attrs.Find(market.StorageAttributeClass)
	persistent, _ := attrs.Find(market.StorageAttributePersistent)
	switch {
	case class == ClassRAM:
		return ClassRAM
	case persistent == "true" && class == "":
		return market.StorageClassDefault
	case persistent == "true":
		return class
	}
	return ClassEphemeral
}

// NewRequest describes an order's group for pricing. gpus gives, per resource unit ID,
// the GPU model the reservation placed its GPUs on; a unit with GPUs and no entry is an
// error (price only what was reserved).
func NewRequest(owner string, spec market.GroupSpec, gpus map[uint32]GPU) (Request, error) {
	r := Request{Owner: owner, Units: make([]Unit, 0, len(spec.Resources))}
	for i, ru := range spec.Resources {
		res := ru.Resources
		u := Unit{Count: ru.Count}
		if res.CPU != nil {
			u.CPUMillis = uint64(res.CPU.Units.Val)
		}
		if res.Memory != nil {
			u.MemoryBytes = uint64(res.Memory.Size.Val)
		}
		for _, st := range res.Storage {
			u.Storage = append(u.Storage, Storage{Class: StorageClass(st.Attributes), Bytes: uint64(st.Size.Val)})
		}
		ips := map[uint32]bool{} // at most one per endpoint, and those are uint32-counted
		for _, ep := range res.Endpoints {
			if ep.Kind == market.EndpointLeasedIP {
				u.IPEndpoints++
				ips[ep.SequenceNumber] = true
			} else {
				u.Endpoints++
			}
		}
		u.LeasedIPs = uint32(len(ips)) //nolint:gosec // len(ips) ≤ IPEndpoints, a uint32
		if res.GPU != nil && res.GPU.Units.Val > 0 {
			if res.GPU.Units.Val > 1<<16 {
				return Request{}, fmt.Errorf("resources[%d]: %d GPUs", i, res.GPU.Units.Val)
			}
			u.GPUs = uint32(res.GPU.Units.Val)
			g, ok := gpus[res.ID]
			if !ok || strings.TrimSpace(g.Model) == "" {
				return Request{}, fmt.Errorf("resources[%d] (unit %d): %d GPUs but no reserved GPU model", i, res.ID, u.GPUs)
			}
			alts, err := gpu.ParseAttributes(res.GPU.Attributes)
			if err != nil {
				return Request{}, fmt.Errorf("resources[%d] (unit %d): %w", i, res.ID, err)
			}
			asked, ok := askedGPU(alts, g)
			if !ok {
				return Request{}, fmt.Errorf("resources[%d] (unit %d): the reserved GPU %s is not one the order accepts", i, res.ID, gpuModel(g))
			}
			u.GPU, u.GPUAsked = g, asked
		}
		r.Units = append(r.Units, u)
		if ru.Price.Denom != "" {
			r.MaxPrice.Denom = ru.Price.Denom
		}
		r.MaxPrice.Amount = r.MaxPrice.Amount.Add(ru.Price.Amount.MulUint(uint64(ru.Count)))
	}
	return r, nil
}

// askedGPU picks the order's entry behind the reserved GPU got, as Akash's provider
// does when it resolves a reservation's GPU attributes (tryAdjustGPU, with
// GPUModels.ExistsOrWildcard): of the entries that accept got, one naming got's model
// wins over "*", and of equals the last in the order's attribute order wins (Akash
// keeps one entry per model, the last). ok is false when no entry accepts got.
func askedGPU(alts []gpu.Model, got GPU) (asked GPU, ok bool) {
	node := gpuModel(got)
	var best gpu.Model
	for _, a := range alts {
		if !a.Accepts(node) || ok && a.Model == "*" && best.Model != "*" {
			continue
		}
		best, ok = a, true
	}
	return GPU{Vendor: best.Vendor, Model: best.Model, RAM: best.RAM, Interface: best.Interface}, ok
}

func gpuModel(g GPU) gpu.Model {
	return gpu.Model{Vendor: g.Vendor, Model: g.Model, RAM: g.RAM, Interface: g.Interface}
}
