package app

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

// leaseReadyClock measures berth_lease_ready_seconds: from a lease's first manifest
// accepted to the first status saying every service of it is ready — what a tenant
// waits for after sending a manifest. Once per lease; leases rebuilt at start (their
// manifest came before) are not measured.
type leaseReadyClock struct {
	hist prometheus.Histogram
	// first is when a lease's first manifest was accepted (the manager's record).
	first func(market.LeaseID) (time.Time, bool)

	mu   sync.Mutex
	done map[market.LeaseID]bool // measured (forgotten when the lease goes)
}

func newLeaseReadyClock(first func(market.LeaseID) (time.Time, bool)) *leaseReadyClock {
	return &leaseReadyClock{first: first, done: map[market.LeaseID]bool{},
		hist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_lease_ready_seconds",
			Help:    "Time from a lease's first manifest accepted to all its services ready (once per lease).",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200},
		})}
}

// observe takes a lease's status from the monitor.
func (c *leaseReadyClock) observe(s deploy.LeaseStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(s.Services) == 0 {
		delete(c.done, s.Lease) // gone (or not deployed yet)
		return
	}
	if !s.Ready || c.done[s.Lease] {
		return
	}
	if at, ok := c.first(s.Lease); ok {
		c.hist.Observe(time.Since(at).Seconds())
		c.done[s.Lease] = true
	}
}

// registerProviderMetrics registers the provider's own metrics beyond its components':
// Akash's names (seed metrics), what the inventory has left, the process's (go_*,
// process_*), the ledger node's height and reachability, whether the balance is below
// its reserve, and the lease-ready clock.
func (p *Provider) registerProviderMetrics() error {
	for _, c := range []prometheus.Collector{
		newSeedMetrics(p), newInventoryMetrics(p.cluster.capacity),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_ledger_height",
			Help: "The ledger node's latest block height, checked every 5 s (berth_bidengine_height behind it: the bid engine lags)."},
			func() float64 { return float64(p.ledger.Latest()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_ledger_reachable",
			Help: "1 while the ledger node answers, 0 since a check failed."},
			func() float64 { return boolGauge(p.ledger.State().Reachable) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_balance_low",
			Help: "1 while the provider's balance is below balance.min_balance (the bid-deposit reserve), as of the last check."},
			func() float64 { return boolGauge(p.balance.Status().Low) }),
		p.readyClock.hist,
	} {
		if err := p.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
