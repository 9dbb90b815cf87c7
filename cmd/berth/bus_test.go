package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/testenv"
)

// TestBusWatch: `berth bus watch TOPIC` prints, one JSON line each, the events another
// process publishes on the real redis-server; without a URL, or with a bad one, it
// says what is wrong (never the password).
func TestBusWatch(t *testing.T) {
	r := testenv.Redis(t)
	url := "redis://" + r.Addr
	root := newRootCommand(slog.New(slog.DiscardHandler))
	var out testenv.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bus", "watch", "inventory.nodes", "--redis", url})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	c, err := redisbus.Connect(redisbus.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	p := redisbus.NewPublisher[map[string]string](c, "inventory.nodes")
	pctx, stop := context.WithCancel(t.Context())
	pdone := make(chan struct{})
	go func() { p.Run(pctx); close(pdone) }()
	// The watcher subscribes after it starts: publish until a line shows.
	testenv.Eventually(t, 20*time.Second, "the event printed", func() bool {
		p.Publish(map[string]string{"node": "dev-gpu-node-1"})
		return strings.Contains(out.String(), `{"node":"dev-gpu-node-1"}`)
	})
	stop()
	<-pdone
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("bus watch: %v\n%s", err, out.String())
	}

	t.Setenv("BERTH_BUS_REDIS", "")
	if out, err := run(t, "bus", "watch", "inventory.nodes"); exitCode(err) != 2 || !strings.Contains(err.Error(), "--redis") {
		t.Errorf("no URL: %v %s", err, out)
	}
	if _, err := run(t, "bus", "watch", "inventory.nodes", "--redis", "redis://u:hunter2-secret@127.0.0.1:nope"); exitCode(err) != 2 || strings.Contains(err.Error(), "hunter2-secret") {
		t.Errorf("bad URL: %v", err)
	}
}
