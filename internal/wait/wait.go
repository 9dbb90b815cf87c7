// Package wait has the context-aware pauses berth's loops take: one between
// attempts (Sleep), one between periodic calls (Every), polling until a check passes
// (Until), retrying with a growing pause until an attempt succeeds (Retry), the
// growing pause itself (Backoff), and running something again each time it stops
// (Keep).
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

// Backoff is the growing pause of a loop between failures: First, doubled after each
// up to Longest; Reset starts it over. The zero value pauses for nothing.
type Backoff struct {
	First, Longest time.Duration
	next           time.Duration
}

// Next is the pause to take now; the next one is twice as long (at most Longest).
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.First
	}
	d := b.next
	b.next = min(2*d, b.Longest)
	return d
}

// Reset makes the next pause First again (after a success).
func (b *Backoff) Reset() { b.next = 0 }

// Sleep pauses for b's next pause (see Sleep); false means ctx ended.
func (b *Backoff) Sleep(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Keep runs run until ctx ends, and again each time it returns before, after b's
// pause; a run that lasted healthy or longer starts b over. ended (may be nil) is
// told of each such return, with run's error (nil: it returned without one) and the
// pause before the next run. Keep returns when ctx ends.
func Keep(ctx context.Context, b Backoff, healthy time.Duration, run func(context.Context) error, ended func(err error, pause time.Duration)) {
	for ctx.Err() == nil {
		start := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= healthy {
			b.Reset()
		}
		pause := b.Next()
		if ended != nil {
			ended(err, pause)
		}
		if !Sleep(ctx, pause) {
			return
		}
	}
}
