package deploy

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/wait"
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

// Window is the window (0: off).
func (u *Unhealthy) Window() time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.after
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

// UnhealthyCloser is the policy over an Unhealthy tracker: every Every it closes the
// leases not ready for the window, through Close (the provider closes its bid with
// reason unstable). While the cluster does not answer (Reachable fails) the windows
// pause instead; a lease the ledger does not show active (Active) is left to the
// orphan check; a lease Close failed on is tried again at the next tick.
type UnhealthyCloser struct {
	Tracker   *Unhealthy
	Every     time.Duration
	Reachable func(context.Context) error
	Active    LeaseActive
	Close     func(context.Context, market.LeaseID) error
	Log       *slog.Logger
}

// Run closes the leases due every Every until ctx ends.
func (c *UnhealthyCloser) Run(ctx context.Context) error {
	wait.Every(ctx, c.Every, c.CloseDue)
	return nil
}

// CloseDue closes the leases whose window is up, unless the cluster does not answer
// now (then the windows pause for Every).
func (c *UnhealthyCloser) CloseDue(ctx context.Context) {
	if err := c.Reachable(ctx); err != nil {
		c.Tracker.Pause(c.Every)
		return
	}
	for _, id := range c.Tracker.Due(time.Now()) {
		active, err := c.Active(ctx, id)
		if err != nil || !active {
			continue
		}
		c.Log.WarnContext(ctx, "closing an unhealthy lease", slog.String("lease", id.String()), slog.Duration("window", c.Tracker.Window()))
		if err := c.Close(ctx, id); err != nil {
			if ctx.Err() == nil {
				c.Log.WarnContext(ctx, "close unhealthy lease", slog.String("lease", id.String()), slog.String("error", err.Error()))
			}
			continue
		}
		c.Tracker.Forget(id)
	}
}
