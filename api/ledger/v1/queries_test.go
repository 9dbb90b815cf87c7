package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

// pagesQuerier answers /orders with the pages it holds, by page key ("" first).
type pagesQuerier struct {
	pages map[string]OrdersResponse
	asked []OrdersRequest
}

func (q *pagesQuerier) QueryRaw(_ context.Context, path string, req []byte) ([]byte, error) {
	if path != QueryOrders.Path {
		return nil, &Error{Code: CodeBadQuery, Msg: "unknown query path " + path}
	}
	var r OrdersRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, err
	}
	q.asked = append(q.asked, r)
	page, ok := q.pages[string(r.Page.Key)]
	if !ok {
		return nil, &Error{Code: CodeNotFound, Msg: "no page " + string(r.Page.Key)}
	}
	return json.Marshal(page)
}

func order(dseq uint64) Order {
	return Order{ID: market.OrderID{Owner: "akash1owner", DSeq: dseq, GSeq: 1, OSeq: 1}, State: OrderOpen}
}

func TestList(t *testing.T) {
	collect := func(q *pagesQuerier, ctx context.Context) ([]uint64, error) {
		var got []uint64
		err := List(ctx, q, QueryOrders, OrdersRequest{State: OrderOpen, Page: Page{Limit: 2}}, func(r OrdersResponse) error {
			for _, o := range r.Orders {
				got = append(got, o.ID.DSeq)
			}
			return nil
		})
		return got, err
	}

	q := &pagesQuerier{pages: map[string]OrdersResponse{
		"":  {Orders: []Order{order(1), order(2)}, NextKey: []byte("b")},
		"b": {NextKey: []byte("c")}, // a filtered page may be empty and not the last
		"c": {Orders: []Order{order(3)}},
	}}
	got, err := collect(q, t.Context())
	if err != nil || len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("got %v, %v; want orders 1, 2, 3", got, err)
	}
	for i, r := range q.asked {
		if r.State != OrderOpen || r.Page.Limit != 2 {
			t.Errorf("request %d: %+v, want the state and limit kept", i, r)
		}
	}

	q = &pagesQuerier{pages: map[string]OrdersResponse{"": {Orders: []Order{order(1)}, NextKey: []byte("a")}, "a": {NextKey: []byte("a")}}}
	if _, err := collect(q, t.Context()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a ledger naming the same page again: %v, want an error", err)
	}

	q = &pagesQuerier{pages: map[string]OrdersResponse{"": {NextKey: []byte("x")}}}
	if _, err := collect(q, t.Context()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused page: %v, want the ledger's error", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	q = &pagesQuerier{pages: map[string]OrdersResponse{"": {NextKey: []byte("b")}, "b": {}}}
	if _, err := collect(q, ctx); !errors.Is(err, context.Canceled) || len(q.asked) != 1 {
		t.Errorf("ended context: %v after %d pages, want context.Canceled after 1", err, len(q.asked))
	}

	stop := errors.New("enough")
	q = &pagesQuerier{pages: map[string]OrdersResponse{"": {NextKey: []byte("b")}}}
	if err := List(t.Context(), q, QueryOrders, OrdersRequest{}, func(OrdersResponse) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("f's error: %v", err)
	}
}

func TestEventIDs(t *testing.T) {
	attrs := map[string]string{AttrOwner: "akash1owner", AttrDSeq: "7", AttrGSeq: "2", AttrOSeq: "3", AttrProvider: "akash1prov"}
	l, err := LeaseOfEvent(attrs)
	if err != nil || l != (market.LeaseID{Owner: "akash1owner", DSeq: 7, GSeq: 2, OSeq: 3, Provider: "akash1prov"}) {
		t.Fatalf("LeaseOfEvent: %+v, %v", l, err)
	}
	for _, drop := range []string{AttrOwner, AttrDSeq, AttrGSeq, AttrOSeq} {
		a := map[string]string{}
		for k, v := range attrs {
			if k != drop {
				a[k] = v
			}
		}
		if _, err := OrderOfEvent(a); err == nil {
			t.Errorf("without %s: no error", drop)
		}
	}
	delete(attrs, AttrProvider)
	if _, err := LeaseOfEvent(attrs); err == nil {
		t.Error("a lease without provider: no error")
	}
	attrs[AttrGSeq] = "4294967296" // beyond uint32
	if _, err := OrderOfEvent(attrs); err == nil {
		t.Error("gseq out of range: no error")
	}
}
