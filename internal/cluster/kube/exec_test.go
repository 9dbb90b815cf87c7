package kube

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/testenv"
)

// TestExec runs commands in a lease's pods through the API server. The local
// control plane runs them on this host (localenv's node server).
func TestExec(t *testing.T) {
	kube := testenv.Cluster(t)
	ctx := t.Context()
	l := deployStreamsLease(t, kube)
	s := newTestStreams(t, kube)

	run := func(t *testing.T, opts deploy.ExecRequest) (code int, stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		opts.Stdout, opts.Stderr = &out, &errOut
		code, err := s.Exec(ctx, l.id, opts)
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}

	t.Run("output", func(t *testing.T) {
		code, out, errOut := run(t, deploy.ExecRequest{Service: "web", Command: []string{"echo", "hello"}})
		if code != 0 || out != "hello\n" || errOut != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		code, out, errOut := run(t, deploy.ExecRequest{Service: "db", Command: []string{"sh", "-c", "echo err >&2; exit 3"}})
		if code != 3 || out != "" || errOut != "err\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		code, out, _ := run(t, deploy.ExecRequest{Service: "web", PodIndex: 1, Command: []string{"cat"}, Stdin: strings.NewReader("piped\nthrough\n")})
		if code != 0 || out != "piped\nthrough\n" {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})
	// kwok v0.8.0's exec with a terminal panics without stdin or stdout (a nil stream),
	// which ended kwok and the cluster with it, and loses the exit code: the local
	// control plane's node server runs these.
	t.Run("terminal without input", func(t *testing.T) {
		var out bytes.Buffer
		code, err := s.Exec(ctx, l.id, deploy.ExecRequest{Service: "web", TTY: true, Stdout: &out,
			Command: []string{"sh", "-c", `[ -t 0 ] && [ -t 1 ] && echo in a terminal; exit 3`}})
		if err != nil || code != 3 || out.String() != "in a terminal\r\n" {
			t.Fatalf("exit %d, err %v, output %q", code, err, out.String())
		}
	})
	t.Run("terminal without output", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		code, err := s.Exec(ctx, l.id, deploy.ExecRequest{Service: "web", TTY: true, Stdin: pr,
			Command: []string{"sh", "-c", "echo nobody reads this; exit 4"}})
		_ = pr.Close()
		if err != nil || code != 4 {
			t.Fatalf("exit %d, err %v", code, err)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		// The shell prints the terminal's size for each line it reads, and stops at "q".
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		resize := make(chan deploy.TerminalSize, 1)
		resize <- deploy.TerminalSize{Width: 100, Height: 40}
		var out testenv.Buffer
		var wg sync.WaitGroup
		var code int
		var err error
		wg.Go(func() {
			defer func() { _ = pr.Close() }() // a write of the test's then fails rather than waits
			code, err = s.Exec(ctx, l.id, deploy.ExecRequest{Service: "web", TTY: true, Resize: resize, Stdin: pr, Stdout: &out,
				Command: []string{"sh", "-c", `while read x; do [ "$x" = q ] && exit 5; stty size; done`}})
		})
		eventually(t, "the terminal's size", func() bool {
			if _, err := pw.Write([]byte("\n")); err != nil {
				t.Fatal(err)
			}
			return strings.Contains(out.String(), "40 100")
		})
		if _, err := pw.Write([]byte("q\n")); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err != nil || code != 5 {
			t.Fatalf("exit %d, err %v; output %q", code, err, out.String())
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			name string
			id   market.LeaseID
			opts deploy.ExecRequest
			want error
		}{
			{"no command", l.id, deploy.ExecRequest{Service: "web"}, deploy.ErrInvalidRequest},
			{"no service", l.id, deploy.ExecRequest{Command: []string{"true"}}, deploy.ErrInvalidRequest},
			{"unknown service", l.id, deploy.ExecRequest{Service: "nope", Command: []string{"true"}}, deploy.ErrNoSuchService},
			{"index past the replicas", l.id, deploy.ExecRequest{Service: "web", PodIndex: 2, Command: []string{"true"}}, deploy.ErrNoSuchPod},
			{"negative index", l.id, deploy.ExecRequest{Service: "db", PodIndex: -1, Command: []string{"true"}}, deploy.ErrNoSuchPod},
			{"unknown command", l.id, deploy.ExecRequest{Service: "web", Command: []string{"berth-no-such-command"}}, deploy.ErrNoSuchCommand},
			{"unknown command by path", l.id, deploy.ExecRequest{Service: "web", Command: []string{"/no/such/dir/cmd"}}, deploy.ErrNoSuchCommand},
			{"unknown lease", market.LeaseID{Owner: "akash1nobody", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"},
				deploy.ExecRequest{Service: "web", Command: []string{"true"}}, deploy.ErrNoSuchLease},
		} {
			if _, err := s.Exec(ctx, c.id, c.opts); !errors.Is(err, c.want) {
				t.Errorf("%s: err %v, want %v", c.name, err, c.want)
			}
		}
	})
}
