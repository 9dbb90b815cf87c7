package client

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
)

// LogOptions select log lines: of some services (all when empty), following new
// lines or not, starting with each container's last Tail lines (-1: all).
type LogOptions struct {
	Services []string
	Follow   bool
	Tail     int
	// Previous asks for the containers' runs before their last restart (not with
	// Follow).
	Previous bool
}

// dial opens a websocket to path with the client's credentials.
func (c *Client) dial(ctx context.Context, path string, q url.Values) (*websocket.Conn, error) {
	u := *c.base
	u.Scheme = "wss"
	u.Path = strings.TrimSuffix(c.base.Path, "/") + path
	u.RawQuery = q.Encode()
	h := http.Header{}
	if c.opts.ClientCert == nil {
		tok, err := c.token()
		if err != nil {
			return nil, err
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	d := websocket.Dialer{NetDialTLSContext: c.dialTLS, HandshakeTimeout: c.opts.Timeout}
	conn, resp, err := d.DialContext(ctx, u.String(), h)
	if resp != nil {
		defer func() { _ = resp.Body.Close() }()
	}
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			var eb api.Error
			msg := strings.TrimSpace(string(data))
			if json.Unmarshal(data, &eb) == nil && eb.Message != "" {
				msg = eb.Message
			}
			return nil, &ResponseError{Status: resp.StatusCode, Message: msg}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The provider pings; answering keeps the stream open (the default handler does).
	return conn, nil
}

// closeMeanings say what a close code means when the provider gave no reason (Akash's
// provider gives none).
var closeMeanings = map[int]string{
	api.CloseInternal:              "the provider failed",
	websocket.CloseGoingAway:       "the provider is going away",
	websocket.CloseProtocolError:   "protocol error",
	websocket.CloseAbnormalClosure: "the connection was lost",
}

// closeError turns how a stream ended into nil (a normal closure) or an error: any
// other close, with its reason, is one (the caller exits non-zero), never an end of
// the stream.
func closeError(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case websocket.CloseNormalClosure:
			return nil
		case api.CloseNotFound:
			return &ResponseError{Status: http.StatusNotFound, Message: ce.Text}
		case api.CloseUnavailable:
			return &ResponseError{Status: http.StatusServiceUnavailable, Message: ce.Text}
		}
		reason := ce.Text
		if reason == "" {
			reason = cmp.Or(closeMeanings[ce.Code], "no reason given")
		}
		return fmt.Errorf("the provider ended the stream: %s (close code %d)", reason, ce.Code)
	}
	return err
}

// readStream decodes each text frame into T and hands it to fn, until the provider
// closes the stream or ctx ends.
func readStream[T any](ctx context.Context, conn *websocket.Conn, fn func(T) error) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer func() { _ = conn.Close() }()
	for {
		kind, msg, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return nil // the caller stopped reading
			}
			return closeError(err)
		}
		if kind != websocket.TextMessage {
			continue
		}
		var v T
		if err := json.Unmarshal(msg, &v); err != nil {
			return fmt.Errorf("stream message: %w", err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
}

func streamQuery(services []string, follow bool, tail int) url.Values {
	q := url.Values{}
	if len(services) > 0 {
		q.Set("service", strings.Join(services, ","))
	}
	if follow {
		q.Set("follow", "true")
	}
	if tail >= 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	return q
}

// Logs streams the lease's log lines to fn.
func (c *Client) Logs(ctx context.Context, id market.LeaseID, o LogOptions, fn func(api.LogMessage) error) error {
	q := streamQuery(o.Services, o.Follow, o.Tail)
	if o.Previous {
		q.Set("previous", "true")
	}
	conn, err := c.dial(ctx, leasePath(id, "logs"), q)
	if err != nil {
		return err
	}
	return readStream(ctx, conn, fn)
}

// Events streams the lease's Kubernetes events to fn.
func (c *Client) Events(ctx context.Context, id market.LeaseID, follow bool, fn func(api.LeaseEvent) error) error {
	conn, err := c.dial(ctx, leasePath(id, "kubeevents"), streamQuery(nil, follow, -1))
	if err != nil {
		return err
	}
	return readStream(ctx, conn, fn)
}

// TerminalSize is a terminal's width and height in characters.
type TerminalSize struct {
	Width, Height uint16
}

// ShellOptions is a command to run in a lease's pod.
type ShellOptions struct {
	Command  []string
	Service  string
	PodIndex int
	TTY      bool
	Stdin    io.Reader // nil: no input
	Stdout   io.Writer
	Stderr   io.Writer
	Resize   <-chan TerminalSize // with TTY
}

// ErrShellFailed is the provider failing to run a shell (frame 103).
var ErrShellFailed = errors.New("lease shell failed: the provider could not run the command")

// Shell runs a command in a service's pod and returns its exit code. A command that
// could not run (no such pod, not found) is an error with the provider's reason.
func (c *Client) Shell(ctx context.Context, id market.LeaseID, o ShellOptions) (int, error) {
	if len(o.Command) == 0 || o.Service == "" {
		return 0, errors.New("shell: a command and a service are required")
	}
	q := url.Values{"service": {o.Service}, "podIndex": {strconv.Itoa(o.PodIndex)}}
	for i, a := range o.Command {
		q.Set("cmd"+strconv.Itoa(i), a)
	}
	if o.TTY {
		q.Set("tty", "1")
	}
	if o.Stdin != nil {
		q.Set("stdin", "1")
	}
	conn, err := c.dial(ctx, leasePath(id, "shell"), q)
	if err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer func() { _ = conn.Close() }()
	var wmu sync.Mutex
	send := func(code byte, payload []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(c.opts.Timeout))
		return conn.WriteMessage(websocket.BinaryMessage, append([]byte{code}, payload...))
	}
	done := make(chan struct{})
	defer close(done)
	if o.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := o.Stdin.Read(buf)
				if n > 0 && send(api.ShellStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	if o.TTY && o.Resize != nil {
		go func() {
			for {
				select {
				case <-done:
					return
				case sz := <-o.Resize:
					var b [4]byte
					binary.BigEndian.PutUint16(b[0:2], sz.Width)
					binary.BigEndian.PutUint16(b[2:4], sz.Height)
					if send(api.ShellResize, b[:]) != nil {
						return
					}
				}
			}
		}()
	}
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if cerr := closeError(err); cerr != nil {
				return 0, cerr
			}
			return 0, errors.New("lease shell: the provider closed the stream without a result")
		}
		if len(msg) == 0 {
			continue
		}
		switch msg[0] {
		case api.ShellStdout:
			if o.Stdout != nil {
				_, _ = o.Stdout.Write(msg[1:])
			}
		case api.ShellStderr:
			if o.Stderr != nil {
				_, _ = o.Stderr.Write(msg[1:])
			}
		case api.ShellResult:
			var r api.ShellExit
			if err := json.Unmarshal(msg[1:], &r); err != nil {
				return 0, fmt.Errorf("lease shell result: %w", err)
			}
			if r.Message != "" {
				return r.ExitCode, fmt.Errorf("lease shell: %s", r.Message)
			}
			return r.ExitCode, nil
		case api.ShellFailure:
			return 0, ErrShellFailed
		}
	}
}
