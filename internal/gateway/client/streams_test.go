package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gateway/auth/authtest"
)

// TestStreamEnds: a log stream that a provider closes other than normally is an error
// with the provider's reason, or with what the code means when it gave none (Akash's
// provider gives none), after the lines it sent; a normal closure is the end.
func TestStreamEnds(t *testing.T) {
	tenant, own, serial := parties(t)
	tc := authtest.TLS(t, own)
	// The provider sends one line, then closes with the code and reason of the query.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		code, _ := strconv.Atoi(r.URL.Query().Get("tail"))
		_ = c.WriteJSON(api.LogMessage{Name: "web-0", Message: "hello"})
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, r.URL.Query().Get("service")), time.Now().Add(time.Second))
		_, _, _ = c.ReadMessage() // until the client closes
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{tc}, MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	defer srv.Close()
	c, err := New(Options{HostURI: srv.URL, Provider: provider, Signer: tenant.Key, Tenant: tenant.Address,
		Certs: func(context.Context, string, string) (ledger.Certificate, error) {
			return ledger.Certificate{Owner: provider, Serial: serial, State: ledger.CertValid, Cert: own.Cert}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.http.CloseIdleConnections()
	id := market.LeaseID{Owner: tenant.Address, DSeq: 5, GSeq: 1, OSeq: 1, Provider: provider}
	for _, tc := range []struct {
		code   int
		reason string
		want   string // "": no error
	}{
		{websocket.CloseNormalClosure, "", ""},
		{api.CloseInternal, "", "the provider ended the stream: the provider failed (close code 4000)"},
		{api.CloseInternal, "no running pods", "the provider ended the stream: no running pods (close code 4000)"},
		{websocket.CloseGoingAway, "", "the provider ended the stream: the provider is going away (close code 1001)"},
		{websocket.CloseProtocolError, "frame code 7", "the provider ended the stream: frame code 7 (close code 1002)"},
		{4999, "", "the provider ended the stream: no reason given (close code 4999)"},
		{api.CloseNotFound, "", "provider answered 404 Not Found"},
		{api.CloseUnavailable, "busy", "provider answered 503: busy"},
	} {
		var lines int
		var services []string
		if tc.reason != "" {
			services = []string{tc.reason}
		}
		err := c.Logs(t.Context(), id, LogOptions{Tail: tc.code, Services: services}, func(api.LogMessage) error {
			lines++
			return nil
		})
		switch {
		case lines != 1:
			t.Errorf("close %d: %d lines before it, want 1", tc.code, lines)
		case tc.want == "" && err != nil:
			t.Errorf("close %d: %v", tc.code, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("close %d %q: %v, want %q", tc.code, tc.reason, err, tc.want)
		}
		var re *ResponseError
		if tc.code == api.CloseNotFound && !errors.As(err, &re) {
			t.Errorf("close 4001: %T, want a *ResponseError", err)
		}
	}
}
