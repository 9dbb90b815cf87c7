package hostname

import (
	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/internal/operator"
)

// Metrics are the hostname operator's Prometheus metrics.
type Metrics struct {
	*operator.ReconcileMetrics
	probes *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ReconcileMetrics: operator.NewReconcileMetrics("hostname", "Hostname", "route", "Route (Ingress or HTTPRoute)", "apply, delete"),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_hostname_probes_total", Help: "Health probes of routed hostnames by result (ready, unready).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(append(m.Collectors(), m.probes)...)
	}
	return m
}

func (m *Metrics) observeProbe(ready bool) {
	r := "unready"
	if ready {
		r = "ready"
	}
	m.probes.WithLabelValues(r).Inc()
}
