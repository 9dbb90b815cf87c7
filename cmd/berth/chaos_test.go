package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/chaos"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestChaos is the chaos suite's short form (`berth bench chaos` with its defaults):
// lease lifecycles while the providers are killed, the API server goes down and the
// ledger node restarts, every promise checked after each round. The providers and the
// ledger node are this test binary run as berth. BERTH_CHAOS_SEED repeats a run (a
// failure prints its seed).
func TestChaos(t *testing.T) {
	t.Parallel() // see TestMain
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	cfg := chaos.DefaultConfig()
	cfg.Berth = os.Args[0]
	if s := os.Getenv("BERTH_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BERTH_CHAOS_SEED %q: %v", s, err)
		}
		cfg.Seed = seed
	}
	// Kept when the run fails (its logs are the evidence), removed otherwise.
	dir, err := os.MkdirTemp("", "berth-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = dir
	var out testenv.Buffer
	cfg.Out = &out
	logf, err := os.Create(filepath.Join(dir, "chaos.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	start := time.Now()
	rep, err := chaos.Run(t.Context(), cfg, slog.New(slog.NewTextHandler(logf, nil)))
	t.Logf("chaos suite (%s):\n%s", time.Since(start).Round(time.Second), out.String())
	if err != nil {
		for _, name := range []string{"provider-a.log", "provider-b.log", "ledger.log"} {
			if b, rerr := os.ReadFile(filepath.Join(cfg.Dir, name)); rerr == nil {
				lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
				t.Logf("%s ends:\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	// A version berth applied that the cluster did not roll out (kwok or the controller
	// manager behind after the API-server outage) ends its lifecycle early: listed,
	// not berth's failure, but most lifecycles must go all the way.
	for _, s := range rep.ClusterStalls {
		t.Logf("cluster stall: %s", s)
	}
	stalls := len(rep.ClusterStalls)
	if rep.Lifecycles != cfg.Lifecycles || stalls*2 > cfg.Lifecycles || rep.ManifestsAcked < 2*(cfg.Lifecycles-stalls) ||
		len(rep.Kills) == 0 || rep.APIOutages != 1 || rep.LedgerDown != 1 {
		t.Fatalf("the suite did not do what it should: %+v", rep)
	}
}
