// Package bus is berth's typed in-process event bus: one Bus per event type, many
// subscribers, each with a bounded buffer.
//
// The contract, which every component relies on:
//
//   - Publish never blocks and never waits for a subscriber.
//   - Each subscriber receives the events it accepts in the order they were published
//     (Publish calls are serialised by the bus).
//   - Nothing is lost silently. A subscriber whose buffer is full when an event arrives
//     is cut off: its channel is closed and Err returns ErrOverflow. It must then
//     rebuild its view from the source of truth (the ledger, the cluster) and subscribe
//     again. Cut-offs are counted (berth_bus_overflows_total) and the fullest buffer
//     is exposed (berth_bus_fullest_queue_ratio), so a slow subscriber shows before it
//     overflows.
//   - Close ends every subscription (Err returns ErrClosed); Publish after Close does
//     nothing.
//
// A Bus and its subscriptions are safe for concurrent use.
package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrOverflow ends a subscription that fell a whole buffer behind.
var ErrOverflow = errors.New("bus: subscriber too slow: its buffer overflowed")

// ErrClosed ends the subscriptions of a closed bus, or one closed by its subscriber.
var ErrClosed = errors.New("bus: closed")

// ErrLost ends the subscriptions of a bus whose transport may have lost events (a
// connection to Redis that broke): as after an overflow, the subscriber rebuilds from
// the source of truth and subscribes again.
var ErrLost = errors.New("bus: events may have been lost in transport")

// Bus carries events of type T.
type Bus[T any] struct {
	name string
	m    *metrics

	mu     sync.Mutex
	subs   map[*Subscription[T]]struct{}
	closed bool
}

// Subscription is one subscriber's view of a bus.
type Subscription[T any] struct {
	bus    *Bus[T]
	ch     chan T
	accept func(T) bool
	err    error // guarded by bus.mu; set once, when ch is closed
}

type metrics struct {
	published   prometheus.Counter
	overflows   prometheus.Counter
	subscribers prometheus.Gauge
	fullest     prometheus.Gauge
}

// New returns a bus named name (the "bus" label of its metrics), registering its
// metrics with reg (nil: not registered).
func New[T any](name string, reg prometheus.Registerer) (*Bus[T], error) {
	if name == "" {
		return nil, errors.New("bus: empty name")
	}
	labels := prometheus.Labels{"bus": name}
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_bus_published_total", Help: "Events published on the bus.", ConstLabels: labels,
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_bus_overflows_total", Help: "Subscribers cut off because their buffer was full when an event arrived.", ConstLabels: labels,
		}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_bus_subscribers", Help: "Current subscribers.", ConstLabels: labels,
		}),
		fullest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_bus_fullest_queue_ratio", Help: "Fill ratio (0 to 1) of the fullest subscriber buffer after the last publish.", ConstLabels: labels,
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.published, m.overflows, m.subscribers, m.fullest} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("bus %s: register metrics: %w", name, err)
			}
		}
	}
	return &Bus[T]{name: name, m: m, subs: map[*Subscription[T]]struct{}{}}, nil
}

// Subscribe adds a subscriber with a buffer of capacity events that receives the events
// accept returns true for (all when accept is nil).
func (b *Bus[T]) Subscribe(capacity int, accept func(T) bool) (*Subscription[T], error) {
	if capacity < 1 {
		return nil, fmt.Errorf("bus %s: capacity %d: want at least 1", b.name, capacity)
	}
	s := &Subscription[T]{bus: b, ch: make(chan T, capacity), accept: accept}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("bus %s: %w", b.name, ErrClosed)
	}
	b.subs[s] = struct{}{}
	b.m.subscribers.Set(float64(len(b.subs)))
	return s, nil
}

// Publish hands ev to every subscriber that accepts it, without blocking.
func (b *Bus[T]) Publish(ev T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.m.published.Inc()
	fullest := 0.0
	for s := range b.subs {
		if s.accept != nil && !s.accept(ev) {
			continue
		}
		select {
		case s.ch <- ev:
			if r := float64(len(s.ch)) / float64(cap(s.ch)); r > fullest {
				fullest = r
			}
		default:
			b.m.overflows.Inc()
			b.endLocked(s, ErrOverflow)
		}
	}
	b.m.fullest.Set(fullest)
}

// CutOff ends every current subscription with err (ErrLost), and counts them as
// overflows; the bus stays open: new subscriptions start from the next event.
func (b *Bus[T]) CutOff(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		b.m.overflows.Inc()
		b.endLocked(s, err)
	}
}

// Close ends every subscription.
func (b *Bus[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		b.endLocked(s, ErrClosed)
	}
}

func (b *Bus[T]) endLocked(s *Subscription[T], err error) {
	if _, ok := b.subs[s]; !ok {
		return
	}
	delete(b.subs, s)
	s.err = err
	close(s.ch)
	b.m.subscribers.Set(float64(len(b.subs)))
}

// Events is the subscription's channel. It is closed when the subscription ends; Err
// then says why. Events buffered before the end are still delivered.
func (s *Subscription[T]) Events() <-chan T { return s.ch }

// Err is nil while the subscription runs, then ErrOverflow, ErrLost or ErrClosed.
func (s *Subscription[T]) Err() error {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.err
}

// Close ends the subscription.
func (s *Subscription[T]) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	s.bus.endLocked(s, ErrClosed)
}

// A Follower is one consumer's standing hold on a bus: taken (Follow) before the
// publisher starts, so that no event is missed, and run (Run) by the consumer. When its
// subscription falls behind, Run takes a new one and says so: the consumer catches up
// from the source of truth, as the contract above asks.
type Follower[T any] struct {
	bus      *Bus[T]
	capacity int
	sub      *Subscription[T]
}

// Follow subscribes a follower with a buffer of capacity events.
func (b *Bus[T]) Follow(capacity int) (*Follower[T], error) {
	sub, err := b.Subscribe(capacity, nil)
	if err != nil {
		return nil, err
	}
	return &Follower[T]{bus: b, capacity: capacity, sub: sub}, nil
}

// Run hands each event to handle, in order, until ctx ends or the bus closes (both
// return nil). When the subscription is cut off (ErrOverflow, ErrLost), a new one is
// taken first and then lost is called with the reason, so that whatever lost reads
// from the source of truth to catch up, nothing published after that is missed.
func (f *Follower[T]) Run(ctx context.Context, handle func(T), lost func(error)) error {
	defer f.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-f.sub.Events():
			if ok {
				handle(ev)
				continue
			}
			reason := f.sub.Err()
			if errors.Is(reason, ErrClosed) {
				return nil
			}
			next, err := f.bus.Subscribe(f.capacity, nil)
			if errors.Is(err, ErrClosed) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("bus %s: subscribe again: %w", f.bus.name, err)
			}
			f.sub = next
			lost(reason)
		}
	}
}

// Close ends the follower's subscription (for a follower that is never run).
func (f *Follower[T]) Close() { f.sub.Close() }
