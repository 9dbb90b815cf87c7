package dev

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/localenv"
)

// devCapabilities are the capability attributes the dev provider registers for cfg.
func devCapabilities(t testing.TB, cfg Config) []config.AttributeConfig {
	t.Helper()
	caps, err := cfg.capabilities(localenv.DevStorageClasses)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]config.AttributeConfig, 0, len(caps))
	for _, a := range caps {
		out = append(out, config.AttributeConfig{Key: a.Key, Value: a.Value})
	}
	return out
}

// TestDevProviderConfigLayers: berth dev's provider takes the dev defaults, then the
// --config file's keys, then --withdraw-period when given; the keys berth dev sets
// itself are refused, each named with its line.
func TestDevProviderConfigLayers(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "price.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 7\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	base := DefaultConfig()
	base.Home = filepath.Join(dir, "home")
	caps := devCapabilities(t, base)
	tenant := exampleAddress(t, 9)

	tests := []struct {
		name string
		file string // "" : no --config
		flag time.Duration
		// check looks at the layered configuration when want is "".
		check func(t *testing.T, pc config.ProviderConfig)
		want  []string // what the error says
	}{
		{name: "dev defaults", check: func(t *testing.T, pc config.ProviderConfig) {
			if pc.Home != base.Home || pc.From != DevProviderKey || pc.Gateway.Listen != "127.0.0.1:0" || pc.Gateway.GRPCListen != "127.0.0.1:0" ||
				pc.Cluster.IngressDomain != IngressDomain || !pc.Cluster.InstallCRDs {
				t.Errorf("dev settings: %+v", pc)
			}
			if s := pc.Bidding.Pricing.Scale; pc.Bidding.Pricing.Strategy != "scale" || s.CPU.Cmp(ScaleRates().CPU) != 0 || s.Storage["beta2"].Short() != "0.00003" {
				t.Errorf("pricing %+v, want the dev scale rates", pc.Bidding.Pricing)
			}
			if pc.Balance.WithdrawPeriod != 10*time.Minute || pc.Balance.CheckInterval != 10*time.Second {
				t.Errorf("balance %+v", pc.Balance)
			}
			want := append(devLocationAttributes(), caps...)
			if !slices.Equal(pc.Attributes, want) {
				t.Errorf("attributes\n got %v\nwant %v", pc.Attributes, want)
			}
		}},
		{name: "script pricing, tenants, budget, limits", file: `
bidding:
  pricing:
    strategy: script
    script: {path: ` + script + `, timeout: 3s}
  tenants:
    deny: [` + tenant + `]
  budget: {bids_per_hour: 12}
  limits: {gpus_per_replica: 2}
`, check: func(t *testing.T, pc config.ProviderConfig) {
			b := pc.Bidding
			if b.Pricing.Strategy != "script" || b.Pricing.Script.Path != script || b.Pricing.Script.Timeout != 3*time.Second ||
				!slices.Equal(b.Tenants.Deny, []string{tenant}) || b.Budget.BidsPerHour != 12 || b.Limits.GPUsPerReplica != 2 {
				t.Errorf("bidding %+v", b)
			}
			if err := pc.Validate(); err != nil { // builds the script pricer
				t.Errorf("validate: %v", err)
			}
			// What the file does not set keeps the dev value.
			if pc.Cluster.IngressDomain != IngressDomain || pc.Bidding.Timeout != 5*time.Minute {
				t.Errorf("unset keys lost their dev values: %+v", pc.Cluster)
			}
		}},
		{name: "a scale rate over the dev rates", file: "bidding:\n  pricing:\n    scale:\n      cpu: \"0.5\"\n      storage: {beta1: \"0.1\"}\n",
			check: func(t *testing.T, pc config.ProviderConfig) {
				s := pc.Bidding.Pricing.Scale
				if s.CPU.Short() != "0.5" || s.Memory.Cmp(ScaleRates().Memory) != 0 || s.Storage["beta1"].Short() != "0.1" || s.Storage["beta2"].Short() != "0.00003" {
					t.Errorf("scale %+v: want cpu and beta1 from the file, the rest dev's", s)
				}
			}},
		{name: "attributes replace the dev location ones, capabilities stay", file: "attributes:\n  - {key: region, value: eu-central}\n  - {key: organization, value: acme}\n",
			check: func(t *testing.T, pc config.ProviderConfig) {
				want := append([]config.AttributeConfig{{Key: "region", Value: "eu-central"}, {Key: "organization", Value: "acme"}}, caps...)
				if !slices.Equal(pc.Attributes, want) {
					t.Errorf("attributes\n got %v\nwant %v", pc.Attributes, want)
				}
			}},
		{name: "no attributes but the capabilities", file: "attributes: []\n", check: func(t *testing.T, pc config.ProviderConfig) {
			if !slices.Equal(pc.Attributes, caps) {
				t.Errorf("attributes %v, want the capabilities only", pc.Attributes)
			}
		}},
		{name: "the file's withdraw period", file: "balance:\n  withdraw_period: 30s\n", check: func(t *testing.T, pc config.ProviderConfig) {
			if pc.Balance.WithdrawPeriod != 30*time.Second || pc.Balance.CheckInterval != 10*time.Second {
				t.Errorf("balance %+v", pc.Balance)
			}
		}},
		{name: "--withdraw-period beats the file", file: "balance:\n  withdraw_period: 30s\n", flag: time.Minute, check: func(t *testing.T, pc config.ProviderConfig) {
			if pc.Balance.WithdrawPeriod != time.Minute {
				t.Errorf("withdraw period %s, want the flag's 1m0s", pc.Balance.WithdrawPeriod)
			}
		}},
		{name: "an empty file", file: "# nothing\n", check: func(t *testing.T, pc config.ProviderConfig) {
			if !slices.Equal(pc.Attributes, append(devLocationAttributes(), caps...)) {
				t.Errorf("attributes %v", pc.Attributes)
			}
		}},

		{name: "home", file: "home: /var/lib/berth\n", want: []string{"berth dev sets these keys itself", "line 1: home: ", "--home"}},
		{name: "every owned key, in file order", file: `log_level: debug
from: provider
node: tcp://ledger.example.com:26657
kubeconfig: /etc/kube
host_uri: https://provider.example.com:8443
gateway:
  grpc_listen: 0.0.0.0:8444
  listen: 0.0.0.0:8443
cluster:
  install_crds: false
`, want: []string{"line 1: log_level: ", "line 2: from: ", `"provider"`, "line 3: node: ", "line 4: kubeconfig: ", "line 5: host_uri: ",
			"line 7: gateway.grpc_listen: ", "line 8: gateway.listen: ", "line 10: cluster.install_crds: "}},
		{name: "an owned key set through an alias", file: "cluster: {ingress_namespace: &l \"0.0.0.0:1\"}\ngateway: {listen: *l}\n", want: []string{"line 2: gateway.listen: "}},
		{name: "unknown key", file: "bidding:\n  pricng: {}\n", want: []string{"config ", "line 2: bidding.pricng: unknown key"}},
		{name: "wrong type", file: "bidding:\n  budget: {bids_per_hour: many}\n", want: []string{"line 2: bidding.budget.bids_per_hour"}},
		{name: "invalid value", file: "bidding:\n  timeout: 1s\n", want: []string{"bidding.timeout 1s"}},
		{name: "missing script", file: "bidding:\n  pricing: {strategy: script, script: {path: /nonexistent/price.sh}}\n", want: []string{"/nonexistent/price.sh"}},
		{name: "a capability attribute", file: "attributes:\n  - {key: region, value: x}\n  - {key: capabilities/storage/1/class, value: beta2}\n",
			want: []string{`attributes[1] "capabilities/storage/1/class": berth dev declares its simulated cluster's capabilities itself`}},
		{name: "an attribute twice", file: "attributes:\n  - {key: region, value: x}\n  - {key: region, value: y}\n", want: []string{`attributes[1]: key "region" is listed twice`}},
		{name: "an attribute without key", file: "attributes:\n  - {value: x}\n", want: []string{"attributes[0].key: empty"}},
		{name: "an attribute too long", file: "attributes:\n  - {key: k, value: " + strings.Repeat("v", 257) + "}\n", want: []string{"attributes[0]: key must be 1 to 256 bytes"}},
		{name: "not a mapping", file: "- home\n", want: []string{"want a mapping"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			if tt.flag != 0 {
				cfg.WithdrawPeriod, cfg.WithdrawPeriodSet = tt.flag, true
			}
			if tt.file != "" {
				cfg.ProviderConfig = filepath.Join(t.TempDir(), "provider.yaml")
				if err := os.WriteFile(cfg.ProviderConfig, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			pc, err := devProviderConfig(cfg)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tt.check(t, pc)
				return
			}
			if err == nil {
				t.Fatalf("no error; want one saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.file != "" && !strings.Contains(err.Error(), cfg.ProviderConfig) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	t.Run("no such file", func(t *testing.T) {
		cfg := base
		cfg.ProviderConfig = filepath.Join(dir, "missing.yaml")
		if _, err := devProviderConfig(cfg); err == nil || !strings.Contains(err.Error(), "--config: open "+cfg.ProviderConfig) {
			t.Fatalf("err = %v", err)
		}
	})
}

// FuzzDevProviderConfig: whatever the file, berth dev's provider configuration is
// either refused or valid, with berth dev's own keys as berth dev sets them and the
// dev cluster's capabilities last among the attributes.
func FuzzDevProviderConfig(f *testing.F) {
	for _, p := range []string{"../../config/deploy/provider.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"attributes:\n  - {key: region, value: eu-central}\n",
		"bidding:\n  pricing:\n    scale: {cpu: \"0.5\", gpu: {a100: \"20\"}}\n  tenants: {allow: [akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63]}\n",
		"balance: {withdraw_period: 30s}\ncluster: {overcommit: {cpu: 50}}\n",
		"gateway:\n  listen: 0.0.0.0:8443\n",
		"x: &a {listen: 1}\ngateway: *a\n",
	} {
		f.Add([]byte(s))
	}
	cfg := DefaultConfig()
	cfg.Home = "/dev-home"
	caps := devCapabilities(f, cfg)
	f.Fuzz(func(t *testing.T, data []byte) {
		pc, err := parseDevProviderConfig(cfg, "provider.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "provider.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := pc.Validate(); err != nil {
			t.Fatalf("accepted an invalid configuration: %v", err)
		}
		if pc.Home != cfg.Home || pc.From != DevProviderKey || pc.Node != "" || pc.Kubeconfig != "" || pc.HostURI != "" ||
			pc.LogLevel != "info" || pc.Gateway.Listen != "127.0.0.1:0" || pc.Gateway.GRPCListen != "127.0.0.1:0" || !pc.Cluster.InstallCRDs {
			t.Fatalf("a key berth dev owns was changed: %+v", pc)
		}
		if n := len(pc.Attributes); n < len(caps) || !slices.Equal(pc.Attributes[n-len(caps):], caps) {
			t.Fatalf("attributes %v do not end with the capabilities", pc.Attributes)
		}
	})
}
