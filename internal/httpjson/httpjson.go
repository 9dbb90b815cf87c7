// Package httpjson answers HTTP requests with JSON, the one way every server of
// berth's does: compact encoding, `application/json; charset=UTF-8`, nosniff, and
// errors as {"message": "…"} (Akash's shape, api/gateway.Error).
//
// An error's message is shown to whoever asked: callers pass only text made for them
// (what was wrong, where), never an internal error's, which may hold paths, addresses
// or secrets; those go to the caller's log.
package httpjson

import (
	"encoding/json"
	"net/http"

	api "berth.dev/berth/api/gateway"
)

// internalError is the body of a response whose value could not be encoded.
const internalError = `{"message":"internal error"}`

// Write answers with code and v encoded as JSON; a v that cannot be encoded answers
// 500 with an internal error instead.
func Write(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(internalError)
	}
	Raw(w, code, b)
}

// Raw answers with code and b, which is already JSON.
func Raw(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// Error answers with code and {"message": msg}; msg must be safe to show.
func Error(w http.ResponseWriter, code int, msg string) {
	Write(w, code, api.Error{Message: msg})
}
