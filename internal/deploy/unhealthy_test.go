package deploy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"berth.dev/berth/api/market/v1"
)

func TestUnhealthy(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	u := NewUnhealthy(2 * time.Hour)
	u.Observe(lease(1), false, t0)
	u.Observe(lease(2), false, t0.Add(30*time.Minute))
	u.Observe(lease(1), false, t0.Add(time.Hour)) // still the same stretch
	if due := u.Due(t0.Add(119 * time.Minute)); len(due) != 0 {
		t.Fatalf("due too early: %v", due)
	}
	if due := u.Due(t0.Add(2 * time.Hour)); len(due) != 1 || due[0] != lease(1) {
		t.Fatalf("due %v", due)
	}
	// Ready again: the count starts over.
	u.Observe(lease(1), true, t0.Add(2*time.Hour))
	u.Observe(lease(1), false, t0.Add(3*time.Hour))
	if due := u.Due(t0.Add(4 * time.Hour)); len(due) != 1 || due[0] != lease(2) {
		t.Fatalf("due %v", due)
	}
	// An outage does not count.
	u.Pause(3 * time.Hour)
	if due := u.Due(t0.Add(4 * time.Hour)); len(due) != 0 {
		t.Fatalf("due after an outage %v", due)
	}
	u.Forget(lease(2))
	if due := u.Due(t0.Add(100 * time.Hour)); len(due) != 1 || due[0] != lease(1) {
		t.Fatalf("due %v", due)
	}
	if due := NewUnhealthy(0).Due(t0); due != nil {
		t.Fatal("the policy is off by default")
	}
}

// TestUnhealthyCloser: the leases due are closed, oldest first, and forgotten; one
// the ledger does not show active is not closed, one whose close failed is tried again;
// while the cluster does not answer nothing is closed and the windows pause.
func TestUnhealthyCloser(t *testing.T) {
	now := time.Now()
	u := NewUnhealthy(time.Hour)
	u.Observe(lease(1), false, now.Add(-3*time.Hour))
	u.Observe(lease(2), false, now.Add(-2*time.Hour))
	u.Observe(lease(3), false, now.Add(-90*time.Minute))
	u.Observe(lease(4), false, now.Add(-time.Minute)) // not due
	var closed []market.LeaseID
	var unreachable error
	failClose := map[market.LeaseID]bool{lease(3): true}
	c := &UnhealthyCloser{Tracker: u, Every: time.Hour, Log: slog.New(slog.DiscardHandler),
		Reachable: func(context.Context) error { return unreachable },
		Active:    func(_ context.Context, id market.LeaseID) (bool, error) { return id != lease(2), nil },
		Close: func(_ context.Context, id market.LeaseID) error {
			if failClose[id] {
				return errors.New("broadcast failed")
			}
			closed = append(closed, id)
			return nil
		}}
	unreachable = errors.New("the API server does not answer")
	c.CloseDue(t.Context())
	if len(closed) != 0 {
		t.Fatalf("closed %v while the cluster did not answer", closed)
	}
	// The outage paused the windows by Every: lease 3 (90 min) is no longer due.
	if due := u.Due(time.Now()); !slices.Equal(due, []market.LeaseID{lease(1), lease(2)}) {
		t.Fatalf("due after a paused tick: %v", due)
	}
	unreachable = nil
	c.Every = 0
	u.Pause(-time.Hour) // undo the pause, so that lease 3 is due again
	c.CloseDue(t.Context())
	if !slices.Equal(closed, []market.LeaseID{lease(1)}) {
		t.Fatalf("closed %v, want lease 1 only (2 is not active, 3 failed)", closed)
	}
	if due := u.Due(time.Now()); !slices.Equal(due, []market.LeaseID{lease(2), lease(3)}) {
		t.Fatalf("still due %v: want the inactive and the failed ones, not the closed one", due)
	}
	delete(failClose, lease(3))
	c.CloseDue(t.Context())
	if !slices.Equal(closed, []market.LeaseID{lease(1), lease(3)}) {
		t.Fatalf("closed %v: the failed close was not tried again", closed)
	}
}
