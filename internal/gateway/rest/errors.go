package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/httpjson"
	"berth.dev/berth/internal/manifest"
)

// Errors the handlers raise themselves; ErrBadRequest and ErrNotFound are also for the
// components behind Deps to mark tenant errors (the message is shown).
var (
	ErrBadRequest = errors.New("bad request")
	// ErrTooMany: a limit on streams is reached.
	ErrTooMany   = errors.New("too many")
	ErrNotFound  = errors.New("not found")
	errForbidden = errors.New("forbidden")
)

// apiError is a tenant-facing error: its message is safe to show.
type apiError struct {
	kind error
	msg  string
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.kind }

func badRequest(msg string) error { return &apiError{kind: ErrBadRequest, msg: msg} }
func notFound(msg string) error   { return &apiError{kind: ErrNotFound, msg: msg} }
func forbidden(msg string) error  { return &apiError{kind: errForbidden, msg: msg} }

// statusOf maps an error to its HTTP status and the message the tenant sees. Only
// errors made for tenants (4xx) show their text; the others say what kind of failure
// it was, and the details go to the log.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, auth.ErrAmbiguous):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, auth.ErrNoCredentials), errors.Is(err, auth.ErrInvalid):
		return http.StatusUnauthorized, err.Error()
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, ErrBadRequest), errors.Is(err, manifest.ErrMalformed), errors.Is(err, deploy.ErrMigration):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, manifest.ErrInvalid), errors.Is(err, manifest.ErrHostnameBlocked), errors.Is(err, deploy.ErrHostnameInUse):
		return http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, ErrNotFound), errors.Is(err, manifest.ErrNotFound), errors.Is(err, deploy.ErrLeaseClosed):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, ErrTooMany):
		return http.StatusTooManyRequests, err.Error()
	case errors.Is(err, deploy.ErrStarting):
		return http.StatusServiceUnavailable, deploy.ErrStarting.Error()
	case errors.Is(err, deploy.ErrNotRecorded):
		return http.StatusServiceUnavailable, "the provider could not record the manifest; send it again"
	case errors.Is(err, auth.ErrUnavailable), errors.Is(err, manifest.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "the provider cannot answer right now; try again"
	}
	return http.StatusInternalServerError, "internal error"
}

// writeError answers with err's status and message, logging what the tenant does not
// see.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := statusOf(err)
	if code >= 500 {
		s.log.WarnContext(r.Context(), "gateway request failed", slog.String("route", r.Pattern), slog.Int("status", code), slog.String("error", err.Error()))
	}
	httpjson.Error(w, code, msg)
}
