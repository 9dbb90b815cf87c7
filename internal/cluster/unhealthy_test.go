package cluster

import (
	"testing"
	"time"
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
