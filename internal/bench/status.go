package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/gateway/status"
)

// StatusBench configures `berth bench status`: GET /status at a fixed rate.
type StatusBench struct {
	// RPS requests a second for Duration, sent on schedule whatever the answers'
	// pace (open loop: a slow answer delays no other request, and latency counts from
	// when a request was due).
	RPS      int
	Duration time.Duration
	// Connections is how many keep-alive connections carry the requests.
	Connections int
	// Nodes sizes the in-process gateway's status (its inventory lists each node).
	Nodes int
	// Target, when set, is a running gateway (https://host:port) to measure instead.
	Target string
}

// DefaultStatusBench returns the settings.
func DefaultStatusBench() StatusBench {
	return StatusBench{RPS: 1000, Duration: 30 * time.Second, Connections: 32, Nodes: 100}
}

// Validate names the first setting out of range.
func (b StatusBench) Validate() error {
	switch {
	case b.RPS < 1 || b.RPS > 100_000:
		return fmt.Errorf("rps: %d is outside 1–100000", b.RPS)
	case b.Duration < time.Second:
		return fmt.Errorf("duration: %s; at least 1s", b.Duration)
	case b.Connections < 1 || b.Connections > 1024:
		return fmt.Errorf("connections: %d is outside 1–1024", b.Connections)
	case b.Nodes < 0 || b.Nodes > 100_000:
		return fmt.Errorf("nodes: %d is outside 0–100000", b.Nodes)
	}
	return nil
}

// RunStatusBench measures GET /status and prints `name value unit` lines: latency
// p50, p99 and max, errors, requests, the rate achieved, the answer's size.
func RunStatusBench(ctx context.Context, b StatusBench, out io.Writer, log *slog.Logger) ([]Result, error) {
	if err := b.Validate(); err != nil {
		return nil, config.Invalid(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	target := b.Target
	var serving sync.WaitGroup
	var serveErr error
	if target == "" {
		srv, ln, err := benchGateway(ctx, b.Nodes, log)
		if err != nil {
			return nil, err
		}
		target = "https://" + ln.Addr().String()
		serving.Go(func() { serveErr = srv.Serve(ctx, ln) })
	}
	defer func() {
		cancel()
		serving.Wait()
	}()

	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}, //nolint:gosec // status is public; only its latency is measured, on loopback
		MaxConnsPerHost:     b.Connections,
		MaxIdleConnsPerHost: b.Connections,
		IdleConnTimeout:     time.Minute,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/status", http.NoBody)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return int(n), err
	}
	// Warm the connections up, and learn the answer's size.
	size, err := get(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s/status: %w", target, err)
	}

	total := int(int64(b.RPS) * int64(b.Duration) / int64(time.Second))
	interval := time.Second / time.Duration(b.RPS)
	due := make(chan time.Time, total)
	lat := make([]time.Duration, total)
	var sent, errs atomic.Int64
	var workers sync.WaitGroup
	for range b.Connections * 4 {
		workers.Go(func() {
			for at := range due {
				i := sent.Add(1) - 1
				if _, err := get(ctx); err != nil {
					errs.Add(1)
				}
				lat[i] = time.Since(at)
			}
		})
	}
	start := time.Now()
	cpu0 := cpuTime()
	t := time.NewTimer(0)
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		due <- at
	}
	t.Stop()
	close(due)
	workers.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	n := int(sent.Load())
	lat = lat[:n]
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	results := []Result{
		{"status_p50", ms(quantile(lat, 0.50)), "ms"},
		{"status_p99", ms(quantile(lat, 0.99)), "ms"},
		{"status_max", ms(quantile(lat, 1)), "ms"},
		{"status_errors", float64(errs.Load()), "count"},
		{"status_requests", float64(n), "count"},
		{"status_rate", float64(n) / elapsed.Seconds(), "req/s"},
		{"status_body", float64(size), "bytes"},
	}
	if b.Target == "" {
		results = append(results, Result{"status_cpu_per_request", float64(cpu.Microseconds()) / float64(max(n, 1)), "us"})
	}
	for _, r := range results {
		if _, err := fmt.Fprintln(out, r.String()); err != nil {
			return nil, err
		}
	}
	cancel()
	serving.Wait()
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
		return results, serveErr
	}
	return results, nil
}

// benchGateway is a gateway serving a status board of nodes nodes, on loopback.
func benchGateway(ctx context.Context, nodes int, log *slog.Logger) (*rest.Server, net.Listener, error) {
	const addr = "akash1benchprovider"
	cert, err := auth.NewCertificate(addr, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		return nil, nil, err
	}
	tc, err := cert.TLS()
	if err != nil {
		return nil, nil, err
	}
	st := status.Status{Address: addr, Timestamp: time.Now(), Cluster: status.Cluster{Leases: uint32(nodes)}} //nolint:gosec // bounded by Validate
	for i := range nodes {
		m := status.Metrics{CPU: 16000, Memory: 64 << 30, StorageEphemeral: 500 << 30}
		st.Cluster.Inventory.Available.Nodes = append(st.Cluster.Inventory.Available.Nodes, status.Node{Name: fmt.Sprintf("node-%04d", i), Allocatable: m, Available: m})
	}
	board := status.NewBoard(st)
	authn, err := auth.NewAuthenticator(unavailableLedger{}, ledger.DefaultAddressPrefix, addr)
	if err != nil {
		return nil, nil, err
	}
	srv, err := rest.New(rest.Config{Provider: addr, Certificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tc, nil }},
		rest.Deps{Auth: authn, Manifests: noLeases{}, Deployments: noLeases{}, Statuses: noLeases{}, Status: board}, log)
	if err != nil {
		return nil, nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	return srv, ln, nil
}

// unavailableLedger answers no authentication query (the status route needs none).
type unavailableLedger struct{}

func (unavailableLedger) Certificate(context.Context, string, string) (ledger.Certificate, error) {
	return ledger.Certificate{}, errors.New("no ledger in the status benchmark")
}

func (unavailableLedger) Account(context.Context, string) (ledger.Account, error) {
	return ledger.Account{}, errors.New("no ledger in the status benchmark")
}

// noLeases is a provider without leases.
type noLeases struct{}

func (noLeases) Submit(context.Context, string, uint64, market.Manifest) error {
	return errors.New("no leases in the status benchmark")
}

func (noLeases) Manifest(market.LeaseID) ([]byte, market.ManifestGroup, bool) {
	return nil, market.ManifestGroup{}, false
}

func (noLeases) State(market.LeaseID) (deploy.DeploymentState, bool) {
	return deploy.DeploymentState{}, false
}

func (noLeases) MigrateHostnames(string, []string, uint64, uint32) ([]string, error) {
	return nil, deploy.ErrMigration
}

func (noLeases) MigrateEndpoints(string, []string, uint64, uint32) ([]string, error) {
	return nil, deploy.ErrMigration
}

func (noLeases) Routes(market.LeaseID) deploy.Routes { return deploy.Routes{} }

func (noLeases) Status(market.LeaseID) (deploy.LeaseStatus, bool) {
	return deploy.LeaseStatus{}, false
}
