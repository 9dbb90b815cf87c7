package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/fixture"
)

// tcpProxy forwards TCP connections on a loopback port to a target, and can make the
// target unreachable as a restart would: refuse connections (nothing listens), and
// once listening again, cut the first connections before the TLS handshake is done.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener // nil while refusing
	conns        map[net.Conn]bool
	cut          int // connections to close as soon as they are accepted
	wg           sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.refuse(); p.wg.Wait() })
	return p
}

// refuse closes the listener and every open connection: new connections are
// refused, established ones are reset.
func (p *tcpProxy) refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// reopen listens on the same address again; the first cut connections are closed as
// soon as they are accepted.
func (p *tcpProxy) reopen(t *testing.T, cut int) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.WithoutCancel(t.Context()), "tcp", p.addr)
	if err != nil {
		t.Errorf("proxy: listen again on %s: %v", p.addr, err)
		return
	}
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	p.serve(ln)
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut > 0 {
				p.cut--
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			p.conns[c] = true
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *tcpProxy) pipe(c net.Conn) {
	var d net.Dialer
	up, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if !p.conns[c] { // refused meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[up] = true
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, dir := range [][2]net.Conn{{up, c}, {c, up}} {
		wg.Go(func() {
			_, _ = io.Copy(dir[0], dir[1])
			_ = dir[0].Close()
			_ = dir[1].Close()
		})
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// hookWriter keeps what a command prints and, when a marker appears for the nth time,
// runs its hook right away, in the command's goroutine, before the command goes on.
type hookWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	hooks []*outputHook
}

type outputHook struct {
	marker string
	n      int
	run    func()
	done   bool
}

func (w *hookWriter) on(marker string, n int, run func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, &outputHook{marker: marker, n: n, run: run})
}

func (w *hookWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	for _, h := range w.hooks {
		if !h.done && strings.Count(w.b.String(), h.marker) >= h.n {
			h.done = true
			h.run()
		}
	}
	return n, err
}

func (w *hookWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDeployRidesOutProviderRestart: a provider unreachable for a while during
// `tenant deploy` — while the manifest is sent, and again while the lease's status is
// polled (connections refused, then handshakes cut) — is retried with a line saying
// so, and the deploy succeeds with its deployment open. A manifest the provider
// refuses (4xx) still fails at once and closes the deployment.
func TestDeployRidesOutProviderRestart(t *testing.T) {
	k, l, dir, sdlFile := gatewayTestbed(t, "cli-retry-1")
	blockedSDL := filepath.Join(dir, "blocked.yaml")
	blocked := strings.Replace(string(fixture.WebSDL), "        as: 80\n", "        as: 80\n        accept:\n          - blocked.example.test\n", 1)
	if err := os.WriteFile(blockedSDL, []byte(blocked), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--home", l.Home(), "--node", l.RPC()}
	cli, must := cliWith(t, common...)
	attrFile := filepath.Join(dir, "attributes.yaml")
	if err := os.WriteFile(attrFile, []byte("attributes:\n  - key: region\n    value: us-west\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must("provider", "register", "--host-uri", "https://127.0.0.1:1", "--attributes-file", attrFile)

	// The provider, in this process; tenants reach its gateway through the proxy.
	p := runProvider(t, l, k, dir, ", blocked_hostnames: [blocked.example.test]")
	providerReady(t, p)
	proxy := newTCPProxy(t, p.Gateway())
	must("provider", "register", "--host-uri", "https://"+proxy.addr, "--attributes-file", attrFile)

	deploy := func(out io.Writer, args ...string) error {
		root := newRootCommand(slog.New(slog.DiscardHandler))
		root.SetOut(out)
		root.SetErr(out)
		root.SetArgs(slices.Concat([]string{"tenant", "deploy"}, args, common))
		return root.ExecuteContext(t.Context())
	}
	state := func(dseq uint64) string {
		var ds []ledger.DeploymentResponse
		if err := json.Unmarshal([]byte(must("tenant", "deployment", "list", "-o", "json")), &ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Deployment.ID.DSeq == dseq {
				return d.Deployment.State
			}
		}
		t.Fatalf("no deployment %d", dseq)
		return ""
	}

	// Down before the manifest is sent: refused, then two handshakes cut, then up.
	// Down again as soon as the manifest is in (the kept connection reset too), while
	// the status is polled: refused, one handshake cut, then up.
	proxy.refuse()
	out := &hookWriter{}
	out.on("unreachable", 1, func() { proxy.reopen(t, 2) })
	out.on("manifest sent to", 1, proxy.refuse)
	out.on("unreachable", 2, func() { proxy.reopen(t, 1) })
	err := deploy(out, sdlFile, "--dseq", "11", "--bid-wait", "0s", "--ready-timeout", "2m")
	if err != nil {
		t.Fatalf("deploy while the provider restarts: %v\n%s", err, out)
	}
	text := out.String()
	if n := strings.Count(text, "unreachable"); n != 2 || !strings.Contains(text, "deployment 11 is ready") || strings.Contains(text, "closed in block") {
		t.Fatalf("deploy output: want two outages told and ridden out, the deployment ready and not closed (%d unreachable lines):\n%s", n, text)
	}
	proxy.mu.Lock()
	uncut := proxy.cut
	proxy.mu.Unlock()
	if uncut != 0 {
		t.Fatalf("%d of the connections to cut were not made: the outage was shorter than meant", uncut)
	}
	if st := state(11); st != ledger.DeploymentActive {
		t.Fatalf("deployment 11 is %s, want active", st)
	}

	// send-manifest (as deployment update) rides out an outage the same way.
	proxy.refuse()
	out = &hookWriter{}
	out.on("unreachable", 1, func() { proxy.reopen(t, 1) })
	root := newRootCommand(slog.New(slog.DiscardHandler))
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(slices.Concat([]string{"tenant", "send-manifest", sdlFile, "11"}, common))
	if err := root.ExecuteContext(t.Context()); err != nil || !strings.Contains(out.String(), "unreachable") || !strings.Contains(out.String(), "manifest sent to") {
		t.Fatalf("send-manifest while the provider restarts: %v\n%s", err, out)
	}

	// A manifest the provider refuses (a blocked hostname: 422) is not retried: the
	// deploy fails and the deployment is closed.
	out = &hookWriter{}
	err = deploy(out, blockedSDL, "--dseq", "12", "--bid-wait", "0s", "--ready-timeout", "2m")
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(out.String(), "deployment 12 closed in block") || strings.Contains(out.String(), "unreachable") {
		t.Fatalf("deploy with a refused manifest: %v\n%s", err, out)
	}
	if st := state(12); st != ledger.DeploymentClosed {
		t.Fatalf("deployment 12 is %s, want closed", st)
	}
	if _, err := cli("tenant", "close", strconv.Itoa(11)); err != nil {
		t.Fatal(err)
	}
}
