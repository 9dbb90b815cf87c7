package redisbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/gateway/auth/authtest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type event struct {
	N    int    `json:"n"`
	Node string `json:"node"`
}

// side is one process's end of the bus: a client, and the goroutines it runs until
// the test ends.
type side struct {
	c   *Client
	reg *prometheus.Registry
	wg  sync.WaitGroup
}

func newSide(t *testing.T, url string, queue int) *side {
	t.Helper()
	s := &side{reg: prometheus.NewRegistry()}
	var err error
	if s.c, err = Connect(Options{URL: url, Queue: queue, Registerer: s.reg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.wg.Wait()
		_ = s.c.Close()
	})
	return s
}

// run runs f until the test ends.
func (s *side) run(t *testing.T, f func(context.Context)) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel) // runs before the wait in newSide's cleanup
	s.wg.Go(func() { f(ctx) })
}

func (s *side) bridge(t *testing.T, topic string) *bus.Bus[event] {
	t.Helper()
	local, err := bus.New[event](topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBridge(s.c, topic, local)
	s.run(t, func(ctx context.Context) {
		if err := b.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	select {
	case <-b.Subscribed():
	case <-time.After(20 * time.Second):
		t.Fatal("the bridge did not subscribe")
	}
	return local
}

func receive(t *testing.T, sub *bus.Subscription[event], what string) event {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok {
			t.Fatalf("%s: subscription ended: %v", what, sub.Err())
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	return event{}
}

// TestRoundTrip: events published in one process reach the subscribers of another, in
// order, with the seeds' topic names under the prefix.
func TestRoundTrip(t *testing.T) {
	r := testenv.Redis(t)
	url := "redis://" + r.Addr
	pub, subSide := newSide(t, url, 1024), newSide(t, url, 1024)
	local := subSide.bridge(t, "inventory.nodes")
	sub, err := local.Subscribe(256, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPublisher[event](pub.c, "inventory.nodes")
	pub.run(t, p.Run)
	for i := 1; i <= 100; i++ {
		p.Publish(event{N: i, Node: fmt.Sprintf("node-%d", i)})
	}
	for i := 1; i <= 100; i++ {
		if ev := receive(t, sub, fmt.Sprintf("event %d", i)); ev.N != i || ev.Node != fmt.Sprintf("node-%d", i) {
			t.Fatalf("event %d: got %+v", i, ev)
		}
	}
	// Counted once PUBLISH has returned, which may be after the subscriber has the event.
	testenv.Eventually(t, 10*time.Second, "100 counted sent", func() bool {
		return testutil.ToFloat64(pub.c.m.sent.WithLabelValues("inventory.nodes")) == 100
	})
	if n := testutil.ToFloat64(subSide.c.m.received.WithLabelValues("inventory.nodes")); n != 100 {
		t.Errorf("received %v", n)
	}
	if got := pub.c.Channel("inventory.nodes"); got != "berth.inventory.nodes" {
		t.Errorf("channel %q", got)
	}
}

// TestRedisRestart: while redis-server is down, publishing does not block and what is
// not sent is counted; the subscribers of the other side are cut off with ErrLost (to
// rebuild from the source of truth); when Redis is back the bridge subscribes again by
// itself and new subscribers receive what is published from then on.
func TestRedisRestart(t *testing.T) {
	r := testenv.Redis(t)
	url := "redis://" + r.Addr
	pub, subSide := newSide(t, url, 64), newSide(t, url, 64)
	local := subSide.bridge(t, "inventory.cluster")
	sub, err := local.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPublisher[event](pub.c, "inventory.cluster")
	pub.run(t, p.Run)
	p.Publish(event{N: 1})
	if ev := receive(t, sub, "the first event"); ev.N != 1 {
		t.Fatalf("got %+v", ev)
	}

	r.Kill()
	for ev, ok := <-sub.Events(); ok; ev, ok = <-sub.Events() {
		t.Fatalf("an event after Redis went: %+v", ev)
	}
	if !errors.Is(sub.Err(), bus.ErrLost) {
		t.Fatalf("the subscription ended with %v, want ErrLost", sub.Err())
	}
	start := time.Now()
	for i := range 200 { // more than the queue holds
		p.Publish(event{N: 100 + i})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("200 publishes with Redis down took %s", d)
	}
	testenv.Eventually(t, 20*time.Second, "the drops counted", func() bool {
		return testutil.ToFloat64(pub.c.m.dropped.WithLabelValues("inventory.cluster", "queue_full"))+
			testutil.ToFloat64(pub.c.m.dropped.WithLabelValues("inventory.cluster", "redis_error")) == 200
	})
	for name, side := range map[string]*side{"publisher": pub, "subscriber": subSide} {
		if up := testutil.ToFloat64(side.c.m.up); up != 0 {
			t.Errorf("%s: berth_bus_redis_up = %v with Redis down", name, up)
		}
	}

	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	again, err := local.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The bridge resubscribes by itself: a probe publish gets through once it has.
	n := 1000
	testenv.EventuallyNoError(t, 30*time.Second, "events through the restarted Redis", func() error {
		n++
		p.Publish(event{N: n})
		select {
		case ev, ok := <-again.Events():
			if !ok {
				// Cut off by the resubscription itself: subscribe anew, as a
				// subscriber rebuilding would.
				again, err = local.Subscribe(64, nil)
				if err != nil {
					t.Fatal(err)
				}
				return errors.New("cut off by the resubscription")
			}
			if ev.N <= 1000 {
				return fmt.Errorf("an old event %+v", ev)
			}
			return nil
		case <-time.After(200 * time.Millisecond):
			return errors.New("nothing yet")
		}
	})
	if n := testutil.ToFloat64(subSide.c.m.lost.WithLabelValues("inventory.cluster", "reconnect")); n < 1 {
		t.Errorf("lost{reconnect} = %v", n)
	}
	// (The publisher records its success just after Redis delivered the event.)
	for name, side := range map[string]*side{"publisher": pub, "subscriber": subSide} {
		testenv.Eventually(t, 10*time.Second, name+"'s berth_bus_redis_up back to 1", func() bool {
			return testutil.ToFloat64(side.c.m.up) == 1
		})
	}
}

// TestGapsAndGarbage: a publisher's sequence that skips (its PUBLISHes failed) cuts the
// subscribers off; messages that are not berth's envelope are counted and skipped.
func TestGapsAndGarbage(t *testing.T) {
	r := testenv.Redis(t)
	subSide := newSide(t, "redis://"+r.Addr, 64)
	local := subSide.bridge(t, "inventory.storage")
	sub, err := local.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer func() { _ = raw.Close() }()
	send := func(payload string) {
		t.Helper()
		if err := raw.Publish(t.Context(), "berth.inventory.storage", payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	envelope := func(seq uint64, n int) string {
		data, _ := json.Marshal(event{N: n})
		b, _ := json.Marshal(Envelope{V: Version, Topic: "inventory.storage", Source: "s1", Seq: seq, At: time.Now(), Data: data})
		return string(b)
	}
	send("not json")
	send(`{"v":2,"topic":"inventory.storage","source":"s1","seq":1,"data":{}}`)
	send(envelope(1, 1))
	if ev := receive(t, sub, "a valid envelope after garbage"); ev.N != 1 {
		t.Fatalf("got %+v", ev)
	}
	if n := testutil.ToFloat64(subSide.c.m.decodeErrors.WithLabelValues("inventory.storage")); n != 2 {
		t.Errorf("decode errors %v, want 2", n)
	}
	send(envelope(4, 4)) // 2 and 3 never came
	for ev, ok := <-sub.Events(); ok; ev, ok = <-sub.Events() {
		t.Fatalf("an event after the gap: %+v", ev)
	}
	if !errors.Is(sub.Err(), bus.ErrLost) {
		t.Fatalf("ended with %v, want ErrLost", sub.Err())
	}
}

// TestConnectErrorsHidePasswords: a bad URL is refused, without its password.
func TestConnectErrorsHidePasswords(t *testing.T) {
	_, err := Connect(Options{URL: "redis://user:s3cret-pass@127.0.0.1:notaport"})
	if err == nil || strings.Contains(err.Error(), "s3cret-pass") {
		t.Fatalf("error %v", err)
	}
	if _, err := Connect(Options{URL: "http://127.0.0.1:6379"}); err == nil {
		t.Fatal("an http URL accepted")
	}
	// Sentinel's URL: the sentinels' password and the master's (a parameter).
	for _, bad := range []string{
		"redis://:s3cret-pass@127.0.0.1:26379?master_name=m&password=master-s3cret&bogus=1",
		"redis://:s3cret-pass@127.0.0.1:26379/x?master_name=m&password=master-s3cret",
		"redis://:s3cret-pass@127.0.0.1:26379?master_name=&password=master-s3cret",
	} {
		for _, err := range []error{Config{Redis: bad}.Validate(), func() error { _, err := Connect(Options{URL: bad}); return err }()} {
			if err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("%s: error %v", bad, err)
			}
		}
	}
	if err := (Config{Redis: "redis://127.0.0.1:26379?master_name=m&addr=127.0.0.1:26380", CAFile: "/ca.pem"}).Validate(); err == nil || !strings.Contains(err.Error(), "only with a rediss:// URL") {
		t.Fatalf("a CA without TLS (Sentinel): %v", err)
	}
}

// TestPassword: with a password in the URL the bus works against a redis-server that
// requires one; a wrong one is refused, and neither reaches an error or the log.
func TestPassword(t *testing.T) {
	const password = "s3cret-bus-pass"
	r, err := localenv.StartRedisWithPassword(t.Context(), t.TempDir(), password)
	testenv.Require(t, err)
	t.Cleanup(r.Stop)

	var logs testenv.Buffer
	c, err := Connect(Options{URL: "redis://:" + password + "@" + r.Addr, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("with the password: %v", err)
	}
	local, err := bus.New[event]("inventory.nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := local.Subscribe(8, nil)
	b := NewBridge(c, "inventory.nodes", local)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	<-b.Subscribed()
	p := NewPublisher[event](c, "inventory.nodes")
	pdone := make(chan struct{})
	go func() { p.Run(ctx); close(pdone) }()
	p.Publish(event{N: 7})
	if ev := receive(t, sub, "an event through the password-protected Redis"); ev.N != 7 {
		t.Fatalf("got %+v", ev)
	}
	cancel()
	<-pdone
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	wrong, err := Connect(Options{URL: "redis://:wrong-" + password + "@" + r.Addr, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wrong.Close() }()
	err = wrong.Ping(t.Context())
	if err == nil || strings.Contains(err.Error(), password) {
		t.Fatalf("a wrong password: %v", err)
	}
	if strings.Contains(logs.String(), password) {
		t.Fatalf("the password in the log:\n%s", logs.String())
	}
}

// TestTLS: with a rediss:// URL and the CA of a private Redis, the bus works over TLS
// against a real redis-server that speaks only TLS; without the CA, the certificate is
// refused.
func TestTLS(t *testing.T) {
	tf := authtest.NewCAFiles(t, "127.0.0.1")
	caFile, certFile, keyFile := tf.CAFile, tf.CertFile, tf.KeyFile
	r, err := localenv.StartRedisWith(t.Context(), t.TempDir(), localenv.RedisOptions{CertFile: certFile, KeyFile: keyFile, CAFile: caFile})
	testenv.Require(t, err)
	t.Cleanup(r.Stop)

	c, err := Connect(Options{URL: "rediss://" + r.Addr, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	untrusting, err := Connect(Options{URL: "rediss://" + r.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = untrusting.Close() }()
	if err := untrusting.Ping(t.Context()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v", err)
	}
	if _, err := Connect(Options{URL: "redis://" + r.Addr, CAFile: caFile}); err == nil {
		t.Fatal("a CA file with a plain redis:// URL accepted")
	}
}

// TestSentinelFailover: with a Sentinel URL (master_name), the bus follows the master
// Sentinel names: events flow through the master; when it is killed, Sentinel
// promotes its replica, the subscriber's side is cut off (events may be lost) and
// subscribes again on the new master by itself, and events flow again.
func TestSentinelFailover(t *testing.T) {
	master := testenv.Redis(t)
	replica, err := localenv.StartRedisWith(t.Context(), t.TempDir(), localenv.RedisOptions{ReplicaOf: master.Addr})
	testenv.Require(t, err)
	t.Cleanup(replica.Stop)
	sentinel, err := localenv.StartRedisWith(t.Context(), t.TempDir(), localenv.RedisOptions{SentinelOf: master.Addr, SentinelMaster: "berth"})
	testenv.Require(t, err)
	t.Cleanup(sentinel.Stop)
	url := "redis://" + sentinel.Addr + "?master_name=berth"
	if err := (Config{Redis: url}).Validate(); err != nil {
		t.Fatal(err)
	}
	// The replica must be in sync, and known to Sentinel, before the master goes.
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	defer func() { _ = sc.Close() }()
	testenv.EventuallyNoError(t, 30*time.Second, "Sentinel knows the replica", func() error {
		replicas, err := sc.Replicas(t.Context(), "berth").Result()
		if err != nil {
			return err
		}
		for _, r := range replicas {
			if r["port"] == strings.Split(replica.Addr, ":")[1] && !strings.Contains(r["flags"], "disconnected") && r["master-link-status"] == "ok" {
				return nil
			}
		}
		return fmt.Errorf("replicas %v", replicas)
	})

	pub, subSide := newSide(t, url, 64), newSide(t, url, 64)
	local := subSide.bridge(t, "inventory.nodes")
	sub, err := local.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPublisher[event](pub.c, "inventory.nodes")
	pub.run(t, p.Run)
	p.Publish(event{N: 1})
	if ev := receive(t, sub, "an event through the master"); ev.N != 1 {
		t.Fatalf("got %+v", ev)
	}

	killed := time.Now()
	master.Kill()
	testenv.EventuallyNoError(t, 60*time.Second, "Sentinel promotes the replica", func() error {
		addr, err := sc.GetMasterAddrByName(t.Context(), "berth").Result()
		if err != nil {
			return err
		}
		if got := strings.Join(addr, ":"); got != replica.Addr {
			return fmt.Errorf("master %s", got)
		}
		return nil
	})
	for ev, ok := <-sub.Events(); ok; ev, ok = <-sub.Events() {
		t.Logf("an event before the cut-off: %+v", ev)
	}
	if !errors.Is(sub.Err(), bus.ErrLost) {
		t.Fatalf("the subscription ended with %v, want ErrLost", sub.Err())
	}
	again, err := local.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 1000
	testenv.EventuallyNoError(t, 60*time.Second, "events through the new master", func() error {
		n++
		p.Publish(event{N: n})
		select {
		case ev, ok := <-again.Events():
			if !ok {
				if again, err = local.Subscribe(64, nil); err != nil {
					t.Fatal(err)
				}
				return fmt.Errorf("cut off again: %w", again.Err())
			}
			if ev.N <= 1000 {
				return fmt.Errorf("an old event %+v", ev)
			}
			return nil
		case <-time.After(200 * time.Millisecond):
			return errors.New("nothing yet")
		}
	})
	t.Logf("events flow through the promoted replica %s after the master was killed", time.Since(killed).Round(10*time.Millisecond))
	testenv.Eventually(t, 10*time.Second, "the publisher's berth_bus_redis_up back to 1", func() bool {
		return testutil.ToFloat64(pub.c.m.up) == 1
	})
}
