package testenv

import (
	"strings"
	"sync"
)

// MarkerWriter is an io.Writer, safe for concurrent use, that keeps what is written
// and closes Seen once Marker has appeared in it (a command's output saying it is
// ready, for instance).
type MarkerWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	marker string
	seen   chan struct{}
	once   sync.Once
}

// NewMarkerWriter returns a writer waiting for marker.
func NewMarkerWriter(marker string) *MarkerWriter {
	return &MarkerWriter{marker: marker, seen: make(chan struct{})}
}

func (w *MarkerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// Seen is closed once the marker has been written.
func (w *MarkerWriter) Seen() <-chan struct{} { return w.seen }

// String is everything written so far.
func (w *MarkerWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Buffer is an io.Writer, safe for concurrent use, that a test reads while a stream
// or a process writes it.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String is everything written so far.
func (w *Buffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
