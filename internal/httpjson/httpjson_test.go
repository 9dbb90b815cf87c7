package httpjson

import (
	"math"
	"net/http"
	"net/http/httptest"
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
