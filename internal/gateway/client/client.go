// Package client is the tenant's side of the gateway: it finds a provider's gateway,
// checks the provider's certificate against the ledger, authenticates with the
// tenant's client certificate or a bearer token signed by the tenant's key, and calls
// the routes. A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/wait"
)

// CertLookup finds a certificate the ledger records (ledger.ErrNotFound if none).
type CertLookup func(ctx context.Context, owner, serial string) (ledger.Certificate, error)

// Options configure a client.
type Options struct {
	// HostURI is the provider's gateway (its registration's host_uri).
	HostURI string
	// Provider is the provider's address: its self-signed certificate must have it
	// as subject CN and be registered on the ledger under it.
	Provider string
	// Certs looks certificates up on the ledger.
	Certs CertLookup
	// ClientCert authenticates with mTLS when set; otherwise Signer signs bearer
	// tokens (valid TokenTTL, full access).
	ClientCert *tls.Certificate
	Signer     ledger.Signer
	Tenant     string
	// Timeout bounds each attempt of a request (not streams); default 30 s.
	Timeout time.Duration
	// OnRetry, when set, is told of each failed attempt of a request that will be made
	// again: its number in the request (from 1), its error and the pause before the
	// next. It must not block.
	OnRetry func(attempt int, err error, pause time.Duration)
}

// TokenTTL is how long the bearer tokens a client makes are valid (as Akash's tools).
const TokenTTL = 15 * time.Minute

// Client calls one provider's gateway. A request the provider could not answer —
// unreachable (connection refused or reset, a TLS handshake cut short, a timeout) or
// answering 500, 502, 503 or 504, as while it restarts — is made again with backoff
// (capped, jittered) until the caller's context ends. A 4xx answer is the tenant's
// error and is returned at once, as is a provider certificate that fails the checks.
type Client struct {
	opts Options
	base *url.URL
	http *http.Client
	tls  *tls.Config
	// pauses between attempts: retryFirst and retryLongest (shorter in tests)
	pauseFirst, pauseLongest time.Duration
	// lifetime ends at Close, and with it every dial in flight.
	lifetime context.Context
	end      context.CancelFunc
}

// ResponseError is a gateway's refusal: its status and message.
type ResponseError struct {
	Status  int
	Message string
}

func (e *ResponseError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("provider answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("provider answered %d: %s", e.Status, e.Message)
}

// New returns a client for the provider's gateway.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.HostURI)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("provider host URI %q: want https://host:port", opts.HostURI)
	}
	switch {
	case opts.Provider == "" || opts.Certs == nil:
		return nil, errors.New("gateway client: provider address and certificate lookup are required")
	case opts.ClientCert == nil && (opts.Signer == nil || opts.Tenant == ""):
		return nil, errors.New("gateway client: a client certificate, or a signer and its address, are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	c := &Client{opts: opts, base: u, pauseFirst: retryFirst, pauseLongest: retryLongest}
	//nolint:forbidigo // the client's own lifetime, ended by Close: no caller context outlives New
	c.lifetime, c.end = context.WithCancel(context.Background())
	c.tls = &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The provider's certificate may be self-signed: dialTLS checks it against a
		// CA or the ledger once the handshake is done.
		InsecureSkipVerify: true, //nolint:gosec // verified in dialTLS
	}
	if opts.ClientCert != nil {
		c.tls.Certificates = []tls.Certificate{*opts.ClientCert}
		c.tls.ServerName = "mtls." + u.Hostname() // as Akash's tools
	}
	c.http = &http.Client{
		Transport: &http.Transport{DialTLSContext: c.dialTLS, IdleConnTimeout: time.Minute},
		// Redirects are not followed (as Akash's tools).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Close ends the client: dials still in flight (the HTTP transport finishes a dial
// whose request was cancelled, for its pool) and idle connections. Requests after it
// fail.
func (c *Client) Close() {
	c.end()
	c.http.CloseIdleConnections()
}

// dialTLS connects to the gateway and checks the provider's certificate. A dial takes
// at most the attempt timeout (a provider whose address drops packets would otherwise
// hold it for the kernel's two minutes of retries), and ends with the client.
func (c *Client) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.lifetime, cancel)()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: c.opts.Timeout}, Config: c.tls}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := conn.(*tls.Conn)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("gateway connection is not TLS")
	}
	if err := c.verifyProvider(ctx, tc.ConnectionState()); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// untrustedError is a provider certificate that fails the checks: asking again does
// not help.
type untrustedError struct{ err error }

func (e *untrustedError) Error() string { return e.err.Error() }
func (e *untrustedError) Unwrap() error { return e.err }

func untrusted(format string, a ...any) error {
	return &untrustedError{fmt.Errorf(format, a...)}
}

// verifyProvider accepts the server's certificate when a system CA vouches for it
// for the host, or when it is the provider's own certificate as the ledger records
// it (subject CN the provider, registered and valid).
func (c *Client) verifyProvider(ctx context.Context, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return untrusted("provider presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: c.base.Hostname(), Intermediates: inter}); err == nil {
		return nil
	}
	if len(cs.PeerCertificates) != 1 || leaf.Subject.CommonName != c.opts.Provider {
		return untrusted("provider certificate: not from a trusted CA, and not %s's own certificate", c.opts.Provider)
	}
	reg, err := c.opts.Certs(ctx, c.opts.Provider, leaf.SerialNumber.String())
	if errors.Is(err, ledger.ErrNotFound) {
		return untrusted("provider certificate %s: not found on the ledger: %w", leaf.SerialNumber, err)
	}
	if err != nil {
		// The ledger did not answer: the certificate may be fine.
		return fmt.Errorf("provider certificate %s: looking it up on the ledger: %w", leaf.SerialNumber, err)
	}
	b, _ := pem.Decode(reg.Cert)
	if reg.State != ledger.CertValid || b == nil || !bytes.Equal(b.Bytes, leaf.Raw) {
		return untrusted("provider certificate %s: not the valid certificate the ledger records for %s", leaf.SerialNumber, c.opts.Provider)
	}
	now := time.Now()
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return untrusted("provider certificate %s: outside its validity period", leaf.SerialNumber)
	}
	return nil
}

// request makes a request to path with the client's credentials.
func (c *Client) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	u := *c.base
	path, u.RawQuery, _ = strings.Cut(path, "?")
	u.Path = strings.TrimSuffix(c.base.Path, "/") + path
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if c.opts.ClientCert == nil {
		tok, err := c.token()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func (c *Client) token() (string, error) {
	now := time.Now()
	// The audience binds the token to this provider: another provider that receives it
	// cannot use it against this one's peers (Akash's tools leave it out).
	return auth.SignToken(auth.Claims{Issuer: c.opts.Tenant, IssuedAt: now.Unix(), NotBefore: now.Unix(), ExpiresAt: now.Add(TokenTTL).Unix(),
		Audience: []string{c.opts.Provider}, Version: auth.TokenVersion, Leases: auth.Leases{Access: auth.AccessFull}}, c.opts.Signer)
}

// Retries of a request: the pause before the next attempt grows from retryFirst to
// retryLongest, jittered (half of it at random) so that clients waiting for one
// provider do not all come back at once.
const (
	retryFirst   = 250 * time.Millisecond
	retryLongest = 5 * time.Second
)

// do sends a request and returns the body of a 200 answer; any other status is a
// *ResponseError. An attempt the provider could not answer (see Client) is made again
// after a pause until ctx ends; the error then is the last attempt's that says why.
func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	pause := wait.Backoff{First: c.pauseFirst, Longest: c.pauseLongest}
	var last error
	for attempt := 1; ; attempt++ {
		data, err := c.once(ctx, method, path, body)
		if err == nil || !retryable(err) {
			return data, err
		}
		if ctx.Err() != nil {
			// The caller's end cut the attempt short; say what failed before.
			if last == nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w (gave up after %d attempts: %w)", last, attempt, ctx.Err())
		}
		last = err
		p := pause.Next()
		p = p/2 + rand.N(p/2+1) //nolint:gosec // G404: jitter, not a secret
		if c.opts.OnRetry != nil {
			c.opts.OnRetry(attempt, err, p)
		}
		if !wait.Sleep(ctx, p) {
			return nil, fmt.Errorf("%w (gave up after %d attempts: %w)", last, attempt, ctx.Err())
		}
	}
}

// retryable reports whether a failed attempt may succeed if made again: the provider
// did not answer (whatever the network said: refused, reset, a handshake or an answer
// cut short, a timeout) or answered 500, 502, 503 or 504. A 4xx is the tenant's error;
// a certificate that fails the checks, or a request that could not be made, fails
// again.
func retryable(err error) bool {
	var re *ResponseError
	if errors.As(err, &re) {
		switch re.Status {
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var ue *untrustedError
	var ae *attemptError
	return errors.As(err, &ae) && !errors.As(err, &ue)
}

// attemptError is a request that went out and got no answer.
type attemptError struct{ err error }

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// once makes one attempt of a request, within the client's timeout.
func (c *Client) once(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error // it repeats the method and URL
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &attemptError{fmt.Errorf("%s %s: %w", method, path, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &attemptError{fmt.Errorf("%s %s: %w", method, path, err)}
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &eb) == nil && eb.Message != "" {
			msg = eb.Message
		}
		return nil, &ResponseError{Status: resp.StatusCode, Message: msg}
	}
	return data, nil
}

// SendManifest sends a deployment's manifest (the JSON array of groups), making the
// request again while the provider does not answer it (see Client). Sending it again
// after an attempt whose answer was lost is safe: the PUT is idempotent — a provider
// takes the same manifest again as it took it the first time — and a provider answers
// 200 only once it holds the manifest.
func (c *Client) SendManifest(ctx context.Context, dseq uint64, m market.Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	_, err = c.do(ctx, http.MethodPut, fmt.Sprintf("/deployment/%d/manifest", dseq), b)
	return err
}

func leasePath(id market.LeaseID, rest string) string {
	return fmt.Sprintf("/lease/%d/%d/%d/%s", id.DSeq, id.GSeq, id.OSeq, rest)
}

// LeaseStatus is a lease's status, as the gateway reports it (JSON).
func (c *Client) LeaseStatus(ctx context.Context, id market.LeaseID) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, leasePath(id, "status"), nil)
}

// ServiceStatus is one service's status (JSON).
func (c *Client) ServiceStatus(ctx context.Context, id market.LeaseID, service string) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, leasePath(id, "service/"+url.PathEscape(service)+"/status"), nil)
}

// LeaseManifest is the manifest the lease runs.
func (c *Client) LeaseManifest(ctx context.Context, id market.LeaseID) (market.Manifest, error) {
	b, err := c.do(ctx, http.MethodGet, leasePath(id, "manifest"), nil)
	if err != nil {
		return nil, err
	}
	var m market.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("lease manifest: %w", err)
	}
	return m, nil
}

// Status is the provider's status (JSON).
func (c *Client) Status(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/status", nil)
}

// Decisions is the provider's bid engine's recent decisions, newest first (JSON
// {"decisions": [...]}): at most limit (0: the gateway's default), one order's only
// when order is set. Only the provider's own account may read them.
func (c *Client) Decisions(ctx context.Context, order *market.OrderID, limit int) (json.RawMessage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if order != nil {
		q.Set("order", order.String())
	}
	path := "/status/decisions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodGet, path, nil)
}

// MigrateHostnames moves the tenant's hostnames to its lease of deployment dseq,
// group gseq (POST /hostname/migrate), and returns those moved.
func (c *Client) MigrateHostnames(ctx context.Context, hostnames []string, dseq uint64, gseq uint32) ([]string, error) {
	return c.migrate(ctx, "/hostname/migrate", api.HostnameMigration{Hostnames: hostnames, DestinationDSeq: dseq, DestinationGSeq: gseq})
}

// MigrateEndpoints moves the tenant's leased-IP endpoints (by SDL name) to its lease
// of deployment dseq, group gseq (POST /endpoint/migrate), and returns those moved.
func (c *Client) MigrateEndpoints(ctx context.Context, endpoints []string, dseq uint64, gseq uint32) ([]string, error) {
	return c.migrate(ctx, "/endpoint/migrate", api.EndpointMigration{Endpoints: endpoints, DestinationDSeq: dseq, DestinationGSeq: gseq})
}

func (c *Client) migrate(ctx context.Context, path string, req any) ([]string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	raw, err := c.do(ctx, http.MethodPost, path, b)
	if err != nil {
		return nil, err
	}
	var tr api.Transferred
	if err := json.Unmarshal(raw, &tr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tr.Transferred, nil
}
