package testenv

import (
	"io"
	"maps"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// Watches counts the watches rc's clients hold open, by resource ("pods",
// "berth.dev/providerhosts"): how many now, and the most at once.
type Watches struct {
	mu         sync.Mutex
	open, peak map[string]int
}

// CountWatches makes rc's clients report their watches to the returned counter.
func CountWatches(rc *rest.Config) *Watches {
	w := &Watches{open: map[string]int{}, peak: map[string]int{}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if verb, what := AuthorizedAs(req); verb == "watch" && err == nil && resp.StatusCode == http.StatusOK {
				w.add(what, 1)
				var once sync.Once
				resp.Body = &watchBody{ReadCloser: resp.Body, closed: func() { once.Do(func() { w.add(what, -1) }) }}
			}
			return resp, err
		})
	})
	return w
}

func (w *Watches) add(what string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open[what] += n
	if w.open[what] == 0 {
		delete(w.open, what)
	}
	w.peak[what] = max(w.peak[what], w.open[what])
}

// Open is how many watches of each resource are open now.
func (w *Watches) Open() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.open)
}

// Peak is the most watches of each resource that were open at once.
func (w *Watches) Peak() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.peak)
}

// watchBody tells when a watch's stream is closed.
type watchBody struct {
	io.ReadCloser
	closed func()
}

func (b *watchBody) Close() error {
	defer b.closed()
	return b.ReadCloser.Close()
}
