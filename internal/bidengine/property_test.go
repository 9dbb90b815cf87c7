package bidengine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// TestEngineProperties drives the engine with random orders and ledger events and
// checks after every step: every reservation belongs to an order the engine tracks
// (an open bid or an active lease) and every tracked order holds one; the capacity
// bookkeeping adds up and no node is overcommitted; no order is ever bid on twice;
// when everything has closed, nothing is reserved.
func TestEngineProperties(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			h := newHarness(t, func(c *EngineConfig) { c.BidsPerHour = 50 })
			bids := map[market.OrderID]int{}
			var known []ledger.Order
			for step := range 400 {
				h.now = h.now.Add(time.Duration(rng.IntN(20)) * time.Second)
				switch op := rng.IntN(12); {
				case op < 4 || len(known) == 0:
					units := []unitSpec{{Count: uint32(1 + rng.IntN(4)), CPU: uint64(100 * (1 + rng.IntN(30))), Mem: uint64(1+rng.IntN(8)) * gib / 2}}
					if rng.IntN(4) == 0 {
						units[0].GPUs, units[0].GPUAttrs = uint64(1+rng.IntN(3)), market.Attributes{{Key: "vendor/nvidia/model/a100", Value: "true"}}
					}
					o := openOrder(uint64(len(known)+1), groupSpec(nil, units...))
					known = append(known, o)
					if m := h.decide(o); m != nil {
						bids[o.ID]++
					}
				case op < 5:
					// The same order again (replayed event): never a second bid.
					o := known[rng.IntN(len(known))]
					if m := h.decide(o); m != nil {
						bids[o.ID]++
					}
				case op < 7:
					o := known[rng.IntN(len(known))]
					var err error
					if rng.IntN(5) == 0 {
						err = ledger.ErrInvalidState
					}
					h.e.BidSent(o.ID, err, h.now)
				case op < 8:
					o := known[rng.IntN(len(known))]
					winner := us
					if rng.IntN(2) == 0 {
						winner = rival
					}
					acts := h.apply(event(ledger.EventLeaseCreated, o.ID, winner))
					for _, a := range acts {
						if a.Kind == ActAdopt {
							if _, err := h.e.Adopt(ledger.Lease{ID: o.ID.Bid(us).Lease()}, o.Spec, false, h.now); err != nil {
								t.Fatal(err)
							}
						}
					}
				case op < 9:
					o := known[rng.IntN(len(known))]
					h.apply(event(ledger.EventLeaseClosed, o.ID, us))
				case op < 10:
					o := known[rng.IntN(len(known))]
					h.apply(event(ledger.EventBidClosed, o.ID, us, ledger.AttrState, []string{ledger.BidLost, ledger.BidClosed}[rng.IntN(2)]))
				case op < 11:
					o := known[rng.IntN(len(known))]
					ev := event([]string{ledger.EventGroupClosed, ledger.EventDeploymentClosed, ledger.EventOrderClosed}[rng.IntN(3)], o.ID, "")
					if ev.Type != ledger.EventOrderClosed {
						delete(ev.Attrs, ledger.AttrOSeq)
					}
					if ev.Type == ledger.EventDeploymentClosed {
						delete(ev.Attrs, ledger.AttrGSeq)
					}
					h.apply(ev)
				default:
					h.e.Tick(h.now)
				}
				check(t, h, step, bids)
			}
			// Everything ends: every lease and bid closes.
			for _, o := range known {
				h.apply(event(ledger.EventLeaseClosed, o.ID, us), event(ledger.EventBidClosed, o.ID, us, ledger.AttrState, ledger.BidClosed))
				h.e.BidSent(o.ID, ledger.ErrInvalidState, h.now)
			}
			if r := h.cap.Reservations(); len(r) != 0 {
				t.Fatalf("%d reservations left after everything closed", len(r))
			}
		})
	}
}

func check(t *testing.T, h *harness, step int, bids map[market.OrderID]int) {
	t.Helper()
	if err := h.cap.Check(); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if over := h.cap.Overcommitted(); len(over) > 0 {
		t.Fatalf("step %d: overcommitted nodes %v", step, over)
	}
	for o, n := range bids {
		if n > 1 {
			t.Fatalf("step %d: %d bids on order %s", step, n, o)
		}
	}
	h.e.mu.Lock()
	tracked := make([]market.OrderID, 0, len(h.e.orders))
	for o := range h.e.orders {
		tracked = append(tracked, o)
	}
	h.e.mu.Unlock()
	reserved := h.cap.Reservations()
	slices.SortFunc(tracked, compareOrders)
	if !slices.Equal(tracked, reserved) {
		t.Fatalf("step %d: tracked %v, reserved %v", step, tracked, reserved)
	}
}

func compareOrders(a, b market.OrderID) int {
	switch {
	case a.String() < b.String():
		return -1
	case a.String() > b.String():
		return 1
	}
	return 0
}
