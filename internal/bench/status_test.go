package bench

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestStatusBench runs the status benchmark small: every request answered, every
// figure printed.
func TestStatusBench(t *testing.T) {
	var out bytes.Buffer
	res, err := RunStatusBench(t.Context(), StatusBench{RPS: 200, Duration: time.Second, Connections: 4, Nodes: 10}, &out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range res {
		got[r.Name] = r.Value
	}
	if got["status_requests"] != 200 || got["status_errors"] != 0 || got["status_body"] < 1000 || got["status_p99"] <= 0 {
		t.Fatalf("results %v", got)
	}
	for _, name := range []string{"status_p50 ", "status_p99 ", "status_max ", "status_errors ", "status_rate "} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("output lacks %q:\n%s", name, out.String())
		}
	}
	if err := (StatusBench{RPS: 0, Duration: time.Second, Connections: 1}).Validate(); err == nil {
		t.Error("rps 0 accepted")
	}
}
