// Package gpu names GPUs as berth and Akash do: Model (vendor, model, memory,
// interface), the node labels a cluster's operator may set to name a node's GPUs, how
// an NVIDIA product name reads as a Model, and how an order's GPU attributes read as
// the models it accepts.
package gpu

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
)

// Node labels a cluster's operator may set by hand to name a node's GPUs; they win over
// what the inventory derives from GPU feature discovery's labels
// (inventory.DescribeGPU).
const (
	LabelVendor    = "berth.dev/gpu.vendor"
	LabelModel     = "berth.dev/gpu.model"
	LabelRAM       = "berth.dev/gpu.ram"
	LabelInterface = "berth.dev/gpu.interface"
)

var (
	ramToken   = regexp.MustCompile(`^(\d+)gb?$`)
	skipTokens = map[string]bool{"nvidia": true, "tesla": true, "geforce": true, "quadro": true}
	// dropTokens are no part of the model once it has begun: memory technology and
	// "Ada Generation"'s second word (NVIDIA-RTX-6000-Ada-Generation is rtx6000ada, as
	// Akash names the RTX 4000 Ada Generation rtx4000ada).
	dropTokens = map[string]bool{"hbm3": true, "hbm3e": true, "hbm2e": true, "hbm2": true, "mig": true, "generation": true}

	// akashNames are the names Akash's provider-configs (devices/pcie/gpus.json, which
	// Akash providers advertise and tenants' SDLs ask for) gives cards whose product
	// name, read as ParseProduct reads it, says otherwise: by the model read.
	akashNames = map[string]string{
		"rtxa5000":      "a5000",       // 10de:2231 "a5000" (while 10de:2230 is "rtxa6000")
		"rtx4000sffada": "rtx4000sada", // 10de:27b0 "rtx4000sada" (renamed from rtx4000sffada)
		// NVIDIA RTX PRO 6000 Blackwell {Server, Workstation, Max-Q Workstation} Edition.
		"rtxpro6000blackwellserveredition":          "pro6000se", // 10de:2bb5
		"rtxpro6000blackwellworkstationedition":     "pro6000we", // 10de:2bb1
		"rtxpro6000blackwellmaxqworkstationedition": "pro6000mq", // 10de:2bb4
	}
	// superchips are CPU+GPU modules whose GPU is on neither a PCIe card nor an SXM
	// board: no interface.
	superchips = []string{"gh200", "gb200", "gb300"}
	// sxmOnly are models made only as SXM boards, whose product names do not say so:
	// the H200 (Akash 10de:2335 h200 SXM5; the PCIe card is the H200 NVL), the H20 (HGX
	// only) and the Blackwell B100/B200 (HGX only).
	sxmOnly = []string{"h200", "h20", "b100", "b200"}
)

// ParseProduct derives vendor, model, memory and interface from an NVIDIA product
// name the way Akash's provider-configs names cards: tokens split on '-', '_' or
// spaces; vendor and family words dropped; "sxm*" and "pcie" give the interface,
// "<N>gb" the memory; "SUPER" is an "s" suffix (rtx4070s) and "Laptop GPU" an "m" one
// (rtx3060m); the rest, joined, is the model, or the name Akash gives it where that
// differs (akashNames). A card whose name does not say sxm is a PCIe card unless it is
// made only as an SXM board (the H100 whose name says HBM3, H200 but the NVL, B100,
// B200), or is a superchip (GH200), which has no interface.
func ParseProduct(product string) Model {
	g := Model{Vendor: "nvidia"}
	var model []string
	hbm3, laptop := false, false
	for _, tok := range strings.FieldsFunc(strings.ToLower(product), func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		switch m := ramToken.FindStringSubmatch(tok); {
		case skipTokens[tok]:
		case strings.HasPrefix(tok, "sxm"):
			g.Interface = "sxm"
		case tok == "pcie":
			g.Interface = "pcie"
		case m != nil:
			g.RAM = m[1] + "Gi"
		case laptop || len(model) == 0:
			// what follows "Laptop" ("GPU") is no part of the model
			if !laptop {
				model = append(model, tok)
			}
		case dropTokens[tok]:
			hbm3 = hbm3 || tok == "hbm3"
		case tok == "super":
			model = append(model, "s")
		case tok == "laptop":
			model, laptop = append(model, "m"), true
		default:
			model = append(model, tok)
		}
	}
	g.Model = strings.Join(model, "")
	if g.Model == "" {
		return g
	}
	if name, ok := akashNames[g.Model]; ok {
		g.Model = name
	}
	if g.Interface == "" {
		switch {
		case slices.Contains(superchips, g.Model):
		case slices.Contains(sxmOnly, g.Model), hbm3 && (g.Model == "h100" || g.Model == "h800"):
			// NVIDIA-H100-80GB-HBM3 is the H100 SXM5 (Akash 10de:2330 h100 SXM5); the
			// PCIe card is NVIDIA-H100-PCIe, the H100 NVL a PCIe card too.
			g.Interface = "sxm"
		default:
			g.Interface = "pcie"
		}
	}
	return g
}

// Model is the GPU a node carries or an order accepts. In an order's alternatives an
// empty RAM or Interface accepts any, and Model "*" accepts any model of the vendor.
type Model struct {
	Vendor    string
	Model     string
	RAM       string
	Interface string
}

// Accepts reports whether the alternative g (from an order) accepts a node's GPU n.
func (g Model) Accepts(n Model) bool {
	return strings.EqualFold(g.Vendor, n.Vendor) &&
		(g.Model == "*" || strings.EqualFold(g.Model, n.Model)) &&
		(g.RAM == "" || strings.EqualFold(g.RAM, n.RAM)) &&
		(g.Interface == "" || strings.EqualFold(g.Interface, n.Interface))
}

func (g Model) String() string {
	s := g.Vendor + "/" + g.Model
	if g.RAM != "" {
		s += "/ram/" + g.RAM
	}
	if g.Interface != "" {
		s += "/interface/" + g.Interface
	}
	return s
}

// ParseAttributes reads an order's GPU attributes ("vendor/nvidia/model/a100[/ram/80Gi]
// [/interface/sxm]" = "true") into the alternatives it accepts, in order.
func ParseAttributes(attrs market.Attributes) ([]Model, error) {
	out := make([]Model, 0, len(attrs))
	for _, a := range attrs {
		if a.Value != "true" {
			continue
		}
		parts := strings.Split(a.Key, "/")
		if len(parts) < 4 || len(parts)%2 != 0 || parts[0] != "vendor" || parts[2] != "model" || parts[1] == "" || parts[3] == "" {
			return nil, fmt.Errorf("GPU attribute %q: want vendor/<vendor>/model/<model>[/ram/<size>][/interface/<pcie|sxm>]", a.Key)
		}
		g := Model{Vendor: parts[1], Model: parts[3]}
		for i := 4; i < len(parts); i += 2 {
			switch parts[i] {
			case "ram":
				g.RAM = parts[i+1]
			case "interface":
				g.Interface = parts[i+1]
			default:
				return nil, fmt.Errorf("GPU attribute %q: unknown qualifier %q", a.Key, parts[i])
			}
		}
		out = append(out, g)
	}
	return out, nil
}
