package localenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPortTakenExit: a process that exits saying a port was taken (as etcd, the API
// server, Traefik and redis-server word it) is errPortTaken, which the starts retry on
// new ports; any other exit is not. Both carry the process's last log lines.
func TestPortTakenExit(t *testing.T) {
	for _, c := range []struct {
		say   string
		taken bool
	}{
		{"listen tcp 127.0.0.1:4001: bind: address already in use", true},
		{"Warning: Could not create server TCP listening socket 127.0.0.1:6379: bind: Address already in use", true},
		{"open /nonexistent: no such file or directory", false},
	} {
		p, err := startProcess("fails", t.TempDir(), "/bin/sh", "-c", "echo '"+c.say+"' >&2; exit 1")
		if err != nil {
			t.Fatal(err)
		}
		err = waitFor(t.Context(), "a listener", 10*time.Millisecond, anyExited(p), func(context.Context) (bool, error) { return false, nil })
		p.stop()
		if !errors.Is(err, errStopped) || errors.Is(err, errPortTaken) != c.taken || !strings.Contains(err.Error(), c.say) {
			t.Errorf("a process saying %q: %v (port taken: %t, want %t)", c.say, err, errors.Is(err, errPortTaken), c.taken)
		}
	}
}

// TestOnFreePorts: a start whose port was taken meanwhile is tried again, up to
// portAttempts times in all, each retry said; any other failure ends it at once.
func TestOnFreePorts(t *testing.T) {
	other := errors.New("bad configuration")
	for _, c := range []struct {
		name    string
		fails   []error // one per call; past the end, success
		calls   int
		retries int
		err     error
	}{
		{"taken once", []error{errPortTaken}, 2, 1, nil},
		{"taken every time", []error{errPortTaken, errPortTaken, errPortTaken}, portAttempts, portAttempts - 1, errPortTaken},
		{"another failure", []error{other}, 1, 0, other},
		{"at once", nil, 1, 0, nil},
	} {
		calls, retries := 0, 0
		v, err := onFreePorts(func() (int, error) {
			calls++
			if calls <= len(c.fails) {
				return 0, c.fails[calls-1]
			}
			return 42, nil
		}, func(error) { retries++ })
		if calls != c.calls || retries != c.retries || !errors.Is(err, c.err) || (c.err == nil && v != 42) {
			t.Errorf("%s: %d calls, %d retries, %d, %v; want %d, %d and %v", c.name, calls, retries, v, err, c.calls, c.retries, c.err)
		}
	}
}
