package testenv

import (
	"context"
	"io"
	"net/http"
)

// Get GETs url with http.DefaultClient: the status code and the whole body, or why
// there is no answer.
func Get(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return 0, nil, err
	}
	return Do(http.DefaultClient, req)
}

// Do sends req with c: the status code and the whole body, or why there is no answer.
func Do(c *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := c.Do(req) //nolint:gosec // G704: the test asks the servers it started, at their loopback addresses
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
