package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

// seedMetrics are the Akash provider's metric names, which providers' dashboards
// know, read from the components when scraped.
type seedMetrics struct {
	p                                       *Provider
	orderManager, deploymentManager, manMgr *prometheus.Desc
	orderHandler                            *prometheus.Desc
}

func newSeedMetrics(p *Provider) *seedMetrics {
	return &seedMetrics{
		p: p,
		orderManager: prometheus.NewDesc("provider_order_manager",
			"Orders the bid engine handles now: a bid being priced, sent or open, or a lease.", nil, nil),
		orderHandler: prometheus.NewDesc("provider_order_handler_total",
			"Orders the bid engine took on (action=start) and let go (action=stop).", []string{"action"}, nil),
		deploymentManager: prometheus.NewDesc("provider_deployment_manager",
			"Leases the deployment manager handles: running, being applied, or being torn down.", nil, nil),
		manMgr: prometheus.NewDesc("provider_manifest_manager",
			"Deployments with a lease here that runs or awaits a manifest.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *seedMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.orderManager
	ch <- m.orderHandler
	ch <- m.deploymentManager
	ch <- m.manMgr
}

// Collect implements prometheus.Collector.
func (m *seedMetrics) Collect(ch chan<- prometheus.Metric) {
	active, started, stopped := m.p.engine.Handlers()
	ch <- prometheus.MustNewConstMetric(m.orderManager, prometheus.GaugeValue, float64(active))
	ch <- prometheus.MustNewConstMetric(m.orderHandler, prometheus.CounterValue, float64(started), "start")
	ch <- prometheus.MustNewConstMetric(m.orderHandler, prometheus.CounterValue, float64(stopped), "stop")
	states := m.p.cluster.manager.States()
	ch <- prometheus.MustNewConstMetric(m.deploymentManager, prometheus.GaugeValue, float64(len(states)))
	deployments := map[market.DeploymentID]bool{}
	for _, s := range states {
		if s.Phase != deploy.PhaseClosing {
			deployments[s.Lease.Deployment()] = true
		}
	}
	for _, id := range m.p.gw.manifests.WaitingLeases() {
		deployments[id.Deployment()] = true
	}
	ch <- prometheus.MustNewConstMetric(m.manMgr, prometheus.GaugeValue, float64(len(deployments)))
}
