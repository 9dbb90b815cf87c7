package bidengine

import (
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

// Reasons eligibility gives for not bidding (metric label values: a fixed set).
const (
	ReasonInvalidOrder      = "invalid_order"      // the order's resources cannot be read
	ReasonTenantDenied      = "tenant_denied"      // the tenant is on the deny list, or not on the allow list
	ReasonAttributes        = "attributes"         // we lack an attribute the order requires
	ReasonSignedBy          = "signed_by"          // the auditors the order requires have not signed our attributes
	ReasonOrderAttributes   = "order_attributes"   // the order does not require an attribute we require of orders
	ReasonStorageCapability = "storage_capability" // we do not offer a persistent storage class the order uses
	ReasonGPUCapability     = "gpu_capability"     // we do not offer any GPU model the order accepts
	ReasonLimits            = "limits"             // the order exceeds a configured limit
	ReasonBudget            = "budget"             // the hourly bid budget is spent
	ReasonTenantBudget      = "tenant_budget"      // the tenant's hourly bid budget is spent
)

// Limits bound what one order may ask for; zero means no limit.
type Limits struct {
	// Per replica.
	CPUMillis   uint64 `json:"cpu_per_replica"`
	MemoryBytes uint64 `json:"memory_per_replica"`
	// StorageBytes bounds the sum of a replica's volumes; Volumes their number.
	StorageBytes uint64 `json:"storage_per_replica"`
	Volumes      uint32 `json:"volumes_per_replica"`
	GPUs         uint32 `json:"gpus_per_replica"`
	// Per order.
	Replicas  uint32 `json:"replicas_per_order"`
	Endpoints uint32 `json:"endpoints_per_order"`
}

// Policy is what decides, before any capacity is looked at, whether an order is one we
// want: tenant lists, the attributes and auditor signatures it requires, the
// capabilities it needs, and limits.
type Policy struct {
	// Attributes are the provider's own, as registered on the ledger.
	Attributes market.Attributes
	// RequireAttributes must each be among an order's placement requirements (a
	// provider serving only orders that ask for it by name, for instance).
	RequireAttributes market.Attributes
	// Allow, when not empty, lists the only tenants we bid for; Deny the tenants we
	// never bid for. Deny wins.
	Allow, Deny []string
	Limits      Limits
}

// Audits are the attributes each auditor has signed for us, by auditor address.
type Audits map[string]market.Attributes

// Eligible says whether we may bid on an order of owner with spec, and if not why
// (a *NoBid). It is pure and cheap: no capacity is looked at.
func (p *Policy) Eligible(owner string, spec market.GroupSpec, audits Audits) error {
	if slices.Contains(p.Deny, owner) {
		return noBid(ReasonTenantDenied, "tenant %s is on the deny list", owner)
	}
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, owner) {
		return noBid(ReasonTenantDenied, "tenant %s is not on the allow list", owner)
	}
	req := spec.Requirements
	for _, a := range p.RequireAttributes {
		if v, ok := req.Attributes.Find(a.Key); !ok || v != a.Value {
			return noBid(ReasonOrderAttributes, "the order does not require %s=%s, which we require of orders", a.Key, a.Value)
		}
	}
	for _, a := range req.Attributes {
		if !p.Attributes.Satisfies(a) {
			return noBid(ReasonAttributes, "the order requires %s=%s, which we do not have", a.Key, a.Value)
		}
	}
	signed := func(auditor string) bool {
		got, ok := audits[auditor]
		if !ok {
			return false
		}
		for _, a := range req.Attributes {
			if !got.Satisfies(a) {
				return false
			}
		}
		return true
	}
	for _, au := range req.SignedBy.AllOf {
		if !signed(au) {
			return noBid(ReasonSignedBy, "auditor %s has not signed the attributes the order requires", au)
		}
	}
	if len(req.SignedBy.AnyOf) > 0 && !slices.ContainsFunc(req.SignedBy.AnyOf, signed) {
		return noBid(ReasonSignedBy, "none of the auditors %s has signed the attributes the order requires", strings.Join(req.SignedBy.AnyOf, ", "))
	}
	if err := p.checkLimits(spec); err != nil {
		return err
	}
	return p.checkCapabilities(spec)
}

func (p *Policy) checkLimits(spec market.GroupSpec) error {
	l := p.Limits
	var replicas, endpoints uint64
	over := func(i int, what string, got, limit uint64) error {
		if limit > 0 && got > limit {
			return noBid(ReasonLimits, "resource unit %d asks for %d %s, the limit is %d", i, got, what, limit)
		}
		return nil
	}
	for i, ru := range spec.Resources {
		res := ru.Resources
		var cpu, mem, storage, gpus uint64
		if res.CPU != nil {
			cpu = uint64(res.CPU.Units.Val)
		}
		if res.Memory != nil {
			mem = uint64(res.Memory.Size.Val)
		}
		if res.GPU != nil {
			gpus = uint64(res.GPU.Units.Val)
		}
		for _, st := range res.Storage {
			storage += min(uint64(st.Size.Val), 1<<62)
		}
		for _, c := range []struct {
			what       string
			got, limit uint64
		}{
			{"millicpu per replica", cpu, l.CPUMillis},
			{"bytes of memory per replica", mem, l.MemoryBytes},
			{"bytes of storage per replica", storage, l.StorageBytes},
			{"volumes per replica", uint64(len(res.Storage)), uint64(l.Volumes)},
			{"GPUs per replica", gpus, uint64(l.GPUs)},
		} {
			if err := over(i, c.what, c.got, c.limit); err != nil {
				return err
			}
		}
		replicas += uint64(ru.Count)
		endpoints += uint64(len(res.Endpoints))
	}
	if l.Replicas > 0 && replicas > uint64(l.Replicas) {
		return noBid(ReasonLimits, "the order asks for %d replicas, the limit is %d", replicas, l.Replicas)
	}
	if l.Endpoints > 0 && endpoints > uint64(l.Endpoints) {
		return noBid(ReasonLimits, "the order asks for %d endpoints, the limit is %d", endpoints, l.Endpoints)
	}
	return nil
}

// Capability attribute keys, as Akash providers declare them:
// capabilities/storage/<n>/class = beta3 with capabilities/storage/<n>/persistent = true;
// capabilities/gpu/vendor/<vendor>/model/<model>[/ram/<size>][/interface/<if>] = true.
const (
	capStoragePrefix = "capabilities/storage/"
	capGPUPrefix     = "capabilities/gpu/"
)

func (p *Policy) checkCapabilities(spec market.GroupSpec) error {
	var gpus []gpu.Model
	for _, a := range p.Attributes {
		if rest, ok := strings.CutPrefix(a.Key, capGPUPrefix); ok && a.Value == "true" {
			if g, err := gpu.ParseAttributes(market.Attributes{{Key: rest, Value: "true"}}); err == nil {
				gpus = append(gpus, g...)
			}
		}
	}
	for i, ru := range spec.Resources {
		res := ru.Resources
		for _, st := range res.Storage {
			class := StorageClass(st.Attributes)
			if class == ClassEphemeral || class == ClassRAM {
				continue
			}
			if !p.offersStorage(class) {
				return noBid(ReasonStorageCapability, "resource unit %d needs persistent storage of class %q, which we do not offer", i, class)
			}
		}
		if res.GPU == nil || res.GPU.Units.Val == 0 {
			continue
		}
		alts, err := gpu.ParseAttributes(res.GPU.Attributes)
		if err != nil {
			return noBid(ReasonInvalidOrder, "resource unit %d: %v", i, err)
		}
		if !slices.ContainsFunc(alts, func(alt gpu.Model) bool { return offersGPU(gpus, alt) }) {
			return noBid(ReasonGPUCapability, "resource unit %d accepts GPUs %s, none of which we offer", i, gpuNames(alts))
		}
	}
	return nil
}

// offersStorage: some capabilities/storage/<n> entry has the class and is persistent.
func (p *Policy) offersStorage(class string) bool {
	entries := map[string][2]bool{} // n → (class matches, persistent)
	for _, a := range p.Attributes {
		rest, ok := strings.CutPrefix(a.Key, capStoragePrefix)
		if !ok {
			continue
		}
		n, field, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		e := entries[n]
		switch field {
		case "class":
			e[0] = a.Value == class
		case "persistent":
			e[1] = a.Value == "true"
		}
		entries[n] = e
	}
	for _, e := range entries {
		if e[0] && e[1] {
			return true
		}
	}
	return false
}

// offersGPU: we declare the vendor and model alt accepts ("*": any model of the vendor),
// and, where we declare memory sizes or interfaces for that model, the ones alt asks
// for (where we declare none, the inventory decides).
func offersGPU(declared []gpu.Model, alt gpu.Model) bool {
	var rams, ifaces []string
	found := false
	for _, d := range declared {
		if !strings.EqualFold(d.Vendor, alt.Vendor) || (alt.Model != "*" && !strings.EqualFold(d.Model, alt.Model)) {
			continue
		}
		found = true
		if d.RAM != "" {
			rams = append(rams, strings.ToLower(d.RAM))
		}
		if d.Interface != "" {
			ifaces = append(ifaces, strings.ToLower(d.Interface))
		}
	}
	return found &&
		(alt.RAM == "" || len(rams) == 0 || slices.Contains(rams, strings.ToLower(alt.RAM))) &&
		(alt.Interface == "" || len(ifaces) == 0 || slices.Contains(ifaces, strings.ToLower(alt.Interface)))
}

func gpuNames(gs []gpu.Model) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.String()
	}
	return strings.Join(names, " or ")
}

// Validate reports the first invalid policy setting, named as in the configuration.
func (p *Policy) Validate() error {
	for i, a := range p.RequireAttributes {
		if strings.TrimSpace(a.Key) == "" {
			return fmt.Errorf("bidding.require_attributes[%d]: empty key", i)
		}
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"bidding.tenants.allow", p.Allow}, {"bidding.tenants.deny", p.Deny}} {
		for i, a := range l.list {
			if strings.TrimSpace(a) == "" || strings.ContainsAny(a, " \t") {
				return fmt.Errorf("%s[%d] %q: not an address", l.name, i, a)
			}
		}
	}
	return nil
}
