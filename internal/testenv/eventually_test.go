package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine as testing.T does.
type fatalTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// TestEventuallyEndsWhenTheSharedControlPlaneFails: a wait in progress does not sit out
// its timeout once the shared control plane has failed; it fails at once with why.
func TestEventuallyEndsWhenTheSharedControlPlaneFails(t *testing.T) {
	done := make(chan struct{})
	prev := sharedFailure.Swap(&failure{done: done, err: func() error { return errors.New("kwok exited (signal: killed)") }})
	defer sharedFailure.Store(prev)

	tb := &fatalTB{TB: t}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		EventuallyNoError(tb, time.Hour, "pods running", func() error { return errNotYet })
	}()
	close(done)
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("the wait went on after the control plane failed")
	}
	if want := "waiting for pods running: the shared control plane failed: kwok exited (signal: killed)"; tb.fatal != want {
		t.Fatalf("failure %q, want %q", tb.fatal, want)
	}
}
