package bidengine

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// What Akash's provider (github.com/akash-network/provider at afc4dd7c, the newest
// release line) writes under resources[].gpu on the pricing script's stdin, and where
// that is decided:
//
//   - bidengine/order.go prices with the reservation's allocated resource units
//     (reservation.GetAllocatedResources()); bidengine/shellscript.go newDataForScript
//     uses them (not the order's) when there are any, and parseGPU turns each GPU
//     attribute "vendor/<v>/model/<m>[/ram/<r>][/interface/<i>]" into
//     {"vendor": {"<v>": {"model": m, "ram": r, "interface": i}}}: one object per
//     vendor, ram and interface omitted when absent (pointer fields with omitempty);
//   - cluster/kube/operators/clients/inventory/inventory.go tryAdjustGPU, which
//     reserves the GPUs, replaces the unit's GPU attributes with one:
//     "vendor/<node's vendor, lower case>/model/<node's model>", plus "/ram/<r>" and
//     "/interface/<i>" only where the order's entry for that model (or its "*" entry,
//     GPUModels.ExistsOrWildcard in cluster/types/v1beta3/clients/inventory/metrics.go)
//     has them, with the order's values. So a wildcard is resolved to the node's model
//     (Test_newDataForScript_GPUWildcard in bidengine/pricing_test.go), and the node's
//     own memory and interface are never sent;
//   - the documented stdin of helm-charts PR #265 (akash-network/helm-charts, "support
//     model[.vram][.interface] pricing"): {"nvidia": {"model": "a100", "ram": "80Gi",
//     "interface": "pcie"}} for an order asking for all three.
//
// SDL GPU forms become those attributes as pkg.akt.dev/go/sdl gpu.go makes them
// (akash-network/chain-sdk go/sdl/gpu.go), as berth's SDL parser does too.

// gpuForms is a one-service SDL whose GPU vendor entry is a format verb: 2 replicas
// with 2 GPUs each, at most 1000000uact per replica and block.
//
//go:embed testdata/gpu-forms.sdl.yaml
var gpuForms string

// gpuFormsStdin is the stdin Akash's provider sends for gpuForms, with the value of
// "vendor" as the format verb.
const gpuFormsStdin = `{"resources":[{"memory":17179869184,"cpu":4000,
	"gpu":{"units":2,"attributes":{"vendor":%s}},
	"storage":[{"class":"ephemeral","size":107374182400}],
	"count":2,"endpoint_quantity":1,"ip_lease_quantity":0}],
	"price":{"denom":"uact","amount":"2000000.000000000000000000"},"price_precision":6}`

// a100SXM is the node GPU the GPU form cases reserve: an A100 80GB SXM4, as berth's
// inventory reads NVIDIA's product label (see GPUFromLabels).
var a100SXM = GPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}

// gpuFormRequest prices gpuForms with the nvidia entry given, its GPUs reserved on got.
func gpuFormRequest(t *testing.T, nvidia string, got GPU) Request {
	t.Helper()
	res, _, err := sdl.Parse(fmt.Appendf(nil, gpuForms, nvidia), sdl.Options{})
	if err != nil {
		t.Fatalf("nvidia: %s: %v", nvidia, err)
	}
	g := res.Groups[0]
	r, err := NewRequest("akash1tenant", g, map[uint32]GPU{g.Resources[0].Resources.ID: got})
	if err != nil {
		t.Fatalf("nvidia: %s: %v", nvidia, err)
	}
	return r
}

// TestScriptInputGPUForms checks the whole stdin for each way an SDL can ask for GPUs
// against what Akash's provider sends (see the comment at the top of this file).
func TestScriptInputGPUForms(t *testing.T) {
	tests := []struct {
		name   string
		nvidia string // the SDL's vendor.nvidia entry
		got    GPU    // the reserved GPU
		vendor string // stdin's gpu.attributes.vendor
	}{
		{"model only", `[{model: a100}]`, a100SXM,
			`{"nvidia": {"model": "a100"}}`},
		{"model and ram", `[{model: a100, ram: 80Gi}]`, a100SXM,
			`{"nvidia": {"model": "a100", "ram": "80Gi"}}`},
		{"model and ram in Mi", `[{model: a100, ram: 81920Mi}]`, a100SXM,
			`{"nvidia": {"model": "a100", "ram": "80Gi"}}`},
		{"model and interface", `[{model: a100, interface: sxm}]`, a100SXM,
			`{"nvidia": {"model": "a100", "interface": "sxm"}}`},
		{"model, ram and interface", `[{model: a100, ram: 80Gi, interface: sxm}]`, a100SXM,
			`{"nvidia": {"model": "a100", "ram": "80Gi", "interface": "sxm"}}`},
		// "nvidia:" with nothing is vendor/nvidia/model/*: the node's model is sent.
		{"vendor wildcard", ``, GPU{Vendor: "nvidia", Model: "h100", RAM: "80Gi", Interface: "sxm"},
			`{"nvidia": {"model": "h100"}}`},
		{"model *", `[{model: "*"}]`, a100SXM,
			`{"nvidia": {"model": "a100"}}`},
		{"several models", `[{model: h100, ram: 80Gi}, {model: a100, interface: pcie}]`,
			GPU{Vendor: "nvidia", Model: "a100", RAM: "40Gi", Interface: "pcie"},
			`{"nvidia": {"model": "a100", "interface": "pcie"}}`},
		// ExistsOrWildcard: an entry naming the model wins over "*".
		{"a model and *", `[{model: "*"}, {model: a100, ram: 80Gi}]`, a100SXM,
			`{"nvidia": {"model": "a100", "ram": "80Gi"}}`},
		// Akash keeps one entry per model, the last of the sorted attributes
		// (…/a100 < …/a100/interface/sxm).
		{"a model twice", `[{model: a100, interface: sxm}, {model: a100}]`, a100SXM,
			`{"nvidia": {"model": "a100", "interface": "sxm"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scriptInput(gpuFormRequest(t, tt.nvidia, tt.got))
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(gpuFormsStdin, tt.vendor)
			if g, w := decodeJSON(t, got), decodeJSON(t, []byte(want)); !reflect.DeepEqual(g, w) {
				t.Fatalf("stdin\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestScriptInputGPUOtherVendor(t *testing.T) {
	// SDL files name only nvidia; orders built otherwise may name amd, which Akash's
	// provider parses too. The vendor key is lower case, as Akash's is.
	r := Request{
		Units: []Unit{{Count: 1, GPUs: 4,
			GPU:      GPU{Vendor: "AMD", Model: "mi300x", RAM: "192Gi", Interface: "sxm"},
			GPUAsked: GPU{Vendor: "amd", Model: "*"}}},
		MaxPrice: market.DecCoin{Amount: market.NewDec(1), Denom: "uakt"},
	}
	b, err := scriptInput(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resources":[{"memory":0,"cpu":0,"gpu":{"units":4,"attributes":{"vendor":{"amd":{"model":"mi300x"}}}},
		"storage":[],"count":1,"endpoint_quantity":0,"ip_lease_quantity":0}],
		"price":{"denom":"uakt","amount":"1.000000000000000000"},"price_precision":6}`
	if !reflect.DeepEqual(decodeJSON(t, b), decodeJSON(t, []byte(want))) {
		t.Fatalf("stdin\n%s\nwant\n%s", b, want)
	}
}

// requireTools ends the test when a program a pricing script needs is missing: a skip
// saying how to install it, or a failure under CI=true (testenv.Require).
func requireTools(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			testenv.Require(t, fmt.Errorf("%w: %s not found in PATH (pricing scripts use it); install it with `apt-get install %s` (make deps does this as root)",
				localenv.ErrMissingDependency, name, name))
		}
	}
}

// akashScriptEnv, when set, names a copy of Akash's price_script_generic.sh
// (akash-network/helm-charts, charts/akash-provider/scripts) for TestScriptGPUMappings
// to run as well as testdata/gpu_price.sh. Akash's script is not berth's code, so no
// copy is kept here.
const akashScriptEnv = "BERTH_AKASH_PRICE_SCRIPT"

// TestScriptGPUMappings runs a pricing script that keys GPU prices on
// model[.ram][.interface], as Akash's price_script_generic.sh does with
// PRICE_TARGET_GPU_MAPPINGS, and checks that berth bids, for each GPU form, exactly what
// the script prints for the stdin Akash's provider sends for that order. The node's GPU
// has memory and an interface the orders may not ask for; sending them anyway priced
// every order here at the a100.80Gi.sxm rate.
func TestScriptGPUMappings(t *testing.T) {
	requireTools(t, "jq", "bc")
	type script struct {
		name, path string
		ours       bool // prices GPUs only, at the mapped rate per block
	}
	scripts := []script{{"gpu_price.sh", filepath.Join("testdata", "gpu_price.sh"), true}}
	if path := os.Getenv(akashScriptEnv); path != "" {
		requireTools(t, "awk")
		scripts = append(scripts, script{"price_script_generic.sh", path, false})
		// It asks an API for the AKT price (unused for uact) unless it has a fresh
		// cached one: a curl that fails at once keeps it off the network.
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "curl"), []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	} else {
		t.Logf("%s is not set: running only testdata/gpu_price.sh", akashScriptEnv)
	}
	// USD per GPU and month for Akash's script; uact per GPU and block for ours.
	t.Setenv("PRICE_TARGET_GPU_MAPPINGS", "a100=100,a100.80Gi=200,a100.sxm=300,a100.80Gi.sxm=400,h100=500")

	tests := []struct {
		name, nvidia, vendor string
		rate                 int64 // the mapping that applies; 4 GPUs in all
	}{
		{"model and ram", `[{model: a100, ram: 80Gi}]`, `{"nvidia": {"model": "a100", "ram": "80Gi"}}`, 200},
		{"model and interface", `[{model: a100, interface: sxm}]`, `{"nvidia": {"model": "a100", "interface": "sxm"}}`, 300},
		{"model only", `[{model: a100}]`, `{"nvidia": {"model": "a100"}}`, 100},
		{"vendor wildcard", ``, `{"nvidia": {"model": "a100"}}`, 100},
		{"model, ram and interface", `[{model: a100, ram: 80Gi, interface: sxm}]`, `{"nvidia": {"model": "a100", "ram": "80Gi", "interface": "sxm"}}`, 400},
	}
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			p := newScriptPricer(t, ScriptConfig{Path: sc.path, Timeout: time.Minute})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					bid, err := p.Price(t.Context(), gpuFormRequest(t, tt.nvidia, a100SXM))
					if err != nil {
						t.Fatal(err)
					}
					akash := runScript(t, sc.path, akashStdin(t, tt.vendor))
					if bid.Denom != "uact" || bid.Amount.Cmp(akash) != 0 {
						t.Fatalf("bid %s; the script prints %suact for the stdin Akash's provider sends", bid, akash)
					}
					if want := market.NewDec(4 * tt.rate); sc.ours && bid.Amount.Cmp(want) != 0 {
						t.Fatalf("bid %s, want 4 GPUs at %d", bid, tt.rate)
					}
				})
			}
		})
	}
}

// akashStdin is gpuFormsStdin with vendor, as Akash's provider writes it: compact,
// one line (json.Encoder).
func akashStdin(t *testing.T, vendor string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, fmt.Appendf(nil, gpuFormsStdin, vendor)); err != nil {
		t.Fatal(err)
	}
	return b.String() + "\n"
}

// runScript runs a pricing script as the provider would, on stdin, and returns the
// price it prints.
func runScript(t *testing.T, script, stdin string) market.Dec {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), script)
	cmd.Env = append(cmd.Environ(), "AKASH_OWNER=akash1tenant", "AKASH_DENOM=uact")
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v; stderr: %s", script, err, stderr.Bytes())
	}
	d, err := ParseScriptPrice(out)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return d
}

// FuzzScriptInputGPU feeds NewRequest and scriptInput an order's GPU attributes (one
// key per line, as a tenant may put any on the ledger) and a reserved GPU, and checks
// the stdin: one vendor, the node's, lower case; the node's model; and "ram" and
// "interface" exactly those of an entry of the order that accepts the node, one naming
// the model when there is such an entry. An order none of whose entries accepts the
// node must be an error.
func FuzzScriptInputGPU(f *testing.F) {
	for _, s := range []struct{ keys, vendor, model, ram, iface string }{
		{"vendor/nvidia/model/a100", "nvidia", "a100", "80Gi", "sxm"},
		{"vendor/nvidia/model/a100/ram/80Gi", "nvidia", "a100", "80Gi", "sxm"},
		{"vendor/nvidia/model/a100/interface/sxm", "nvidia", "a100", "80Gi", "sxm"},
		{"vendor/nvidia/model/a100/ram/80Gi/interface/sxm", "nvidia", "a100", "80Gi", "sxm"},
		{"vendor/nvidia/model/*", "nvidia", "h100", "80Gi", "sxm"},
		{"vendor/nvidia/model/*\nvendor/nvidia/model/a100/ram/80Gi", "nvidia", "a100", "80Gi", "pcie"},
		{"vendor/nvidia/model/h100/ram/80Gi\nvendor/nvidia/model/a100/interface/pcie", "nvidia", "a100", "40Gi", "pcie"},
		{"vendor/amd/model/mi300x", "AMD", "mi300x", "192Gi", ""},
		{"vendor/nvidia/model/a100/ram/40Gi", "nvidia", "a100", "80Gi", "sxm"},
		{"vendor/nvidia/model/a100/cores/6912", "nvidia", "a100", "", ""},
	} {
		f.Add(s.keys, s.vendor, s.model, s.ram, s.iface)
	}
	f.Fuzz(func(t *testing.T, keys, vendor, model, ram, iface string) {
		var attrs market.Attributes
		for k := range strings.SplitSeq(keys, "\n") {
			attrs = append(attrs, market.Attribute{Key: k, Value: "true"})
		}
		spec := market.GroupSpec{Resources: []market.ResourceUnit{{Count: 1, Resources: market.Resources{
			ID: 1, GPU: &market.GPU{Units: market.ResourceValue{Val: 1}, Attributes: attrs},
		}}}}
		node := GPU{Vendor: vendor, Model: model, RAM: ram, Interface: iface}
		r, err := NewRequest("akash1tenant", spec, map[uint32]GPU{1: node})
		alts, perr := gpu.ParseAttributes(attrs)
		nodeModel := gpu.Model{Vendor: vendor, Model: model, RAM: ram, Interface: iface}
		var accepting []gpu.Model
		for _, a := range alts {
			if a.Accepts(nodeModel) {
				accepting = append(accepting, a)
			}
		}
		if perr != nil || strings.TrimSpace(model) == "" || len(accepting) == 0 {
			if err == nil {
				t.Fatalf("order %q, node %+v: priced", keys, node)
			}
			return
		}
		if err != nil {
			t.Fatalf("order %q, node %+v: %v", keys, node, err)
		}
		b, err := scriptInput(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("stdin is not one line: %q", b)
		}
		var in struct {
			Resources []struct {
				GPU struct {
					Attributes struct {
						Vendor map[string]map[string]string `json:"vendor"`
					} `json:"attributes"`
				} `json:"gpu"`
			} `json:"resources"`
		}
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
		sent := in.Resources[0].GPU.Attributes.Vendor
		wantVendor := strings.ToLower(vendor)
		if wantVendor == "" {
			wantVendor = "nvidia"
		}
		if len(sent) != 1 || sent[wantVendor] == nil || sent[wantVendor]["model"] != viaJSON(t, model) {
			t.Fatalf("order %q, node %+v: sent %s, want vendor %s and the node's model", keys, node, b, wantVendor)
		}
		g := sent[wantVendor]
		namesModel := slices.ContainsFunc(accepting, func(a gpu.Model) bool { return a.Model != "*" })
		if !slices.ContainsFunc(accepting, func(a gpu.Model) bool {
			return viaJSON(t, a.RAM) == g["ram"] && viaJSON(t, a.Interface) == g["interface"] && (a.Model != "*" || !namesModel)
		}) {
			t.Fatalf("order %q, node %+v: sent %v, which is no entry of the order that accepts the node", keys, node, g)
		}
	})
}

// viaJSON is s as it reads back from JSON: invalid UTF-8 becomes U+FFFD.
func viaJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back string
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}
