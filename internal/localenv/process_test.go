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
