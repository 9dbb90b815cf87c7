package rest

import (
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

// TestDecisions: GET /status/decisions serves the bid engine's recent decisions,
// newest first, to the provider's own account only, filtered by order and limit, and
// says what was wrong with a bad query.
func TestDecisions(t *testing.T) {
	l := authtest.NewLedger()
	op, tenant := authtest.NewTenant(t, l), authtest.NewTenant(t, l)
	a, err := auth.NewAuthenticator(l, authtest.Prefix, op.Address)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := bidengine.NewHistory(10, nil)
	if err != nil {
		t.Fatal(err)
	}
	orderA := market.OrderID{Owner: tenant.Address, DSeq: 5, GSeq: 1, OSeq: 1}
	orderB := market.OrderID{Owner: tenant.Address, DSeq: 6, GSeq: 1, OSeq: 1}
	price := market.DecCoin{Amount: market.NewDec(12), Denom: "uact"}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for i, d := range []bidengine.Decision{
		{Order: orderA, Result: bidengine.ResultNoBid, Reason: bidengine.ReasonPriceAboveMax, Detail: "our price 20uact is above the order's 10uact"},
		{Order: orderB, Result: bidengine.ResultBid, Reason: bidengine.ReasonPriced, Price: &price},
		{Order: orderB, Result: bidengine.ResultWon, Reason: bidengine.ReasonLeased},
		{Order: orderA, Result: bidengine.ResultClosed, Reason: bidengine.ReasonOrderClosed},
	} {
		d.Time = t0.Add(time.Duration(i) * time.Second)
		hist.Record(d)
	}
	srv, err := New(Config{Provider: op.Address, Certificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }},
		Deps{Auth: a, Manifests: &fakeManifests{got: map[string]market.Manifest{}}, Deployments: &fakeDeployments{}, Statuses: fakeStatuses{},
			Status: staticStatus(`{}`), Decisions: hist}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) (int, Decisions, string) {
		t.Helper()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.mux.ServeHTTP(rec, req)
		var d Decisions
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
				t.Fatalf("%s: %v: %s", path, err, rec.Body.String())
			}
		}
		return rec.Code, d, rec.Body.String()
	}
	full := auth.Leases{Access: auth.AccessFull}
	opTok, tenantTok := op.Token(t, time.Now(), full), tenant.Token(t, time.Now(), full)

	if code, _, body := get("/status/decisions", ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d %s", code, body)
	}
	if code, _, body := get("/status/decisions", tenantTok); code != http.StatusForbidden {
		t.Errorf("a tenant, even the one the decisions are about: %d %s", code, body)
	}
	// The provider's own account, but a narrower token: a scoped one (a monitoring
	// tool's), or a granular one meant for another provider.
	scoped := op.Token(t, time.Now(), auth.Leases{Access: auth.AccessScoped, Scope: []auth.Scope{auth.ScopeLogs, auth.ScopeStatus}})
	elsewhere := op.Token(t, time.Now(), auth.Leases{Access: auth.AccessGranular, Permissions: []auth.Permission{{Provider: tenant.Address, Access: auth.AccessFull}}})
	for name, tok := range map[string]string{"scoped": scoped, "granular for another provider": elsewhere} {
		if code, _, body := get("/status/decisions", tok); code != http.StatusForbidden {
			t.Errorf("the provider's %s token: %d %s, want 403", name, code, body)
		}
	}
	code, d, body := get("/status/decisions", opTok)
	if code != http.StatusOK || len(d.Decisions) != 4 || d.Decisions[0].Result != bidengine.ResultClosed || d.Decisions[3].Reason != bidengine.ReasonPriceAboveMax {
		t.Fatalf("the provider: %d %s", code, body)
	}
	if got := d.Decisions[3].Detail; got != "our price 20uact is above the order's 10uact" {
		t.Errorf("detail %q", got)
	}
	if code, d, body := get("/status/decisions?limit=2", opTok); code != http.StatusOK || len(d.Decisions) != 2 || d.Decisions[1].Result != bidengine.ResultWon {
		t.Errorf("limit=2: %d %s", code, body)
	}
	code, d, body = get("/status/decisions?order="+orderB.String(), opTok)
	if code != http.StatusOK || len(d.Decisions) != 2 || d.Decisions[0].Order != orderB || d.Decisions[1].Price == nil || d.Decisions[1].Price.Denom != "uact" {
		t.Errorf("order=%s: %d %s", orderB, code, body)
	}
	for _, q := range []string{"limit=0", "limit=x", "order=nope"} {
		if code, _, body := get("/status/decisions?"+q, opTok); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
}
