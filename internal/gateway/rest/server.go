package rest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/httpjson"
)

// Authenticator identifies the tenant behind a request (auth.Authenticator).
type Authenticator interface {
	Authenticate(r *http.Request) (auth.Identity, error)
}

// Manifests accepts tenants' manifests (manifest.Service).
type Manifests interface {
	Submit(ctx context.Context, owner string, dseq uint64, m market.Manifest) error
}

// Deployments is what the deployment manager knows of a lease (deploy.Manager).
type Deployments interface {
	Manifest(id market.LeaseID) ([]byte, market.ManifestGroup, bool)
	State(id market.LeaseID) (deploy.DeploymentState, bool)
	MigrateHostnames(owner string, hosts []string, dseq uint64, gseq uint32) ([]string, error)
	MigrateEndpoints(owner string, endpoints []string, dseq uint64, gseq uint32) ([]string, error)
	Routes(id market.LeaseID) deploy.Routes
}

// Statuses are the leases' cluster status (kube.Monitor).
type Statuses interface {
	Status(id market.LeaseID) (deploy.LeaseStatus, bool)
}

// StatusSource is the provider's status snapshot: its JSON, served as it is.
type StatusSource interface {
	StatusJSON() []byte
}

// Version is what GET /version reports.
type Version struct {
	Berth BuildInfo `json:"akash"`
	Kube  any       `json:"kube,omitempty"`
}

// BuildInfo describes the running binary.
type BuildInfo struct {
	Name       string `json:"name"`
	ServerName string `json:"server_name"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	BuildTags  string `json:"build_tags"`
	Go         string `json:"go"`
}

// Config configures the server.
type Config struct {
	// Provider is the provider's account address.
	Provider string
	// PublicHostname is the host tenants reach forwarded ports on (reported in lease
	// status).
	PublicHostname string
	// IngressDomain is where the provider names services' HTTP ports (its hostnames
	// are left out of the manifest a tenant reads back).
	IngressDomain string
	// IngressHTTPPort is the port the HTTP ingress answers services' URIs on, when not
	// 80 (lease status says it: BerthLeaseStatus.IngressHTTPPort).
	IngressHTTPPort int
	// Version is GET /version's answer.
	Version Version
	// Certificate serves the provider's certificate (tls.Config.GetCertificate).
	Certificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// PingPeriod is how often websockets are pinged (default 10 s; Akash's tenant
	// tools drop a socket after 15 s without a ping).
	PingPeriod time.Duration
	// MaxConnections bounds open connections (default 4096); MaxSessions the
	// websocket sessions (default 1024), and MaxTenantSessions one tenant's (default
	// 32): each session holds streams on the cluster.
	MaxConnections, MaxSessions, MaxTenantSessions int
}

// ReadTimeout bounds reading a request, body included (a manifest is at most 1 MiB).
// A websocket sets its own deadlines once upgraded.
const ReadTimeout = 30 * time.Second

// Deps are the components the routes use. Metrics, when set, is served at /metrics.
type Deps struct {
	Auth        Authenticator
	Manifests   Manifests
	Deployments Deployments
	Statuses    Statuses
	Status      StatusSource
	// Streams serves logs, events and shells (those routes exist only with it).
	Streams    Streams
	Metrics    http.Handler
	Registerer prometheus.Registerer
	// Decisions serves GET /status/decisions to the provider's own account (the route
	// exists only with it).
	Decisions DecisionSource
}

// Server is the gateway's HTTPS server.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	// sessions counts websocket sessions, which outlive the HTTP server's own
	// bookkeeping once hijacked.
	sessions sync.WaitGroup
	// submissions counts manifest submissions under way: a stopping server waits for
	// them, so a manifest being recorded is recorded (and answered) before it exits.
	submissions sync.WaitGroup
	// open and perTenant count sessions for the limits.
	mu        sync.Mutex
	open      int
	perTenant map[string]int
}

// New builds the server and its routes; it starts nothing.
func New(cfg Config, deps Deps, log *slog.Logger) (*Server, error) {
	switch {
	case cfg.Provider == "":
		return nil, errors.New("gateway: provider address is required")
	case cfg.Certificate == nil:
		return nil, errors.New("gateway: a server certificate is required")
	case deps.Auth == nil || deps.Manifests == nil || deps.Deployments == nil || deps.Statuses == nil || deps.Status == nil || log == nil:
		return nil, errors.New("gateway: authenticator, manifests, deployments, statuses, status and logger are required")
	}
	if cfg.PingPeriod <= 0 {
		cfg.PingPeriod = 10 * time.Second
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 4096
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 1024
	}
	if cfg.MaxTenantSessions <= 0 {
		cfg.MaxTenantSessions = 32
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, deps: deps, log: log, mux: http.NewServeMux(), metrics: m, perTenant: map[string]int{}}
	s.routes()
	return s, nil
}

// Handler is the server's routes (for tests and for serving without TLS in front of
// a terminating proxy).
func (s *Server) Handler() http.Handler { return s }

// TLSConfig is the server's TLS: 1.3 only; a client certificate is asked for but not
// required (a bearer token is the other way in), and checked against the ledger by
// the authenticator rather than against a CA.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: s.cfg.Certificate,
		ClientAuth:     tls.RequestClientCert,
	}
}

// Serve serves HTTPS on ln until ctx ends, then shuts down: new requests are refused,
// running ones (manifest submissions being recorded, above all) are given submitDrain
// to finish and answer, then closed; websockets end with ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var conns sync.WaitGroup
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         s.TLSConfig(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				conns.Add(1)
			case http.StateHijacked, http.StateClosed:
				conns.Done()
			}
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(netutil.LimitListener(ln, s.cfg.MaxConnections), "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitDrain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// Manifest submissions go on (their answer may be lost; they are idempotent).
		err = srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	s.submissions.Wait()
	conns.Wait()
	s.sessions.Wait() // their contexts derive from ctx: they are ending
	return err
}

func (s *Server) routes() {
	s.handle("GET /version", s.public(s.version))
	s.handle("GET /address", s.public(s.address))
	s.handle("GET /status", s.public(s.status))
	if s.deps.Decisions != nil {
		s.handle("GET /status/decisions", s.operator(s.decisions))
	}
	s.handle("PUT /deployment/{dseq}/manifest", s.tenant(auth.ScopeSendManifest, deploymentRoute, s.putManifest))
	s.handle("GET /lease/{dseq}/{gseq}/{oseq}/status", s.tenant(auth.ScopeStatus, leaseRoute, s.leaseStatus))
	s.handle("GET /lease/{dseq}/{gseq}/{oseq}/manifest", s.tenant(auth.ScopeGetManifest, leaseRoute, s.leaseManifest))
	s.handle("GET /lease/{dseq}/{gseq}/{oseq}/service/{service}/status", s.tenant(auth.ScopeStatus, leaseRoute, s.serviceStatus))
	s.handle("POST /hostname/migrate", s.migrateHostnames)
	s.handle("POST /endpoint/migrate", s.migrateEndpoints)
	if s.deps.Streams != nil {
		s.handle("GET /lease/{dseq}/{gseq}/{oseq}/logs", s.tenant(auth.ScopeLogs, leaseRoute, s.leaseLogs))
		s.handle("GET /lease/{dseq}/{gseq}/{oseq}/kubeevents", s.tenant(auth.ScopeEvents, leaseRoute, s.leaseEvents))
		s.handle("/lease/{dseq}/{gseq}/{oseq}/shell", s.tenant(auth.ScopeShell, leaseRoute, s.leaseShell))
	}
	if s.deps.Metrics != nil {
		s.mux.Handle("GET /metrics", s.deps.Metrics)
	}
}

// ServeHTTP serves the routes; the mux's own answers (404 for an unknown path, 405
// with Allow for a wrong method) get JSON bodies like every other error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.mux.ServeHTTP(&jsonError{ResponseWriter: w}, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// jsonError turns the mux's plain-text error into {"message": ...}.
type jsonError struct {
	http.ResponseWriter
	code    int
	written bool
}

func (j *jsonError) WriteHeader(code int) { j.code = code }

func (j *jsonError) Write(b []byte) (int, error) {
	if j.written {
		return len(b), nil
	}
	j.written = true
	if j.code == 0 {
		j.code = http.StatusOK
	}
	j.ResponseWriter.Header().Del("Content-Length")
	httpjson.Error(j.ResponseWriter, j.code, strings.TrimSpace(string(b)))
	return len(b), nil
}

// handle registers a route, counted and timed under its pattern.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.mux.Handle(pattern, s.metrics.instrument(pattern, h))
}

// public routes need no credentials, but bad credentials sent anyway are refused
// (as on Akash), so a tenant learns its token is wrong on the first call.
func (s *Server) public(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			if _, err := s.deps.Auth.Authenticate(r); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		h(w, r)
	}
}

// routeKind says what a tenant route's path names.
type routeKind int

const (
	deploymentRoute routeKind = iota // /deployment/{dseq}
	leaseRoute                       // /lease/{dseq}/{gseq}/{oseq}
)

// tenantHandler serves an authenticated tenant on its own lease (or, for deployment
// routes, LeaseID with GSeq and OSeq 0).
type tenantHandler func(w http.ResponseWriter, r *http.Request, id market.LeaseID)

// tenant authenticates the request, builds the lease ID from the authenticated
// owner (so a tenant can only ever name its own leases) and the path, and checks the
// identity's scope on it.
func (s *Server) tenant(scope auth.Scope, kind routeKind, h tenantHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, err := s.deps.Auth.Authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		id, err := s.pathLease(r, kind, who.Owner)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !who.Allows(scope, id) {
			s.writeError(w, r, forbidden(fmt.Sprintf("your credentials do not grant %q on this %s", scope, kindName(kind))))
			return
		}
		h(w, r, id)
	}
}

func kindName(k routeKind) string {
	if k == deploymentRoute {
		return "deployment"
	}
	return "lease"
}

func (s *Server) pathLease(r *http.Request, kind routeKind, owner string) (market.LeaseID, error) {
	id := market.LeaseID{Owner: owner, Provider: s.cfg.Provider}
	dseq, err := strconv.ParseUint(r.PathValue("dseq"), 10, 64)
	if err != nil || dseq == 0 {
		return id, badRequest(fmt.Sprintf("dseq %q: want a positive integer", r.PathValue("dseq")))
	}
	id.DSeq = dseq
	if kind == deploymentRoute {
		return id, nil
	}
	for _, p := range []struct {
		name string
		dst  *uint32
	}{{"gseq", &id.GSeq}, {"oseq", &id.OSeq}} {
		v, err := strconv.ParseUint(r.PathValue(p.name), 10, 32)
		if err != nil || v == 0 {
			return id, badRequest(fmt.Sprintf("%s %q: want a positive integer", p.name, r.PathValue(p.name)))
		}
		*p.dst = uint32(v)
	}
	return id, nil
}
