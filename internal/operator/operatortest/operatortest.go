// Package operatortest runs an operator in a test as its process runs it
// (operator.Run: leader election, probes, metrics), on the tests' shared cluster with
// berth's CRDs installed (Cluster).
package operatortest

import (
	"context"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/testenv"
)

var crdsOnce sync.Once

// Cluster is the tests' shared cluster (testenv.Cluster) with berth's CRDs installed
// (once per test binary), and a dynamic client of it.
func Cluster(t *testing.T) (*testenv.Kube, dynamic.Interface) {
	t.Helper()
	k := testenv.Cluster(t)
	dc, err := dynamic.NewForConfig(k.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crdsOnce.Do(func() {
		if err := kube.InstallCRDs(t.Context(), dc); err != nil {
			t.Fatal(err)
		}
	})
	return k, dc
}

// ExampleConfig is the operator's example configuration file at path, decoded with
// decode and checked; either failing fails the test.
func ExampleConfig[C any, P interface {
	*C
	Validate() error
}](t *testing.T, path string, decode func([]byte) (C, error)) C {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decode(b)
	if err != nil {
		t.Fatalf("the example configuration %s: %v", path, err)
	}
	if err := P(&cfg).Validate(); err != nil {
		t.Fatalf("the example configuration %s: %v", path, err)
	}
	return cfg
}

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
