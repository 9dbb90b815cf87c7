package testenv

import (
	"context"
	"sync"
	"testing"
)

// Go runs each of runs (a component's Run) in a goroutine until stop is called or the
// test ends, whichever is first; a run that returns an error fails the test. stop
// cancels their context and waits for them to return; it may be called more than once.
func Go(t testing.TB, runs ...func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}
