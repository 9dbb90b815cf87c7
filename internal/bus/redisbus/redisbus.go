// Package redisbus carries berth's typed bus events between processes over Redis
// publish/subscribe, keeping the bus contract (package bus): publishing never blocks and
// never waits for Redis; each subscriber receives events in publication order; nothing
// is lost silently — events that could not be sent are counted, and when a subscriber's
// side may have missed events (its connection to Redis broke, a publisher's sequence
// skipped) its local subscribers are cut off with bus.ErrLost, to rebuild from the
// source of truth and subscribe again.
//
// On the wire, each event is a versioned JSON envelope on the channel <prefix><topic>:
//
//	{"v":1,"topic":"inventory.nodes","source":"<publisher id>","seq":42,"at":"…","data":{…}}
//
// seq counts the source's events of the topic from 1; a subscriber that sees a source's
// seq jump knows it missed events.
package redisbus

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/wait"
)

// Version is the envelope's wire version.
const Version = 1

// DefaultPrefix starts every channel name ("berth." + "inventory.nodes").
const DefaultPrefix = "berth."

// Envelope is an event on the wire.
type Envelope struct {
	V      int             `json:"v"`
	Topic  string          `json:"topic"`
	Source string          `json:"source"`
	Seq    uint64          `json:"seq"`
	At     time.Time       `json:"at"`
	Data   json.RawMessage `json:"data"`
}

// Options configure a Client.
type Options struct {
	// URL is Redis's: redis://[user:password@]host:port[/db], rediss:// for TLS, or
	// Redis Sentinel's, with a master_name parameter (see parseURL).
	URL string
	// CAFile (PEM), with rediss://, is the CA Redis's certificate is checked against
	// instead of the system's.
	CAFile string
	// Prefix starts every channel name (default DefaultPrefix).
	Prefix string
	// Queue is how many events per topic wait to be sent while Redis is slow (default
	// 1024); beyond, events are dropped and counted.
	Queue int
	// Registerer takes the metrics (nil: not registered).
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Client is one process's connection to the bus's Redis.
type Client struct {
	rdb    *redis.Client
	url    string // to redact its password from errors
	prefix string
	queue  int
	source string
	log    *slog.Logger
	m      *metrics

	mu   sync.Mutex
	down bool // the last command to Redis failed (said once per outage)
}

type metrics struct {
	sent, dropped, received, lost, decodeErrors *prometheus.CounterVec
	up                                          prometheus.Gauge
}

// debugLogger sends go-redis's own messages (each failed dial while Redis is down) to
// slog at debug level: berth says once, at warn, that Redis does not answer.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "go-redis", slog.String("message", fmt.Sprintf(format, v...)))
}

var quietRedis sync.Once

// parseURL reads a bus.redis URL: redis://[user:password@]host:port[/db] (rediss://
// for TLS), or, with a master_name parameter, Redis Sentinel's:
// redis://[user:password@]sentinel:26379[/db]?master_name=NAME[&addr=sentinel2:26379…]
// [&username=U&password=P] — the user information is the sentinels' credentials, the
// username and password parameters the master's (go-redis's failover URL). Errors
// never show a password.
func parseURL(raw string) (parsedURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return parsedURL{}, fmt.Errorf("bus.redis: %s", redactURL(err.Error(), raw))
	}
	if u.Query().Has("master_name") {
		fo, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return parsedURL{}, fmt.Errorf("bus.redis: %s", redactURL(err.Error(), raw))
		}
		if fo.MasterName == "" {
			return parsedURL{}, errors.New("bus.redis: master_name is empty")
		}
		return parsedURL{failover: fo}, nil
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return parsedURL{}, fmt.Errorf("bus.redis: %s", redactURL(err.Error(), raw))
	}
	return parsedURL{plain: opts}, nil
}

// parsedURL is a bus.redis URL's client options: one Redis's, or Sentinel's.
type parsedURL struct {
	plain    *redis.Options
	failover *redis.FailoverOptions
}

// tls is the URL's TLS configuration (nil: redis://, no TLS).
func (p parsedURL) tls() *tls.Config {
	if p.failover != nil {
		return p.failover.TLSConfig
	}
	return p.plain.TLSConfig
}

// Connect makes a client (it does not wait for Redis: publishing works, counting
// drops, while Redis is down). The URL's password never reaches a log or an error.
func Connect(o Options) (*Client, error) {
	quietRedis.Do(func() { redis.SetLogger(debugLogger{}) })
	p, err := parseURL(o.URL)
	if err != nil {
		return nil, err
	}
	if o.CAFile != "" {
		if p.tls() == nil {
			return nil, errors.New("bus.ca_file: only with a rediss:// URL")
		}
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("bus.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("bus.ca_file %s: no PEM certificate in it", o.CAFile)
		}
		p.tls().RootCAs = pool
	}
	if tc := p.tls(); tc != nil {
		tc.MinVersion = tls.VersionTLS12
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	// A failed publish is counted, not retried behind the queue's back.
	var rdb *redis.Client
	if fo := p.failover; fo != nil {
		fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout, fo.MaxRetries = 2*time.Second, 2*time.Second, 2*time.Second, 0
		rdb = redis.NewFailoverClient(fo)
	} else {
		opts := p.plain
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.MaxRetries = 2*time.Second, 2*time.Second, 2*time.Second, 0
		rdb = redis.NewClient(opts)
	}
	c := &Client{rdb: rdb, url: o.URL, prefix: o.Prefix, queue: o.Queue, source: hex.EncodeToString(id[:]), log: o.Log, m: newMetrics()}
	c.m.up.Set(1)
	if o.Registerer != nil {
		for _, col := range []prometheus.Collector{c.m.sent, c.m.dropped, c.m.received, c.m.lost, c.m.decodeErrors, c.m.up} {
			if err := o.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("bus.redis: metrics: %w", err)
			}
		}
	}
	return c, nil
}

func newMetrics() *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_bus_redis_" + name, Help: help}, labels)
	}
	return &metrics{
		sent:         counter("sent_total", "Events published to Redis, by topic.", "topic"),
		dropped:      counter("dropped_total", "Events not published to Redis, by topic and reason (queue_full: Redis too slow or gone for longer than the queue; redis_error: the PUBLISH failed; encode: the event cannot be encoded).", "topic", "reason"),
		received:     counter("received_total", "Events received from Redis, by topic.", "topic"),
		lost:         counter("lost_total", "Times a topic's local subscribers were cut off because events may have been lost, by topic and reason (reconnect: the subscription's connection to Redis broke; gap: a publisher's sequence skipped).", "topic", "reason"),
		decodeErrors: counter("decode_errors_total", "Messages on a topic's channel that are not berth's envelope of this version, by topic.", "topic"),
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_bus_redis_up",
			Help: "1 while Redis answers the bus's commands (the last publish or subscription worked), 0 after one failed; starts at 1."}),
	}
}

// health records whether Redis answered the last command: the first failure of an
// outage is logged at warn (with why) and berth_bus_redis_up drops to 0; the first
// success after it is logged and sets it back to 1.
func (c *Client) health(ctx context.Context, topic string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil && !c.down:
		c.down = true
		c.m.up.Set(0)
		c.log.WarnContext(ctx, "bus: Redis does not answer; events are dropped (and counted) until it does", slog.String("topic", topic), slog.String("error", redactURL(err.Error(), c.url)))
	case err == nil && c.down:
		c.down = false
		c.m.up.Set(1)
		c.log.InfoContext(ctx, "bus: Redis answers again", slog.String("topic", topic))
	}
}

// redactURL removes a URL's passwords (its user information's, and a password
// parameter's) from s.
func redactURL(s, raw string) string {
	var secrets []string
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			rest = rest[:end]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pass, ok := strings.Cut(rest[:at], ":"); ok && pass != "" {
				secrets = append(secrets, pass)
			}
		}
	}
	if _, query, ok := strings.Cut(raw, "?"); ok {
		for kv := range strings.SplitSeq(query, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasSuffix(k, "password") && v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "REDACTED")
		if dec, err := url.QueryUnescape(secret); err == nil && dec != secret {
			s = strings.ReplaceAll(s, dec, "REDACTED")
		}
	}
	return s
}

// Close closes the connection.
func (c *Client) Close() error { return c.rdb.Close() }

// Channel is the Redis channel of a topic.
func (c *Client) Channel(topic string) string { return c.prefix + topic }

// Ping asks Redis whether it answers.
func (c *Client) Ping(ctx context.Context) error { return c.rdb.Ping(ctx).Err() }

// Publisher sends one topic's events to Redis, from a queue, in order.
type Publisher[T any] struct {
	c     *Client
	topic string
	q     chan Envelope
	seq   uint64 // guarded by mu
	mu    sync.Mutex
}

// NewPublisher makes the publisher of topic; Run sends its events.
func NewPublisher[T any](c *Client, topic string) *Publisher[T] {
	return &Publisher[T]{c: c, topic: topic, q: make(chan Envelope, c.queue)}
}

// Publish queues ev without blocking; when the queue is full the event is dropped and
// counted (berth_bus_redis_dropped_total{reason="queue_full"}).
func (p *Publisher[T]) Publish(ev T) {
	data, err := json.Marshal(ev)
	if err != nil {
		p.c.log.Error("bus: an event cannot be encoded; dropped", slog.String("topic", p.topic), slog.Any("error", err))
		p.c.m.dropped.WithLabelValues(p.topic, "encode").Inc()
		return
	}
	p.mu.Lock()
	p.seq++
	env := Envelope{V: Version, Topic: p.topic, Source: p.c.source, Seq: p.seq, At: time.Now().UTC(), Data: data}
	p.mu.Unlock()
	select {
	case p.q <- env:
	default:
		p.c.m.dropped.WithLabelValues(p.topic, "queue_full").Inc()
	}
}

// Run sends queued events until ctx ends. A failed PUBLISH drops its event (counted;
// subscribers see the sequence gap) and the next one is tried.
func (p *Publisher[T]) Run(ctx context.Context) {
	ch := p.c.Channel(p.topic)
	for {
		select {
		case <-ctx.Done():
			return
		case env := <-p.q:
			b, err := json.Marshal(env)
			if err == nil {
				err = p.c.rdb.Publish(ctx, ch, b).Err()
			}
			if ctx.Err() != nil {
				return
			}
			p.c.health(ctx, p.topic, err)
			if err != nil {
				p.c.m.dropped.WithLabelValues(p.topic, "redis_error").Inc()
				continue
			}
			p.c.m.sent.WithLabelValues(p.topic).Inc()
		}
	}
}

// Bridge receives one topic's events from Redis and publishes them on a local bus, for
// the process's subscribers.
type Bridge[T any] struct {
	c     *Client
	topic string
	local *bus.Bus[T]
	ready chan struct{}
	once  sync.Once
}

// NewBridge makes the bridge of topic into local; Run receives.
func NewBridge[T any](c *Client, topic string, local *bus.Bus[T]) *Bridge[T] {
	return &Bridge[T]{c: c, topic: topic, local: local, ready: make(chan struct{})}
}

// Subscribed is closed once the first subscription to Redis is confirmed.
func (b *Bridge[T]) Subscribed() <-chan struct{} { return b.ready }

// Run subscribes until ctx ends. Each time the subscription is made again after its
// connection broke, and each time a source's sequence skips, the local subscribers are
// cut off with bus.ErrLost (events may be missing); messages that are not a valid
// envelope are counted and skipped.
func (b *Bridge[T]) Run(ctx context.Context) error {
	ps := b.c.rdb.Subscribe(ctx, b.c.Channel(b.topic))
	// Receive waits on the connection, not on ctx: closing ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		stop()
		_ = ps.Close()
	}()
	last := map[string]uint64{} // by source: the last seq seen
	subscribed := false
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// go-redis reconnects and subscribes again by itself; what was published
			// meanwhile is gone.
			b.c.health(ctx, b.topic, err)
			if subscribed {
				b.lost("reconnect", "the connection to Redis broke")
				subscribed = false
			}
			if !wait.Sleep(ctx, 100*time.Millisecond) {
				return nil
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.c.health(ctx, b.topic, nil)
				if subscribed {
					b.lost("reconnect", "the subscription to Redis was made again")
				}
				subscribed = true
				clear(last)
				b.once.Do(func() { close(b.ready) })
			}
		case *redis.Message:
			var env Envelope
			var ev T
			if err := json.Unmarshal([]byte(m.Payload), &env); err != nil || env.V != Version || env.Topic != b.topic || json.Unmarshal(env.Data, &ev) != nil {
				b.c.m.decodeErrors.WithLabelValues(b.topic).Inc()
				continue
			}
			if prev, ok := last[env.Source]; ok && env.Seq != prev+1 {
				b.lost("gap", fmt.Sprintf("source %s's events %d to %d are missing", env.Source, prev+1, env.Seq-1))
			}
			last[env.Source] = env.Seq
			b.c.m.received.WithLabelValues(b.topic).Inc()
			b.local.Publish(ev)
		}
	}
}

func (b *Bridge[T]) lost(reason, why string) {
	b.c.m.lost.WithLabelValues(b.topic, reason).Inc()
	b.c.log.Warn("bus: events may have been lost; subscribers rebuild", slog.String("topic", b.topic), slog.String("why", why))
	b.local.CutOff(bus.ErrLost)
}

// Gap makes the next event's sequence skip one, so that subscribers know they missed
// an event that never reached the publisher (its local subscription overflowed).
func (p *Publisher[T]) Gap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
}

// Forward publishes to Redis, through p, every event of local until ctx ends or local
// closes. When its subscription to local overflows, the event it missed shows to
// Redis's subscribers as a gap (they rebuild), and it subscribes again.
func Forward[T any](ctx context.Context, local *bus.Bus[T], p *Publisher[T]) {
	for ctx.Err() == nil {
		sub, err := local.Subscribe(p.c.queue, nil)
		if err != nil {
			return // closed
		}
		stop := context.AfterFunc(ctx, sub.Close)
		for ev := range sub.Events() {
			p.Publish(ev)
		}
		stop()
		if !errors.Is(sub.Err(), bus.ErrOverflow) && !errors.Is(sub.Err(), bus.ErrLost) {
			return
		}
		p.Gap()
	}
}

// Config is the bus section of berth's configuration files.
type Config struct {
	// Redis is the URL of the Redis that carries the bus between processes
	// (redis://[user:password@]host:port[/db], rediss:// for TLS; with master_name,
	// Redis Sentinel's: see parseURL); empty: the bus is in-process only.
	Redis string `yaml:"redis"`
	// Prefix starts the Redis channel names (default "berth.").
	Prefix string `yaml:"prefix"`
	// CAFile, with a rediss:// URL, is the CA (PEM) Redis's certificate is checked
	// against instead of the system's.
	CAFile string `yaml:"ca_file"`
}

// Options are c's connection options.
func (c Config) Options() Options { return Options{URL: c.Redis, Prefix: c.Prefix, CAFile: c.CAFile} }

// Validate checks the URL (the error never shows its password).
func (c Config) Validate() error {
	if c.Redis == "" {
		if c.Prefix != "" || c.CAFile != "" {
			return errors.New("bus.prefix, bus.ca_file: set without bus.redis")
		}
		return nil
	}
	p, err := parseURL(c.Redis)
	if err != nil {
		return err
	}
	if c.CAFile != "" && p.tls() == nil {
		return errors.New("bus.ca_file: only with a rediss:// URL")
	}
	return nil
}
