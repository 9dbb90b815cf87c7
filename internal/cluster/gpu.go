package cluster

import (
	"regexp"
	"strings"
)

// Node labels a cluster's operator may set by hand to name a node's GPUs; they win over
// what the inventory derives from GPU feature discovery's labels
// (inventory.DescribeGPU).
const (
	LabelGPUVendor    = "berth.dev/gpu.vendor"
	LabelGPUModel     = "berth.dev/gpu.model"
	LabelGPURAM       = "berth.dev/gpu.ram"
	LabelGPUInterface = "berth.dev/gpu.interface"
)

var (
	ramToken   = regexp.MustCompile(`^(\d+)gb?$`)
	skipTokens = map[string]bool{"nvidia": true, "tesla": true, "geforce": true, "quadro": true}
)

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
		case len(model) > 0 && (tok == "hbm3" || tok == "hbm2e" || tok == "hbm2" || tok == "nvl" || tok == "mig" || tok == "generation"):
			// memory technology, form factors and "Ada Generation" are not part of the
			// model (NVIDIA-RTX-6000-Ada-Generation is Akash's rtx6000ada)
		default:
			model = append(model, tok)
		}
	}
	g.Model = strings.Join(model, "")
	return g
}
