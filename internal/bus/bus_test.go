package bus

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newBus(t *testing.T, reg prometheus.Registerer) *Bus[int] {
	t.Helper()
	b, err := New[int]("test", reg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func drain(s *Subscription[int]) []int {
	var out []int
	for v := range s.Events() {
		out = append(out, v)
	}
	return out
}

func TestOrderAndFilter(t *testing.T) {
	b := newBus(t, nil)
	all, err := b.Subscribe(100, nil)
	if err != nil {
		t.Fatal(err)
	}
	even, err := b.Subscribe(100, func(v int) bool { return v%2 == 0 })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		b.Publish(i)
	}
	b.Close()
	got, gotEven := drain(all), drain(even)
	for i, v := range got {
		if v != i {
			t.Fatalf("all: %v", got)
		}
	}
	if len(got) != 10 || len(gotEven) != 5 || gotEven[4] != 8 {
		t.Fatalf("all %v even %v", got, gotEven)
	}
	if !errors.Is(all.Err(), ErrClosed) {
		t.Fatalf("err after close: %v", all.Err())
	}
	b.Publish(11) // after Close: nothing, no panic
	if _, err := b.Subscribe(1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
}

// A subscriber that falls a whole buffer behind is cut off and told so; the others
// and the publisher carry on.
func TestOverflowCutsOffOnlyTheSlowSubscriber(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := newBus(t, reg)
	slow, err := b.Subscribe(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := b.Subscribe(100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		b.Publish(i)
	}
	if got := drain(slow); len(got) != 3 || got[2] != 2 {
		t.Fatalf("slow got %v, want the 3 events buffered before the overflow", got)
	}
	if !errors.Is(slow.Err(), ErrOverflow) {
		t.Fatalf("slow err %v", slow.Err())
	}
	if fast.Err() != nil || len(fast.Events()) != 5 {
		t.Fatalf("fast: err %v, %d buffered", fast.Err(), len(fast.Events()))
	}
	if got := testutil.ToFloat64(b.m.overflows); got != 1 {
		t.Fatalf("overflows %v", got)
	}
	if got := testutil.ToFloat64(b.m.subscribers); got != 1 {
		t.Fatalf("subscribers %v", got)
	}
	if got := testutil.ToFloat64(b.m.fullest); got != 0.05 {
		t.Fatalf("fullest ratio %v, want 5/100", got)
	}
	if n, err := testutil.GatherAndCount(reg, "berth_bus_published_total"); err != nil || n != 1 {
		t.Fatalf("registered metrics: %d %v", n, err)
	}
	fast.Close()
	fast.Close() // twice is fine
	if !errors.Is(fast.Err(), ErrClosed) {
		t.Fatalf("fast err %v", fast.Err())
	}
}

func TestConcurrentPublishersKeepEachOnesOrder(t *testing.T) {
	b := newBus(t, nil)
	const pubs, per = 4, 500
	s, err := b.Subscribe(pubs*per, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				b.Publish(p*per + i)
			}
		}()
	}
	wg.Wait()
	b.Close()
	last := map[int]int{}
	n := 0
	for v := range s.Events() {
		p := v / per
		if prev, ok := last[p]; ok && v <= prev {
			t.Fatalf("publisher %d: %d after %d", p, v, prev)
		}
		last[p] = v
		n++
	}
	if n != pubs*per {
		t.Fatalf("received %d of %d", n, pubs*per)
	}
}

func TestBadArguments(t *testing.T) {
	if _, err := New[int]("", nil); err == nil {
		t.Fatal("empty name accepted")
	}
	b := newBus(t, nil)
	if _, err := b.Subscribe(0, nil); err == nil {
		t.Fatal("capacity 0 accepted")
	}
	reg := prometheus.NewRegistry()
	if _, err := New[int]("dup", reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New[int]("dup", reg); err == nil {
		t.Fatal("two buses with one name on one registry")
	}
	if _, err := New[string]("other", reg); err != nil {
		t.Fatalf("a second bus on the registry: %v", err)
	}
}

// BenchmarkPublish measures the publisher's cost of one event to ten subscribers
// (buffers large enough that none falls behind; they are read after the clock stops).
func BenchmarkPublish(b *testing.B) {
	bus, err := New[int]("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	for range 10 {
		if _, err := bus.Subscribe(b.N+1, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		bus.Publish(i)
	}
	b.StopTimer()
	if n := testutil.ToFloat64(bus.m.overflows); n != 0 {
		b.Fatalf("%v subscribers overflowed", n)
	}
	bus.Close()
}

// TestCutOff: every current subscriber ends with the given error (counted as an
// overflow); the bus stays open and new subscribers receive the events after.
func TestCutOff(t *testing.T) {
	b, err := New[int]("cutoff", nil)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := b.Subscribe(4, nil)
	s2, _ := b.Subscribe(4, nil)
	b.Publish(1)
	b.CutOff(ErrLost)
	for _, s := range []*Subscription[int]{s1, s2} {
		if v, ok := <-s.Events(); !ok || v != 1 {
			t.Fatalf("the buffered event: %v %v", v, ok)
		}
		if _, ok := <-s.Events(); ok || !errors.Is(s.Err(), ErrLost) {
			t.Fatalf("ended with %v", s.Err())
		}
	}
	if n := testutil.ToFloat64(b.m.overflows); n != 2 {
		t.Errorf("overflows %v", n)
	}
	s3, err := b.Subscribe(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Publish(2)
	if v := <-s3.Events(); v != 2 || s3.Err() != nil {
		t.Fatalf("after the cut-off: %v %v", v, s3.Err())
	}
}

// TestFollower: a follower taken before publishing starts misses nothing; cut off, it
// reports why and goes on from the next event; it ends when the bus closes or its
// context does.
func TestFollower(t *testing.T) {
	b := newBus(t, nil)
	f, err := b.Follow(2)
	if err != nil {
		t.Fatal(err)
	}
	b.Publish(1)
	b.Publish(2)
	b.Publish(3) // the buffer holds two: the follower is cut off, after 1 and 2
	got := make(chan int, 10)
	lost := make(chan error, 10)
	done := make(chan error, 1)
	go func() {
		done <- f.Run(context.Background(), func(v int) { got <- v }, func(err error) { lost <- err })
	}()
	if a, c := <-got, <-got; a != 1 || c != 2 {
		t.Fatalf("got %d, %d before the cut-off; want 1, 2", a, c)
	}
	if err := <-lost; !errors.Is(err, ErrOverflow) {
		t.Fatalf("lost with %v; want ErrOverflow", err)
	}
	b.Publish(4) // lost is called once the new subscription is in place
	if v := <-got; v != 4 {
		t.Fatalf("after the cut-off got %d; want 4", v)
	}
	b.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	if len(lost) != 0 {
		t.Fatalf("lost called again: %v", <-lost)
	}

	b2 := newBus(t, nil)
	f2, err := b2.Follow(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f2.Run(ctx, func(int) { t.Error("no event was published") }, func(error) { t.Error("nothing was lost") }); err != nil {
		t.Fatalf("Run with its context done: %v", err)
	}
	b2.mu.Lock()
	left := len(b2.subs)
	b2.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d subscriptions left after Run returned", left)
	}
	if _, err := b2.Follow(0); err == nil {
		t.Fatal("Follow(0) accepted")
	}
	b2.Close()
	if _, err := b2.Follow(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Follow on a closed bus: %v", err)
	}
}
