package rest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/testenv"
)

// fakeStreams behaves like a lease with a web service of two pods.
type fakeStreams struct {
	mu      sync.Mutex
	resizes []deploy.TerminalSize
}

func (f *fakeStreams) Logs(ctx context.Context, _ market.LeaseID, o deploy.LogOptions, emit func(deploy.LogLine) error) error {
	tail := int64(-1)
	if o.TailLines != nil {
		tail = *o.TailLines
	}
	if tail == 99 { // the lease's namespace is not there yet
		return fmt.Errorf("%w: lease akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq/7/1/1/akash1provider: the lease runs nothing on this provider (namespace lease-abcdef)", deploy.ErrNoSuchLease)
	}
	if tail == 98 {
		return deploy.ErrNoPods
	}
	if tail == 97 { // one pod's container has not started
		if err := emit(deploy.LogLine{Pod: "web-0", Service: "web", Message: "hello from web-0"}); err != nil {
			return err
		}
		return fmt.Errorf("%w: 1 of 2 pods (pod lease-abcdef/web-1)", deploy.ErrLogUnreadable)
	}
	for _, pod := range []string{"web-0", "web-1"} {
		msg := "hello from " + pod + " tail=" + strconv.FormatInt(tail, 10)
		if o.Previous {
			msg += " (previous run)"
		}
		if err := emit(deploy.LogLine{Pod: pod, Service: "web", Message: msg}); err != nil {
			return err
		}
	}
	if o.Follow {
		<-ctx.Done()
	}
	return nil
}

func (f *fakeStreams) Events(ctx context.Context, _ market.LeaseID, o deploy.EventOptions, emit func(deploy.Event) error) error {
	if err := emit(deploy.Event{Type: "Normal", Reason: "Scheduled", Message: "assigned", Object: "Pod/web-0", Namespace: "lease-abcdef", Count: 1}); err != nil {
		return err
	}
	if o.Follow {
		<-ctx.Done()
	}
	return nil
}

func (f *fakeStreams) Exec(ctx context.Context, _ market.LeaseID, r deploy.ExecRequest) (int, error) {
	switch {
	case r.PodIndex == 9:
		return 0, deploy.ErrNoSuchPod
	case r.Command[0] == "no-such-command":
		return 0, fmt.Errorf("%w: exec in lease-abcdef/web-0", deploy.ErrNoSuchCommand)
	case r.Command[0] == "boom":
		return 0, errors.New("kube: stream reset by peer at 10.0.0.3")
	case r.Command[0] == "exit":
		n, _ := strconv.Atoi(r.Command[1])
		_, _ = io.WriteString(r.Stderr, "bye\n")
		return n, nil
	case r.Command[0] == "cat":
		if r.TTY {
			select {
			case sz := <-r.Resize:
				f.mu.Lock()
				f.resizes = append(f.resizes, sz)
				f.mu.Unlock()
			case <-ctx.Done():
			}
		}
		_, err := io.Copy(r.Stdout, r.Stdin)
		return 0, err
	}
	_, _ = io.WriteString(r.Stdout, strings.Join(r.Command, " ")+"\n")
	return 0, nil
}

// dial opens a websocket; the status is the HTTP answer when the upgrade is refused.
func (e *env) dial(t *testing.T, path, token string) (*websocket.Conn, int, error) {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}, HandshakeTimeout: 5 * time.Second}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := d.DialContext(t.Context(), "wss"+strings.TrimPrefix(e.url, "https")+path, h)
	code := 0
	if resp != nil {
		code = resp.StatusCode
		_ = resp.Body.Close()
	}
	if c != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, code, err
}

func TestLogsAndEvents(t *testing.T) {
	e := newEnv(t)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})

	c, _, err := e.dial(t, "/lease/7/1/1/logs?tail=5&service=web", tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"web-0", "web-1"} {
		var m api.LogMessage
		if err := c.ReadJSON(&m); err != nil || m.Name != pod || m.Message != "hello from "+pod+" tail=5" {
			t.Fatalf("log line: %+v %v", m, err)
		}
	}
	// previous=true asks for the containers' runs before their restart.
	pc, _, err := e.dial(t, "/lease/7/1/1/logs?previous=true&tail=2", tok)
	if err != nil {
		t.Fatal(err)
	}
	var pm api.LogMessage
	if err := pc.ReadJSON(&pm); err != nil || pm.Message != "hello from web-0 tail=2 (previous run)" {
		t.Fatalf("previous log line: %+v %v", pm, err)
	}
	_ = pc.Close()
	var ce *websocket.CloseError
	if _, _, err := c.ReadMessage(); !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("after the logs: %v", err)
	}

	// Errors after the upgrade end the stream with their close code and a fixed reason
	// (never the error's own text, which names the cluster's objects).
	for tail, want := range map[string]struct {
		code   int
		reason string
	}{
		"99": {api.CloseNotFound, "lease or service not found"},
		"98": {api.CloseInternal, "no running pods"},
		// A log that cannot be read is not a normal end with lines missing.
		"97": {api.CloseInternal, "a pod's log could not be read (its container has not started, or the pod is gone)"},
	} {
		c, _, err := e.dial(t, "/lease/7/1/1/logs?tail="+tail, tok)
		if err != nil {
			t.Fatal(err)
		}
		if tail == "97" {
			var m api.LogMessage
			if err := c.ReadJSON(&m); err != nil || m.Name != "web-0" {
				t.Fatalf("the readable pod's line: %+v %v", m, err)
			}
		}
		if _, _, err := c.ReadMessage(); !errors.As(err, &ce) || ce.Code != want.code || !strings.HasPrefix(ce.Text, want.reason) || strings.Contains(ce.Text, "lease-") {
			t.Fatalf("tail=%s: %v, want close %d %q", tail, err, want.code, want.reason)
		}
	}

	// Follow: lines keep coming until the client leaves; pings keep it alive.
	fc, _, err := e.dial(t, "/lease/7/1/1/logs?follow=true", tok)
	if err != nil {
		t.Fatal(err)
	}
	pings := make(chan struct{}, 10)
	fc.SetPingHandler(func(string) error {
		pings <- struct{}{}
		return fc.WriteControl(websocket.PongMessage, nil, time.Now().Add(time.Second))
	})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			if _, _, err := fc.ReadMessage(); err != nil {
				return
			}
		}
	}()
	select {
	case <-pings:
	case <-time.After(5 * time.Second):
		t.Fatal("no ping")
	}
	_ = fc.Close()
	<-readerDone

	c, _, err = e.dial(t, "/lease/7/1/1/kubeevents", tok)
	if err != nil {
		t.Fatal(err)
	}
	var ev api.LeaseEvent
	if err := c.ReadJSON(&ev); err != nil || ev.Reason != "Scheduled" || ev.Note != "assigned" || ev.Object != (api.EventObject{Kind: "Pod", Namespace: "lease-abcdef", Name: "web-0"}) {
		t.Fatalf("event: %+v %v", ev, err)
	}

	// Refusals before the upgrade are plain HTTP answers.
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/lease/7/1/1/logs", "", 401},
		{"/lease/7/1/1/logs?service=db", tok, 404},
		{"/lease/7/1/1/logs?service=web,", tok, 400},
		{"/lease/7/1/1/logs?follow=maybe", tok, 400},
		{"/lease/7/1/1/logs?tail=-2", tok, 400},
		{"/lease/7/1/1/logs?previous=maybe", tok, 400},
		{"/lease/7/1/1/logs?previous=true&follow=true", tok, 400},
		{"/lease/8/1/1/kubeevents", tok, 404},
		{"/lease/7/1/1/kubeevents", e.other.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull}), 404},
		{"/lease/7/1/1/logs", e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeEvents}}), 403},
	} {
		if _, code, err := e.dial(t, tc.path, tc.token); err == nil || code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.path, code, err, tc.want)
		}
	}
}

// readShell reads frames until the result (or failure) and returns stdout, stderr and
// the result frame.
func readShell(t *testing.T, c *websocket.Conn) (stdout, stderr string, res *shellResult, failed bool) {
	t.Helper()
	for {
		kind, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("shell read: %v (stdout %q)", err, stdout)
		}
		if kind != websocket.BinaryMessage || len(msg) == 0 {
			t.Fatalf("frame %d %q", kind, msg)
		}
		switch msg[0] {
		case frameStdout:
			stdout += string(msg[1:])
		case frameStderr:
			stderr += string(msg[1:])
		case frameResult:
			var r shellResult
			if err := json.Unmarshal(msg[1:], &r); err != nil {
				t.Fatal(err)
			}
			return stdout, stderr, &r, false
		case frameFailure:
			return stdout, stderr, nil, true
		default:
			t.Fatalf("frame code %d", msg[0])
		}
	}
}

func TestShell(t *testing.T) {
	e := newEnv(t)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})
	c, _, err := e.dial(t, "/lease/7/1/1/shell?cmd0=echo&cmd1=hello&service=web&podIndex=0", tok)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, res, _ := readShell(t, c); out != "echo hello\n" || res.ExitCode != 0 || res.Message != "" {
		t.Fatalf("echo: %q %+v", out, res)
	}
	c, _, err = e.dial(t, "/lease/7/1/1/shell?cmd0=exit&cmd1=3&service=web&podIndex=0", tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, res, _ := readShell(t, c); errOut != "bye\n" || res.ExitCode != 3 {
		t.Fatalf("exit 3: %q %+v", errOut, res)
	}
	// Input and a terminal resize.
	c, _, err = e.dial(t, "/lease/7/1/1/shell?cmd0=cat&service=web&podIndex=0&stdin=1&tty=1", tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte{frameResize, 0, 120, 0, 40}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, append([]byte{frameStdin}, "typed\n"...)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.ReadMessage()
	if err != nil || msg[0] != frameStdout || string(msg[1:]) != "typed\n" {
		t.Fatalf("echoed input: %q %v", msg, err)
	}
	_ = c.Close()
	e.srv.sessions.Wait()
	if fs, _ := e.srv.deps.Streams.(*fakeStreams); len(fs.resizes) != 1 || fs.resizes[0] != (deploy.TerminalSize{Width: 120, Height: 40}) {
		t.Fatalf("resizes %v", fs.resizes)
	}
	// A pod index past the pods: a result with the reason; an internal failure: 103,
	// with nothing of the cause.
	c, _, err = e.dial(t, "/lease/7/1/1/shell?cmd0=ls&service=web&podIndex=9", tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, res, _ := readShell(t, c); res == nil || !strings.Contains(res.Message, "out of range") {
		t.Fatalf("pod index: %+v", res)
	}
	// A command the container does not have: Akash's result text, word for word.
	c, _, err = e.dial(t, "/lease/7/1/1/shell?cmd0=no-such-command&service=web&podIndex=0", tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, res, _ := readShell(t, c); res == nil || res.Message != "remote command execute error: command could not be executed because it does not exist" {
		t.Fatalf("unknown command: %+v", res)
	}
	c, _, err = e.dial(t, "/lease/7/1/1/shell?cmd0=boom&service=web&podIndex=0", tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, failed := readShell(t, c); !failed {
		t.Fatal("an internal failure is frame 103")
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/lease/7/1/1/shell?service=web&podIndex=0", 400},
		{"/lease/7/1/1/shell?cmd0=ls&service=db&podIndex=0", 404},
		{"/lease/7/1/1/shell?cmd0=ls&service=web", 400},
	} {
		if _, code, err := e.dial(t, tc.path, tok); err == nil || code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.path, code, err, tc.want)
		}
	}
}

// TestShellProtocolViolation: a frame a client may not send ends the session with
// close code 1002 and what was wrong with it, not with a normal closure.
func TestShellProtocolViolation(t *testing.T) {
	e := newEnv(t)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})
	for _, tc := range []struct {
		name   string
		frame  []byte
		reason string
	}{
		{"unknown code", []byte{7, 'x'}, "frame code 7: a client sends 104 (stdin) or 105 (resize)"},
		{"output code", []byte{frameStdout, 'x'}, "frame code 100: a client sends 104 (stdin) or 105 (resize)"},
		{"short resize", []byte{frameResize, 0, 80}, "resize frame of 3 bytes: want the code and 4"},
	} {
		c, _, err := e.dial(t, "/lease/7/1/1/shell?cmd0=cat&service=web&podIndex=0&stdin=1&tty=1", tok)
		if err != nil {
			t.Fatal(err)
		}
		// Text frames and empty frames are ignored, as Akash's provider does.
		if err := c.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMessage(websocket.BinaryMessage, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMessage(websocket.BinaryMessage, tc.frame); err != nil {
			t.Fatal(err)
		}
		var ce *websocket.CloseError
		if _, msg, err := c.ReadMessage(); !errors.As(err, &ce) || ce.Code != websocket.CloseProtocolError || !strings.HasPrefix(ce.Text, tc.reason) {
			t.Errorf("%s: %q %v, want close 1002 %q", tc.name, msg, err, tc.reason)
		}
	}
}

// TestStreamsWhenTheProviderStops: a followed stream that the provider ends because
// it stops closes with 1001 and says so; the tenant does not take it for the end of
// the logs.
func TestStreamsWhenTheProviderStops(t *testing.T) {
	e := newEnv(t)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})
	logs, _, err := e.dial(t, "/lease/7/1/1/logs?follow=true", tok)
	if err != nil {
		t.Fatal(err)
	}
	var m api.LogMessage
	if err := logs.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	shell, _, err := e.dial(t, "/lease/7/1/1/shell?cmd0=cat&service=web&podIndex=0&stdin=1", tok)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "both sessions open", func() bool {
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		return e.srv.open == 2
	})
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*websocket.Conn{"logs": logs, "shell": shell} {
		var ce *websocket.CloseError
		for {
			_, _, err := c.ReadMessage()
			if err == nil {
				continue // the follow's second line
			}
			if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || ce.Text != "the provider is stopping; try again" {
				t.Errorf("%s: %v, want close 1001", name, err)
			}
			break
		}
	}
}

// TestSessionLimits: a tenant cannot open more streams than its share (429), and a
// closed one frees its place.
func TestSessionLimits(t *testing.T) {
	e := newEnv(t)
	e.srv.cfg.MaxTenantSessions = 1
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})
	first, _, err := e.dial(t, "/lease/7/1/1/logs?follow=true", tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, code, err := e.dial(t, "/lease/7/1/1/kubeevents?follow=true", tok); err == nil || code != 429 {
		t.Fatalf("a second stream: %d %v, want 429", code, err)
	}
	_ = first.Close()
	testenv.Eventually(t, 5*time.Second, "the first stream's place freed", func() bool {
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		return e.srv.open == 0
	})
	c, _, err := e.dial(t, "/lease/7/1/1/kubeevents", tok)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}
