package status

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// LoopbackClient reads the status of a provider a tool started itself on this
// machine's loopback (berth dev's processes, the chaos suite's providers): its
// certificate is not checked. Not for a provider reached over a network.
var LoopbackClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}}, //nolint:gosec // G402: see above
}

// Read fetches GET /status (public, no credentials) from the gateway at hostURI
// (https://host:port) with hc. Anything but a 200 is an error: a provider still
// waiting for its ledger node answers 503.
func Read(ctx context.Context, hc *http.Client, hostURI string) (Status, error) {
	var st Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hostURI+"/status", http.NoBody)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s/status: %s", hostURI, resp.Status)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("GET %s/status: %w", hostURI, err)
	}
	return st, nil
}
