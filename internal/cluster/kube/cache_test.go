package kube

import (
	"context"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"berth.dev/berth/internal/ownership"
)

// startCache runs a Cache for owner until the test ends (after what the test started
// later, which ends first).
func startCache(t *testing.T, cs kubernetes.Interface, dc dynamic.Interface, owner ownership.Owner) *Cache {
	t.Helper()
	c, err := NewCache(cs, dc, owner)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// idleCache is a Cache that never runs, for what only checks its configuration.
func idleCache(t *testing.T) *Cache {
	t.Helper()
	c, err := NewCache(fake.NewClientset(), nil, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
