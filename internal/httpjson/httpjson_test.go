package httpjson

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(http.ResponseWriter)
		code int
		body string
	}{
		{"value", func(w http.ResponseWriter) { Write(w, http.StatusCreated, map[string]int{"a": 1}) }, http.StatusCreated, `{"a":1}`},
		{"unencodable", func(w http.ResponseWriter) { Write(w, http.StatusOK, math.NaN()) }, http.StatusInternalServerError, internalError},
		{"error", func(w http.ResponseWriter) { Error(w, http.StatusNotFound, `lease "1/2" <not> found`) }, http.StatusNotFound, `{"message":"lease \"1/2\" \u003cnot\u003e found"}`},
		{"raw", func(w http.ResponseWriter) { Raw(w, http.StatusOK, []byte(`[1]`)) }, http.StatusOK, `[1]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.do(rec)
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("got %d %s, want %d %s", rec.Code, rec.Body, tc.code, tc.body)
			}
			if ct, ns := rec.Header().Get("Content-Type"), rec.Header().Get("X-Content-Type-Options"); ct != "application/json; charset=UTF-8" || ns != "nosniff" {
				t.Errorf("headers: Content-Type %q, X-Content-Type-Options %q", ct, ns)
			}
		})
	}
}

// TestDecodeProblem: each decoding failure is said without Go's type names.
func TestDecodeProblem(t *testing.T) {
	type doc struct {
		Name string `json:"name"`
	}
	decode := func(in string, strict bool, v any) error {
		d := json.NewDecoder(strings.NewReader(in))
		if strict {
			d.DisallowUnknownFields()
		}
		return d.Decode(v)
	}
	var d doc
	var list []doc
	for _, c := range []struct {
		err  error
		want string
	}{
		{decode(`{"name":1}`, false, &d), "name: got a JSON number (offset 9)"},
		{decode(`{"name":"a"}`, false, &list), "the top level: got a JSON object (offset 1)"},
		{decode(`{"name":}`, false, &d), "syntax error at offset 9: invalid character '}' looking for beginning of value"},
		{decode(`{"name":"a"`, false, &d), "unexpected end of input"},
		{decode(``, false, &d), "unexpected end of input"},
		{decode(`{"other":1}`, true, &d), `unknown field "other"`},
		{decode(`{}`, false, d), "malformed JSON"}, // not a pointer: Go's message names the type
	} {
		if got := DecodeProblem(c.err); got != c.want || strings.Contains(got, "httpjson.") || strings.Contains(got, "Go ") {
			t.Errorf("DecodeProblem(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
