// Package grafana is berth's Grafana dashboard: its panels' queries over the metrics
// berth exports (a test checks each against the real registries) and the dashboard's
// JSON model, which hack/chartgen writes into the Helm chart.
package grafana

// A panel of the dashboard: a time series of PromQL queries.
type panel struct {
	title, unit, description string
	// queries: legend format → PromQL.
	queries [][2]string
}

// rows are the dashboard's rows of panels, in order.
var rows = []struct {
	title  string
	panels []panel
}{
	{"Bidding", []panel{
		{title: "Decisions by result", unit: "ops", description: "Orders decided (bid, no_bid, failed) and bid outcomes (won, lost, closed), per second.",
			queries: [][2]string{{"{{result}}", `sum by (result) (rate(berth_bid_decisions_total{job=~"$job"}[5m]))`}}},
		{title: "Declined orders by reason", unit: "ops", description: "Why orders got no bid (capacity, price, attributes, inventory_stale…).",
			queries: [][2]string{{"{{reason}}", `sum by (reason) (rate(berth_bid_decisions_total{job=~"$job",result="no_bid"}[5m]))`}}},
		{title: "Win rate", unit: "percentunit", description: "Leases won per bid placed, over the last hour.",
			queries: [][2]string{{"won / bid", `sum(increase(berth_bid_decisions_total{job=~"$job",result="won"}[1h])) / clamp_min(sum(increase(berth_bid_decisions_total{job=~"$job",result="bid"}[1h])), 1)`}}},
		{title: "Bid latency", unit: "s", description: "From the order's block read to the bid handed to the broadcaster.",
			queries: [][2]string{{"p50", `histogram_quantile(0.5, sum by (le) (rate(berth_bid_latency_seconds_bucket{job=~"$job"}[5m])))`},
				{"p99", `histogram_quantile(0.99, sum by (le) (rate(berth_bid_latency_seconds_bucket{job=~"$job"}[5m])))`}}},
	}},
	{"Leases", []panel{
		{title: "Leases", unit: "short", description: "Leases the provider runs, and those whose escrow runs low.",
			queries: [][2]string{{"active", `provider_deployment_manager{job=~"$job"}`}, {"low funds", `berth_balance_leases_low_funds{job=~"$job"}`},
				{"waiting for a manifest", `berth_manifest_waiting_leases{job=~"$job"}`}}},
		{title: "Lease ready time", unit: "s", description: "From a lease's first manifest accepted to all its services ready.",
			queries: [][2]string{{"p50", `histogram_quantile(0.5, sum by (le) (rate(berth_lease_ready_seconds_bucket{job=~"$job"}[30m])))`},
				{"p99", `histogram_quantile(0.99, sum by (le) (rate(berth_lease_ready_seconds_bucket{job=~"$job"}[30m])))`}}},
		{title: "Manifests", unit: "short", description: "Manifests received by outcome, and bids closed because none came (per hour).",
			queries: [][2]string{{"{{outcome}}", `sum by (outcome) (increase(berth_manifests_received_total{job=~"$job"}[1h]))`},
				{"timeouts", `increase(berth_manifest_timeouts_total{job=~"$job"}[1h])`}}},
		{title: "Lease objects repaired", unit: "short", description: "Edits and deletions of lease objects (by anyone) that berth put back, per hour.",
			queries: [][2]string{{"{{kind}} {{change}}", `sum by (kind, change) (increase(berth_lease_object_changes_total{job=~"$job"}[1h]))`}}},
	}},
	{"Earnings", []panel{
		{title: "Earnings", unit: "short", description: "Total paid out to the provider by its leases, by denomination.",
			queries: [][2]string{{"{{denom}}", `berth_balance_earnings{job=~"$job"}`}}},
		{title: "Account balance", unit: "short", description: "The provider account's balance, and whether it is below balance.min_balance.",
			queries: [][2]string{{"{{denom}}", `berth_balance_account{job=~"$job"}`}, {"low (1)", `berth_balance_low{job=~"$job"}`}}},
		{title: "Withdrawals", unit: "short", description: "Withdrawal transactions by outcome, and lease payouts, per hour.",
			queries: [][2]string{{"{{outcome}}", `sum by (outcome) (increase(berth_balance_withdrawals_total{job=~"$job"}[1h]))`},
				{"leases paid out", `increase(berth_balance_withdrawn_leases_total{job=~"$job"}[1h])`}}},
	}},
	{"Inventory", []panel{
		{title: "Free for new leases", unit: "short", description: "What the provider can still offer (after its reservations), on schedulable nodes.",
			queries: [][2]string{{"CPU cores", `berth_inventory_available_cpu_cores{job=~"$job"}`}, {"GPUs", `berth_inventory_available_gpus{job=~"$job"}`}}},
		{title: "Free memory and storage", unit: "bytes", description: "Memory and ephemeral storage left for new leases.",
			queries: [][2]string{{"memory", `berth_inventory_available_memory_bytes{job=~"$job"}`}, {"ephemeral storage", `berth_inventory_available_ephemeral_storage_bytes{job=~"$job"}`}}},
		{title: "Cluster resources (inventory operator)", unit: "short", description: "Allocatable and used on schedulable nodes, all providers together.",
			queries: [][2]string{{"{{resource}} {{state}}", `berth_inventory_operator_resource{job=~"$job",resource=~"cpu|nvidia.com/gpu"}`}}},
		{title: "GPUs by model", unit: "short", description: "GPUs of schedulable nodes by model, offered or not.",
			queries: [][2]string{{"{{vendor}} {{model}} {{ram}} {{interface}} {{state}}", `berth_inventory_operator_gpus{job=~"$job"}`}}},
		{title: "Storage classes", unit: "bytes", description: "Offered storage classes: capacity and used.",
			queries: [][2]string{{"{{class}} {{state}}", `berth_inventory_operator_storage_bytes{job=~"$job"}`}}},
		{title: "Nodes", unit: "short", description: "Nodes that take new pods, and those that do not.",
			queries: [][2]string{{"schedulable={{schedulable}}", `berth_inventory_nodes{job=~"$job"}`}}},
	}},
	{"Gateway and ledger", []panel{
		{title: "Gateway latency", unit: "s", description: "p99 by route (websocket routes: whole sessions).",
			queries: [][2]string{{"{{route}}", `histogram_quantile(0.99, sum by (le, route) (rate(berth_gateway_request_duration_seconds_bucket{job=~"$job"}[5m])))`}}},
		{title: "Gateway errors", unit: "reqps", description: "Requests answered 5xx by route, and 4xx.",
			queries: [][2]string{{"5xx {{route}}", `sum by (route) (rate(berth_gateway_requests_total{job=~"$job",code=~"5.."}[5m]))`},
				{"4xx", `sum(rate(berth_gateway_requests_total{job=~"$job",code=~"4.."}[5m]))`}}},
		{title: "Ledger feed", unit: "short", description: "Blocks the bid engine is behind the ledger node; the node reachable (1).",
			queries: [][2]string{{"blocks behind", `berth_ledger_height{job=~"$job"} - berth_bidengine_height{job=~"$job"}`}, {"reachable", `berth_ledger_reachable{job=~"$job"}`}}},
	}},
	{"Bus", []panel{
		{title: "Bus overflows", unit: "short", description: "Subscribers cut off because they fell behind, per hour, by bus.",
			queries: [][2]string{{"{{bus}}", `sum by (bus) (increase(berth_bus_overflows_total{job=~"$job"}[1h]))`}}},
		{title: "Bus over Redis", unit: "short", description: "Events dropped (Redis gone or slow) per hour by topic and reason, and Redis answering (1).",
			queries: [][2]string{{"dropped {{topic}} {{reason}}", `sum by (topic, reason) (increase(berth_bus_redis_dropped_total{job=~"$job"}[1h]))`},
				{"up {{job}}", `berth_bus_redis_up{job=~"$job"}`}}},
	}},
}

// Dashboard is the Grafana dashboard (JSON model) of berth's metrics, with a job
// variable (the Prometheus jobs that scrape berth's processes).
func Dashboard() map[string]any {
	var panels []any
	id, y := 1, 0
	for _, r := range rows {
		panels = append(panels, map[string]any{"type": "row", "id": id, "title": r.title, "collapsed": false,
			"gridPos": map[string]any{"h": 1, "w": 24, "x": 0, "y": y}, "panels": []any{}})
		id++
		y++
		for i, p := range r.panels {
			var targets []any
			for j, q := range p.queries {
				targets = append(targets, map[string]any{"refId": string(rune('A' + j)), "expr": q[1], "legendFormat": q[0],
					"datasource": map[string]any{"type": "prometheus", "uid": "${datasource}"}})
			}
			panels = append(panels, map[string]any{
				"type": "timeseries", "id": id, "title": p.title, "description": p.description,
				"datasource":  map[string]any{"type": "prometheus", "uid": "${datasource}"},
				"gridPos":     map[string]any{"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i/3)*8},
				"fieldConfig": map[string]any{"defaults": map[string]any{"unit": p.unit}, "overrides": []any{}},
				"options":     map[string]any{"legend": map[string]any{"displayMode": "list", "placement": "bottom"}, "tooltip": map[string]any{"mode": "multi"}},
				"targets":     targets,
			})
			id++
		}
		y += ((len(r.panels) + 2) / 3) * 8
	}
	return map[string]any{
		"uid": "berth", "title": "berth provider", "tags": []string{"berth"}, "schemaVersion": 39, "version": 1,
		"editable": true, "timezone": "browser", "refresh": "30s",
		"time": map[string]any{"from": "now-6h", "to": "now"},
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
			map[string]any{"name": "job", "label": "Job", "type": "query", "datasource": map[string]any{"type": "prometheus", "uid": "${datasource}"},
				"query": "label_values(berth_bidengine_height, job)", "includeAll": true, "multi": true, "allValue": ".+",
				"current": map[string]any{"text": "All", "value": "$__all"}},
		}},
		"panels": panels,
	}
}

// DashboardQueries are every query of the dashboard, for tests.
func DashboardQueries() []string {
	var out []string
	for _, r := range rows {
		for _, p := range r.panels {
			for _, q := range p.queries {
				out = append(out, q[1])
			}
		}
	}
	return out
}
