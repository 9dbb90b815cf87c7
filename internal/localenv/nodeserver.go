package localenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// nodeServer is the kubelet endpoint every simulated node advertises (kwok's
// --node-port), in front of kwok's own server. It runs `exec` itself, with a terminal
// or without, and hands everything else (logs, attach, port-forward, health) to kwok
// unchanged. No exec request reaches kwok.
//
// kwok v0.8.0's exec gets wrong what a tenant's shell relies on. A non-zero exit of the
// command reaches the client as an internal error rather than as the exit code (kwok
// wraps the *exec.ExitError, and the kubelet streaming library only recognises it
// unwrapped); without a terminal the command's stdin is never closed, so `cat` never
// sees the end of its input; with a terminal but no stdin or no stdout, kwok copies
// from or to a nil stream in a goroutine of its own, and the panic ends kwok (and the
// simulated nodes with it). Here the command runs on this host in the exec directory,
// as kwok's would, with all of that right.
//
// Only clients with a certificate from the control plane's CA (the API server) are
// served. stop ends running commands and returns once every request has finished.
type nodeServer struct {
	addr    string // host:port
	execDir string
	srv     *http.Server
	proxy   *httputil.ReverseProxy
	kwok    *http.Transport
	log     *slog.Logger
	// cancel ends the context of every request, and with it every running command.
	cancel   context.CancelFunc
	serveErr chan error

	mu       sync.Mutex // guards stopped and the Add side of requests
	stopped  bool
	requests sync.WaitGroup
}

// nodeServerConfig says where kwok listens and which credentials the node server uses.
type nodeServerConfig struct {
	kwokAddr string   // kwok's server, host:port
	serving  certPair // the node server's certificate (kwok's: the API server checks it)
	client   certPair // presented to kwok
	caPEM    []byte   // the control plane's CA: clients and kwok must have its certificates
	execDir  string
	log      *slog.Logger
}

// execStreamTimeout bounds how long an exec waits for the client's streams to open.
const execStreamTimeout = 30 * time.Second

func startNodeServer(ctx context.Context, cfg nodeServerConfig) (*nodeServer, error) {
	defaultHangUpForCommands()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.caPEM) {
		return nil, errors.New("node server: no CA certificate")
	}
	serving, err := tls.X509KeyPair(cfg.serving.CertPEM, cfg.serving.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("node server: serving certificate: %w", err)
	}
	client, err := tls.X509KeyPair(cfg.client.CertPEM, cfg.client.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("node server: client certificate: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("node server: listen: %w", err)
	}
	// The server outlives the start-up call whose context this is.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &nodeServer{addr: ln.Addr().String(), execDir: cfg.execDir, log: cfg.log, cancel: cancel, serveErr: make(chan error, 1)}
	// HTTP/1.1 only: exec and port-forward upgrade the connection.
	s.kwok = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}}
	target := &url.URL{Scheme: "https", Host: cfg.kwokAddr}
	s.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     s.kwok,
		FlushInterval: -1, // followed logs line by line
		ErrorLog:      slog.NewLogLogger(cfg.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil { // not just a client that went away
				cfg.log.WarnContext(r.Context(), "node server: kwok did not answer", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", s.exec)
	mux.HandleFunc("/exec/{namespace}/{pod}/{uid}/{container}", s.exec)
	// No other path under /exec/ reaches kwok either: its router ignores a trailing
	// slash (say), and would run its own exec.
	mux.HandleFunc("/exec/", http.NotFound)
	mux.Handle("/", s.proxy)
	s.srv = &http.Server{
		Handler: s.track(mux),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serving},
			ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS12,
		},
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(cfg.log.Handler(), slog.LevelWarn),
	}
	go func() { s.serveErr <- s.srv.ServeTLS(ln, "", "") }()
	return s, nil
}

// port is the port the node server listens on.
func (s *nodeServer) port() int {
	_, p, _ := net.SplitHostPort(s.addr)
	n, _ := strconv.Atoi(p)
	return n
}

// track counts requests in flight (hijacked connections included, which
// http.Server.Close does not wait for) and refuses new ones once stopping.
func (s *nodeServer) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			http.Error(w, "node server stopping", http.StatusServiceUnavailable)
			return
		}
		s.requests.Add(1)
		s.mu.Unlock()
		defer s.requests.Done()
		h.ServeHTTP(w, r)
	})
}

// stop kills running commands, closes the listener and connections, and returns once
// every request has returned. Stop kwok first: proxied upgraded connections end when
// it does.
func (s *nodeServer) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	_ = s.srv.Close()
	if err := <-s.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Warn("node server", slog.String("error", err.Error()))
	}
	s.requests.Wait()
	s.kwok.CloseIdleConnections()
}

// exec serves the kubelet's exec endpoint with the remote command protocol v4 over
// SPDY (what the API server speaks to kubelets, translating websocket clients), with
// a terminal or without, as a kubelet does.
func (s *nodeServer) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	argv := q[corev1.ExecCommandParam]
	if len(argv) == 0 {
		http.Error(w, "no command", http.StatusBadRequest)
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// Only clients of an old protocol reach a kubelet by websocket: the API server
		// translates its own (v5) to SPDY.
		http.Error(w, "exec by websocket is not served here: use the API server's v5.channel.k8s.io protocol, or SPDY", http.StatusBadRequest)
		return
	}
	want := map[string]bool{corev1.StreamTypeError: true}
	for param, typ := range map[string]string{corev1.ExecStdinParam: corev1.StreamTypeStdin, corev1.ExecStdoutParam: corev1.StreamTypeStdout, corev1.ExecStderrParam: corev1.StreamTypeStderr} {
		if q.Get(param) == "1" {
			want[typ] = true
		}
	}
	if len(want) == 1 {
		http.Error(w, "exec needs at least one of stdin, stdout and stderr", http.StatusBadRequest)
		return
	}
	tty := q.Get(corev1.ExecTTYParam) == "1"
	if tty {
		// A terminal has one output, and a size (as on a kubelet, stderr is ignored).
		delete(want, corev1.StreamTypeStderr)
		want[corev1.StreamTypeResize] = true
	}
	if _, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name}); err != nil {
		return // Handshake told the client
	}
	type newStream struct {
		httpstream.Stream
		replySent <-chan struct{}
	}
	arrived := make(chan newStream, len(want))
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case arrived <- newStream{st, replySent}:
			return nil
		default:
			return errors.New("unexpected stream")
		}
	})
	if conn == nil {
		return // the upgrader told the client
	}
	defer func() { _ = conn.Close() }()
	// The node server stopping ends the connection, and with it any write to a client
	// that does not read.
	defer context.AfterFunc(r.Context(), func() { _ = conn.Close() })()
	streams := map[string]httpstream.Stream{}
	timeout := time.NewTimer(execStreamTimeout)
	defer timeout.Stop()
	for len(streams) < len(want) {
		select {
		case st := <-arrived:
			typ := st.Headers().Get(corev1.StreamType)
			if !want[typ] || streams[typ] != nil {
				_ = st.Reset()
				continue
			}
			select {
			case <-st.replySent:
			case <-conn.CloseChan():
				return
			}
			streams[typ] = st.Stream
		case <-timeout.C:
			s.log.WarnContext(r.Context(), "exec: streams did not open", slog.String("path", r.URL.Path))
			return
		case <-conn.CloseChan():
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() { // a client gone ends the command
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	}()
	// Goroutines reading from the client (stdin, resizes) may still wait on it once
	// the command is over: closing the connection ends them.
	var readers sync.WaitGroup
	var err error
	if tty {
		err = s.runTerminal(ctx, argv, streams[corev1.StreamTypeStdin], streams[corev1.StreamTypeStdout], streams[corev1.StreamTypeResize], &readers)
	} else {
		err = s.run(ctx, argv, streams[corev1.StreamTypeStdin], streams[corev1.StreamTypeStdout], streams[corev1.StreamTypeStderr], &readers)
	}
	if b, jerr := json.Marshal(execStatus(err)); jerr == nil {
		_, _ = streams[corev1.StreamTypeError].Write(b)
	}
	_ = conn.Close()
	readers.Wait()
}

// hangUpOnce makes exec'd commands start with SIGHUP's default action.
var hangUpOnce sync.Once

// defaultHangUpForCommands: started under nohup (SIGHUP ignored), this process would
// pass the ignored SIGHUP on to every command it runs, and a shell cannot trap or
// reset a signal ignored when it started: the end of a terminal session's stdin would
// not hang the command up, and the session would never end. Go gives exec'd processes
// the default action of the signals it handles, so it handles SIGHUP (and, as before,
// does nothing with it). Without nohup nothing changes: a hang-up still ends berth.
func defaultHangUpForCommands() {
	hangUpOnce.Do(func() {
		if signal.Ignored(syscall.SIGHUP) {
			signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
		}
	})
}

// command is argv to run in the exec directory, in its own process group, killed
// whole when ctx ends.
func (s *nodeServer) command(ctx context.Context, argv []string) *exec.Cmd {
	//nolint:gosec // G204: running the client's command on this host is what this test double is for
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.execDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// run runs a command without a terminal and returns when it has exited. The copy of
// stdin, which may wait on the client, is counted in readers.
func (s *nodeServer) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer, readers *sync.WaitGroup) error {
	cmd := s.command(ctx, argv)
	// A background child keeping stdout open does not hold the session.
	cmd.WaitDelay = time.Second
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	var in io.WriteCloser
	if stdin != nil {
		var err error
		if in, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if in != nil {
		readers.Go(func() {
			_, _ = io.Copy(in, stdin)
			_ = in.Close() // the end of the client's stdin is the end of the command's
		})
	}
	return cmd.Wait()
}

// execStatus is the v4 protocol's result: success, the exit code, or why the command
// could not run.
func execStatus(err error) metav1.Status {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return metav1.Status{Status: metav1.StatusSuccess}
	case errors.As(err, &exit) && exitCode(exit) > 0:
		return metav1.Status{
			Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exit),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(exitCode(exit)),
			}}},
		}
	default:
		return metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError,
			Message: "error executing command in container: " + err.Error()}
	}
}

// exitCode is a command's exit status as a container runtime reports it: 128 plus the
// signal's number for a command a signal ended.
func exitCode(exit *exec.ExitError) int {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}
