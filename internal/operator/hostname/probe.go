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
	m       *metrics
	changed func(hostname string)
	client  *http.Client

	mu      sync.Mutex
	results map[string]probeResult
	kick    chan struct{}
}

func newProber(cfg HealthConfig, m *metrics, changed func(string)) *prober {
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

// round probes hosts, at most 8 at once, and forgets hostnames no longer routed.
func (p *prober) round(ctx context.Context, hosts []string) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, h := range hosts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := p.probe(ctx, h)
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

// probe asks the ingress for hostname h. Any answer but a gateway error means the
// route reached the service (a 404 from the application still reached it).
func (p *prober) probe(ctx context.Context, h string) probeResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.cfg.Address+p.cfg.Path, http.NoBody)
	if err != nil {
		return probeResult{why: "probe request: " + err.Error()}
	}
	req.Host = probeName(h)
	req.Header.Set("User-Agent", "berth-hostname-operator")
	resp, err := p.client.Do(req)
	if err != nil {
		return probeResult{why: fmt.Sprintf("no answer through the ingress at %s: %v", p.cfg.Address, unwrapURLError(err))}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return probeResult{why: fmt.Sprintf("the ingress at %s answered %s: the service does not answer behind it", p.cfg.Address, resp.Status)}
	}
	return probeResult{ready: true, why: fmt.Sprintf("a request through the ingress at %s reached the service (HTTP %d)", p.cfg.Address, resp.StatusCode)}
}

// unwrapURLError drops url.Error's "Get \"http://…\":" prefix.
func unwrapURLError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
