package inventory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/client-go/tools/cache"
)

// watchError is a list/watch that fails: since when, the last error and when.
type watchError struct {
	since, last time.Time
	err         string
}

// watchErrorRecent: an informer whose list/watch failed within it is failing (client-go
// retries a failed list/watch within 30 s); one failing for two heartbeats stops the
// heartbeats and fails /readyz.
const watchErrorRecent = time.Minute

// watchErrorHandler records an informer's list/watch failures (client-go retries
// them with backoff; the caches stay as they were meanwhile).
func (c *Controller) watchErrorHandler(name string) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		w := c.watchErrs[name]
		if w == nil || now.Sub(w.last) > watchErrorRecent {
			w = &watchError{since: now}
			c.watchErrs[name] = w
		}
		w.last, w.err = now, err.Error()
		go c.markDirty() // the report says so (c.mu is held here)
	}
}

// watchProblems are the informers failing now, one sentence each.
func (c *Controller) watchProblems(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.watchErrs)) {
		if w := c.watchErrs[name]; now.Sub(w.last) <= watchErrorRecent {
			out = append(out, fmt.Sprintf("watching %s fails since %s (the report may be out of date): %s", name, w.since.UTC().Format(time.RFC3339), w.err))
		}
	}
	return out
}

// watchFailing reports whether some informer has failed for watchFailingAfter.
func (c *Controller) watchFailing() bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.watchErrs {
		if now.Sub(w.last) <= watchErrorRecent && now.Sub(w.since) >= 2*c.cfg.Heartbeat {
			return true
		}
	}
	return false
}
