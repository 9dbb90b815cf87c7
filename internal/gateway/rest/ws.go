package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/wait"
)

// Streams serve a lease's logs, events and shells (kube.Streams). Their errors the
// tenant can act on are cluster's: ErrNoSuchLease, ErrNoSuchService, ErrNoPods,
// ErrNoSuchPod, ErrInvalidRequest, ErrLogUnreadable, ErrNoSuchCommand.
type Streams interface {
	// Logs sends each log line of the lease's pods (of the services named, or all) to
	// emit; without Follow it returns when the logs are read, with ErrLogUnreadable if
	// a pod's could not be (after the others' lines) and ErrNoPods if there are none.
	Logs(ctx context.Context, id market.LeaseID, opts deploy.LogOptions, emit func(deploy.LogLine) error) error
	// Events sends the lease's Kubernetes events to emit; with Follow it then sends
	// new ones until ctx ends.
	Events(ctx context.Context, id market.LeaseID, opts deploy.EventOptions, emit func(deploy.Event) error) error
	// Exec runs a command in one of a service's pods and returns its exit code.
	Exec(ctx context.Context, id market.LeaseID, req deploy.ExecRequest) (int, error)
}

// Close reasons and result messages the tenant sees. msgCommandNotFound is Akash's
// result text for a command the container does not have, word for word.
const (
	reasonStopping     = "the provider is stopping; try again"
	reasonLogUnread    = "a pod's log could not be read (its container has not started, or the pod is gone)"
	msgCommandNotFound = "remote command execute error: command could not be executed because it does not exist"
)

// maxCloseReason is the most a close frame's reason may hold (a control frame's 125
// bytes, less the code's 2).
const maxCloseReason = 123

// Websocket close codes (Akash's): internal error, lease not found, unavailable.
const (
	closeInternal    = api.CloseInternal
	closeNotFound    = api.CloseNotFound
	closeUnavailable = api.CloseUnavailable
)

// wsWriteTimeout bounds one websocket write (a client that stops reading is dropped).
const wsWriteTimeout = 10 * time.Second

// stdinQueue is how many input frames wait for a command that is not reading.
const stdinQueue = 64

var upgrader = websocket.Upgrader{
	ReadBufferSize:   1024,
	WriteBufferSize:  1024,
	HandshakeTimeout: 10 * time.Second,
	// The default origin check stays: a browser page of another site cannot open a
	// shell with the tenant's client certificate.
}

// admit counts a session against the limits, or refuses it.
func (s *Server) admit(owner string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.open >= s.cfg.MaxSessions:
		return nil, fmt.Errorf("%w: the provider has %d streams open; try again later", ErrTooMany, s.open)
	case s.perTenant[owner] >= s.cfg.MaxTenantSessions:
		return nil, fmt.Errorf("%w: you have %d streams open here, the most allowed", ErrTooMany, s.perTenant[owner])
	}
	s.open++
	s.perTenant[owner]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.open--
		s.perTenant[owner]--
		if s.perTenant[owner] <= 0 {
			delete(s.perTenant, owner)
		}
	}, nil
}

// wsConn is an upgraded connection: writes serialised, pings sent every period, and
// the connection's context ended when the client goes away or breaks the protocol.
type wsConn struct {
	c      *websocket.Conn
	mu     sync.Mutex
	ctx    context.Context //nolint:containedctx // the connection's lifetime, for its goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   func() // the server's session count
	// violation is what the client sent that the protocol does not allow (the session
	// then ends with 1002 and this as the reason); nil if nothing.
	violation atomic.Pointer[string]
}

// upgrade upgrades the request and starts pinging; onMessage (may be nil) gets the
// client's messages (pongs and close frames are handled). The context ends when the
// client closes, a read fails, or the server stops.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, owner string, onMessage func(kind int, msg []byte) error) (*wsConn, error) {
	release, err := s.admit(owner)
	if err != nil {
		s.writeError(w, r, err)
		return nil, err
	}
	// Counted before the hijack, while the server still counts the connection, so
	// that Serve's wait cannot miss it.
	s.sessions.Add(1)
	done := func() {
		release()
		s.sessions.Done()
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		done()
		return nil, err // the upgrader answered the client
	}
	ctx, cancel := context.WithCancel(r.Context())
	ws := &wsConn{c: c, ctx: ctx, cancel: cancel, done: done}
	c.SetReadLimit(64 << 10)
	_ = c.SetReadDeadline(time.Now().Add(2 * s.cfg.PingPeriod))
	c.SetPongHandler(func(string) error { return c.SetReadDeadline(time.Now().Add(2 * s.cfg.PingPeriod)) })
	ws.wg.Go(func() {
		defer cancel()
		for {
			kind, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(2 * s.cfg.PingPeriod))
			if onMessage != nil {
				if err := onMessage(kind, msg); err != nil {
					v := err.Error()
					ws.violation.Store(&v)
					return
				}
			}
		}
	})
	ws.wg.Go(func() {
		wait.Every(ctx, s.cfg.PingPeriod, func(context.Context) {
			if err := c.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)); err != nil {
				cancel() // ends Every too
			}
		})
	})
	return ws, nil
}

func (ws *wsConn) write(kind int, b []byte) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	_ = ws.c.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return ws.c.WriteMessage(kind, b)
}

func (ws *wsConn) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ws.write(websocket.TextMessage, b)
}

// close sends a close frame with code and reason (cut to what a close frame holds),
// closes the connection and waits for its goroutines.
func (ws *wsConn) close(code int, reason string) {
	if len(reason) > maxCloseReason {
		reason = strings.ToValidUTF8(reason[:maxCloseReason], "")
	}
	msg := websocket.FormatCloseMessage(code, reason)
	_ = ws.c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	ws.cancel()
	_ = ws.c.Close()
	ws.wg.Wait()
	ws.done()
}

// closeFor closes with the code fitting how the session ended: the provider stopping
// (1001), the client breaking the protocol (1002, with what it sent), err, or nothing
// (1000, normal closure).
func (s *Server) closeFor(ws *wsConn, r *http.Request, err error) {
	// Close reasons are fixed texts (a protocol violation's is ours, about the client's
	// frame): a control frame holds at most 123 bytes, and an error's own text may name
	// the cluster's objects.
	switch {
	case r.Context().Err() != nil: // the server's context: the client leaving ends ws.ctx only
		ws.close(websocket.CloseGoingAway, reasonStopping)
	case ws.violation.Load() != nil:
		ws.close(websocket.CloseProtocolError, *ws.violation.Load())
	case err == nil, ws.ctx.Err() != nil:
		ws.close(websocket.CloseNormalClosure, "")
	case errors.Is(err, deploy.ErrNoPods):
		ws.close(closeInternal, "no running pods")
	case errors.Is(err, deploy.ErrLogUnreadable):
		ws.close(closeInternal, reasonLogUnread)
	case errors.Is(err, ErrNotFound), errors.Is(err, deploy.ErrNoSuchLease), errors.Is(err, deploy.ErrNoSuchService):
		ws.close(closeNotFound, "lease or service not found (not deployed yet?)")
	case errors.Is(err, ErrBadRequest), errors.Is(err, deploy.ErrInvalidRequest):
		ws.close(closeInternal, "invalid request")
	default:
		code, msg := statusOf(err)
		if code == http.StatusServiceUnavailable {
			ws.close(closeUnavailable, msg)
			return
		}
		s.log.WarnContext(r.Context(), "gateway stream failed", slog.String("route", r.Pattern), slog.String("error", err.Error()))
		ws.close(closeInternal, "internal error")
	}
}

// streamParams reads the logs and events routes' query: service (comma-separated,
// each in the lease's manifest), follow, tail, previous (logs: the containers' runs
// before their last restart; not with follow).
func streamParams(r *http.Request, g *market.ManifestGroup) (deploy.LogOptions, error) {
	var o deploy.LogOptions
	q := r.URL.Query()
	if v := q.Get("service"); v != "" {
		if strings.HasSuffix(v, ",") {
			return o, badRequest(`parameter "service" must not end with a comma`)
		}
		for name := range strings.SplitSeq(v, ",") {
			if !slices.ContainsFunc(g.Services, func(s market.Service) bool { return s.Name == name }) {
				return o, notFound(fmt.Sprintf("the lease has no service %q", name))
			}
			o.Services = append(o.Services, name)
		}
	}
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			return o, badRequest(fmt.Sprintf(`parameter "follow" %q: want true or false`, v))
		}
		o.Follow = f
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < -1 {
			return o, badRequest(fmt.Sprintf(`parameter "tail" %q: want a number of lines, or -1 for all`, v))
		}
		if n >= 0 {
			o.TailLines = &n
		}
	}
	if v := q.Get("previous"); v != "" {
		p, err := strconv.ParseBool(v)
		if err != nil {
			return o, badRequest(fmt.Sprintf(`parameter "previous" %q: want true or false`, v))
		}
		o.Previous = p
	}
	if o.Previous && o.Follow {
		return o, badRequest(`parameters "previous" and "follow": a container's ended run writes no more; ask for one or the other`)
	}
	return o, nil
}

// stream checks a logs or events request, upgrades it and runs stream on the socket
// until it ends, closing with the code its error calls for.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id market.LeaseID, stream func(ws *wsConn, o deploy.LogOptions) error) {
	g, err := s.leaseGroup(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts, err := streamParams(r, &g)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, err := s.upgrade(w, r, id.Owner, nil)
	if err != nil {
		return
	}
	s.closeFor(ws, r, stream(ws, opts))
}

func (s *Server) leaseLogs(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	s.stream(w, r, id, func(ws *wsConn, o deploy.LogOptions) error {
		return s.deps.Streams.Logs(ws.ctx, id, o, func(l deploy.LogLine) error {
			return ws.writeJSON(api.LogMessage{Name: l.Pod, Message: l.Message})
		})
	})
}

func (s *Server) leaseEvents(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	s.stream(w, r, id, func(ws *wsConn, o deploy.LogOptions) error {
		return s.deps.Streams.Events(ws.ctx, id, deploy.EventOptions{Follow: o.Follow}, func(e deploy.Event) error {
			kind, name, _ := strings.Cut(e.Object, "/")
			return ws.writeJSON(api.LeaseEvent{Type: e.Type, Reason: e.Reason, Note: e.Message, Object: api.EventObject{Kind: kind, Namespace: e.Namespace, Name: name}})
		})
	})
}

// frameWriter writes a stream as shell frames of one code.
type frameWriter struct {
	ws   *wsConn
	code byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	const chunk = 32 << 10
	for off := 0; off < len(p); off += chunk {
		end := min(off+chunk, len(p))
		msg := make([]byte, 0, end-off+1)
		msg = append(msg, f.code)
		msg = append(msg, p[off:end]...)
		if err := f.ws.write(websocket.BinaryMessage, msg); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (s *Server) leaseShell(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	g, err := s.leaseGroup(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := parseShellQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, badRequest(err.Error()))
		return
	}
	if !slices.ContainsFunc(g.Services, func(svc market.Service) bool { return svc.Name == req.Service }) {
		s.writeError(w, r, notFound(fmt.Sprintf("the lease has no service %q", req.Service)))
		return
	}
	// Input goes through a queue to the command, so that the socket's reader keeps
	// answering pings while the command is not reading (up to stdinQueue frames).
	var stdinR *io.PipeReader
	var stdinW *io.PipeWriter
	stdinQ := make(chan []byte, stdinQueue)
	writerDone := make(chan struct{})
	if req.Stdin {
		stdinR, stdinW = io.Pipe()
	}
	var resize chan deploy.TerminalSize
	if req.TTY {
		resize = make(chan deploy.TerminalSize, 4)
	}
	ws, err := s.upgrade(w, r, id.Owner, func(kind int, msg []byte) error {
		if kind != websocket.BinaryMessage {
			return nil
		}
		f, ok, err := parseClientFrame(msg)
		if err != nil || !ok {
			return err
		}
		switch {
		case f.code == frameStdin && stdinW != nil:
			select {
			case stdinQ <- f.stdin:
			case <-writerDone:
			}
		case f.code == frameResize && resize != nil:
			select {
			case resize <- f.resize:
			default: // the command is behind on resizes: the next one wins
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	er := deploy.ExecRequest{Service: req.Service, PodIndex: req.PodIndex, Command: req.Command, TTY: req.TTY,
		Stdout: frameWriter{ws, frameStdout}, Stderr: frameWriter{ws, frameStderr}}
	var writer sync.WaitGroup
	defer writer.Wait()
	if stdinR != nil {
		er.Stdin = stdinR
		// The end of the session ends the input (and any write waiting on it).
		context.AfterFunc(ws.ctx, func() { _ = stdinW.CloseWithError(io.EOF) })
		writer.Go(func() {
			defer close(writerDone)
			failed := false
			for {
				select {
				case b := <-stdinQ:
					if !failed {
						// A command that stopped reading its input keeps its session.
						_, err := stdinW.Write(b)
						failed = err != nil
					}
				case <-ws.ctx.Done():
					return
				}
			}
		})
	} else {
		close(writerDone)
	}
	if resize != nil {
		er.Resize = resize
	}
	code, err := s.deps.Streams.Exec(ws.ctx, id, er)
	switch {
	case ws.ctx.Err() != nil:
		// Cut short (the client left or broke the protocol, the provider is stopping):
		// the command's end, if it came, is no result (closing its input may have
		// ended it), and closeFor says why.
	case err == nil:
		_ = ws.write(websocket.BinaryMessage, resultFrame(shellResult{ExitCode: code}))
	case errors.Is(err, deploy.ErrNoPods), errors.Is(err, deploy.ErrNoSuchPod):
		_ = ws.write(websocket.BinaryMessage, resultFrame(shellResult{ExitCode: code, Message: "no running pod at that index (pod index out of range)"}))
	case errors.Is(err, ErrNotFound), errors.Is(err, deploy.ErrNoSuchLease), errors.Is(err, deploy.ErrNoSuchService):
		_ = ws.write(websocket.BinaryMessage, resultFrame(shellResult{ExitCode: code, Message: "the lease's service is not deployed (yet)"}))
	case errors.Is(err, deploy.ErrNoSuchCommand):
		_ = ws.write(websocket.BinaryMessage, resultFrame(shellResult{ExitCode: code, Message: msgCommandNotFound}))
	default:
		s.log.WarnContext(r.Context(), "lease shell failed", slog.String("lease", id.String()), slog.String("error", err.Error()))
		_ = ws.write(websocket.BinaryMessage, []byte{frameFailure})
	}
	s.closeFor(ws, r, nil)
}
