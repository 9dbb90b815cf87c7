package balance

import (
	"slices"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

func dec(t *testing.T, s string) market.Dec {
	t.Helper()
	d, err := market.ParseDec(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func decCoin(t *testing.T, s string) market.DecCoin {
	t.Helper()
	return market.DecCoin{Amount: dec(t, s), Denom: "uakt"}
}

func TestRemainingBlocks(t *testing.T) {
	pay := func(state, rate string) ledger.Payment {
		return ledger.Payment{State: state, Rate: decCoin(t, rate)}
	}
	tests := []struct {
		name      string
		state     string
		balance   string
		payments  []ledger.Payment
		want      int64
		wantLimit bool
	}{
		{"ours alone", ledger.EscrowOpen, "1000", []ledger.Payment{pay(ledger.PaymentOpen, "10")}, 100, true},
		{"every provider's rate counts", ledger.EscrowOpen, "1000", []ledger.Payment{pay(ledger.PaymentOpen, "10"), pay(ledger.PaymentOpen, "30")}, 25, true},
		{"closed payments do not", ledger.EscrowOpen, "1000", []ledger.Payment{pay(ledger.PaymentOpen, "10"), pay(ledger.PaymentClosed, "30")}, 100, true},
		{"rounds down", ledger.EscrowOpen, "999.9", []ledger.Payment{pay(ledger.PaymentOpen, "10")}, 99, true},
		{"fractional rates", ledger.EscrowOpen, "1", []ledger.Payment{pay(ledger.PaymentOpen, "0.001")}, 1000, true},
		{"nothing paid from it", ledger.EscrowOpen, "1000", nil, 0, false},
		{"overdrawn", ledger.EscrowOverdrawn, "0.5", []ledger.Payment{pay(ledger.PaymentOverdrawn, "10")}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ledger.DeploymentResponse{Escrow: ledger.EscrowAccount{State: tt.state, Balance: decCoin(t, tt.balance)}, Payments: tt.payments}
			got, limited := remainingBlocks(&d)
			if got != tt.want || limited != tt.wantLimit {
				t.Fatalf("remainingBlocks = %d, %v; want %d, %v", got, limited, tt.want, tt.wantLimit)
			}
		})
	}
}

func TestPeriodDue(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		period   time.Duration
		lastFull time.Time
		now      time.Time
		want     bool
	}{
		{"off", 0, time.Time{}, t0, false},
		{"never withdrawn", time.Hour, time.Time{}, t0, true},
		{"too soon", time.Hour, t0, t0.Add(59 * time.Minute), false},
		{"a check a little early", time.Hour, t0, t0.Add(time.Hour - time.Second), true},
		{"due", time.Hour, t0, t0.Add(time.Hour), true},
		{"overdue", time.Hour, t0, t0.Add(5 * time.Hour), true},
		{"clock set back", time.Hour, t0, t0.Add(-5 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := periodDue(tt.period, time.Minute, tt.lastFull, tt.now); got != tt.want {
				t.Fatalf("periodDue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMakePlan(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	listed := func(id market.LeaseID, state, balance string) ledger.LeaseResponse {
		return ledger.LeaseResponse{
			Lease:   ledger.Lease{ID: id, State: state},
			Payment: ledger.Payment{ID: id, Balance: decCoin(t, balance), Withdrawn: decCoin(t, "7"), Rate: decCoin(t, "1")},
		}
	}
	v := &view{
		height: 100,
		leases: []ledger.LeaseResponse{
			listed(lease(1, 1), ledger.LeaseActive, "5.5"),
			listed(lease(1, 2), ledger.LeaseActive, "0.9"), // less than a unit: never withdrawn
			listed(lease(2, 1), ledger.LeaseActive, "3"),   // deployment 2 runs low
			listed(lease(3, 1), ledger.LeaseClosed, "0"),   // from a full listing
		},
		remaining: map[market.DeploymentID]int64{lease(1, 1).Deployment(): 10_000, lease(2, 1).Deployment(): 599},
		balances:  []market.Coin{uakt(1_000)},
	}
	cfg := DefaultConfig()
	cfg.MinBalance = uakt(500)
	ids := func(cs []candidate) []market.LeaseID {
		var out []market.LeaseID
		for _, c := range cs {
			out = append(out, c.id)
		}
		return out
	}
	tests := []struct {
		name       string
		change     func(*planInput)
		wantReason string
		want       []market.LeaseID
		wantLowBal bool
	}{
		{"low funds only", func(*planInput) {}, ReasonLowFunds, []market.LeaseID{lease(2, 1)}, false},
		{"threshold off", func(in *planInput) { in.cfg.LowFundsBlocks = 0 }, "", nil, false},
		{"threshold lower", func(in *planInput) { in.cfg.LowFundsBlocks = 599 }, "", nil, false},
		{"period", func(in *planInput) { in.lastFull = now.Add(-2 * time.Hour) }, ReasonPeriod, []market.LeaseID{lease(1, 1), lease(2, 1)}, false},
		{"first period", func(in *planInput) { in.lastFull = time.Time{} }, ReasonPeriod, []market.LeaseID{lease(1, 1), lease(2, 1)}, false},
		{"period off", func(in *planInput) { in.lastFull, in.cfg.WithdrawPeriod = time.Time{}, 0 }, ReasonLowFunds, []market.LeaseID{lease(2, 1)}, false},
		{"low balance", func(in *planInput) { in.cfg.MinBalance = uakt(1_001) }, ReasonLowBalance, []market.LeaseID{lease(1, 1), lease(2, 1)}, true},
		{"balance in another denomination", func(in *planInput) { in.cfg.MinBalance = market.Coin{Amount: 1, Denom: "ufoo"} }, ReasonLowBalance, []market.LeaseID{lease(1, 1), lease(2, 1)}, true},
		{"min balance off", func(in *planInput) { in.cfg.MinBalance = market.Coin{Denom: "ufoo"} }, ReasonLowFunds, []market.LeaseID{lease(2, 1)}, false},
		{"manual", func(in *planInput) { in.manual = true }, ReasonManual, []market.LeaseID{lease(1, 1), lease(2, 1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := planInput{now: now, lastFull: now.Add(-time.Minute), cfg: cfg}
			tt.change(&in)
			p := makePlan(v, in)
			if p.reason != tt.wantReason || !slices.Equal(ids(p.withdraw), tt.want) || p.lowBalance != tt.wantLowBal {
				t.Fatalf("plan: reason %q, withdraw %v, low balance %v; want %q, %v, %v", p.reason, ids(p.withdraw), p.lowBalance, tt.wantReason, tt.want, tt.wantLowBal)
			}
		})
	}
	p := makePlan(v, planInput{now: now, lastFull: now, cfg: cfg})
	if !p.lowFunds[lease(2, 1).Deployment()] || len(p.lowFunds) != 1 || !slices.Equal(p.lowLeases, []market.LeaseID{lease(2, 1)}) {
		t.Fatalf("low funds: %v, leases %v", p.lowFunds, p.lowLeases)
	}
	if c := p.withdraw[0]; c.accrued != 3 || c.withdrawn != uakt(7) {
		t.Fatalf("candidate %+v", c)
	}
}

func TestBatchSize(t *testing.T) {
	var cands []candidate
	for i := range 300 {
		cands = append(cands, candidate{id: lease(uint64(i+1), 1)})
	}
	p := ledger.DefaultParams()
	if got := batchSize(p, cands); got != 100 {
		t.Fatalf("default params: %d a transaction, want max_msgs_per_tx 100", got)
	}
	p.MaxTxBytes = 4096 // about 2 000 bytes for messages of about 150
	got := batchSize(p, cands)
	if got < 5 || got > 20 {
		t.Fatalf("max_tx_bytes 4096: %d a transaction", got)
	}
	p.MaxTxBytes = 1024 // no room beyond the overhead: one at a time still
	if got := batchSize(p, cands); got != 1 {
		t.Fatalf("max_tx_bytes 1024: %d a transaction, want 1", got)
	}
}
