package cluster

import (
	"regexp"
	"strconv"
	"strings"
)

// Node labels that describe a node's GPUs. NVIDIA's GPU feature discovery publishes
// the product and memory; berth's own labels (set by an operator, or by the inventory
// operator) override what is derived from them.
const (
	LabelNvidiaProduct = "nvidia.com/gpu.product"
	LabelNvidiaMemory  = "nvidia.com/gpu.memory" // MiB per GPU
	LabelGPUVendor     = "berth.dev/gpu.vendor"
	LabelGPUModel      = "berth.dev/gpu.model"
	LabelGPURAM        = "berth.dev/gpu.ram"
	LabelGPUInterface  = "berth.dev/gpu.interface"
)

var (
	ramToken   = regexp.MustCompile(`^(\d+)gb?$`)
	skipTokens = map[string]bool{"nvidia": true, "tesla": true, "geforce": true, "quadro": true}
)

// GPUFromLabels describes a node's GPUs from its labels: berth's labels when present,
// else derived from the NVIDIA product name the way Akash names models
// ("NVIDIA-A100-SXM4-80GB" → nvidia/a100/ram/80Gi/interface/sxm,
// "NVIDIA-GeForce-RTX-4090" → nvidia/rtx4090). ok is false when the labels name no GPU.
func GPUFromLabels(labels map[string]string) (GPUModel, bool) {
	g := GPUModel{Vendor: "nvidia"}
	if product := labels[LabelNvidiaProduct]; product != "" {
		g = ParseGPUProduct(product)
	}
	if mib, err := strconv.Atoi(labels[LabelNvidiaMemory]); err == nil && mib > 0 && g.RAM == "" {
		g.RAM = strconv.Itoa((mib+512)/1024) + "Gi"
	}
	for label, field := range map[string]*string{LabelGPUVendor: &g.Vendor, LabelGPUModel: &g.Model, LabelGPURAM: &g.RAM, LabelGPUInterface: &g.Interface} {
		if v := strings.TrimSpace(labels[label]); v != "" {
			*field = strings.ToLower(v)
		}
	}
	return g, g.Model != ""
}

// ParseGPUProduct derives vendor, model, memory and interface from an NVIDIA product
// name: tokens split on '-', '_' or spaces; vendor and family words dropped; "sxm*" and
// "pcie" give the interface, "<N>gb" the memory; the rest, joined, is the model.
func ParseGPUProduct(product string) GPUModel {
	g := GPUModel{Vendor: "nvidia"}
	var model []string
	for _, tok := range strings.FieldsFunc(strings.ToLower(product), func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		switch m := ramToken.FindStringSubmatch(tok); {
		case skipTokens[tok]:
		case strings.HasPrefix(tok, "sxm"):
			g.Interface = "sxm"
		case tok == "pcie":
			g.Interface = "pcie"
		case m != nil:
			g.RAM = m[1] + "Gi"
		case len(model) > 0 && (tok == "hbm3" || tok == "hbm2e" || tok == "hbm2" || tok == "nvl" || tok == "mig"):
			// memory technology and form factors are not part of the model
		default:
			model = append(model, tok)
		}
	}
	g.Model = strings.Join(model, "")
	return g
}
