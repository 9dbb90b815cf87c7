package testenv

import (
	"errors"
	"testing"
	"time"
)

// errNotYet is what Eventually's condition reports until it holds.
var errNotYet = errors.New("not yet")

// Eventually polls cond every 20 ms until it holds, failing the test when timeout
// passes first (what names the awaited state) or the test's context ends. This is how
// tests wait for state: never with time.Sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNoError(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// EventuallyNoError polls f every 20 ms until it succeeds, as Eventually does; a
// failure reports f's last error. A wait ends at once when the package's shared control
// plane fails (Cluster).
func EventuallyNoError(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var failed <-chan struct{} // nil (never ready) without a shared control plane
	cp := sharedFailure.Load()
	if cp != nil {
		failed = cp.done
	}
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-failed:
			t.Fatalf("waiting for %s: the shared control plane failed: %v", what, cp.err())
		case <-tick.C:
		}
	}
}
