package chain

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestNodeWatch: a node that stops answering is reported unreachable with the
// reason, once in the log; back, it is reachable again, and Since marks each change.
func TestNodeWatch(t *testing.T) {
	var logs bytes.Buffer
	var fail error
	w := NewNodeWatch("unix:///node.sock", func(context.Context) (int64, error) { return 7, fail }, slog.New(slog.NewTextHandler(&logs, nil)))
	start := w.State()
	if !start.Reachable || start.Node != "unix:///node.sock" || start.Since.IsZero() {
		t.Fatalf("at start: %+v", start)
	}
	w.check(t.Context())
	if s := w.State(); s != start {
		t.Fatalf("a node that answers changed the state: %+v, was %+v", s, start)
	}
	fail = errors.New("dial unix /node.sock: connect: connection refused")
	w.check(t.Context())
	down := w.State()
	if down.Reachable || down.Error != fail.Error() || down.Since.Before(start.Since) {
		t.Fatalf("down: %+v", down)
	}
	w.check(t.Context())
	if s := w.State(); s.Since != down.Since || strings.Count(logs.String(), "does not answer") != 1 {
		t.Fatalf("still down: %+v; log:\n%s", s, logs.String())
	}
	fail = nil
	w.check(t.Context())
	up := w.State()
	if !up.Reachable || up.Error != "" || up.Since.Before(down.Since) || !strings.Contains(logs.String(), "the ledger node answers again") {
		t.Fatalf("back: %+v; log:\n%s", up, logs.String())
	}
	// A check cut short by the provider stopping says nothing about the node.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	fail = context.Canceled
	w.check(ctx)
	if s := w.State(); s != up {
		t.Fatalf("a cancelled check changed the state: %+v", s)
	}
}
