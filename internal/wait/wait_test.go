package wait

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSleep: a pause passes whole (true) unless its context ends first (false, at once).
func TestSleep(t *testing.T) {
	if !Sleep(t.Context(), time.Millisecond) {
		t.Fatal("a 1 ms pause with a live context did not pass")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("a pause passed with its context ended")
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("an ended context's pause took %s", d)
	}
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan bool)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	if <-done {
		t.Fatal("a pause passed after its context was cancelled")
	}
}

func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	Every(ctx, time.Millisecond, func(context.Context) {
		calls++
		if calls == 3 {
			cancel()
		}
	})
	if calls != 3 {
		t.Fatalf("%d calls, want 3 (the third ended the context)", calls)
	}
	Every(ctx, time.Millisecond, func(context.Context) { t.Fatal("called with its context ended") })
}

// TestUntil: a check is called until it passes; Abort ends the wait with its error;
// a context that ends first gives an Ended saying what was still wrong.
func TestUntil(t *testing.T) {
	calls := 0
	if err := Until(t.Context(), time.Millisecond, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("passing on the third call: %v after %d calls", err, calls)
	}
	gone := errors.New("the process exited")
	calls = 0
	err := Until(t.Context(), time.Millisecond, func(context.Context) error {
		calls++
		return Abort(gone)
	})
	if err != gone || calls != 1 { //nolint:errorlint // Until returns the aborting error itself
		t.Fatalf("abort: %v after %d calls", err, calls)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	stale := errors.New("inventory stale")
	err = Until(ctx, time.Millisecond, func(context.Context) error { return stale })
	var ended *Ended
	if !errors.As(err, &ended) || err.Error() != "inventory stale" || !errors.Is(err, stale) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed out: %v (%T)", err, err)
	}
	if Abort(nil) != nil {
		t.Fatal("Abort(nil) is not nil")
	}
	// A check cut short by the end of ctx does not hide what was still wrong before.
	ctx, cancel = context.WithCancel(t.Context())
	calls = 0
	err = Until(ctx, time.Millisecond, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return stale
		}
		cancel()
		return fmt.Errorf("read the inventory: %w", ctx.Err())
	})
	if err == nil || err.Error() != "inventory stale" || !errors.Is(err, context.Canceled) {
		t.Fatalf("cut short: %v", err)
	}
}

// TestRetry: failures are reported with pauses doubling to the longest; success ends
// the retries; Abort ends them with its error; a context that ends gives an Ended.
func TestRetry(t *testing.T) {
	var pauses []time.Duration
	calls := 0
	err := Retry(t.Context(), time.Millisecond, 3*time.Millisecond, func(context.Context) error {
		calls++
		if calls < 5 {
			return errors.New("connection refused")
		}
		return nil
	}, func(_ error, pause time.Duration) { pauses = append(pauses, pause) })
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}
	if err != nil || !slices.Equal(pauses, want) {
		t.Fatalf("retries: %v, pauses %v (want %v)", err, pauses, want)
	}
	refused := errors.New("forbidden")
	err = Retry(t.Context(), time.Millisecond, time.Millisecond, func(context.Context) error { return Abort(refused) },
		func(error, time.Duration) { t.Fatal("an aborting failure was retried") })
	if err != refused { //nolint:errorlint // Retry returns the aborting error itself
		t.Fatalf("abort: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	err = Retry(ctx, time.Hour, time.Hour, func(context.Context) error { return errors.New("no answer") },
		func(error, time.Duration) { cancel() })
	if _, ended := errors.AsType[*Ended](err); !ended || err.Error() != "no answer" || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{First: time.Second, Longest: 5 * time.Second}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Fatalf("after Reset: %v", d)
	}
}

// TestKeep: a run that fails at once is run again after a growing pause; one that
// lasted healthy starts the pause over; Keep returns once ctx ends, without telling
// of the run ctx cut short.
func TestKeep(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var pauses []time.Duration
	var errs []error
	runs := 0
	Keep(ctx, Backoff{First: time.Millisecond, Longest: 4 * time.Millisecond}, 20*time.Millisecond, func(ctx context.Context) error {
		runs++
		switch runs {
		case 4: // a healthy run
			Sleep(ctx, 25*time.Millisecond)
			return nil
		case 6:
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
		return fmt.Errorf("run %d failed", runs)
	}, func(err error, pause time.Duration) {
		errs = append(errs, err)
		pauses = append(pauses, pause)
	})
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}
	if runs != 6 || !slices.Equal(pauses, want) {
		t.Fatalf("runs %d, pauses %v (want 6, %v)", runs, pauses, want)
	}
	if errs[0] == nil || errs[0].Error() != "run 1 failed" || errs[3] != nil {
		t.Fatalf("errors told: %v", errs)
	}
}

// TestWithin: a check that passes ends the wait; one still failing at the timeout
// says what was wrong (an *Ended with the deadline); a caller's context that ends
// first is reported as itself, not as a time-out.
func TestWithin(t *testing.T) {
	if err := Within(t.Context(), time.Minute, time.Millisecond, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("a check that passes: %v", err)
	}
	notYet := errors.New("not yet")
	err := Within(t.Context(), 20*time.Millisecond, time.Millisecond, func(context.Context) error { return notYet })
	if _, ended := errors.AsType[*Ended](err); !ended || !errors.Is(err, notYet) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed out: %v; want an *Ended with the check's error and the deadline", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	err = Within(ctx, time.Minute, time.Millisecond, func(context.Context) error { cancel(); return notYet })
	if !errors.Is(err, context.Canceled) || errors.Is(err, notYet) {
		t.Fatalf("stopped: %v; want the caller's context.Canceled alone", err)
	}
}
