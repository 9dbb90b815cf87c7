package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"berth.dev/berth/internal/testenv"
)

// asBerthEnv makes this test binary berth itself (main), for tests that run berth as
// processes of its own (the chaos suite's providers and ledger node, the processes of
// berth dev --redis).
const asBerthEnv = "BERTH_TEST_AS_BERTH"

// TestMain runs the tests, or berth when asBerthEnv says so. Every process the tests
// start of this binary is berth: the variable is set for the whole run, not by the tests
// that need it (t.Setenv would keep those tests from running in parallel).
//
// The tests that run a whole berth dev for a minute or more (the journeys, the chaos
// suite, berth dev --redis) call t.Parallel, so they run beside one another once the
// rest are done. The two on a real node (TestRealNodeJourney, TestChartOnRealNode) take
// the machine's one real-node lock; only the journey is parallel, so the chart's test
// runs first and nothing waits on the lock while holding a slot. TestHomeInUseIsRefused
// is not parallel: it reads what klog (one per process) logs.
func TestMain(m *testing.M) {
	if os.Getenv(asBerthEnv) == "1" {
		main()
		os.Exit(0)
	}
	if err := os.Setenv(asBerthEnv, "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m)
}

// ledgerCLI runs berth commands against the ledger node l (--home, --node), failing
// the test on an error, and returns their output.
func ledgerCLI(t *testing.T, l *testenv.LedgerNode) func(args ...string) string {
	common := []string{"--home", l.Home(), "--node", l.RPC()}
	return func(args ...string) string {
		t.Helper()
		out, err := run(t, append(args, common...)...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand(slog.New(slog.DiscardHandler))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// cliWith returns berth run with the flags common added before a command's own
// arguments ("--": what follows is a remote command), and must, which fails the test
// on an error.
func cliWith(t *testing.T, common ...string) (cli func(...string) (string, error), must func(...string) string) {
	cli = func(args ...string) (string, error) {
		t.Helper()
		at := slices.Index(args, "--")
		if at < 0 {
			at = len(args)
		}
		return run(t, slices.Concat(args[:at], common, args[at:])...)
	}
	must = func(args ...string) string {
		t.Helper()
		out, err := cli(args...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	return cli, must
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 2
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"berth " + version, "commit: ", "go: " + runtime.Version()} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}
}

func TestHelpListsGroups(t *testing.T) {
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	run := strings.Index(out, "Run:")
	tools := strings.Index(out, "Tools:")
	if run < 0 || tools < 0 || run > tools {
		t.Fatalf("help should list the Run group before Tools:\n%s", out)
	}
	if !strings.Contains(out[run:tools], "dev") || !strings.Contains(out[tools:], "version") {
		t.Errorf("commands not in their groups:\n%s", out)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		message string
	}{
		{[]string{"version"}, 0, ""},
		{[]string{"no-such-command"}, 2, `unknown command "no-such-command"`},
		{[]string{"version", "extra"}, 2, "unknown command"},
		{[]string{"version", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"dev", "--nodes", "-1"}, 2, "--nodes: -1 is outside 0–100"},
		{[]string{"dev", "--nodes", "0", "--gpu-nodes", "0"}, 2, "at least one node"},
		{[]string{"dev", "--nodes", "many"}, 2, `invalid argument "many"`},
		{[]string{"dev", "--config", "/nonexistent/provider.yaml"}, 2, "--config: open /nonexistent/provider.yaml"},
		{[]string{"bench", "status", "--rps", "0"}, 2, "rps: 0 is outside 1–100000"},
		{[]string{"bench", "lease-ready", "--leases", "0"}, 2, "leases: 0; at least 1"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit code %d (err %v), want %d", got, err, tt.code)
			}
			if tt.message != "" && (err == nil || !strings.Contains(err.Error(), tt.message)) {
				t.Errorf("error %v, want it to contain %q", err, tt.message)
			}
		})
	}
}

// TestExitStatus: a failure is said on stderr and never exits 0; a remote command's
// exit code is kept when an exit status can carry it.
func TestExitStatus(t *testing.T) {
	tests := []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{errors.New("no ledger"), 2, "berth: no ledger\n"},
		{usageError("--bad"), 2, "berth: --bad\n"},
		{&exitError{code: 1, err: errors.New("lease shell failed")}, 1, "berth: lease shell failed\n"},
		{&exitError{code: 3, err: errors.New("command terminated with exit code 3")}, 3, "berth: command terminated with exit code 3\n"},
		{&exitError{code: 256, err: errors.New("command terminated with exit code 256")}, 1, "berth: command terminated with exit code 256\n"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if got := exitStatus(&stderr, tt.err); got != tt.code || stderr.String() != tt.stderr {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", tt.err, got, stderr.String(), tt.code, tt.stderr)
		}
	}
}

// TestKlogRouted: what the Kubernetes libraries log through klog reaches the logger of
// the command that runs, in its format and at its level, attributes included.
func TestKlogRouted(t *testing.T) {
	var first, second testenv.Buffer
	routeKlog(slog.New(slog.NewTextHandler(&first, &slog.HandlerOptions{Level: slog.LevelWarn})))
	klog.InfoS("below the level", "k", "v")
	klog.Background().WithValues("reflector", "pods").Error(errors.New("boom"), "Failed to watch")
	routeKlog(slog.New(slog.NewTextHandler(&second, nil)))
	klog.InfoS("to the second", "k", "v")
	if got := first.String(); strings.Contains(got, "below the level") || !strings.Contains(got, `level=ERROR msg="Failed to watch"`) ||
		!strings.Contains(got, "reflector=pods") || !strings.Contains(got, "err=boom") {
		t.Errorf("first logger got:\n%s", got)
	}
	if got := second.String(); !strings.Contains(got, `level=INFO msg="to the second" k=v`) || strings.Contains(got, "Failed to watch") {
		t.Errorf("second logger got:\n%s", got)
	}
}
