package grafana

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/chartspec/charttest"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// promtool is Prometheus's promtool ($BERTH_PROMTOOL: hack/tool.sh promtool).
func promtool(t *testing.T) string {
	t.Helper()
	return testenv.Tool(t, "BERTH_PROMTOOL", "promtool", "set BERTH_PROMTOOL=$(hack/tool.sh promtool) (make test does)")
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
}

// TestDashboardQueriesParse: every query of the dashboard is valid PromQL (checked by
// promtool as recording rules, with the job variable at its "All" value).
func TestDashboardQueriesParse(t *testing.T) {
	var rules []any
	for i, q := range DashboardQueries() {
		rules = append(rules, map[string]any{"record": fmt.Sprintf("berth:dashboard:%d", i), "expr": strings.ReplaceAll(q, "$job", ".+")})
	}
	file := writeYAML(t, "dashboard-rules.yaml", map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	runPromtool(t, "check", "rules", file)
}

// TestAlertRules: the chart's PrometheusRule is valid (promtool check rules) and its
// alerts fire when they should and not before (promtool test rules, on series made for
// each case).
func TestAlertRules(t *testing.T) {
	out, err := charttest.Render(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	var spec any
	for doc := range strings.SplitSeq(string(out), "\n---") {
		var pr struct {
			Kind string `json:"kind"`
			Spec any    `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &pr) == nil && pr.Kind == "PrometheusRule" {
			spec = pr.Spec
		}
	}
	if spec == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	rules := writeYAML(t, "rules.yaml", spec)
	runPromtool(t, "check", "rules", rules)
	// The alerts' annotations, expected as they are (none of those tested uses $value).
	annotations := map[string]any{}
	b, _ := yaml.Marshal(spec)
	var parsed struct {
		Groups []struct {
			Rules []struct {
				Alert       string         `json:"alert"`
				Annotations map[string]any `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &parsed); err != nil {
		t.Fatal(err)
	}
	for _, g := range parsed.Groups {
		for _, r := range g.Rules {
			annotations[r.Alert] = r.Annotations
		}
	}

	labels := `{job="berth", namespace="berth-system"}`
	alert := func(name string, labels map[string]any) map[string]any {
		l := map[string]any{"severity": "warning"}
		for k, v := range labels {
			l[k] = v
		}
		return map[string]any{"exp_labels": l, "exp_annotations": annotations[name]}
	}
	tests := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []any{
			map[string]any{ // low balance: fires after 5 minutes, not before
				"interval": "1m",
				"input_series": []any{
					map[string]any{"series": "berth_balance_low" + labels, "values": "0 0 1x10"},
				},
				"alert_rule_test": []any{
					map[string]any{"eval_time": "3m", "alertname": "BerthBalanceLow", "exp_alerts": []any{}},
					map[string]any{"eval_time": "9m", "alertname": "BerthBalanceLow", "exp_alerts": []any{
						alert("BerthBalanceLow", map[string]any{"severity": "critical", "job": "berth", "namespace": "berth-system"})}},
				},
			},
			map[string]any{ // the bid engine 40 blocks behind for 10 minutes
				"interval": "1m",
				"input_series": []any{
					map[string]any{"series": "berth_ledger_height" + labels, "values": "100+60x20"},
					map[string]any{"series": "berth_bidengine_height" + labels, "values": "100+60x2 220+58x18"},
				},
				"alert_rule_test": []any{
					map[string]any{"eval_time": "5m", "alertname": "BerthLedgerFeedBehind", "exp_alerts": []any{}},
					map[string]any{"eval_time": "20m", "alertname": "BerthLedgerFeedBehind", "exp_alerts": []any{
						alert("BerthLedgerFeedBehind", map[string]any{"severity": "critical", "job": "berth", "namespace": "berth-system"})}},
				},
			},
			map[string]any{ // orders keep coming and CPU is free; bids stop at 25m: fires once 30m pass without one (and 5m more)
				"interval": "1m",
				"input_series": []any{
					map[string]any{"series": `berth_bid_decisions_total{job="berth",namespace="berth-system",result="no_bid",reason="price"}`, "values": "0+1x90"},
					map[string]any{"series": `berth_bid_decisions_total{job="berth",namespace="berth-system",result="bid",reason="priced"}`, "values": "0+1x25 25x65"},
					map[string]any{"series": "berth_inventory_available_cpu_cores" + labels, "values": "32x90"},
					// Another provider, bidding all along: never.
					map[string]any{"series": `berth_bid_decisions_total{job="other",namespace="berth-system",result="bid",reason="priced"}`, "values": "0+1x90"},
					map[string]any{"series": `berth_bid_decisions_total{job="other",namespace="berth-system",result="no_bid",reason="price"}`, "values": "0+1x90"},
					map[string]any{"series": `berth_inventory_available_cpu_cores{job="other",namespace="berth-system"}`, "values": "32x90"},
				},
				"alert_rule_test": []any{
					map[string]any{"eval_time": "40m", "alertname": "BerthNoBids", "exp_alerts": []any{}},
					map[string]any{"eval_time": "70m", "alertname": "BerthNoBids", "exp_alerts": []any{
						alert("BerthNoBids", map[string]any{"job": "berth", "namespace": "berth-system"})}},
				},
			},
			map[string]any{ // Redis down 5 minutes; events dropped
				"interval": "1m",
				"input_series": []any{
					map[string]any{"series": "berth_bus_redis_up" + labels, "values": "1 1 0x10"},
					map[string]any{"series": `berth_bus_redis_dropped_total{job="berth",namespace="berth-system",topic="akash.provider.bidengine.status",reason="redis_error"}`, "values": "0 0 0+3x10"},
				},
				"alert_rule_test": []any{
					map[string]any{"eval_time": "9m", "alertname": "BerthBusRedisDown", "exp_alerts": []any{
						alert("BerthBusRedisDown", map[string]any{"job": "berth", "namespace": "berth-system"})}},
					map[string]any{"eval_time": "9m", "alertname": "BerthBusOverflow", "exp_alerts": []any{
						alert("BerthBusOverflow", map[string]any{"job": "berth", "namespace": "berth-system"})}},
				},
			},
		},
	}
	runPromtool(t, "test", "rules", writeYAML(t, "tests.yaml", tests))
}

func writeYAML(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
