// Package inventory is what berth knows about describing a cluster for bidding, free
// of any client: a node's GPUs from the labels NVIDIA's GPU feature discovery (GFD)
// and node feature discovery (NFD) publish, the capability labels berth keeps on nodes
// so that workloads are placed with affinity on them, and a storage class's capacity
// from what the cluster reports. The inventory operator (internal/operator/inventory)
// applies it to the cluster's objects; the provider's own inventory uses the GPU part.
package inventory

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/gpu"
)

// Labels GPU feature discovery and node feature discovery publish, and the resources
// NVIDIA's device plugin advertises.
const (
	LabelGFDProduct  = "nvidia.com/gpu.product"
	LabelGFDMemory   = "nvidia.com/gpu.memory" // MiB per GPU
	LabelGFDCount    = "nvidia.com/gpu.count"
	LabelGFDReplicas = "nvidia.com/gpu.replicas"
	LabelGFDSharing  = "nvidia.com/gpu.sharing-strategy" // none, time-slicing, mps
	LabelGFDMIG      = "nvidia.com/mig.strategy"         // single, mixed
	// NFD's PCI device labels: feature.node.kubernetes.io/pci-<fields>.present, the
	// fields (class, vendor, device, … as NFD is configured) joined by '_'.
	labelNFDPCIPrefix = "feature.node.kubernetes.io/pci-"
	labelNFDPCISuffix = ".present"
	// VendorNVIDIA is NVIDIA's PCI vendor id.
	VendorNVIDIA = "10de"
)

// ResourceGPU is the extended resource NVIDIA's device plugin advertises; MIG devices
// are advertised as nvidia.com/mig-<profile> (mixed strategy).
const (
	ResourceGPU       corev1.ResourceName = "nvidia.com/gpu"
	resourceMIGPrefix string              = "nvidia.com/mig-"
	// ResourceGPUShared is what the device plugin advertises instead of nvidia.com/gpu
	// when it shares GPUs (time-slicing or MPS) with renameByDefault set.
	ResourceGPUShared corev1.ResourceName = "nvidia.com/gpu.shared"
)

// Sharing strategies, as GFD labels them.
const (
	SharingTimeSlicing = "time-slicing"
	SharingMPS         = "mps"
	SharingMIG         = "mig"
)

// GPUModelOverride names a card whose product name does not say what it is, or says it
// in a way SDLs do not: the SDL's model, memory and interface.
type GPUModelOverride struct {
	Vendor    string `yaml:"vendor"`
	Model     string `yaml:"model"`
	RAM       string `yaml:"ram"`
	Interface string `yaml:"interface"`
}

// GPUOptions are the operator's GPU settings.
type GPUOptions struct {
	// Models maps a GFD product name ("NVIDIA-Graphics-Device"), or a PCI id
	// "10de:2330", to the card it is. Keys are compared case-insensitively.
	Models map[string]GPUModelOverride
	// OfferShared offers the replicas of time-sliced or MPS-shared GPUs as GPUs (each
	// lease's GPU is then a share of a card). Off by default: a tenant asking for an
	// A100 expects a whole one.
	OfferShared bool
}

// Validate checks the overrides; the error names the key.
func (o GPUOptions) Validate() error {
	seen := map[string]string{}
	for k, m := range o.Models {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("gpu.models: empty key")
		}
		if other, ok := seen[strings.ToLower(k)]; ok {
			return fmt.Errorf("gpu.models: %q and %q name the same card (keys are compared case-insensitively)", min(k, other), max(k, other))
		}
		seen[strings.ToLower(k)] = k
		if !modelName.MatchString(strings.ToLower(m.Model)) {
			return fmt.Errorf("gpu.models[%q].model %q: want lower-case letters and digits (the SDL's model name)", k, m.Model)
		}
		if m.Vendor != "" && !modelName.MatchString(strings.ToLower(m.Vendor)) {
			return fmt.Errorf("gpu.models[%q].vendor %q: want lower-case letters and digits", k, m.Vendor)
		}
		if m.RAM != "" && !ramName.MatchString(m.RAM) {
			return fmt.Errorf("gpu.models[%q].ram %q: want a size in Gi, such as 80Gi", k, m.RAM)
		}
		if m.Interface != "" && m.Interface != "pcie" && m.Interface != "sxm" {
			return fmt.Errorf("gpu.models[%q].interface %q: want pcie or sxm", k, m.Interface)
		}
		if bad := labelProblem(gpu.Model{Vendor: cmpOr(strings.ToLower(m.Vendor), "nvidia"), Model: strings.ToLower(m.Model), RAM: m.RAM, Interface: m.Interface}); bad != "" {
			return fmt.Errorf("gpu.models[%q]: %s", k, bad)
		}
	}
	return nil
}

var (
	modelName = regexp.MustCompile(`^[a-z0-9]{1,40}$`)
	ramName   = regexp.MustCompile(`^[1-9]\d{0,4}Gi$`)
	hex4      = regexp.MustCompile(`^[0-9a-f]{4}$`)
	// unnamed are product names drivers give cards they do not know.
	unnamed = []string{"nvidia-graphics-device", "graphics-device", "nvidia-device"}
)

// DescribeGPU describes a node's GPUs from its labels and allocatable resources: nil
// when the node has none (no GFD or NFD label of an NVIDIA card and no nvidia.com/gpu,
// nvidia.com/gpu.shared or MIG resource). The model is derived from GFD's product name
// the way Akash's SDLs name models ("NVIDIA-A100-SXM4-80GB" → a100, 80Gi, sxm;
// "Tesla-T4" with 15360 MiB → t4, 16Gi, pcie), or taken from opts.Models for the
// product or the PCI id, or from berth's per-node labels (berth.dev/gpu.model, …) that
// an operator sets by hand. A card nothing names is reported with Model "" and not
// offered; neither are shared GPUs (unless opts.OfferShared; never those advertised as
// nvidia.com/gpu.shared, which berth's pods do not request) nor MIG slices standing for
// whole GPUs. It never fails: what it cannot use, it says in Message.
func DescribeGPU(labels map[string]string, allocatable corev1.ResourceList, opts GPUOptions) *berthv1.InventoryGPU {
	devices := quantity(allocatable, ResourceGPU)
	sharedDevices := quantity(allocatable, ResourceGPUShared)
	product := strings.TrimSpace(labels[LabelGFDProduct])
	pci := nvidiaPCIDevice(labels)
	mig := migDevices(allocatable)
	count, _ := strconv.ParseInt(labels[LabelGFDCount], 10, 64)
	if devices == 0 && sharedDevices == 0 && product == "" && pci == "" && len(mig) == 0 && count == 0 {
		return nil
	}
	// renamed: the device plugin shares the GPUs with renameByDefault, advertising them
	// as nvidia.com/gpu.shared only.
	renamed := devices == 0 && sharedDevices > 0
	g := &berthv1.InventoryGPU{Vendor: "nvidia", Product: product, PCIDevice: pci, Devices: devices, MIG: mig}
	if renamed {
		g.Devices = sharedDevices
	}
	var why []string

	base, shared := strings.CutSuffix(product, "-SHARED")
	migSingle := false
	if i := indexFold(base, "-MIG-"); i >= 0 {
		base, migSingle = base[:i], true
	}
	switch sharing := labels[LabelGFDSharing]; {
	case sharing == SharingTimeSlicing || sharing == SharingMPS:
		g.Sharing = sharing
	case shared || renamed:
		g.Sharing = SharingTimeSlicing
	}
	if g.Sharing != "" {
		g.Replicas, _ = strconv.ParseInt(labels[LabelGFDReplicas], 10, 64)
	}
	// With the single strategy, GFD's labels describe a MIG device, not the GPU.
	sliced := migSingle || labels[LabelGFDMIG] == "single" && strings.Contains(strings.ToUpper(product), "MIG")
	if sliced || len(mig) > 0 {
		g.Sharing = SharingMIG
	}

	model, named := nameGPU(base, pci, labels, opts, sliced)
	g.Vendor, g.Model, g.RAM, g.Interface = model.Vendor, model.Model, model.RAM, model.Interface
	g.Offered = devices
	bad := ""
	if named {
		bad = labelProblem(model)
	}
	switch {
	case bad != "":
		// What cannot be a node label cannot be placed with affinity: not offered.
		g.Offered = 0
		why = append(why, fmt.Sprintf("%s: name it shorter in the operator's gpu.models, or label the node %s", bad, gpu.LabelModel))
	case !named:
		g.Offered = 0
		what := "an NVIDIA GPU"
		if product != "" {
			what = fmt.Sprintf("GPU %q", product)
		}
		if pci != "" {
			what += " (PCI " + pci + ")"
		}
		key := product
		if key == "" || pci != "" && slices.Contains(unnamed, strings.ToLower(base)) {
			key = pci
		}
		if key == "" {
			key = "<product>"
		}
		why = append(why, fmt.Sprintf("%s has no known model name: name it in the operator's gpu.models (%q: {model: …, ram: …, interface: …}), or label the node %s", what, key, gpu.LabelModel))
	case migSingle:
		g.Offered = 0
		why = append(why, "its GPUs are partitioned into MIG devices (single strategy): an SDL cannot ask for a slice of a GPU, so none is offered")
	case renamed:
		// Offered is 0 (no nvidia.com/gpu); why is said below.
	case g.Sharing == SharingTimeSlicing || g.Sharing == SharingMPS:
		if !opts.OfferShared {
			g.Offered = 0
			why = append(why, fmt.Sprintf("its GPUs are shared (%s, %d replicas): not offered unless gpu.offer_shared is set", g.Sharing, g.Replicas))
		}
	}
	if len(mig) > 0 && !migSingle {
		why = append(why, fmt.Sprintf("MIG devices (%s) are not offered: an SDL cannot ask for a slice of a GPU", migSummary(mig)))
	}
	switch {
	case renamed:
		sharing := g.Sharing
		if g.Replicas > 0 {
			sharing += fmt.Sprintf(", %d replicas", g.Replicas)
		}
		why = append(why, fmt.Sprintf("its GPUs are shared (%s) and the device plugin advertises them as %s only (renameByDefault): berth's pods request %s, so none is offered, even with gpu.offer_shared; set renameByDefault to false in the device plugin's sharing config to offer them with gpu.offer_shared", sharing, ResourceGPUShared, ResourceGPU))
	case sharedDevices > 0:
		why = append(why, fmt.Sprintf("the %d %s the device plugin also advertises are not offered: berth's pods request %s", sharedDevices, ResourceGPUShared, ResourceGPU))
	}
	if devices == 0 && !renamed && len(mig) == 0 && (count > 0 || product != "" || pci != "") {
		why = append(why, "the node's labels describe GPUs but it advertises no nvidia.com/gpu: is NVIDIA's device plugin running there?")
	} else if count > 0 && devices > 0 && g.Sharing == "" && devices != count {
		why = append(why, fmt.Sprintf("GPU feature discovery counts %d GPUs, the device plugin advertises %d", count, devices))
	}
	g.Message = strings.Join(why, "; ")
	return g
}

// nameGPU finds the SDL's name of a card: the overrides first (by product, then PCI
// id), then GFD's product name, then the memory label; berth's per-node labels win
// over all of these. named is false when no model came out. sliced says GFD's labels
// describe a MIG device (single strategy), so that its memory label is not the card's.
func nameGPU(product, pci string, labels map[string]string, opts GPUOptions, sliced bool) (gpu.Model, bool) {
	g := gpu.Model{Vendor: "nvidia"}
	mib, err := strconv.Atoi(labels[LabelGFDMemory])
	// GFD's memory label, up to 16 TiB a GPU, unless it is a MIG device's.
	memoryLabel := err == nil && mib > 0 && mib <= 1<<24 && !sliced
	derivedInterface := false
	override := func(key string) bool {
		for k, m := range opts.Models {
			if key != "" && strings.EqualFold(k, key) {
				g = gpu.Model{Vendor: cmpOr(strings.ToLower(m.Vendor), "nvidia"), Model: strings.ToLower(m.Model), RAM: m.RAM, Interface: m.Interface}
				return true
			}
		}
		return false
	}
	switch {
	case override(product), override(labels[LabelGFDProduct]), pci != "" && override(pci):
	case product != "" && !slices.Contains(unnamed, strings.ToLower(product)):
		g = gpu.ParseProduct(product)
		if !modelName.MatchString(g.Model) {
			g.Model = ""
		}
		derivedInterface = g.Interface != ""
		// A product's size that the memory label contradicts is not the GPU's: the
		// GH200's "480GB" is its CPU's and GPU's memory together.
		if gi, err := strconv.Atoi(strings.TrimSuffix(g.RAM, "Gi")); err == nil && memoryLabel && (gi > 1<<14 || absDiff(gi*1024, mib)*5 > gi*1024) {
			g.RAM = ""
		}
	}
	for label, field := range map[string]*string{gpu.LabelVendor: &g.Vendor, gpu.LabelModel: &g.Model, gpu.LabelRAM: &g.RAM, gpu.LabelInterface: &g.Interface} {
		if v := strings.TrimSpace(labels[label]); v != "" {
			*field = strings.ToLower(v)
			derivedInterface = derivedInterface && label != gpu.LabelInterface
		}
	}
	// GFD's memory label, when nothing else said the memory.
	if memoryLabel && g.RAM == "" && g.Model != "" {
		g.RAM = marketedRAM(mib)
	}
	g.RAM = normalRAM(g.RAM)
	// An interface the product name only implies (PCIe, for want of an SXM one) is not
	// worth the card: a model too long to carry it in a label is offered without it.
	if derivedInterface && labelProblem(g) != "" {
		if bare := (gpu.Model{Vendor: g.Vendor, Model: g.Model, RAM: g.RAM}); labelProblem(bare) == "" {
			g = bare
		}
	}
	return g, g.Model != ""
}

// marketedGiB are the memory sizes, in GiB, NVIDIA's GPUs are sold with (and Akash's
// provider-configs names them with): GFD's memory label is the usable memory, a little
// less (a T4's 16 GiB is 15360 MiB, an L40S's 48 GiB 46068 MiB, a B200's 192 GiB
// 183359 MiB). No NVIDIA GPU has 256 GiB: a B300's 288 GiB must not round to it.
var marketedGiB = []int{1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 128, 141, 144, 192, 288}

// marketedRAM is the size of a GPU whose memory label says mib: the nearest marketed
// size within 8% of it, else mib rounded to GiB ("" under 512 MiB).
func marketedRAM(mib int) string {
	best, bestDiff := 0, 0
	for _, gi := range marketedGiB {
		if d := absDiff(gi*1024, mib); d*100 <= gi*1024*8 && (best == 0 || d < bestDiff) {
			best, bestDiff = gi, d
		}
	}
	if best == 0 {
		best = (mib + 512) / 1024
	}
	if best == 0 {
		return ""
	}
	return strconv.Itoa(best) + "Gi"
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// nvidiaPCIDevice is "10de:<device>" (or "10de" alone when NFD is not configured to
// label device ids) from NFD's PCI labels, "" when none names an NVIDIA device. Of
// several, the display controller's (class 03xx) wins, then the smallest.
func nvidiaPCIDevice(labels map[string]string) string {
	var found []string
	for k, v := range labels {
		rest, ok := strings.CutPrefix(k, labelNFDPCIPrefix)
		if !ok || v != "true" {
			continue
		}
		rest, ok = strings.CutSuffix(rest, labelNFDPCISuffix)
		if !ok {
			continue
		}
		fields := strings.Split(strings.ToLower(rest), "_")
		i := slices.Index(fields, VendorNVIDIA)
		if i < 0 || slices.ContainsFunc(fields, func(f string) bool { return !hex4.MatchString(f) }) {
			continue
		}
		display := i > 0 && strings.HasPrefix(fields[i-1], "03")
		id := VendorNVIDIA
		if i+1 < len(fields) {
			id += ":" + fields[i+1]
		}
		if i == 0 || display {
			found = append(found, id)
		}
	}
	slices.Sort(found)
	// A label with a device id says more than one without.
	for _, id := range found {
		if strings.Contains(id, ":") {
			return id
		}
	}
	if len(found) > 0 {
		return found[0]
	}
	return ""
}

// migDevices are the MIG resources the device plugin advertises (mixed strategy), by
// profile.
func migDevices(allocatable corev1.ResourceList) map[string]int64 {
	var out map[string]int64
	for name, q := range allocatable {
		if profile, ok := strings.CutPrefix(string(name), resourceMIGPrefix); ok && q.Value() > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[profile] = q.Value()
		}
	}
	return out
}

func migSummary(mig map[string]int64) string {
	parts := make([]string, 0, len(mig))
	for p, n := range mig {
		parts = append(parts, fmt.Sprintf("%d × %s", n, p))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := l[name]; ok {
		return q.Value()
	}
	return 0
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// indexFold is the index of the first ASCII-case-insensitive match of sub in s, or -1.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// normalRAM writes a memory size as SDLs do: "80Gi" (from "80gi", "80GI").
func normalRAM(ram string) string {
	if ram == "" {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(ram), "gi") + "Gi"
}

// labelProblem says why g's capability labels could not be node labels ("" when they
// can).
func labelProblem(g gpu.Model) string {
	for _, k := range []string{GPULabel(g.Vendor, g.Model, "", ""), GPULabel(g.Vendor, g.Model, g.RAM, ""), GPULabel(g.Vendor, g.Model, "", g.Interface)} {
		if len(validation.IsQualifiedName(k)) > 0 {
			return fmt.Sprintf("the model name %q makes the node label %q, longer than a label's 63-character name", g.Model, k)
		}
	}
	return ""
}

// Model is the GPU model the bid engine places on: the offered part of g.
func Model(g *berthv1.InventoryGPU) gpu.Model {
	if g == nil || g.Model == "" {
		return gpu.Model{}
	}
	return gpu.Model{Vendor: g.Vendor, Model: g.Model, RAM: g.RAM, Interface: g.Interface}
}
