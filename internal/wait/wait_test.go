package wait

import (
	"context"
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
