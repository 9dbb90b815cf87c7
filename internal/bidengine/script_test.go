package bidengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/testenv"
)

// These tests run real bash scripts. None of them is parallel: writing an executable
// while another goroutine forks can make exec fail with ETXTBSY (golang/go#22315).

// writeScript writes an executable bash script with body into a fresh directory and
// returns its path.
func writeScript(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "price.sh")
	if err := os.WriteFile(path, []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func newScriptPricer(t testing.TB, cfg ScriptConfig) *ScriptPricer {
	t.Helper()
	p, err := NewScriptPricer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// plainRequest is a group without GPUs: a web replica with a volume and a port, and
// two workers without storage or endpoints. The order pays at most 1000uakt per block.
func plainRequest() Request {
	return Request{
		Owner: "akash1plain",
		Units: []Unit{
			{Count: 1, CPUMillis: 500, MemoryBytes: 512 << 20, Storage: []Storage{{Class: ClassEphemeral, Bytes: 1 << 30}}, Endpoints: 1},
			{Count: 2, CPUMillis: 100, MemoryBytes: 128 << 20},
		},
		MaxPrice: market.DecCoin{Amount: market.NewDec(1000), Denom: "uakt"},
	}
}

func wantNoBid(t *testing.T, err error, reason string) *NoBid {
	t.Helper()
	var nb *NoBid
	if !errors.As(err, &nb) || nb.Reason != reason {
		t.Fatalf("error %v, want a no-bid with reason %s", err, reason)
	}
	return nb
}

// eventually waits until cond holds, for at most 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, what, cond)
}

// processGone reports whether pid has exited. An exited process whose new parent has
// not reaped it yet (a zombie, state Z) has exited.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state …: comm may hold spaces and parentheses, so the last ")" ends it.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the script did not record its child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestScriptPrice(t *testing.T) {
	p := newScriptPricer(t, ScriptConfig{Path: writeScript(t, `cat >/dev/null; printf '  12.5\n\n'`)})
	price, err := p.Price(t.Context(), plainRequest())
	if err != nil {
		t.Fatal(err)
	}
	if price.Denom != "uakt" || price.Amount.Cmp(dec(t, "12.5")) != 0 {
		t.Fatalf("price %s, want 12.5uakt", price)
	}

	// A relative path is the file in the working directory, not a PATH lookup.
	script := writeScript(t, `echo 3`)
	t.Chdir(filepath.Dir(script))
	p = newScriptPricer(t, ScriptConfig{Path: filepath.Base(script)})
	if price, err := p.Price(t.Context(), plainRequest()); err != nil || price.Amount.Cmp(market.NewDec(3)) != 0 {
		t.Fatalf("relative path: %s %v", price, err)
	}
}

func TestScriptOutput(t *testing.T) {
	tests := []struct {
		name, body, reason string
	}{
		{"empty", `true`, ReasonScriptOutput},
		{"blank", `echo '   '`, ReasonScriptOutput},
		{"garbage", `echo 'twelve'`, ReasonScriptOutput},
		{"exponent", `echo 1e3`, ReasonScriptOutput},
		{"two numbers", `echo 1; echo 2`, ReasonScriptOutput},
		{"19 decimals", `echo 0.0000000000000000001`, ReasonScriptOutput},
		{"too long", `head -c 5000 /dev/zero | tr '\0' ' '; echo 1`, ReasonScriptOutput},
		{"zero", `echo 0.000`, ReasonPriceNotPositive},
		{"negative", `echo -5`, ReasonPriceNotPositive},
		{"above the order", `echo 1000.000000000000000001`, ReasonPriceAboveMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newScriptPricer(t, ScriptConfig{Path: writeScript(t, tt.body)})
			_, err := p.Price(t.Context(), plainRequest())
			if nb := wantNoBid(t, err, tt.reason); nb.Detail == "" || len(nb.Detail) > 512 {
				t.Fatalf("detail %q", nb.Detail)
			}
		})
	}
}

func TestScriptFailed(t *testing.T) {
	t.Run("exit status", func(t *testing.T) {
		p := newScriptPricer(t, ScriptConfig{Path: writeScript(t, `echo 5; echo "no rate for model h100" >&2; exit 3`)})
		_, err := p.Price(t.Context(), plainRequest())
		nb := wantNoBid(t, err, ReasonScriptFailed)
		if !strings.Contains(nb.Detail, "exit status 3") || !strings.Contains(nb.Detail, "no rate for model h100") {
			t.Fatalf("detail %q", nb.Detail)
		}
	})
	t.Run("stderr is bounded", func(t *testing.T) {
		p := newScriptPricer(t, ScriptConfig{Path: writeScript(t, `head -c 100000 /dev/zero | tr '\0' x >&2; echo ' the end' >&2; exit 1`)})
		_, err := p.Price(t.Context(), plainRequest())
		nb := wantNoBid(t, err, ReasonScriptFailed)
		if len(nb.Detail) > maxScriptStderr+512 || !strings.Contains(nb.Detail, "the end") {
			t.Fatalf("detail of %d bytes: %.200q…", len(nb.Detail), nb.Detail)
		}
	})
	t.Run("cannot start", func(t *testing.T) {
		// Executable, but not a program: no "#!" line.
		path := filepath.Join(t.TempDir(), "price")
		if err := os.WriteFile(path, []byte("echo 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		p := newScriptPricer(t, ScriptConfig{Path: path})
		_, err := p.Price(t.Context(), plainRequest())
		if nb := wantNoBid(t, err, ReasonScriptFailed); !strings.Contains(nb.Detail, "could not be started") {
			t.Fatalf("detail %q", nb.Detail)
		}
	})
}

func TestScriptTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, fmt.Sprintf(`sleep 30 & echo $! > %s/pid; wait`, dir))
	p := newScriptPricer(t, ScriptConfig{Path: script, Timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := p.Price(t.Context(), plainRequest())
	if nb := wantNoBid(t, err, ReasonScriptFailed); !strings.Contains(nb.Detail, "did not finish within 300ms") {
		t.Fatalf("detail %q", nb.Detail)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Price returned after %s: it waited for the script's child", took)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	eventually(t, fmt.Sprintf("the script's child %d is still running", pid), func() bool { return processGone(pid) })
}

func TestScriptLeftOutputOpen(t *testing.T) {
	// The script prints a price and exits, but its child keeps stdout open.
	dir := t.TempDir()
	p := newScriptPricer(t, ScriptConfig{Path: writeScript(t, fmt.Sprintf(`sleep 30 & echo $! > %s/pid; echo 1`, dir))})
	_, err := p.Price(t.Context(), plainRequest())
	if nb := wantNoBid(t, err, ReasonScriptFailed); !strings.Contains(nb.Detail, "kept its output open") {
		t.Fatalf("detail %q", nb.Detail)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	eventually(t, fmt.Sprintf("the script's child %d is still running", pid), func() bool { return processGone(pid) })
}

func TestScriptConcurrencyCap(t *testing.T) {
	// Each run takes the lowest free slot directory (mkdir is atomic), notes the slot
	// number, holds it a moment and frees it. With at most n runs at once no run ever
	// finds n slots taken, so no slot above n is ever used.
	dir := t.TempDir()
	script := writeScript(t, fmt.Sprintf(`d=%s
i=1
until mkdir "$d/slot$i" 2>/dev/null; do i=$((i+1)); done
mkdir -p "$d/used$i"
sleep 0.2
rmdir "$d/slot$i"
echo 1`, dir))
	p := newScriptPricer(t, ScriptConfig{Path: script, MaxConcurrent: 2})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = p.Price(t.Context(), plainRequest()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	used, err := filepath.Glob(filepath.Join(dir, "used*"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(used, " ")
	if len(used) > 2 {
		t.Fatalf("more than 2 runs at once: slots used %s", got)
	}
	if len(used) < 2 {
		t.Fatalf("the runs never overlapped (slots used %s): the test proves nothing", got)
	}
}

func TestScriptContextEnds(t *testing.T) {
	// With one slot: a run holds it until its ctx is cancelled; a second caller's ctx
	// ends while it waits for the slot; then the slot is free again.
	dir := t.TempDir()
	script := writeScript(t, fmt.Sprintf(`d=%s
if [ -e "$d/fast" ]; then echo 2; exit; fi
sleep 30 & echo $! > "$d/pid"
mkdir "$d/started.$$"
wait`, dir))
	p := newScriptPricer(t, ScriptConfig{Path: script, MaxConcurrent: 1})
	started := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "started.*"))
		return len(m)
	}

	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	first := make(chan error, 1)
	go func() {
		_, err := p.Price(ctx1, plainRequest())
		first <- err
	}()
	eventually(t, "the first run did not start", func() bool { return started() == 1 })

	ctx2, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel2()
	_, err := p.Price(ctx2, plainRequest())
	var nb *NoBid
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nb) {
		t.Fatalf("waiting caller: %v, want its ctx's error and no decision", err)
	}
	if n := started(); n != 1 {
		t.Fatalf("%d runs started, want 1: the waiting caller ran the script", n)
	}

	cancel1()
	if err := <-first; !errors.Is(err, context.Canceled) || errors.As(err, &nb) {
		t.Fatalf("cancelled run: %v, want context.Canceled and no decision", err)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	eventually(t, fmt.Sprintf("the cancelled script's child %d is still running", pid), func() bool { return processGone(pid) })

	if err := os.WriteFile(filepath.Join(dir, "fast"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if price, err := p.Price(t.Context(), plainRequest()); err != nil || price.Amount.Cmp(market.NewDec(2)) != 0 {
		t.Fatalf("after the cancellations: %s %v, want 2uakt (the slot was not freed?)", price, err)
	}

	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Price(ended, plainRequest()); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended ctx with a free slot: %v, want context.Canceled", err)
	}
}

func TestScriptConfigValidate(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, `echo 1`)
	plain := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(plain, []byte("#!/bin/bash\necho 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  ScriptConfig
		key  string // "" for valid
	}{
		{"defaults", ScriptConfig{Path: script}, ""},
		{"limits", ScriptConfig{Path: script, Timeout: MaxScriptTimeout, MaxConcurrent: MaxScriptConcurrent}, ""},
		{"no path", ScriptConfig{}, "pricing.script.path"},
		{"missing", ScriptConfig{Path: filepath.Join(dir, "nope.sh")}, "pricing.script.path"},
		{"directory", ScriptConfig{Path: dir}, "pricing.script.path"},
		{"not executable", ScriptConfig{Path: plain}, "pricing.script.path"},
		{"negative timeout", ScriptConfig{Path: script, Timeout: -time.Second}, "pricing.script.timeout"},
		{"long timeout", ScriptConfig{Path: script, Timeout: MaxScriptTimeout + time.Nanosecond}, "pricing.script.timeout"},
		{"negative concurrency", ScriptConfig{Path: script, MaxConcurrent: -1}, "pricing.script.max_concurrent"},
		{"high concurrency", ScriptConfig{Path: script, MaxConcurrent: MaxScriptConcurrent + 1}, "pricing.script.max_concurrent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.key == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.key != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.key)):
				t.Fatalf("error %v, want one naming %s", err, tt.key)
			}
			if _, nerr := NewScriptPricer(tt.cfg); (nerr == nil) != (err == nil) {
				t.Fatalf("NewScriptPricer: %v, Validate: %v", nerr, err)
			}
		})
	}
}

func BenchmarkScriptPrice(b *testing.B) {
	p := newScriptPricer(b, ScriptConfig{Path: writeScript(b, `echo 1`)})
	r := plainRequest()
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.Price(b.Context(), r); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := p.Price(b.Context(), r); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b)
	})
}
