// Package operatortest runs an operator in a test as its process runs it
// (operator.Run: leader election, probes, metrics).
package operatortest

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/operator"
)

// Start runs operator.Run(ctx, rc, opts, c) until the test ends, when a Run error
// fails the test. With opts.Listen set it returns once the probes serve, with their
// base URL (http://host:port; "" without a listener); a Run that ends before fails
// the test. stop ends the operator early and returns Run's error. Start sets
// opts.Started.
func Start(t *testing.T, rc *rest.Config, opts operator.Options, c operator.Controller) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	addr := make(chan string, 1)
	opts.Started = func(a string) { addr <- a }
	go func() { done <- operator.Run(ctx, rc, opts, c) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("operator: %v", err)
		}
	})
	if opts.Listen == "" {
		return "", stop
	}
	select {
	case a := <-addr:
		return "http://" + a, stop
	case err := <-done:
		once.Do(func() { cancel(); runErr = err })
		t.Fatalf("operator: %v", err)
	}
	return "", stop
}
