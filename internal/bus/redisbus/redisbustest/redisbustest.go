// Package redisbustest helps tests look at bus topics over Redis as another process
// would: a topic received into a local bus, subscriptions, and waits for an event.
package redisbustest

import (
	"context"
	"testing"
	"time"

	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
)

// Topic receives topic from Redis into a local bus until the test ends; it returns
// once the subscription to Redis is confirmed.
func Topic[T any](t *testing.T, c *redisbus.Client, topic string) *bus.Bus[T] {
	t.Helper()
	local, err := bus.New[T](topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := redisbus.NewBridge(c, topic, local)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-b.Subscribed():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not subscribed to Redis in 10 s", topic)
	}
	return local
}

// Subscribe subscribes to b (1,024 events of room) until the test ends.
func Subscribe[T any](t *testing.T, b *bus.Bus[T]) *bus.Subscription[T] {
	t.Helper()
	sub, err := b.Subscribe(1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// Await waits up to timeout for an event of sub that ok accepts; the test fails,
// listing the events seen, if none comes or the subscription ends.
func Await[T any](t *testing.T, sub *bus.Subscription[T], timeout time.Duration, what string, ok func(T) bool) {
	t.Helper()
	deadline := time.After(timeout)
	var seen []T
	for {
		select {
		case ev, open := <-sub.Events():
			if !open {
				t.Fatalf("%s: subscription ended: %v", what, sub.Err())
			}
			if ok(ev) {
				return
			}
			seen = append(seen, ev)
		case <-deadline:
			t.Fatalf("%s: not in %s; got %+v", what, timeout, seen)
		}
	}
}
