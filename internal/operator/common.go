package operator

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/internal/ownership"
)

// CheckCommon checks the settings every operator's file has: whose resources it
// serves, its leader election, its listen address, its workers and its resync period;
// the error names the key.
func CheckCommon(owner ownership.Owner, le LeaderElection, listen string, workers int, resync time.Duration) error {
	if err := owner.Validate(); err != nil {
		return fmt.Errorf("provider/chain_id: %w", err)
	}
	return CheckRuntime(le, listen, workers, resync)
}

// Prepare is how every operator's New begins: cfg checked, a nil logger replaced by
// one that discards, nil metrics made with newMetrics(nil) (unregistered).
func Prepare[M any](cfg interface{ Validate() error }, m *M, log *slog.Logger, newMetrics func(prometheus.Registerer) *M) (*M, *slog.Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = newMetrics(nil)
	}
	return m, log, nil
}

// CheckRuntime checks the settings of how an operator runs: its leader election, its
// listen address, its workers and its resync period; the error names the key.
func CheckRuntime(le LeaderElection, listen string, workers int, resync time.Duration) error {
	if err := le.WithDefaults("x").Validate(); err != nil {
		return err
	}
	if listen != "" {
		if _, _, err := net.SplitHostPort(listen); err != nil {
			return fmt.Errorf("listen %q: %w", listen, err)
		}
	}
	if workers < 1 || workers > 64 {
		return fmt.Errorf("workers %d: want 1 to 64", workers)
	}
	if resync < time.Minute {
		return fmt.Errorf("resync %s: want at least 1m", resync)
	}
	return nil
}

// ReconcileMetrics are what every operator counts: its reconciles, their duration, and
// its writes of the objects it owns.
type ReconcileMetrics struct {
	syncs    *prometheus.CounterVec
	duration prometheus.Histogram
	writes   *prometheus.CounterVec
}

// NewReconcileMetrics names the metrics berth_<prefix>_syncs_total,
// berth_<prefix>_sync_duration_seconds and berth_<prefix>_<written>_writes_total; item
// is what one reconcile is of, objects what is written and ops the write operations
// (for the help texts).
func NewReconcileMetrics(prefix, item, written, objects, ops string) *ReconcileMetrics {
	return &ReconcileMetrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_" + prefix + "_syncs_total", Help: item + " reconciles by result (ok, error).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_" + prefix + "_sync_duration_seconds", Help: "How long one " + strings.ToLower(item[:1]) + item[1:] + "'s reconcile took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_" + prefix + "_" + written + "_writes_total", Help: objects + " writes by operation (" + ops + ") and result (ok, error).",
		}, []string{"op", "result"}),
	}
}

// Collectors are the metrics to register.
func (m *ReconcileMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.syncs, m.duration, m.writes}
}

// Result is a metric label of an outcome: ok or error.
func Result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// ObserveSync counts one reconcile.
func (m *ReconcileMetrics) ObserveSync(err error, d time.Duration) {
	m.syncs.WithLabelValues(Result(err)).Inc()
	m.duration.Observe(d.Seconds())
}

// ObserveWrite counts one write (apply, delete).
func (m *ReconcileMetrics) ObserveWrite(op string, err error) {
	m.writes.WithLabelValues(op, Result(err)).Inc()
}
