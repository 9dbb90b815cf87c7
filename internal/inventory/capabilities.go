package inventory

import (
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/gpu"
)

// CapabilityPrefix starts the node labels the inventory operator keeps in step with
// what it discovers, in the forms of Akash's akash.network/capabilities labels:
//
//	berth.dev/capabilities.gpu.vendor.nvidia.model.a100=true
//	berth.dev/capabilities.gpu.vendor.nvidia.model.a100.ram.80Gi=true
//	berth.dev/capabilities.gpu.vendor.nvidia.model.a100.interface.sxm=true
//	berth.dev/capabilities.storage.class.local-path=true
//
// Every label with this prefix on a node is the operator's: it removes those that no
// longer hold. GPU labels are set only for offered GPUs.
const CapabilityPrefix = "berth.dev/capabilities."

// GPULabel is the capability label of a node offering GPUs of vendor and model, with
// the memory or interface when not empty (one of them at most: a label name holds 63
// characters).
func GPULabel(vendor, model, ram, iface string) string {
	k := CapabilityPrefix + "gpu.vendor." + strings.ToLower(vendor) + ".model." + strings.ToLower(model)
	switch {
	case ram != "":
		k += ".ram." + normalRAM(ram)
	case iface != "":
		k += ".interface." + strings.ToLower(iface)
	}
	return k
}

// StorageLabel is the capability label of a node whose pods can use volumes of the
// cluster's storage class.
func StorageLabel(class string) string { return CapabilityPrefix + "storage.class." + class }

// GPUAffinity is what a node must carry to offer the GPU alternative g of an order
// (model "*": any model of the vendor is not expressible as one label, so "" is
// returned and the caller leaves the node choice to the vendor's models it knows).
func GPUAffinity(g gpu.Model) []string {
	if g.Model == "" || g.Model == "*" {
		return nil
	}
	keys := []string{GPULabel(g.Vendor, g.Model, "", "")}
	if g.RAM != "" {
		keys = append(keys, GPULabel(g.Vendor, g.Model, g.RAM, ""))
	}
	if g.Interface != "" {
		keys = append(keys, GPULabel(g.Vendor, g.Model, "", g.Interface))
	}
	return keys
}

// Capabilities are the capability labels a node should carry: its offered GPUs' and
// the storage classes it can use. Names that cannot be label keys are left out (and
// returned in invalid, for the report).
func Capabilities(g *berthv1.InventoryGPU, storageClasses []string) (labels map[string]string, invalid []string) {
	labels = map[string]string{}
	add := func(k string) {
		if len(validation.IsQualifiedName(k)) > 0 {
			invalid = append(invalid, k)
			return
		}
		labels[k] = "true"
	}
	if g != nil && g.Model != "" && g.Offered > 0 {
		add(GPULabel(g.Vendor, g.Model, "", ""))
		if g.RAM != "" {
			add(GPULabel(g.Vendor, g.Model, g.RAM, ""))
		}
		if g.Interface != "" {
			add(GPULabel(g.Vendor, g.Model, "", g.Interface))
		}
	}
	for _, c := range storageClasses {
		add(StorageLabel(c))
	}
	return labels, invalid
}

// GPULabelled reports whether labels carry every GPU capability label of g's offered
// GPUs (those GPU pods' node affinity may select on); false when g offers none.
func GPULabelled(labels map[string]string, g *berthv1.InventoryGPU) bool {
	want, invalid := Capabilities(g, nil)
	if len(want) == 0 || len(invalid) > 0 {
		return false
	}
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// LabelChanges is the patch that brings a node's capability labels from have (all its
// labels) to want: set what differs, nil (delete) what has the prefix, is not wanted
// and is the caller's to manage (owns nil: every capability label). Empty when
// nothing changes.
func LabelChanges(have, want map[string]string, owns func(key string) bool) map[string]*string {
	patch := map[string]*string{}
	for k, v := range want {
		if have[k] != v {
			patch[k] = &v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, CapabilityPrefix) && (owns == nil || owns(k)) {
			patch[k] = nil
		}
	}
	return patch
}

// IsGPULabel reports whether key is a GPU capability label.
func IsGPULabel(key string) bool { return strings.HasPrefix(key, CapabilityPrefix+"gpu.") }

// CapabilityLabelsOf are the capability labels among a node's labels.
func CapabilityLabelsOf(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	maps.DeleteFunc(out, func(k, _ string) bool { return !strings.HasPrefix(k, CapabilityPrefix) })
	return out
}
