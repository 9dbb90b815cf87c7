package localenv

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// TestNodeServer runs the node server in front of a stand-in for kwok: exec without a
// terminal runs here with its output, its exit code and the end of its stdin; exec with
// a terminal and everything else reach the backend; a client without a certificate
// from the CA is refused.
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

	exec := func(t *testing.T, cmd []string, stdin io.Reader, tty bool) (string, string, error) {
		t.Helper()
		q := url.Values{corev1.ExecCommandParam: cmd, corev1.ExecStdoutParam: {"1"}}
		if !tty {
			q.Set(corev1.ExecStderrParam, "1")
		} else {
			q.Set(corev1.ExecTTYParam, "1")
		}
		if stdin != nil {
			q.Set(corev1.ExecStdinParam, "1")
		}
		u := &url.URL{Scheme: "https", Host: s.addr, Path: "/exec/ns/pod/web", RawQuery: q.Encode()}
		ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Tty: tty}
		if !tty {
			opts.Stderr = &errOut
		}
		err = ex.StreamWithContext(t.Context(), opts)
		return out.String(), errOut.String(), err
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
	t.Run("terminal goes to kwok", func(t *testing.T) {
		if _, _, err := exec(t, []string{"sh"}, nil, true); err == nil {
			t.Fatal("the stand-in refuses exec, yet it succeeded")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(backendPaths) == 0 || backendPaths[len(backendPaths)-1] != "/exec/ns/pod/web" {
			t.Fatalf("backend saw %v", backendPaths)
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
