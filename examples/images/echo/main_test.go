package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newServer(dataDir string) *server {
	return &server{hostname: "pod-1", dataDir: dataDir, environ: os.Environ, log: &bytes.Buffer{}}
}

func do(t *testing.T, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
	return rec
}

func TestRoot(t *testing.T) {
	t.Setenv("ECHO_TEST_VAR", "hello world")
	s := newServer("")
	rec := do(t, s.handler(), http.MethodGet, "/", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
	lines := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n")
	if lines[0] != "hostname: pod-1" {
		t.Errorf("first line = %q, want hostname: pod-1", lines[0])
	}
	env := lines[1:]
	if !slices.Contains(env, "ECHO_TEST_VAR=hello world") {
		t.Errorf("environment listing lacks ECHO_TEST_VAR=hello world:\n%s", rec.Body)
	}
	for i := 1; i < len(env); i++ {
		if env[i-1] > env[i] {
			t.Errorf("environment not sorted: %q before %q", env[i-1], env[i])
		}
	}
	buf, ok := s.log.(*bytes.Buffer)
	if !ok {
		t.Fatalf("log is a %T, want the test's buffer", s.log)
	}
	if got, want := buf.String(), "echo: GET / from 192.0.2.1:1234\n"; got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
}

func TestHealthz(t *testing.T) {
	rec := do(t, newServer("").handler(), http.MethodGet, "/healthz", "")
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", rec.Code, rec.Body)
	}
}

func TestData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "volume")
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := recordStart(dir, "pod-1", start); err != nil {
		t.Fatal(err)
	}
	h := newServer(dir).handler()

	rec := do(t, h, http.MethodGet, "/data", "")
	wantStarts := "start 2026-01-02T03:04:05.000000006Z pod-1\n"
	if rec.Code != http.StatusOK || rec.Body.String() != wantStarts {
		t.Fatalf("GET /data before notes = %d %q, want 200 %q", rec.Code, rec.Body, wantStarts)
	}
	for _, note := range []string{"first", "second"} {
		if rec := do(t, h, http.MethodPost, "/data", note); rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
			t.Fatalf("POST /data %q = %d %q, want 200 ok", note, rec.Code, rec.Body)
		}
	}
	rec = do(t, h, http.MethodGet, "/data", "")
	if want := wantStarts + "first\nsecond\n"; rec.Body.String() != want {
		t.Errorf("GET /data = %q, want %q", rec.Body, want)
	}

	rec = do(t, h, http.MethodPost, "/data", strings.Repeat("x", maxNote+1))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST /data of %d bytes = %d, want 413", maxNote+1, rec.Code)
	}
	if rec := do(t, h, http.MethodPost, "/data", strings.Repeat("x", maxNote)); rec.Code != http.StatusOK {
		t.Errorf("POST /data of %d bytes = %d, want 200", maxNote, rec.Code)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "notes.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := len("first\nsecond\n") + maxNote + 1; len(notes) != want {
		t.Errorf("notes.log has %d bytes, want %d (the refused body must not be written)", len(notes), want)
	}
}

func TestDataWithoutDataDir(t *testing.T) {
	h := newServer("").handler()
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		rec := do(t, h, method, "/data", "note")
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "DATA_DIR") {
			t.Errorf("%s /data = %d %q, want 404 naming DATA_DIR", method, rec.Code, rec.Body)
		}
	}
}

func TestRecordStartUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := recordStart(filepath.Join(file, "sub"), "pod-1", time.Now()); err == nil {
		t.Error("recordStart under a regular file succeeded, want an error")
	}
}

func TestMemory(t *testing.T) {
	s := newServer("")
	h := s.handler()
	for _, q := range []string{"", "mib=0", "mib=-1", "mib=x", "mib=16385"} {
		if rec := do(t, h, http.MethodPost, "/memory?"+q, ""); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "from 1 to 16384") {
			t.Errorf("POST /memory?%s = %d %q, want 400 naming the range", q, rec.Code, rec.Body)
		}
	}
	if rec := do(t, h, http.MethodPost, "/memory?mib=2", ""); rec.Code != http.StatusOK || rec.Body.String() != "holding 2 MiB\n" {
		t.Errorf("POST /memory?mib=2 = %d %q", rec.Code, rec.Body)
	}
	if rec := do(t, h, http.MethodPost, "/memory?mib=3", ""); rec.Body.String() != "holding 5 MiB\n" {
		t.Errorf("a second POST /memory?mib=3 = %q, want 5 MiB held in all", rec.Body)
	}
}
