// Command echo is the program of berth's dev and test workload image "echo". Tests and
// `berth dev` run it as a tenant container to prove that containers really run:
// hack/images.sh builds it, and berth dev's real node imports it as an image.
//
// It serves HTTP on every port in $PORTS (comma-separated, default 8080) on all
// interfaces. GET / answers the hostname and the sorted environment, GET /healthz
// answers "ok", and /data reads (GET) or appends to (POST) files in $DATA_DIR, which is
// meant to be a volume. Every start is appended to $DATA_DIR/starts.log, so a restart
// keeps the earlier lines. POST /memory?mib=N allocates N MiB more, writes every page
// and holds it, so that a test can push the process past its memory limit. With $EXIT_AFTER (a Go duration) it exits with status 3 after
// that long. SIGTERM or SIGINT shuts it down gracefully with status 0.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxNote is the largest body POST /data accepts.
const maxNote = 64 << 10

// maxMiB is the most one POST /memory allocates.
const maxMiB = 16 << 10

// server answers echo's HTTP requests.
type server struct {
	hostname string
	dataDir  string // empty: /data answers 404
	environ  func() []string
	log      io.Writer

	mu   sync.Mutex // serialises appends to notes.log and holds held
	held [][]byte   // what POST /memory allocated
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", s.root)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /data", s.readData)
	mux.HandleFunc("POST /data", s.appendNote)
	mux.HandleFunc("POST /memory", s.allocate)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(s.log, "echo: %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		mux.ServeHTTP(w, r)
	})
}

func (s *server) root(w http.ResponseWriter, _ *http.Request) {
	env := slices.Clone(s.environ())
	slices.Sort(env)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "hostname: %s\n%s\n", s.hostname, strings.Join(env, "\n"))
}

func (s *server) readData(w http.ResponseWriter, _ *http.Request) {
	if s.dataDir == "" {
		http.Error(w, "no data directory: DATA_DIR is not set", http.StatusNotFound)
		return
	}
	starts, err := os.ReadFile(filepath.Join(s.dataDir, "starts.log"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	notes, err := os.ReadFile(filepath.Join(s.dataDir, "notes.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(append(starts, notes...))
}

func (s *server) appendNote(w http.ResponseWriter, r *http.Request) {
	if s.dataDir == "" {
		http.Error(w, "no data directory: DATA_DIR is not set", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNote))
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("body larger than %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		return
	} else if err != nil {
		http.Error(w, fmt.Sprintf("read body: %v", err), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := appendSync(filepath.Join(s.dataDir, "notes.log"), append(body, '\n')); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// allocate holds mib more MiB, each page written so that it is resident.
func (s *server) allocate(w http.ResponseWriter, r *http.Request) {
	mib, err := strconv.Atoi(r.URL.Query().Get("mib"))
	if err != nil || mib < 1 || mib > maxMiB {
		http.Error(w, fmt.Sprintf("mib=%q: want a whole number of MiB from 1 to %d", r.URL.Query().Get("mib"), maxMiB), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for range mib {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		s.held = append(s.held, b)
	}
	for _, b := range s.held {
		total += len(b)
	}
	_, _ = fmt.Fprintf(w, "holding %d MiB\n", total>>20)
}

// appendSync appends data to the file name, creating it, and flushes it to disk.
func appendSync(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("append to %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	return f.Close()
}

// recordStart appends this start to dir/starts.log, creating dir.
func recordStart(dir, hostname string, now time.Time) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	line := fmt.Sprintf("start %s %s\n", now.Format(time.RFC3339Nano), hostname)
	return appendSync(filepath.Join(dir, "starts.log"), []byte(line))
}

func main() { os.Exit(run()) }

func run() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "echo: "+format+"\n", args...)
		return 1
	}
	hostname, err := os.Hostname()
	if err != nil {
		return fail("hostname: %v", err)
	}
	s := &server{hostname: hostname, dataDir: os.Getenv("DATA_DIR"), environ: os.Environ, log: os.Stdout}
	if s.dataDir != "" {
		if err := recordStart(s.dataDir, hostname, time.Now()); err != nil {
			return fail("record start in DATA_DIR %s: %v", s.dataDir, err)
		}
	}
	var (
		exitAfter <-chan time.Time // nil without EXIT_AFTER: never ready
		d         time.Duration
	)
	if v := os.Getenv("EXIT_AFTER"); v != "" {
		if d, err = time.ParseDuration(v); err != nil {
			return fail("EXIT_AFTER %q: %v", v, err)
		}
		exitAfter = time.After(d)
	}
	ports := os.Getenv("PORTS")
	if ports == "" {
		ports = "8080"
	}
	var listeners []net.Listener
	for _, p := range strings.Split(ports, ",") {
		p = strings.TrimSpace(p)
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fail("PORTS %q: %q is not a port", ports, p)
		}
		var lc net.ListenConfig
		ln, err := lc.Listen(context.Background(), "tcp", ":"+p) // every interface, IPv4 and IPv6
		if err != nil {
			return fail("listen: %v", err)
		}
		fmt.Printf("echo: listening on :%s\n", p)
		listeners = append(listeners, ln)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, len(listeners))
	for _, ln := range listeners {
		go func() { served <- srv.Serve(ln) }()
	}
	code := 0
	select {
	case <-ctx.Done():
	case <-exitAfter:
		fmt.Printf("echo: exiting after %s\n", d)
		code = 3
	case err := <-served:
		code = fail("serve: %v", err)
	}
	fmt.Println("echo: stopping")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fail("shutdown: %v", err)
	}
	return code
}
