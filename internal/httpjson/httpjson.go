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
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

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

// DecodeProblem says what was wrong with a JSON document someone sent, from its
// decoding error, in words for them: where a value had the wrong JSON type, where the
// syntax broke, that the input ended early, or which field is unknown, and never Go's
// type names (which the decoder's own messages carry). Anything else is "malformed
// JSON".
func DecodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "the top level"
		}
		return fmt.Sprintf("%s: got a JSON %s (offset %d)", where, te.Value, te.Offset)
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at offset %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "malformed JSON"
}
