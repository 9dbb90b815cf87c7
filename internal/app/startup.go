package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/httpjson"
)

// startupServer answers on the gateway's address while the provider waits for its
// ledger node at start: GET /status says so (503, with berth.ledger), every other route
// answers 503 with the reason. Its listener is handed to the gateway once the provider
// is built, so the address never stops accepting connections.
type startupServer struct {
	ln   *handoverListener
	srv  *http.Server
	done chan struct{}

	mu    sync.Mutex
	state status.Ledger
}

// newStartupServer listens on addr and serves until handOver. The certificates are
// the gateway's: the configured one for the names it covers, otherwise the provider's
// own from an earlier start, or a throwaway one (the address of the provider's key
// needs the ledger's address prefix).
func newStartupServer(ctx context.Context, cfg config.ProviderConfig, log *slog.Logger) (*startupServer, error) {
	certs, err := startupCertificates(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Gateway.Listen)
	if err != nil {
		return nil, fmt.Errorf("gateway.listen %s: %w", cfg.Gateway.Listen, err)
	}
	tcp, ok := raw.(*net.TCPListener)
	if !ok {
		_ = raw.Close()
		return nil, fmt.Errorf("gateway.listen %s: not a TCP address", cfg.Gateway.Listen)
	}
	s := &startupServer{ln: &handoverListener{TCPListener: tcp}, done: make(chan struct{}),
		state: status.Ledger{Node: cfg.Node, Since: time.Now()}}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: certs.GetCertificate},
	}
	go func() {
		defer close(s.done)
		if err := s.srv.ServeTLS(s.ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			log.WarnContext(ctx, "start-up gateway stopped", slog.String("error", err.Error()))
		}
	}()
	return s, nil
}

// startupCertificates serves the provider's own certificate from an earlier start (or
// a throwaway one) and the configured one, chosen by server name as the gateway does.
func startupCertificates(cfg config.ProviderConfig) (*auth.ServerCertificates, error) {
	dir := filepath.Join(cfg.Home, "provider", "gateway")
	own, err := auth.LoadCertificate(filepath.Join(dir, auth.CertFile), filepath.Join(dir, auth.KeyFile))
	if err != nil {
		if own, err = auth.NewCertificate("berth-provider-starting", []string{"localhost", "127.0.0.1", "::1"}, 24*time.Hour); err != nil {
			return nil, err
		}
	}
	return serverCertificates(own, cfg.Gateway)
}

// waiting records why the ledger node did not answer.
func (s *startupServer) waiting(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Error = err.Error()
}

func (s *startupServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	st := status.Status{Timestamp: time.Now()}
	l := s.state
	st.Berth.Ledger = &l
	st.Berth.Starting = "waiting for the ledger node"
	s.mu.Unlock()
	w.Header().Set("Retry-After", "5")
	if r.URL.Path != "/status" {
		httpjson.Error(w, http.StatusServiceUnavailable, fmt.Sprintf("the provider is starting: waiting for the ledger node %s (%s)", l.Node, l.Error))
		return
	}
	httpjson.Write(w, http.StatusServiceUnavailable, st)
}

// handOver stops serving and returns the listener, still open, for the gateway. The
// connections being answered finish first (up to 5 s).
func (s *startupServer) handOver(ctx context.Context) net.Listener {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
	return s.ln.release()
}

// close stops serving and closes the listener (the provider does not start after all).
func (s *startupServer) close(ctx context.Context) {
	_ = s.handOver(ctx).Close()
}

// handoverListener is a TCP listener whose Close only ends Accept (an http.Server
// closes its listener on Shutdown); release makes it accept again for its next user.
type handoverListener struct {
	*net.TCPListener
	closed atomic.Bool
}

func (l *handoverListener) Accept() (net.Conn, error) {
	c, err := l.TCPListener.Accept()
	if l.closed.Load() {
		if c != nil {
			_ = c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

func (l *handoverListener) Close() error {
	l.closed.Store(true)
	return l.SetDeadline(time.Now())
}

func (l *handoverListener) release() net.Listener {
	_ = l.SetDeadline(time.Time{})
	return l.TCPListener
}
