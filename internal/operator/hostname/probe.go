package hostname

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// probeResult is a hostname's last probe.
type probeResult struct {
	ready bool
	why   string
}

// prober sends each routed hostname a request through the ingress controller's
// address every interval and keeps the results; a change of readiness enqueues the
// hostname.
type prober struct {
	cfg     HealthConfig
	m       *Metrics
	changed func(hostname string)
	client  *http.Client

	mu      sync.Mutex
	results map[string]probeResult
	kick    chan struct{}
}

func newProber(cfg HealthConfig, m *Metrics, changed func(string)) *prober {
	return &prober{
		cfg: cfg, m: m, changed: changed, results: map[string]probeResult{}, kick: make(chan struct{}, 1),
		client: &http.Client{
			Timeout: cfg.Timeout,
			// The answer to the request is what counts, not where a redirect leads.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true, MaxIdleConns: 1},
		},
	}
}

// result is hostname's readiness as last probed; a hostname not probed yet asks for
// a round at once.
func (p *prober) result(hostname string) (bool, string) {
	p.mu.Lock()
	r, ok := p.results[hostname]
	p.mu.Unlock()
	if !ok {
		select {
		case p.kick <- struct{}{}:
		default:
		}
		return false, "waiting for the first probe through " + p.cfg.Address
	}
	return r.ready, r.why
}

// run probes targets() every interval (and when kicked) until ctx ends.
func (p *prober) run(ctx context.Context, targets func() []string) {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.client.CloseIdleConnections()
			return
		case <-t.C:
		case <-p.kick:
		}
		p.round(ctx, targets())
	}
}

// answer is what an ingress said to a probe: its status and the start of its body.
type answer struct {
	status int
	body   string
}

// unroutedName is a hostname no route has (.invalid is reserved, RFC 2606): what the
// ingress answers for it is its answer for a hostname it does not route.
const unroutedName = "berth-probe-unrouted.invalid"

// round probes hosts, at most 8 at once, and forgets hostnames no longer routed. It
// first asks for a name nothing routes: an answer the same as that one is the
// ingress's own (a 404 of its default backend), not the service's.
func (p *prober) round(ctx context.Context, hosts []string) {
	if len(hosts) == 0 {
		return
	}
	baseline, err := p.ask(ctx, unroutedName)
	if err != nil {
		baseline = nil // the ingress does not answer: every probe will say so
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, h := range hosts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := p.probe(ctx, h, baseline)
			if ctx.Err() != nil {
				return
			}
			p.m.observeProbe(r.ready)
			p.mu.Lock()
			old, had := p.results[h]
			p.results[h] = r
			p.mu.Unlock()
			if !had || old != r {
				p.changed(h)
			}
		}()
	}
	wg.Wait()
	keep := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		keep[h] = true
	}
	p.mu.Lock()
	for h := range p.results {
		if !keep[h] {
			delete(p.results, h)
		}
	}
	p.mu.Unlock()
}

// probeName is the name a probe asks for: a wildcard's own "*" label cannot be sent,
// so one name it covers stands in.
func probeName(h string) string {
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		return "berth-probe." + rest
	}
	return h
}

// ask sends the ingress a request for host and reads its answer.
func (p *prober) ask(ctx context.Context, host string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.cfg.Address+p.cfg.Path, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Host = host
	req.Header.Set("User-Agent", "berth-hostname-operator")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, unwrapURLError(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return &answer{status: resp.StatusCode, body: string(b)}, nil
}

// probe asks the ingress for hostname h. An answer that is not a gateway error, and
// not the ingress's answer for an unknown hostname (baseline), reached the service (a
// 404 of the application's own still reached it).
func (p *prober) probe(ctx context.Context, h string, baseline *answer) probeResult {
	a, err := p.ask(ctx, probeName(h))
	switch {
	case err != nil:
		return probeResult{why: fmt.Sprintf("no answer through the ingress at %s: %v", p.cfg.Address, err)}
	case a.status == http.StatusBadGateway || a.status == http.StatusServiceUnavailable || a.status == http.StatusGatewayTimeout:
		return probeResult{why: fmt.Sprintf("the ingress at %s answered %d %s: the service does not answer behind it", p.cfg.Address, a.status, http.StatusText(a.status))}
	case baseline != nil && *a == *baseline:
		return probeResult{why: fmt.Sprintf("the ingress at %s answers %d as for a hostname it does not route: the route is not in effect (yet)", p.cfg.Address, a.status)}
	}
	return probeResult{ready: true, why: fmt.Sprintf("a request through the ingress at %s reached the service (HTTP %d)", p.cfg.Address, a.status)}
}

// unwrapURLError drops url.Error's "Get \"http://…\":" prefix.
func unwrapURLError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
