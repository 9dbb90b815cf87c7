package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Query is one of the ledger's queries: its path, and the types of its request and
// of its answer (the Query… variables). Run it with Into, or List for a list's pages.
type Query[Req, Resp any] struct{ Path string }

// NoRequest is the request of a query that takes none.
type NoRequest struct{}

// Querier asks the ledger one query: the path and the JSON request, the JSON answer;
// a refusal is the ledger's *Error (chain.Client).
type Querier interface {
	QueryRaw(ctx context.Context, path string, req []byte) ([]byte, error)
}

// Into asks q with req and decodes the answer into resp.
func (q Query[Req, Resp]) Into(ctx context.Context, c Querier, req Req, resp *Resp) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("query %s: %w", q.Path, err)
	}
	b, err := c.QueryRaw(ctx, q.Path, data)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("query %s: decode answer: %w", q.Path, err)
	}
	return nil
}

// PagedRequest is a list query's request: WithKey is it asking for the page at key.
type PagedRequest[R any] interface{ WithKey(key []byte) R }

// PagedResponse is a list query's answer: Next is the next page's key (none: last).
type PagedResponse interface{ Next() []byte }

// List asks q with req, then for each following page (req's limit kept), and calls f
// with each answer, until the last page, f's error, or ctx's end. A ledger that names
// the page it just gave as the next one is an error, not a loop.
func List[Req PagedRequest[Req], Resp PagedResponse](ctx context.Context, c Querier, q Query[Req, Resp], req Req, f func(Resp) error) error {
	var key []byte
	for {
		var resp Resp
		if err := q.Into(ctx, c, req, &resp); err != nil {
			return err
		}
		if err := f(resp); err != nil {
			return err
		}
		next := resp.Next()
		switch {
		case len(next) == 0:
			return nil
		case key != nil && bytes.Equal(next, key):
			return fmt.Errorf("query %s: the ledger gave next key %x twice", q.Path, next)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		key = next
		req = req.WithKey(next)
	}
}
