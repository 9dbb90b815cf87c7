package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/balance"
	"berth.dev/berth/internal/testenv"
)

// otherChainAddr is a valid address with the prefix "cosmos".
const otherChainAddr = "cosmos1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnrql8a"

func TestProviderConfig(t *testing.T) {
	script := filepath.Join(t.TempDir(), "price.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       string // error substring; "" = valid
	}{
		{"defaults", "", nil, ""},
		{"full", `
home: /tmp/h
from: prov
bidding:
  timeout: 2m
  pricing:
    scale: {denom: uakt, cpu: "0.5", gpu: {a100: "120"}, storage: {beta3: "0.01"}}
  tenants:
    deny: [akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq7cdc78]
  budget: {bids_per_hour: 100, tenant_bids_per_hour: 10}
  limits: {cpu_per_replica: "8", memory_per_replica: 64Gi}
inventory:
  storage: {beta3: 2Ti}
  leased_ips: 4
`, nil, ""},
		{"script", "bidding:\n  pricing:\n    strategy: script\n    script: {path: " + script + ", timeout: 3s}\n", nil, ""},
		{"unknown key", "bidding:\n  pricing:\n    scale:\n      cpuu: \"1\"\n", nil, "line 4: bidding.pricing.scale.cpuu: unknown key"},
		{"bad decimal", "bidding:\n  pricing:\n    scale: {cpu: abc}\n", nil, `line 3: bidding.pricing.scale.cpu: "abc": not a decimal number`},
		{"negative rate", "bidding:\n  pricing:\n    scale: {gpu: {h100: \"-1\"}}\n", nil, "bidding.pricing.scale.gpu.h100"},
		{"strategy", "bidding:\n  pricing:\n    strategy: auction\n", nil, `bidding.pricing.strategy "auction"`},
		{"script path", "bidding:\n  pricing:\n    strategy: script\n    script: {path: /nonexistent}\n", nil, "pricing.script.path"},
		{"timeout", "bidding:\n  timeout: 1s\n", nil, `bidding.timeout 1s: want a duration from 10s`},
		{"deny address", "bidding:\n  tenants: {deny: [bob]}\n", nil, `bidding.tenants.deny[0] "bob"`},
		// Before the chain is known, an address of another chain's prefix is valid.
		{"other prefix", "bidding:\n  tenants: {allow: [" + otherChainAddr + "]}\n", nil, ""},
		{"limit", "bidding:\n  limits: {memory_per_replica: lots}\n", nil, "bidding.limits.memory_per_replica"},
		{"storage", "inventory:\n  storage: {beta3: big}\n", nil, "inventory.storage.beta3"},
		{"storage negative", "inventory:\n  storage: {beta3: -1Ti}\n", nil, `line 2: inventory.storage.beta3: "-1Ti": must not be negative`},
		{"storage empty", "inventory:\n  storage: {beta3: \"\"}\n", nil, "inventory.storage.beta3: empty"},
		{"metallb pool", "inventory:\n  leased_ip_pool: metallb-system/leased-ips\n", nil, ""},
		{"metallb pool name", "inventory:\n  leased_ip_pool: leased-ips\n", nil, `inventory.leased_ip_pool "leased-ips": want NAMESPACE/NAME`},
		{"metallb pool and count", "inventory:\n  leased_ip_pool: metallb-system/p\n  leased_ips: 3\n", nil, "leased_ip_pool and leased_ips both set"},
		{"log level", "log_level: loud\n", nil, `log_level: "loud"`},
		{"env overrides", "home: /from/file\n", map[string]string{"BERTH_HOME": "/from/env", "BERTH_LOG_LEVEL": "verbose"}, `log_level: "verbose"`},
		{"wrong type", "kube_burst: many\n", nil, "line 1: kube_burst"},
		{"bus", "bus: {redis: \"rediss://:s3cret@127.0.0.1:6380/0\", prefix: \"p1.\", ca_file: /etc/ca.pem}\n", nil, ""},
		{"bus url", "bus: {redis: \"http://:s3cret@127.0.0.1:6379\"}\n", nil, "bus.redis: "},
		{"bus ca without tls", "bus: {redis: \"redis://127.0.0.1:6379\", ca_file: /etc/ca.pem}\n", nil, "bus.ca_file: only with a rediss:// URL"},
		{"bus prefix alone", "bus: {prefix: \"p1.\"}\n", nil, "set without bus.redis"},
		{"bus env", "bus: {redis: \"redis://127.0.0.1:1\"}\n", map[string]string{"BERTH_BUS_REDIS": "redis//:s3cret@nowhere"}, "bus.redis: "},
		{"overcommit", "cluster:\n  overcommit: {cpu: 2000}\n", nil, "cluster.overcommit.cpu: 2000%"},
		{"egress", "cluster:\n  egress_deny: [10.0.0.0/33]\n", nil, `cluster.egress_deny[0] "10.0.0.0/33"`},
		{"orphans", "cluster:\n  orphan_interval: 1s\n", nil, `cluster.orphan_interval 1s: want`},
		{"failed pods", "cluster:\n  failed_pod_ttl: -1s\n", nil, `cluster.failed_pod_ttl -1s: want`},
		{"failed pods kept", "cluster:\n  failed_pod_ttl: 0s\n", nil, ""},
		{"unhealthy window", "cluster:\n  unhealthy_close_after: 30m\n", nil, `cluster.unhealthy_close_after 30m0s: want a duration of at least 1h`},
		{"deploy concurrency", "cluster:\n  deploy_concurrency: 0\n", nil, "cluster.deploy_concurrency: 0 is outside 1–1024"},
		{"ingress domain", "cluster: {ingress_domain: ingress.example.com}\n", nil, ""},
		{"bad ingress domain", "cluster: {ingress_domain: \"*.example.com\"}\n", nil, `cluster.ingress_domain "*.example.com"`},
		{"balance", "balance: {withdraw_period: 30m, check_interval: 30s, low_funds_blocks: 100, min_balance: 10000000uakt, earnings_file: /tmp/e.json}\n", nil, ""},
		{"balance period", "balance: {withdraw_period: soon}\n", nil, `line 1: balance.withdraw_period: "soon" is not a duration`},
		{"balance period short", "balance: {withdraw_period: 10s, check_interval: 1m}\n", nil, "withdraw_period 10s: shorter than check_interval"},
		{"balance min", "balance: {min_balance: lots}\n", nil, `line 1: balance.min_balance: coin "lots"`},
		{"deposit", "bidding: {deposit: five}\n", nil, `line 1: bidding.deposit: coin "five"`},
		{"balance blocks", "balance: {low_funds_blocks: -1}\n", nil, "low_funds_blocks"},
		// One document: a second one is refused with the file and its line, never
		// ignored; markers around the one document are fine.
		{"second document", "log_level: warn\n---\nlog_level: debug\n", nil, "provider.yaml: line 3: a second YAML document"},
		{"document markers", "---\nlog_level: warn\n---\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadProviderConfig(testenv.WriteFile(t, "provider.yaml", tc.yaml), func(k string) string { return tc.env[k] })
			if err == nil {
				err = c.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error shows the password: %v", err)
			}
			if tc.name == "other prefix" {
				if _, err := c.Policy(ledger.DefaultAddressPrefix); err == nil || !strings.Contains(err.Error(), `prefix "cosmos"`) {
					t.Fatalf("on an akash chain: %v", err)
				}
			}
			if tc.name == "full" {
				if c.Home != "/tmp/h" || c.Bidding.Pricing.Scale.Storage["ephemeral"].IsZero() || c.Bidding.Pricing.Scale.Storage["beta3"].Short() != "0.01" {
					t.Fatalf("merged config %+v", c)
				}
			}
		})
	}
}

// TestBalanceDefaults: the configuration's defaults are the balance checker's.
func TestBalanceDefaults(t *testing.T) {
	c := DefaultProviderConfig()
	b, err := c.CheckerConfig("akash1provider")
	if err != nil {
		t.Fatal(err)
	}
	d := balance.DefaultConfig()
	if b.WithdrawPeriod != d.WithdrawPeriod || b.CheckInterval != d.CheckInterval || b.LowFundsBlocks != d.LowFundsBlocks {
		t.Fatalf("config defaults %+v, balance defaults %+v", b, d)
	}
	if b.EarningsFile != filepath.Join(c.Home, "provider", "earnings.json") {
		t.Fatalf("earnings file %s", b.EarningsFile)
	}
}

// TestBiddingDocExamples keeps docs/bidding.md, docs/cluster.md and
// docs/operations.md true: every YAML example in them decodes strictly, and the ones
// that do not name a script on this machine validate.
func TestBiddingDocExamples(t *testing.T) {
	var blocks []string
	for _, f := range []string{"../../docs/bidding.md", "../../docs/cluster.md", "../../docs/operations.md"} {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, strings.Split(string(doc), "```yaml\n")[1:]...)
	}
	if len(blocks) < 4 {
		t.Fatalf("found %d YAML examples", len(blocks))
	}
	for i, b := range blocks {
		body, _, _ := strings.Cut(b, "```")
		c, err := LoadProviderConfig(testenv.WriteFile(t, "provider.yaml", body), func(string) string { return "" })
		if err != nil {
			t.Errorf("example %d: %v", i+1, err)
			continue
		}
		if c.Bidding.Pricing.Strategy == "script" {
			continue
		}
		if err := c.Validate(); err != nil {
			t.Errorf("example %d: %v", i+1, err)
		}
	}
}
