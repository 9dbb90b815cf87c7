// Package wait has the context-aware pauses berth's loops take: one between
// attempts (Sleep), one between periodic calls (Every), polling until a check passes
// (Until), and retrying with a growing pause until an attempt succeeds (Retry).
package wait

import (
	"context"
	"time"
)

// Sleep pauses for d, or until ctx ends, whichever comes first. It reports whether
// the whole pause passed: false means ctx ended and the caller should stop.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Every calls f every d (the first time d from now) until ctx ends, then returns. A
// call that takes longer than d delays the next: calls never overlap.
func Every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}
