package dev

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
	"berth.dev/berth/internal/yaml"
)

// TestDevProcessFiles: the files berth dev --redis writes for its processes are read
// by `berth provider run` and `berth operator NAME` as exactly the configuration berth
// dev built (a key lost or changed on the way would run a different provider).
func TestDevProcessFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(file, []byte("bidding:\n  tenants: {deny: [akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq7cdc78]}\ncluster:\n  egress_deny: []\n  overcommit: {cpu: 20}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, over := range []string{"", file} {
		cfg := DefaultConfig()
		cfg.Home, cfg.ProviderConfig = dir, over
		pc, err := devProviderConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pc.Node, pc.Kubeconfig, pc.Bus.Redis = "tcp://127.0.0.1:1", "/k", "redis://127.0.0.1:2"
		path, err := writeDevFile(dir, "provider.yaml", pc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := config.LoadProviderConfig(path, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if err := got.Validate(); err != nil {
			t.Fatal(err)
		}
		pc.Build = got.Build // not in the file: the binary's own
		if !reflect.DeepEqual(got, pc) {
			b, _ := os.ReadFile(path)
			t.Fatalf("over %q: read back\n%+v\nwant\n%+v\nfile:\n%s", over, got, pc, b)
		}
	}

	pc := devProviderDefaults(DefaultConfig())
	h := devHostnameConfig(pc, "akash1provider", "berth-dev", "/k")
	roundTrip(t, "hostname", h, hostname.DecodeConfig)
	roundTrip(t, "ip", devIPConfig("akash1provider", "berth-dev", "/k", "127.0.0.1:3"), ip.DecodeConfig)
	v := devInventoryConfig("/k", "127.0.0.1:4")
	v.Bus.Redis = "redis://127.0.0.1:2"
	roundTrip(t, "inventory", v, inventoryop.DecodeConfig)
}

func roundTrip[T any](t *testing.T, name string, want T, decode func([]byte) (T, error)) {
	t.Helper()
	b, err := yaml.Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(b)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, b)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: read back\n%+v\nwant\n%+v\nfile:\n%s", name, got, want, b)
	}
}
