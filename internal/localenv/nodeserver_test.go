package localenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// TestNodeServer runs the node server in front of a stand-in for kwok: exec runs here,
// without a terminal (output, exit code, the end of its stdin) and with one (with or
// without stdin and stdout, resizes, hang-up at the end of stdin); no exec request
// reaches the backend, everything else does; a client without a certificate from the
// CA is refused.
func TestNodeServer(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	serving, err := p.serving("node", []string{"localhost"}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	client, err := p.client("apiserver", "kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	execDir := filepath.Join(dir, "exec")
	if err := os.Mkdir(execDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(execDir, "marker"), []byte("in the exec dir\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The stand-in for kwok records the paths it is asked for.
	var mu sync.Mutex
	var backendPaths []string
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		backendPaths = append(backendPaths, r.URL.Path)
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/exec/") {
			http.Error(w, "kwok exec", http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, "from kwok "+r.URL.Path)
	}))
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	backend.StartTLS()
	defer backend.Close()

	s, err := startNodeServer(t.Context(), nodeServerConfig{kwokAddr: backend.Listener.Addr().String(), serving: serving,
		client: client, caPEM: caPEM, execDir: execDir, log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	cfg := &rest.Config{Host: "https://" + s.addr, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: client.CertPEM, KeyData: client.KeyPEM}}

	type execOpts struct {
		stdin     io.Reader
		noStdout  bool
		tty       bool
		sizes     remotecommand.TerminalSizeQueue
		stdout    io.Writer // instead of the output returned
		urlSuffix string
	}
	execWith := func(t *testing.T, cmd []string, o execOpts) (string, string, error) {
		t.Helper()
		q := url.Values{corev1.ExecCommandParam: cmd}
		if !o.noStdout {
			q.Set(corev1.ExecStdoutParam, "1")
		}
		if !o.tty {
			q.Set(corev1.ExecStderrParam, "1")
		} else {
			q.Set(corev1.ExecTTYParam, "1")
		}
		if o.stdin != nil {
			q.Set(corev1.ExecStdinParam, "1")
		}
		u := &url.URL{Scheme: "https", Host: s.addr, Path: "/exec/ns/pod/web" + o.urlSuffix, RawQuery: q.Encode()}
		ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		opts := remotecommand.StreamOptions{Stdin: o.stdin, Tty: o.tty, TerminalSizeQueue: o.sizes}
		switch {
		case o.stdout != nil:
			opts.Stdout = o.stdout
		case !o.noStdout:
			opts.Stdout = &out
		}
		if !o.tty {
			opts.Stderr = &errOut
		}
		err = ex.StreamWithContext(t.Context(), opts)
		return out.String(), errOut.String(), err
	}
	exec := func(t *testing.T, cmd []string, stdin io.Reader, tty bool) (string, string, error) {
		t.Helper()
		return execWith(t, cmd, execOpts{stdin: stdin, tty: tty})
	}
	backendSaw := func(prefix string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(backendPaths, func(p string) bool { return strings.HasPrefix(p, prefix) })
	}

	t.Run("output", func(t *testing.T) {
		out, _, err := exec(t, []string{"cat", "marker"}, nil, false)
		if err != nil || out != "in the exec dir\n" {
			t.Fatalf("stdout %q, err %v", out, err)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		_, errOut, err := exec(t, []string{"sh", "-c", "echo err >&2; exit 3"}, nil, false)
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 3 || errOut != "err\n" {
			t.Fatalf("stderr %q, err %v (%T), want exit code 3", errOut, err, err)
		}
	})
	t.Run("stdin ends", func(t *testing.T) {
		out, _, err := exec(t, []string{"cat"}, strings.NewReader("piped\n"), false)
		if err != nil || out != "piped\n" {
			t.Fatalf("stdout %q, err %v", out, err)
		}
	})
	t.Run("command ends before stdin", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }() // ends the client's copy of stdin
		out, _, err := exec(t, []string{"echo", "hi"}, pr, false)
		if err != nil || out != "hi\n" {
			t.Fatalf("stdout %q, err %v", out, err)
		}
	})
	t.Run("no such command", func(t *testing.T) {
		_, _, err := exec(t, []string{"berth-no-such-command"}, nil, false)
		var exit utilexec.ExitError
		if err == nil || errors.As(err, &exit) {
			t.Fatalf("err %v, want a failure that is not an exit code", err)
		}
	})
	// With a terminal the command runs here too (kwok's exec panics without stdin or
	// stdout, and loses the exit code): in a terminal, with its exit code.
	t.Run("terminal without stdin", func(t *testing.T) {
		out, _, err := exec(t, []string{"sh", "-c", "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && cat marker; exit 3"}, nil, true)
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 3 || out != "in the exec dir\r\n" {
			t.Fatalf("output %q, err %v, want exit code 3", out, err)
		}
	})
	t.Run("terminal without stdout", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		_, _, err := execWith(t, []string{"sh", "-c", "echo read by nobody; exit 4"}, execOpts{stdin: pr, noStdout: true, tty: true})
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 4 {
			t.Fatalf("err %v, want exit code 4", err)
		}
	})
	t.Run("terminal with input and resizes", func(t *testing.T) {
		// For each line typed, the shell prints the terminal's size; it ends at "q".
		sizes := &sizeQueue{c: make(chan remotecommand.TerminalSize, 1)}
		sizes.c <- remotecommand.TerminalSize{Width: 120, Height: 30}
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		var out lockedBuffer
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { _ = pr.Close() }() // a write of the test's then fails rather than waits
			_, _, err = execWith(t, []string{"sh", "-c", `while read x; do [ "$x" = q ] && exit 5; echo "size $(stty size)"; done`},
				execOpts{stdin: pr, tty: true, sizes: sizes, stdout: &out})
		}()
		for _, want := range []string{"size 30 120\r\n", "size 24 80\r\n"} {
			eventually(t, 30*time.Second, want, func() bool {
				if _, err := pw.Write([]byte("\n")); err != nil {
					t.Fatal(err)
				}
				return strings.Contains(out.String(), want)
			})
			sizes.c <- remotecommand.TerminalSize{Width: 80, Height: 24}
		}
		if _, err := pw.Write([]byte("q\n")); err != nil {
			t.Fatal(err)
		}
		<-done
		close(sizes.c) // ends client-go's wait for sizes
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 5 {
			t.Fatalf("err %v, want exit code 5; output %q", err, out.String())
		}
	})
	t.Run("the end of stdin hangs the terminal up", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		var out lockedBuffer
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { _ = pr.Close() }()
			_, _, err = execWith(t, []string{"sh", "-c", `trap 'echo hung up; exit 6' HUP; echo ready; while :; do sleep 0.05; done`},
				execOpts{stdin: pr, tty: true, stdout: &out})
		}()
		eventually(t, 30*time.Second, "the trap set", func() bool { return strings.Contains(out.String(), "ready") })
		_ = pw.Close()
		<-done
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 6 || !strings.Contains(out.String(), "hung up") {
			t.Fatalf("output %q, err %v, want exit code 6", out.String(), err)
		}
	})
	t.Run("a signal's exit code", func(t *testing.T) {
		_, _, err := exec(t, []string{"sh", "-c", "kill -TERM $$"}, nil, false)
		var exit utilexec.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 128+15 {
			t.Fatalf("err %v, want exit code 143", err)
		}
	})
	t.Run("no exec reaches kwok", func(t *testing.T) {
		// kwok's router ignores a trailing slash.
		if _, _, err := execWith(t, []string{"true"}, execOpts{tty: true, urlSuffix: "/"}); err == nil {
			t.Fatal("an exec path with a trailing slash succeeded")
		}
		if backendSaw("/exec/") {
			t.Fatal("an exec request reached kwok")
		}
	})
	t.Run("bad exec requests", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer hc.CloseIdleConnections()
		for _, c := range []struct {
			name, query string
			header      http.Header
			want        string
		}{
			{"no streams", "command=true&tty=1", nil, "at least one of stdin, stdout and stderr"},
			{"websocket", "command=true&stdout=1", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, "not served here"},
		} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+s.addr+"/exec/ns/pod/web?"+c.query, http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(req.Header, c.header)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
				t.Errorf("%s: %s %q, want 400 with %q", c.name, resp.Status, b, c.want)
			}
		}
		if backendSaw("/exec/") {
			t.Fatal("an exec request reached kwok")
		}
	})
	t.Run("the rest goes to kwok", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+s.addr+"/containerLogs/ns/pod/web?follow=true", http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || string(b) != "from kwok /containerLogs/ns/pod/web" {
			t.Fatalf("body %q, err %v", b, err)
		}
	})
	t.Run("clients need a certificate", func(t *testing.T) {
		anon := rest.CopyConfig(cfg)
		anon.CertData, anon.KeyData = nil, nil
		hc, err := rest.HTTPClientFor(anon)
		if err != nil {
			t.Fatal(err)
		}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+s.addr+"/healthz", http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			t.Fatalf("served without a client certificate: %s", resp.Status)
		}
	})
}

// sizeQueue hands client-go the sizes sent on c, until c is closed.
type sizeQueue struct {
	c chan remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	sz, ok := <-q.c
	if !ok {
		return nil
	}
	return &sz
}

// lockedBuffer is a buffer written and read by different goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTerminalHangUpUnderNohup: started with SIGHUP ignored (nohup, as a CI job may
// be), the node server still hangs a terminal session's command up at the end of its
// stdin. It runs the hang-up subtest in a copy of this test binary that inherits an
// ignored SIGHUP; without the fix the command never ends and the copy is killed.
func TestTerminalHangUpUnderNohup(t *testing.T) {
	if os.Getenv("BERTH_TEST_NOHUP_CHILD") != "" {
		t.Skip("the copy runs TestNodeServer only")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "sh", "-c", `trap '' HUP; exec "$@"`, "sh", os.Args[0],
		"-test.run", "^TestNodeServer$/^the_end_of_stdin_hangs_the_terminal_up$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), "BERTH_TEST_NOHUP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the hang-up subtest did not end within 90 s with SIGHUP ignored:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNodeServer/the_end_of_stdin_hangs_the_terminal_up") {
		t.Fatalf("with SIGHUP ignored: %v\n%s", err, out)
	}
}
