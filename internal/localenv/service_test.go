package localenv

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestServiceRestarts: a service killed as in a crash is started again (logged, with
// its log appended); past its restart budget it fails, saying why; Stop ends it.
func TestServiceRestarts(t *testing.T) {
	dir := t.TempDir()
	s, err := StartService(ServiceOptions{
		Name: "sleeper", Bin: "/bin/sh", Args: []string{"-c", "echo started $MARK; exec sleep 1000"}, Env: []string{"MARK=m1"},
		LogDir: dir, Restart: RestartPolicy{Max: 1, Window: time.Minute, Backoff: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	first := s.PID()
	n, restarted := s.Restarts()
	if n != 0 {
		t.Fatalf("%d restarts at start", n)
	}
	waitLog := func(want int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			b, _ := os.ReadFile(s.LogPath())
			if strings.Count(string(b), "started m1") >= want {
				return
			}
			select {
			case <-deadline:
				t.Fatalf("log %q, want %d starts", b, want)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitLog(1) // started: its shell has run
	s.Kill()
	select {
	case <-restarted:
	case <-time.After(30 * time.Second):
		t.Fatal("not restarted")
	}
	if s.PID() == first {
		t.Fatal("same process after a restart")
	}
	waitLog(2)
	s.Kill()
	select {
	case <-s.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("not failed past its budget")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "sleeper exited (signal: killed) and it was restarted 1 times") {
		t.Fatalf("Err %v", err)
	}
	s.Stop()
	s.Stop()
}
