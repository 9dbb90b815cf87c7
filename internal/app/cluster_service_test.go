package app

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/testenv"
)

// TestCRDInstallWaitsForTheAPIServer: a provider started while its API server does not
// answer waits for it (saying so) rather than exiting.
func TestCRDInstallWaitsForTheAPIServer(t *testing.T) {
	port, err := testenv.FreePort(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(&rest.Config{Host: "https://127.0.0.1:" + strconv.Itoa(port), TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil)) // one goroutine logs
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	if err := installCRDsWithRetry(ctx, dc, log); err != nil {
		t.Fatalf("an unreachable API server ended the provider: %v", err)
	}
	if n := strings.Count(logs.String(), "the API server does not answer; retrying"); n < 2 {
		t.Fatalf("%d retries logged in 2.5 s:\n%s", n, logs.String())
	}
}
