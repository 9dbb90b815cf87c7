package app

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/bus/redisbus/redisbustest"
	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/gateway/status/topics"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestStatusTopicsOverRedis: with bus.redis, the provider publishes its status topics
// (the seeds' akash.provider.*.status) on the real redis-server for other processes;
// with Redis killed it goes on bidding, counting the events it could not send; when
// Redis is back, the other process's subscribers are cut off (they may have missed
// events) and the provider's next round of its status gives them the whole state again.
func TestStatusTopicsOverRedis(t *testing.T) {
	k := testenv.Cluster(t)
	if err := k.AddNodes(t.Context(), localenv.NodeSpec{Name: "app-bus-1", CPU: "8", Memory: "32Gi"}); err != nil {
		t.Fatal(err)
	}
	r := testenv.Redis(t)
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	// Unchanged sections are sent again every 300 ms here (30 s by default).
	p, _ := startTestProvider(t, l, k, fmt.Sprintf("gateway: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\"}\nbus: {redis: \"redis://%s\"}\n", r.Addr), "",
		func(p *Provider) { p.gw.statusEvery = 300 * time.Millisecond })

	// Another process's view of the four topics.
	other, err := redisbus.Connect(redisbus.Options{URL: "redis://" + r.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	bidengine := redisbustest.Topic[status.BidEngine](t, other, topics.BidEngineStatus)
	cluster := redisbustest.Topic[status.Cluster](t, other, topics.ClusterStatus)
	manifest := redisbustest.Topic[status.Manifest](t, other, topics.ManifestStatus)
	inventory := redisbustest.Topic[status.Inventory](t, other, topics.InventoryStatus)
	bids := redisbustest.Subscribe(t, bidengine) // ~3 events a second until Redis is killed

	c := l.Client(t)
	me, tenant := l.Address(t, "provider"), l.Address(t, "tenant")
	dep := parseWeb(t)
	tb := l.Broadcaster(t, c, "tenant")
	bidOn := func(dseq uint64) {
		t.Helper()
		order := deployWeb(t, tb, dep, tenant, dseq, 5_000_000)
		testenv.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("a bid on deployment %d", dseq), func() error {
			var b ledger.Bid
			return ledger.QueryBid.Into(t.Context(), c, ledger.BidRequest{ID: order.Bid(me)}, &b)
		})
	}

	// The bid shows in the other process: one order decided, one reservation pending.
	bidOn(11)
	redisbustest.Await(t, bids, 30*time.Second, "the bid engine's status with the order", func(s status.BidEngine) bool { return s.Orders == 1 })
	redisbustest.Await(t, redisbustest.Subscribe(t, inventory), 30*time.Second, "the inventory's status with the reservation", func(s status.Inventory) bool { return len(s.Pending) == 1 })
	redisbustest.Await(t, redisbustest.Subscribe(t, cluster), 30*time.Second, "the cluster's status with the reservation", func(s status.Cluster) bool { return len(s.Inventory.Pending) == 1 })
	redisbustest.Await(t, redisbustest.Subscribe(t, manifest), 30*time.Second, "the manifest's status", func(s status.Manifest) bool { return s.Deployments == 0 })

	// Redis gone: the provider bids all the same, and counts what it could not send.
	r.Kill()
	bidOn(12)
	testenv.EventuallyNoError(t, 30*time.Second, "status events counted as dropped", func() error {
		if n := counterSum(t, p.reg, "berth_bus_redis_dropped_total", "topic", topics.BidEngineStatus); n == 0 {
			return errors.New("none yet")
		}
		if up := gauge(t, p.reg, "berth_bus_redis_up"); up != 0 {
			return fmt.Errorf("berth_bus_redis_up = %v", up)
		}
		return nil
	})
	if st, _, _ := p.gw.board.Get(); st.BidEngine.Orders != 2 {
		t.Fatalf("/status bid engine %+v, want 2 orders", st.BidEngine)
	}
	// The other process's subscribers are cut off: events may have been missed.
	for range bids.Events() {
	}
	if !errors.Is(bids.Err(), bus.ErrLost) {
		t.Fatalf("subscription ended with %v, want bus.ErrLost", bids.Err())
	}

	// Back: they subscribe again and have the whole state with the provider's next round.
	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "the state after Redis came back", func() error {
		again, err := bidengine.Subscribe(64, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		select {
		case s, ok := <-again.Events():
			if !ok {
				return fmt.Errorf("cut off: %w", again.Err())
			}
			if s.Orders != 2 {
				return fmt.Errorf("bid engine status %+v, want 2 orders", s)
			}
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("no event in 5 s")
		}
	})
	if n := counterSum(t, p.reg, "berth_bus_redis_sent_total", "topic", topics.BidEngineStatus); n < 2 {
		t.Fatalf("berth_bus_redis_sent_total{topic=%q} = %v", topics.BidEngineStatus, n)
	}
	// (The publisher records its success just after Redis delivered the event.)
	testenv.Eventually(t, 10*time.Second, "berth_bus_redis_up back to 1", func() bool { return gauge(t, p.reg, "berth_bus_redis_up") == 1 })
}

// counterSum adds the values of reg's counter name whose label has value.
func counterSum(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// gauge is the value of reg's unlabelled gauge name.
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
