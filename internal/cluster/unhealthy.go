package cluster

import (
	"slices"
	"sync"
	"time"

	"berth.dev/berth/internal/market"
)

// Unhealthy tracks how long each lease has been continuously not ready, for the
// optional policy that closes leases unhealthy for longer than a window. Time during
// which the cluster could not be observed (Pause) does not count. Safe for concurrent
// use.
type Unhealthy struct {
	after time.Duration

	mu    sync.Mutex
	since map[market.LeaseID]time.Time
}

// NewUnhealthy returns a tracker with the given window (0: the policy is off and Due
// never returns anything).
func NewUnhealthy(after time.Duration) *Unhealthy {
	return &Unhealthy{after: after, since: map[market.LeaseID]time.Time{}}
}

// Observe records a lease's readiness at now.
func (u *Unhealthy) Observe(id market.LeaseID, ready bool, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if ready {
		delete(u.since, id)
		return
	}
	if _, ok := u.since[id]; !ok {
		u.since[id] = now
	}
}

// Forget drops a lease (closed, or torn down).
func (u *Unhealthy) Forget(id market.LeaseID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.since, id)
}

// Pause does not count d: the cluster could not be observed for that long (an API
// server outage), so no lease's unhealthy time grows.
func (u *Unhealthy) Pause(d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, t := range u.since {
		u.since[id] = t.Add(d)
	}
}

// SetWindow changes the window (0: off).
func (u *Unhealthy) SetWindow(d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.after = d
}

// Due lists the leases not ready for at least the window, oldest first.
func (u *Unhealthy) Due(now time.Time) []market.LeaseID {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.after <= 0 {
		return nil
	}
	var out []market.LeaseID
	for id, t := range u.since {
		if now.Sub(t) >= u.after {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b market.LeaseID) int { return u.since[a].Compare(u.since[b]) })
	return out
}
