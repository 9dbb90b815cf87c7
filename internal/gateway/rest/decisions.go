package rest

import (
	"fmt"
	"net/http"
	"strconv"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/httpjson"
)

// DecisionSource is the bid engine's record of its recent decisions, newest first.
type DecisionSource interface {
	Last(n int) []bidengine.Decision
}

// Decisions answers GET /status/decisions: what the bid engine decided lately and why.
type Decisions struct {
	Decisions []bidengine.Decision `json:"decisions"`
}

// defaultDecisions is how many decisions GET /status/decisions returns without limit.
const defaultDecisions = 100

// operator authenticates the request as the provider's own account with full access
// (its client certificate, or a token granting everything on this provider): routes
// about the provider's business (which tenants it declined, at what prices) are for its
// operator, not for tenants, the public, or a narrower token the operator handed out
// (a monitoring tool's logs-only token, a granular token meant for another provider).
func (s *Server) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, err := s.deps.Auth.Authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if who.Owner != s.cfg.Provider {
			s.writeError(w, r, forbidden("only the provider's own account may read this"))
			return
		}
		if !who.Full() {
			s.writeError(w, r, forbidden("only the provider's own account with full access (its certificate, or a full-access token) may read this"))
			return
		}
		h(w, r)
	}
}

// decisions serves the bid engine's recent decisions, newest first: ?limit=N (default
// 100, at most what the engine keeps) and ?order=OWNER/DSEQ/GSEQ/OSEQ (that order's
// only: why it got a bid or not, and what became of the bid).
func (s *Server) decisions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultDecisions
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.writeError(w, r, badRequest(fmt.Sprintf("limit %q: want a positive whole number", v)))
			return
		}
		limit = n
	}
	all := s.deps.Decisions.Last(0)
	out := make([]bidengine.Decision, 0, min(limit, len(all)))
	var order *market.OrderID
	if v := q.Get("order"); v != "" {
		id, err := market.ParseOrderID(v)
		if err != nil {
			s.writeError(w, r, badRequest(fmt.Sprintf("order %q: %v (want OWNER/DSEQ/GSEQ/OSEQ)", v, err)))
			return
		}
		order = &id
	}
	for _, d := range all {
		if len(out) == limit {
			break
		}
		if order == nil || d.Order == *order {
			out = append(out, d)
		}
	}
	httpjson.Write(w, http.StatusOK, Decisions{Decisions: out})
}
