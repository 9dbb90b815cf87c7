// Package wait has the one context-aware pause berth's loops take between attempts.
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
