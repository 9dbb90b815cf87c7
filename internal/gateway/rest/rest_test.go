package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const providerAddr = "akash1provider"

// fakeManifests records submissions; err is returned instead when set.
type fakeManifests struct {
	mu    sync.Mutex
	owner string // the only tenant with a deployment (dseq 7)
	got   map[string]market.Manifest
	err   error
}

func (f *fakeManifests) Submit(_ context.Context, owner string, dseq uint64, m market.Manifest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if owner != f.owner || dseq != 7 {
		return fmt.Errorf("deployment %d: %w", dseq, manifest.ErrNotFound)
	}
	f.got[fmt.Sprintf("%s/%d", owner, dseq)] = m
	return nil
}

// fakeDeployments holds leases' groups.
type fakeDeployments struct {
	groups map[market.LeaseID]market.ManifestGroup
	failed string // the deployment manager's last error, if any
}

func (f *fakeDeployments) Manifest(id market.LeaseID) ([]byte, market.ManifestGroup, bool) {
	g, ok := f.groups[id]
	return []byte{1}, g, ok
}

func (f *fakeDeployments) State(id market.LeaseID) (deploy.DeploymentState, bool) {
	if _, ok := f.groups[id]; !ok {
		return deploy.DeploymentState{}, false
	}
	if f.failed != "" {
		return deploy.DeploymentState{Lease: id, Phase: deploy.PhaseDeploying, Attempts: 3, Error: f.failed}, true
	}
	return deploy.DeploymentState{Lease: id, Phase: deploy.PhaseDeployed}, true
}

func (f *fakeDeployments) MigrateHostnames(owner string, hosts []string, dseq uint64, gseq uint32) ([]string, error) {
	for id, g := range f.groups {
		if id.Owner != owner || id.DSeq != dseq || id.GSeq != gseq {
			continue
		}
		for _, h := range hosts {
			if h == "taken.example.com" {
				return nil, &deploy.HostnameError{Hostname: h}
			}
			listed := false
			for _, e := range g.Services[0].Expose {
				listed = listed || slices.Contains(e.Hosts, h)
			}
			if !listed {
				return nil, fmt.Errorf("%w: not listed", deploy.ErrMigration)
			}
		}
		return hosts, nil
	}
	return nil, fmt.Errorf("%w: no destination", deploy.ErrMigration)
}

func (f *fakeDeployments) MigrateEndpoints(owner string, names []string, dseq uint64, gseq uint32) ([]string, error) {
	for id, g := range f.groups {
		if id.Owner != owner || id.DSeq != dseq || id.GSeq != gseq {
			continue
		}
		for _, n := range names {
			if !slices.ContainsFunc(g.Services[0].Expose, func(e market.ServiceExpose) bool { return e.IP == n }) {
				return nil, fmt.Errorf("%w: no port on %s", deploy.ErrMigration, n)
			}
		}
		return names, nil
	}
	return nil, fmt.Errorf("%w: no destination", deploy.ErrMigration)
}

// Routes: everything the group asks for, except withheld.example.com.
func (f *fakeDeployments) Routes(id market.LeaseID) deploy.Routes {
	g := f.groups[id]
	r := deploy.RoutesOf(&g)
	r.Hosts = slices.DeleteFunc(r.Hosts, func(h string) bool { return h == "withheld.example.com" })
	return r
}

type fakeStatuses map[market.LeaseID]deploy.LeaseStatus

func (f fakeStatuses) Status(id market.LeaseID) (deploy.LeaseStatus, bool) {
	s, ok := f[id]
	return s, ok
}

type staticStatus []byte

func (s staticStatus) StatusJSON() []byte { return s }

// webGroup is a group with a web service on port 80 (a hostname) and a random port.
func webGroup() market.ManifestGroup {
	return market.ManifestGroup{Name: "dcloud", Services: []market.Service{{
		Name: "web", Image: "nginx", Count: 2,
		Credentials: &market.ServiceCredentials{Host: "registry.example.com", Username: "u", Password: "secret-password"},
		Expose: []market.ServiceExpose{
			{Port: 80, Proto: market.ProtoTCP, Global: true, Hosts: []string{"web.example.com", "withheld.example.com"}},
			{Port: 9000, Proto: market.ProtoUDP, Global: true},
			{Port: 443, Proto: market.ProtoTCP, Global: true, IP: "front"},
		},
	}}}
}

type env struct {
	srv      *Server
	url      string
	ledger   *authtest.Ledger
	owner    authtest.Tenant
	other    authtest.Tenant
	lease    market.LeaseID
	manifest *fakeManifests
	ca       *tls.Certificate
	// stop stops the server (Serve returns) and reports what Serve returned.
	stop func() error
}

// testIngressDomain is where the test provider names services' HTTP ports.
const testIngressDomain = "ingress.example.com"

// newEnv serves the routes on loopback with the provider's own certificate (e.ca);
// certs, when given, chooses the served certificate from it instead.
func newEnv(t *testing.T, certs ...func(own tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *env {
	t.Helper()
	l := authtest.NewLedger()
	e := &env{ledger: l, owner: authtest.NewTenant(t, l), other: authtest.NewTenant(t, l), manifest: &fakeManifests{got: map[string]market.Manifest{}}}
	e.lease = market.LeaseID{Owner: e.owner.Address, DSeq: 7, GSeq: 1, OSeq: 1, Provider: providerAddr}
	e.manifest.owner = e.owner.Address
	a, err := auth.NewAuthenticator(l, authtest.Prefix, providerAddr)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := auth.NewCertificate(providerAddr, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tc := authtest.TLS(t, pc)
	e.ca = &tc
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tc, nil }
	for _, c := range certs {
		getCert = c(tc)
	}
	reg := prometheus.NewRegistry()
	st := fakeStatuses{e.lease: {Lease: e.lease, Ready: true, Services: []deploy.ServiceStatus{{
		Name: "web", Total: 2, Available: 2, Ready: 2, Replicas: 2, Updated: 2, ObservedGeneration: 3,
		Forwarded: []deploy.ForwardedPort{{Port: 9000, ExternalPort: 31000, Proto: "UDP", Name: "web"}},
	}}}}
	srv, err := New(Config{Provider: providerAddr, PublicHostname: "provider.example.com", IngressDomain: testIngressDomain, PingPeriod: 200 * time.Millisecond, Version: Version{Berth: BuildInfo{Name: "berth", Version: "v0.test"}},
		Certificate: getCert},
		Deps{Auth: a, Manifests: e.manifest, Deployments: &fakeDeployments{groups: map[market.LeaseID]market.ManifestGroup{e.lease: deploy.WithIngressHosts(e.lease, webGroup(), testIngressDomain)}},
			Statuses: st, Status: staticStatus(`{"address":"akash1provider"}`), Streams: &fakeStreams{}, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Registerer: reg},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "https://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	e.stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return e
}

// client connects with an optional client certificate, trusting any server
// certificate (the tests check the server's separately).
func (e *env) client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	code int
	body []byte
}

func (e *env) do(t *testing.T, c *http.Client, method, path, token string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	code, b, err := testenv.Do(c, req)
	if err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	return answer{code, b}
}

func TestPublicRoutes(t *testing.T) {
	e := newEnv(t)
	c := e.client(nil)
	if a := e.do(t, c, "GET", "/address", "", nil); a.code != 200 || string(a.body) != `{"address":"akash1provider"}` {
		t.Fatalf("address: %d %s", a.code, a.body)
	}
	if a := e.do(t, c, "GET", "/status", "", nil); a.code != 200 || !strings.Contains(string(a.body), "akash1provider") {
		t.Fatalf("status: %d %s", a.code, a.body)
	}
	var v Version
	if a := e.do(t, c, "GET", "/version", "", nil); a.code != 200 || json.Unmarshal(a.body, &v) != nil || v.Berth.Version != "v0.test" {
		t.Fatalf("version: %d %s", a.code, a.body)
	}
	// A bad token is refused even on a public route.
	if a := e.do(t, c, "GET", "/status", "garbage", nil); a.code != 401 {
		t.Fatalf("status with a bad token: %d %s", a.code, a.body)
	}
	if a := e.do(t, c, "GET", "/nope", "", nil); a.code != 404 || !strings.Contains(string(a.body), `"message"`) {
		t.Fatalf("unknown route: %d %s", a.code, a.body)
	}
	if a := e.do(t, c, "POST", "/status", "", nil); a.code != 405 {
		t.Fatalf("wrong method: %d %s", a.code, a.body)
	}
	if a := e.do(t, c, "GET", "/metrics", "", nil); a.code != 200 || !strings.Contains(string(a.body), "berth_gateway_requests_total") {
		t.Fatalf("metrics: %d", a.code)
	}
}

func TestTLS13Only(t *testing.T) {
	e := newEnv(t)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/version", http.NoBody)
	resp, err := c.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("a TLS 1.2 client was served")
	}
}

// validManifest is a manifest the routes accept (the fake service does not check it
// against a ledger).
func validManifest(t *testing.T) []byte {
	t.Helper()
	g := webGroup()
	g.Services[0].Resources = market.Resources{ID: 1, CPU: &market.CPU{Units: market.ResourceValue{Val: 100}}, Memory: &market.Memory{Size: market.ResourceValue{Val: 1 << 20}}}
	b, err := json.Marshal(market.Manifest{g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAuthMatrix: every tenant route, with no credentials, another tenant's, expired
// or revoked ones, a token without the route's scope, and the owner's token (ES256K
// and a wallet's ES256KADR36) and certificate.
func TestAuthMatrix(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	ownerCert := e.owner.Register(t, e.ledger)
	ownerTLS := authtest.TLS(t, ownerCert)
	revokedCert := e.owner.Register(t, e.ledger)
	revokedTLS := authtest.TLS(t, revokedCert)
	serial, _ := revokedCert.Serial()
	e.ledger.Revoke(e.owner.Address, serial)
	otherTLS := authtest.TLS(t, e.other.Register(t, e.ledger))
	full := auth.Leases{Access: auth.AccessFull}
	expired := e.owner.Token(t, now.Add(-time.Hour), full)
	statusOnly := e.owner.Token(t, now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeStatus}})
	walletStatusOnly := e.owner.WalletToken(t, now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeStatus}})

	routes := []struct {
		method, path string
		body         []byte
		scope        auth.Scope
		ws           bool // a websocket route: the owner gets 101, not 200
	}{
		{"PUT", "/deployment/7/manifest", validManifest(t), auth.ScopeSendManifest, false},
		{"GET", "/lease/7/1/1/status", nil, auth.ScopeStatus, false},
		{"GET", "/lease/7/1/1/manifest", nil, auth.ScopeGetManifest, false},
		{"GET", "/lease/7/1/1/service/web/status", nil, auth.ScopeStatus, false},
		{"GET", "/lease/7/1/1/logs", nil, auth.ScopeLogs, true},
		{"GET", "/lease/7/1/1/kubeevents", nil, auth.ScopeEvents, true},
		{"GET", "/lease/7/1/1/shell?cmd0=echo&service=web&podIndex=0", nil, auth.ScopeShell, true},
		{"POST", "/hostname/migrate", []byte(`{"hostnames_to_migrate":["web.example.com"],"destination_dseq":7,"destination_gseq":1}`), auth.ScopeHostnameMigrate, false},
		{"POST", "/endpoint/migrate", []byte(`{"endpoints_to_migrate":["front"],"destination_dseq":7,"destination_gseq":1}`), auth.ScopeIPMigrate, false},
	}
	for _, r := range routes {
		name := r.method + " " + r.path
		ok := 200
		if r.ws {
			ok = 101
		}
		for _, c := range []struct {
			who   string
			cert  *tls.Certificate
			token string
			want  int
		}{
			{"no credentials", nil, "", 401},
			{"another tenant's token", nil, e.other.Token(t, now, full), 404},
			{"another tenant's certificate", &otherTLS, "", 404},
			{"an expired token", nil, expired, 401},
			{"a revoked certificate", &revokedTLS, "", 401},
			{"the owner's token and certificate at once", &ownerTLS, e.owner.Token(t, now, full), 400},
			{"the owner's token", nil, e.owner.Token(t, now, full), ok},
			{"the owner's wallet (ES256KADR36) token", nil, e.owner.WalletToken(t, now, full), ok},
			{"another tenant's wallet token", nil, e.other.WalletToken(t, now, full), 404},
			{"the owner's certificate", &ownerTLS, "", ok},
		} {
			want := c.want
			if want == 404 && strings.HasSuffix(r.path, "/migrate") {
				want = 400 // another tenant names no destination of its own
			}
			if code, body := e.call(t, r.ws, c.cert, r.method, r.path, c.token, r.body); code != want {
				t.Errorf("%s with %s: %d %s, want %d", name, c.who, code, body, want)
			} else if code >= 400 && !json.Valid(body) {
				t.Errorf("%s with %s: error body is not JSON: %q", name, c.who, body)
			}
		}
		want := 403
		if r.scope == auth.ScopeStatus {
			want = ok
		}
		if code, body := e.call(t, r.ws, nil, r.method, r.path, statusOnly, r.body); code != want {
			t.Errorf("%s with a status-only token: %d %s, want %d", name, code, body, want)
		}
		if code, body := e.call(t, r.ws, nil, r.method, r.path, walletStatusOnly, r.body); code != want {
			t.Errorf("%s with a status-only wallet token: %d %s, want %d", name, code, body, want)
		}
	}
}

// call makes a request (a websocket handshake for ws routes) with a client
// certificate and a token, each optional; it returns the status and body.
func (e *env) call(t *testing.T, ws bool, cert *tls.Certificate, method, path, token string, body []byte) (int, []byte) {
	t.Helper()
	if !ws {
		a := e.do(t, e.client(cert), method, path, token, body)
		return a.code, a.body
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{TLSClientConfig: cfg, HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.DialContext(t.Context(), "wss"+strings.TrimPrefix(e.url, "https")+path, h)
	if err == nil {
		_ = c.Close()
		return http.StatusSwitchingProtocols, nil
	}
	if resp == nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestLeaseRoutes(t *testing.T) {
	e := newEnv(t)
	c := e.client(nil)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})

	a := e.do(t, c, "GET", "/lease/7/1/1/status", tok, nil)
	var st api.LeaseStatus
	if a.code != 200 || json.Unmarshal(a.body, &st) != nil {
		t.Fatalf("status: %d %s", a.code, a.body)
	}
	web := st.Services["web"]
	if web.Available != 2 || web.Total != 2 || web.ObservedGeneration != 3 || !st.Berth.Ready ||
		!slices.Equal(web.URIs, []string{"web.example.com", deploy.IngressHost(e.lease, "web", testIngressDomain)}) {
		t.Fatalf("status: %s", a.body)
	}
	if fp := st.ForwardedPorts["web"]; len(fp) != 1 || fp[0].ExternalPort != 31000 || fp[0].Host != "provider.example.com" || fp[0].Proto != "UDP" {
		t.Fatalf("forwarded ports: %s", a.body)
	}
	if !strings.Contains(string(a.body), `"ips":null`) {
		t.Fatalf("ips should be null: %s", a.body)
	}

	a = e.do(t, c, "GET", "/lease/7/1/1/service/web/status", tok, nil)
	var ss api.ServiceStatus
	if a.code != 200 || json.Unmarshal(a.body, &ss) != nil || ss.Name != "web" || ss.ReadyReplicas != 2 {
		t.Fatalf("service status: %d %s", a.code, a.body)
	}
	if a := e.do(t, c, "GET", "/lease/7/1/1/service/db/status", tok, nil); a.code != 404 {
		t.Fatalf("unknown service: %d %s", a.code, a.body)
	}

	a = e.do(t, c, "GET", "/lease/7/1/1/manifest", tok, nil)
	var m market.Manifest
	if a.code != 200 || json.Unmarshal(a.body, &m) != nil || len(m) != 1 || m[0].Name != "dcloud" {
		t.Fatalf("manifest: %d %s", a.code, a.body)
	}
	if strings.Contains(string(a.body), "secret-password") || m[0].Services[0].Credentials.Username != "u" {
		t.Fatalf("manifest credentials: %s", a.body)
	}
	// The manifest as the tenant sent it: the provider's own hostname is not in it.
	if strings.Contains(string(a.body), testIngressDomain) || !reflect.DeepEqual(m[0].Services[0].Expose, webGroup().Services[0].Expose) {
		t.Fatalf("manifest hosts: %s", a.body)
	}

	for _, p := range []struct {
		path string
		want int
	}{
		{"/lease/8/1/1/status", 404},
		{"/lease/x/1/1/status", 400},
		{"/lease/7/0/1/status", 400},
		{"/lease/7/1/99999999999/status", 400},
	} {
		if a := e.do(t, c, "GET", p.path, tok, nil); a.code != p.want {
			t.Errorf("%s: %d %s, want %d", p.path, a.code, a.body, p.want)
		}
	}
}

func TestPutManifest(t *testing.T) {
	e := newEnv(t)
	c := e.client(nil)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})
	if a := e.do(t, c, "PUT", "/deployment/7/manifest", tok, validManifest(t)); a.code != 200 || len(a.body) != 0 {
		t.Fatalf("accepted: %d %q", a.code, a.body)
	}
	if len(e.manifest.got) != 1 {
		t.Fatalf("submitted %v", e.manifest.got)
	}
	for _, c2 := range []struct {
		name string
		body []byte
		err  error
		want int
		msg  string
	}{
		{"not JSON", []byte("{"), nil, 400, "not a JSON array"},
		{"unknown field", []byte(`[{"name":"a","services":[],"x":1}]`), nil, 400, "unknown field"},
		{"too large", bytes.Repeat([]byte(" "), manifest.MaxBytes+1), nil, 400, "larger than"},
		{"invalid", validManifest(t), fmt.Errorf("check: %w", &manifest.Error{Path: "[0].name", Msg: "bad"}), 422, "[0].name: bad"},
		{"hostname held", validManifest(t), &deploy.HostnameError{Hostname: "web.example.com"}, 422, "another tenant"},
		{"blocked", validManifest(t), fmt.Errorf("host: %w", manifest.ErrHostnameBlocked), 422, "blocked"},
		{"no lease", validManifest(t), fmt.Errorf("deployment 7 has no lease: %w", manifest.ErrNotFound), 404, "no lease"},
		{"ledger down", validManifest(t), fmt.Errorf("query: %w: dial tcp 10.0.0.1:26657: connection refused", manifest.ErrUnavailable), 503, "try again"},
		{"a bug", validManifest(t), errors.New("nil pointer somewhere internal"), 500, "internal error"},
	} {
		e.manifest.err = c2.err
		a := e.do(t, c, "PUT", "/deployment/7/manifest", tok, c2.body)
		var body api.Error
		if a.code != c2.want || json.Unmarshal(a.body, &body) != nil || !strings.Contains(body.Message, c2.msg) {
			t.Errorf("%s: %d %s, want %d with %q", c2.name, a.code, a.body, c2.want, c2.msg)
		}
		if strings.Contains(string(a.body), "10.0.0.1") || strings.Contains(string(a.body), "nil pointer") {
			t.Errorf("%s: internal details leaked: %s", c2.name, a.body)
		}
	}
}

func TestMigrateHostnames(t *testing.T) {
	e := newEnv(t)
	c := e.client(nil)
	now := time.Now()
	tok := e.owner.Token(t, now, auth.Leases{Access: auth.AccessFull})
	body := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	req := api.HostnameMigration{Hostnames: []string{"web.example.com"}, DestinationDSeq: 7, DestinationGSeq: 1}
	a := e.do(t, c, "POST", "/hostname/migrate", tok, body(req))
	var tr api.Transferred
	if a.code != 200 || json.Unmarshal(a.body, &tr) != nil || !slices.Equal(tr.Transferred, req.Hostnames) {
		t.Fatalf("migrate: %d %s", a.code, a.body)
	}
	for _, tc := range []struct {
		name  string
		token string
		body  []byte
		want  int
	}{
		{"no credentials", "", body(req), 401},
		{"another tenant (no such destination of theirs)", e.other.Token(t, now, auth.Leases{Access: auth.AccessFull}), body(req), 400},
		{"without the scope", e.owner.Token(t, now, auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeStatus}}), body(req), 403},
		{"malformed", tok, []byte(`{"hostnames":["a"]}`), 400},
		{"empty", tok, body(api.HostnameMigration{DestinationDSeq: 7, DestinationGSeq: 1}), 400},
		{"bad hostname", tok, body(api.HostnameMigration{Hostnames: []string{"Bad_Host"}, DestinationDSeq: 7, DestinationGSeq: 1}), 400},
		{"not listed", tok, body(api.HostnameMigration{Hostnames: []string{"x.example.com"}, DestinationDSeq: 7, DestinationGSeq: 1}), 400},
		{"another tenant's hostname", tok, body(api.HostnameMigration{Hostnames: []string{"taken.example.com"}, DestinationDSeq: 7, DestinationGSeq: 1}), 422},
	} {
		if a := e.do(t, c, "POST", "/hostname/migrate", tc.token, tc.body); a.code != tc.want || !json.Valid(a.body) {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.want)
		}
	}
}

func TestMigrateEndpoints(t *testing.T) {
	e := newEnv(t)
	c := e.client(nil)
	tok := e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull})
	a := e.do(t, c, "POST", "/endpoint/migrate", tok, []byte(`{"endpoints_to_migrate":["front"],"destination_dseq":7,"destination_gseq":1}`))
	var tr api.Transferred
	if a.code != 200 || json.Unmarshal(a.body, &tr) != nil || !slices.Equal(tr.Transferred, []string{"front"}) {
		t.Fatalf("migrate: %d %s", a.code, a.body)
	}
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"endpoints_to_migrate":["back"],"destination_dseq":7,"destination_gseq":1}`, 400},
		{`{"endpoints_to_migrate":["Front!"],"destination_dseq":7,"destination_gseq":1}`, 400},
		{`{"endpoints_to_migrate":[],"destination_dseq":7,"destination_gseq":1}`, 400},
		{`{"endpoints_to_migrate":["front"],"destination_dseq":7}`, 400},
		{`{"hostnames_to_migrate":["front"],"destination_dseq":7,"destination_gseq":1}`, 400},
	} {
		if a := e.do(t, c, "POST", "/endpoint/migrate", tok, []byte(tc.body)); a.code != tc.want || !json.Valid(a.body) {
			t.Errorf("%s: %d %s, want %d", tc.body, a.code, a.body, tc.want)
		}
	}
}

// TestLeaseStatusHidesDeployErrors: why an apply failed can name the cluster's
// addresses; tenants see that it is retried, not the cause.
func TestLeaseStatusHidesDeployErrors(t *testing.T) {
	e := newEnv(t)
	fd, _ := e.srv.deps.Deployments.(*fakeDeployments)
	fd.failed = `Post "https://10.0.0.1:6443/apis/apps/v1/namespaces/lease-x/deployments": dial tcp 10.0.0.1:6443: connect: connection refused`
	a := e.do(t, e.client(nil), "GET", "/lease/7/1/1/status", e.owner.Token(t, time.Now(), auth.Leases{Access: auth.AccessFull}), nil)
	var st api.LeaseStatus
	if a.code != 200 || json.Unmarshal(a.body, &st) != nil || st.Berth.Phase != deploy.PhaseDeploying || !strings.Contains(st.Berth.Error, "3 attempts") {
		t.Fatalf("status: %d %s", a.code, a.body)
	}
	if strings.Contains(string(a.body), "10.0.0.1") {
		t.Fatalf("the cluster's address leaked: %s", a.body)
	}
}
