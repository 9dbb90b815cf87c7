package balance

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a withdrawal transaction (label outcome).
const (
	outcomeOK    = "ok"
	outcomeError = "error"
)

type metrics struct {
	withdrawals     *prometheus.CounterVec
	withdrawnLeases prometheus.Counter
	earnings        *prometheus.GaugeVec
	account         *prometheus.GaugeVec
	leases          prometheus.Gauge
	lowFunds        prometheus.Gauge
	lastCheck       prometheus.Gauge
}

// newMetrics builds the checker's metrics and registers them with reg (nil: not
// registered).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		withdrawals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_balance_withdrawals_total",
			Help: "Withdrawal transactions sent, by outcome (ok, error).",
		}, []string{"outcome"}),
		withdrawnLeases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_balance_withdrawn_leases_total",
			Help: "Lease withdrawals (MsgWithdrawLease) in successful transactions.",
		}),
		earnings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_balance_earnings",
			Help: "Total the ledger has paid out for our leases, as recorded, by denomination.",
		}, []string{"denom"}),
		account: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_balance_account",
			Help: "The provider account's balance at the last check, by denomination.",
		}, []string{"denom"}),
		leases: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_balance_leases",
			Help: "Our active leases at the last check.",
		}),
		lowFunds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_balance_leases_low_funds",
			Help: "Our active leases whose deployment's escrow pays for fewer than low_funds_blocks blocks, at the last check.",
		}),
		lastCheck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_balance_last_check_timestamp_seconds",
			Help: "Unix time of the last check that read the ledger successfully.",
		}),
	}
	m.withdrawals.WithLabelValues(outcomeOK)
	m.withdrawals.WithLabelValues(outcomeError)
	if reg != nil {
		for _, c := range []prometheus.Collector{m.withdrawals, m.withdrawnLeases, m.earnings, m.account, m.leases, m.lowFunds, m.lastCheck} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("balance: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
