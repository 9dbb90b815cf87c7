package inventory_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
)

const (
	capA100      = "berth.dev/capabilities.gpu.vendor.nvidia.model.a100"
	capA100RAM   = "berth.dev/capabilities.gpu.vendor.nvidia.model.a100.ram.80Gi"
	capA100SXM   = "berth.dev/capabilities.gpu.vendor.nvidia.model.a100.interface.sxm"
	capLocalPath = "berth.dev/capabilities.storage.class.local-path"
	capCephRBD   = "berth.dev/capabilities.storage.class.ceph-rbd"
)

func checkQualifiedNames(t *testing.T, keys []string) {
	t.Helper()
	for _, k := range keys {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%q is not a label key: %v", k, errs)
		}
	}
}

func TestGPULabel(t *testing.T) {
	tests := []struct {
		vendor, model, ram, iface string
		want                      string
	}{
		{"nvidia", "a100", "", "", capA100},
		{"nvidia", "a100", "80Gi", "", capA100RAM},
		{"nvidia", "a100", "", "sxm", capA100SXM},
		{"NVIDIA", "A100", "", "SXM", capA100SXM},
		// One qualifier at most: the memory wins.
		{"nvidia", "a100", "80Gi", "sxm", capA100RAM},
		{"nvidia", "rtx4090", "24Gi", "", "berth.dev/capabilities.gpu.vendor.nvidia.model.rtx4090.ram.24Gi"},
		{"amd", "mi300x", "", "", "berth.dev/capabilities.gpu.vendor.amd.model.mi300x"},
	}
	for _, tt := range tests {
		got := inventory.GPULabel(tt.vendor, tt.model, tt.ram, tt.iface)
		if got != tt.want {
			t.Errorf("GPULabel(%q, %q, %q, %q) = %q, want %q", tt.vendor, tt.model, tt.ram, tt.iface, got, tt.want)
		}
		if !strings.HasPrefix(got, inventory.CapabilityPrefix) {
			t.Errorf("%q lacks the prefix", got)
		}
		checkQualifiedNames(t, []string{got})
	}
}

func TestStorageLabel(t *testing.T) {
	for class, want := range map[string]string{
		"local-path":  capLocalPath,
		"ceph-rbd":    capCephRBD,
		"ebs.gp3":     "berth.dev/capabilities.storage.class.ebs.gp3",
		"longhorn-v2": "berth.dev/capabilities.storage.class.longhorn-v2",
	} {
		if got := inventory.StorageLabel(class); got != want {
			t.Errorf("StorageLabel(%q) = %q, want %q", class, got, want)
		}
		checkQualifiedNames(t, []string{want})
	}
}

func TestGPUAffinity(t *testing.T) {
	tests := []struct {
		name string
		g    gpu.Model
		want []string
	}{
		{"no model", gpu.Model{Vendor: "nvidia"}, nil},
		{"any model", gpu.Model{Vendor: "nvidia", Model: "*"}, nil},
		{"any model, with RAM", gpu.Model{Vendor: "nvidia", Model: "*", RAM: "80Gi"}, nil},
		{"model", gpu.Model{Vendor: "nvidia", Model: "a100"}, []string{capA100}},
		{"model and RAM", gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}, []string{capA100, capA100RAM}},
		{"model and interface", gpu.Model{Vendor: "nvidia", Model: "a100", Interface: "sxm"}, []string{capA100, capA100SXM}},
		{"all", gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}, []string{capA100, capA100RAM, capA100SXM}},
		{"capitals", gpu.Model{Vendor: "NVIDIA", Model: "A100", Interface: "SXM"}, []string{capA100, capA100SXM}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inventory.GPUAffinity(tt.g)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			checkQualifiedNames(t, got)
		})
	}
}

func TestCapabilities(t *testing.T) {
	a100 := &berthv1.InventoryGPU{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm", Product: "NVIDIA-A100-SXM4-80GB", Devices: 8, Offered: 8}
	notOffered := *a100
	notOffered.Offered = 0
	unnamed := &berthv1.InventoryGPU{Vendor: "nvidia", PCIDevice: "10de:2330", Devices: 8, Offered: 8}
	long := strings.Repeat("x", 37) // 27 + 37 characters after "berth.dev/": one too many
	tests := []struct {
		name        string
		gpu         *berthv1.InventoryGPU
		classes     []string
		want        []string
		wantInvalid []string
	}{
		{name: "nothing"},
		{name: "offered GPUs", gpu: a100, want: []string{capA100, capA100RAM, capA100SXM}},
		{name: "offered GPUs and classes", gpu: a100, classes: []string{"local-path", "ceph-rbd"}, want: []string{capA100, capA100RAM, capA100SXM, capLocalPath, capCephRBD}},
		{name: "GPUs offered without RAM nor interface", gpu: &berthv1.InventoryGPU{Vendor: "nvidia", Model: "l4", Devices: 1, Offered: 1}, want: []string{"berth.dev/capabilities.gpu.vendor.nvidia.model.l4"}},
		{name: "GPUs not offered: no GPU label", gpu: &notOffered, classes: []string{"local-path"}, want: []string{capLocalPath}},
		{name: "GPUs of no model: no GPU label", gpu: unnamed, want: nil},
		{name: "classes only", classes: []string{"local-path"}, want: []string{capLocalPath}},
		{name: "a class too long for a label", classes: []string{"local-path", long}, want: []string{capLocalPath}, wantInvalid: []string{inventory.StorageLabel(long)}},
		{name: "a class of 36 characters fits", classes: []string{long[1:]}, want: []string{inventory.StorageLabel(long[1:])}},
		{
			name: "a model too long for the memory's label",
			gpu:  &berthv1.InventoryGPU{Vendor: "nvidia", Model: "abcdefghijklmnopqrstuvwxyz", RAM: "80Gi", Devices: 1, Offered: 1},
			want: []string{"berth.dev/capabilities.gpu.vendor.nvidia.model.abcdefghijklmnopqrstuvwxyz"},
			wantInvalid: []string{
				"berth.dev/capabilities.gpu.vendor.nvidia.model.abcdefghijklmnopqrstuvwxyz.ram.80Gi",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			labels, invalid := inventory.Capabilities(tt.gpu, tt.classes)
			if labels == nil {
				t.Fatal("nil labels")
			}
			keys := slices.Sorted(maps.Keys(labels))
			if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(keys, want) {
				t.Errorf("labels %q, want %q", keys, want)
			}
			for k, v := range labels {
				if v != "true" {
					t.Errorf("%s=%q, want true", k, v)
				}
				if !strings.HasPrefix(k, inventory.CapabilityPrefix) {
					t.Errorf("%s lacks the prefix", k)
				}
			}
			checkQualifiedNames(t, keys)
			if !slices.Equal(invalid, tt.wantInvalid) {
				t.Errorf("invalid %q, want %q", invalid, tt.wantInvalid)
			}
		})
	}
}

// The labels a node offering a GPU gets satisfy the affinity of an order for it.
func TestCapabilitiesSatisfyGPUAffinity(t *testing.T) {
	g := inventory.DescribeGPU(gfd("NVIDIA-A100-SXM4-80GB", "81920", "8"), gpus(8), inventory.GPUOptions{})
	labels, _ := inventory.Capabilities(g, nil)
	for _, order := range []gpu.Model{
		{Vendor: "nvidia", Model: "a100"},
		{Vendor: "nvidia", Model: "a100", RAM: "80Gi"},
		{Vendor: "nvidia", Model: "a100", Interface: "sxm"},
		{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"},
	} {
		if !order.Accepts(inventory.Model(g)) {
			t.Fatalf("%s does not accept %s", order, inventory.Model(g))
		}
		for _, k := range inventory.GPUAffinity(order) {
			if labels[k] != "true" {
				t.Errorf("order %s: the node lacks %s (has %v)", order, k, labels)
			}
		}
	}
	for _, order := range []gpu.Model{
		{Vendor: "nvidia", Model: "h100"},
		{Vendor: "nvidia", Model: "a100", RAM: "40Gi"},
		{Vendor: "nvidia", Model: "a100", Interface: "pcie"},
	} {
		ok := true
		for _, k := range inventory.GPUAffinity(order) {
			ok = ok && labels[k] == "true"
		}
		if ok {
			t.Errorf("order %s: an A100 SXM 80GB node carries all of %q", order, inventory.GPUAffinity(order))
		}
	}
}

func TestLabelChanges(t *testing.T) {
	other := map[string]string{
		"kubernetes.io/hostname":                   "gpu-1",
		inventory.LabelGFDProduct:                  "NVIDIA-A100-SXM4-80GB",
		gpu.LabelModel:                             "a100",
		"berth.dev/capabilities":                   "true", // not the prefix: it ends with '.'
		"berth.dev/capabilitiesx.gpu":              "true",
		"akash.network/capabilities.gpu.vendor.nv": "true",
		nfdNvidiaDisplay:                           "true",
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		name       string
		have, want map[string]string
		patch      map[string]*string
	}{
		{name: "nothing either side", patch: map[string]*string{}},
		{name: "no capability, none wanted", have: other, want: map[string]string{}, patch: map[string]*string{}},
		{name: "in step", have: merge(other, map[string]string{capA100: "true", capLocalPath: "true"}), want: map[string]string{capA100: "true", capLocalPath: "true"}, patch: map[string]*string{}},
		{
			name:  "new labels",
			have:  other,
			want:  map[string]string{capA100: "true", capLocalPath: "true"},
			patch: map[string]*string{capA100: str("true"), capLocalPath: str("true")},
		},
		{
			name:  "set, changed and stale",
			have:  merge(other, map[string]string{capA100: "true", capA100RAM: "false", capCephRBD: "true", inventory.CapabilityPrefix + "hand.made": "yes"}),
			want:  map[string]string{capA100: "true", capA100RAM: "true", capA100SXM: "true"},
			patch: map[string]*string{capA100RAM: str("true"), capA100SXM: str("true"), capCephRBD: nil, inventory.CapabilityPrefix + "hand.made": nil},
		},
		{
			name:  "all stale",
			have:  merge(other, map[string]string{capA100: "true", capLocalPath: "true"}),
			want:  nil,
			patch: map[string]*string{capA100: nil, capLocalPath: nil},
		},
		{
			name:  "distinct values get distinct pointers",
			have:  nil,
			want:  map[string]string{capA100: "a", capLocalPath: "b", capCephRBD: "c"},
			patch: map[string]*string{capA100: str("a"), capLocalPath: str("b"), capCephRBD: str("c")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := maps.Clone(tt.have)
			patch := inventory.LabelChanges(tt.have, tt.want, nil)
			if patch == nil {
				t.Fatal("nil patch")
			}
			if len(patch) != len(tt.patch) {
				t.Errorf("patch of %d keys %v, want %d", len(patch), render(patch), len(tt.patch))
			}
			for k, want := range tt.patch {
				got, ok := patch[k]
				switch {
				case !ok:
					t.Errorf("%s not in the patch", k)
				case want == nil && got != nil:
					t.Errorf("%s set to %q, want deleted", k, *got)
				case want != nil && (got == nil || *got != *want):
					t.Errorf("%s: %s, want %q", k, render(map[string]*string{k: got}), *want)
				}
			}
			for k := range patch {
				if _, ok := other[k]; ok {
					t.Errorf("the patch touches %s, which is not berth's", k)
				}
			}
			if !reflect.DeepEqual(have, tt.have) {
				t.Error("LabelChanges changed have")
			}
			// Applying the patch gives the wanted capability labels and leaves the rest.
			applied := maps.Clone(tt.have)
			if applied == nil {
				applied = map[string]string{}
			}
			for k, v := range patch {
				if v == nil {
					delete(applied, k)
				} else {
					applied[k] = *v
				}
			}
			if got, want := inventory.CapabilityLabelsOf(applied), maps.Clone(tt.want); len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Errorf("after the patch: %v, want %v", got, want)
			}
			for k, v := range tt.have {
				if !strings.HasPrefix(k, inventory.CapabilityPrefix) && applied[k] != v {
					t.Errorf("after the patch %s=%q, was %q", k, applied[k], v)
				}
			}
			if again := inventory.LabelChanges(applied, tt.want, nil); len(again) != 0 {
				t.Errorf("a second patch: %v", render(again))
			}
		})
	}
}

func render(p map[string]*string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if p[k] == nil {
			b.WriteString(k + "=<delete> ")
		} else {
			b.WriteString(k + "=" + *p[k] + " ")
		}
	}
	return b.String()
}

func TestCapabilityLabelsOf(t *testing.T) {
	labels := map[string]string{
		"kubernetes.io/hostname":     "gpu-1",
		gpu.LabelModel:               "a100",
		"berth.dev/capabilities":     "true",
		capA100:                      "true",
		capLocalPath:                 "true",
		"akash.network/capabilities": "true",
	}
	before := maps.Clone(labels)
	got := inventory.CapabilityLabelsOf(labels)
	if want := map[string]string{capA100: "true", capLocalPath: "true"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if !reflect.DeepEqual(labels, before) {
		t.Error("CapabilityLabelsOf changed its argument")
	}
	if got := inventory.CapabilityLabelsOf(nil); len(got) != 0 {
		t.Errorf("of nil: %v", got)
	}
	if got := inventory.CapabilityLabelsOf(map[string]string{"a": "b"}); len(got) != 0 {
		t.Errorf("of none: %v", got)
	}
}
