package app

import (
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/chartspec/charttest"
	"berth.dev/berth/internal/grafana"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
	"berth.dev/berth/internal/testenv"
)

// metricNames are the names of every metric reg describes (histograms also as their
// _bucket, _sum and _count series).
func metricNames(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1024)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("a metric description without a name: %s", d)
		}
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[m[1]+suffix] = true
		}
	}
	return out
}

// TestDashboardAndAlertsUseExportedMetrics: every metric the Grafana dashboard and the
// chart's alert rules query is one the provider or an operator exports — read from
// their real registries, the provider's with a gateway and the bus over Redis.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	k := testenv.Cluster(t)
	r := testenv.Redis(t)
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	p, _ := startTestProvider(t, l, k, fmt.Sprintf("gateway: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\"}\nbus: {redis: \"redis://%s\"}\n", r.Addr), "", nil)
	exported := metricNames(t, p.reg)
	kubeconfig := k.Kubeconfig(t)
	log := slog.New(slog.DiscardHandler)
	const provider, chainID = "akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq7cdc78", "berth-test"
	hc := hostname.DefaultConfig()
	hc.Provider, hc.ChainID, hc.Kubeconfig, hc.Listen = provider, chainID, kubeconfig, "127.0.0.1:0"
	host, err := NewHostnameOperator(hc, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ic := ip.DefaultConfig()
	ic.Provider, ic.ChainID, ic.Kubeconfig, ic.Listen = provider, chainID, kubeconfig, "127.0.0.1:0"
	ic.Pool = "dashboard"
	ipOp, err := NewIPOperator(ic, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	// (Its bus metrics are the provider's, by name.)
	vc := inventoryop.DefaultConfig()
	vc.Name, vc.Kubeconfig, vc.Listen = "dashboard", kubeconfig, "127.0.0.1:0"
	inv, _, err := NewInventoryOperator(vc, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*Operator{host, ipOp, inv} {
		for name := range metricNames(t, o.opts.Registry) {
			exported[name] = true
		}
	}

	rules, err := charttest.Render(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for doc := range strings.SplitSeq(string(rules), "\n---") {
		var pr struct {
			Kind string `json:"kind"`
			Spec struct {
				Groups []struct {
					Rules []struct {
						Expr string `json:"expr"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &pr); err != nil || pr.Kind != "PrometheusRule" {
			continue
		}
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				exprs = append(exprs, r.Expr)
			}
		}
	}
	if len(exprs) < 9 {
		t.Fatalf("%d alert expressions rendered", len(exprs))
	}
	name := regexp.MustCompile(`\b(?:berth|provider)_[a-z0-9_]+\b`)
	used := map[string][]string{}
	for what, queries := range map[string][]string{"dashboard": grafana.DashboardQueries(), "alert rules": exprs} {
		for _, q := range queries {
			for _, m := range name.FindAllString(q, -1) {
				if !slices.Contains(used[m], what) {
					used[m] = append(used[m], what)
				}
			}
		}
	}
	if len(used) < 30 {
		t.Fatalf("only %d metrics used: %v", len(used), used)
	}
	for m, where := range used {
		if !exported[m] {
			t.Errorf("%s (in the %s) is not exported by berth", m, strings.Join(where, " and "))
		}
	}
}
