package bench

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"berth.dev/berth/internal/testenv"
)

// TestRealLeaseBench runs `berth bench real-lease` small on a real node: two leases
// measured after the warm-up, each answering through the ingress, and the six figures
// printed in order, times positive and ordered (p50 ≤ p99 ≤ max). (The figures are in
// docs/benchmarks.md, from full-size runs.)
func TestRealLeaseBench(t *testing.T) {
	b := DefaultRealLeaseBench()
	b.Leases = 2
	testenv.Require(t, b.find(t.Context()))
	var out bytes.Buffer
	res, err := RunRealLeaseBench(t.Context(), b, &out, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"real_first_answer_p50", "real_first_answer_p99", "real_first_answer_max", "real_ready_p50", "real_ready_p99", "real_ready_max"}
	if len(res) != len(want) || len(lines) != len(want) {
		t.Fatalf("results %v, output:\n%s", res, out.String())
	}
	for i, r := range res {
		if r.Name != want[i] || r.Unit != "s" || r.Value <= 0 || lines[i] != r.String() {
			t.Errorf("result %d: %+v, line %q", i, r, lines[i])
		}
		if i%3 > 0 && r.Value < res[i-1].Value {
			t.Errorf("%s %.3f s is below %s %.3f s", r.Name, r.Value, res[i-1].Name, res[i-1].Value)
		}
	}
}
