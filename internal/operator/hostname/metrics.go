package hostname

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the hostname operator's Prometheus metrics.
type Metrics struct {
	syncs    *prometheus.CounterVec
	duration prometheus.Histogram
	writes   *prometheus.CounterVec
	probes   *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_hostname_syncs_total", Help: "Hostname reconciles by result (ok, error).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_hostname_sync_duration_seconds", Help: "How long one hostname's reconcile took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_hostname_route_writes_total", Help: "Route (Ingress or HTTPRoute) writes by operation (apply, delete) and result (ok, error).",
		}, []string{"op", "result"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_hostname_probes_total", Help: "Health probes of routed hostnames by result (ready, unready).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.syncs, m.duration, m.writes, m.probes)
	}
	return m
}

type metrics struct{ *Metrics }

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

func (m *metrics) observeSync(err error, d time.Duration) {
	m.syncs.WithLabelValues(result(err)).Inc()
	m.duration.Observe(d.Seconds())
}

func (m *metrics) observeWrite(op string, err error) { m.writes.WithLabelValues(op, result(err)).Inc() }

func (m *metrics) observeProbe(ready bool) {
	r := "unready"
	if ready {
		r = "ready"
	}
	m.probes.WithLabelValues(r).Inc()
}
