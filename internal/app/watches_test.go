package app

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	restclient "k8s.io/client-go/rest"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

// TestProviderOneWatchPerKind: the provider's cluster side (inventory, deployment
// manager, status monitor, drift watcher) holds one watch of each kind it reads, through
// one cache. The counts are its whole view of the cluster: a new informer, or a kind
// watched twice, fails here.
func TestProviderOneWatchPerKind(t *testing.T) {
	k := testenv.Cluster(t)
	rc := restclient.CopyConfig(k.RESTConfig())
	watches := testenv.CountWatches(rc)
	me := ownership.Owner{Provider: "akash1watchesprovider", ChainID: "berth-test"}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := newClusterService(rc, config.DefaultProviderConfig(), me, func(context.Context, market.LeaseID) (bool, error) { return true, nil }, nil, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		stop()
		if err := g.Wait(); err != nil {
			t.Errorf("cluster service: %v", err)
		}
	})
	svc.start(gctx, g, true, log)
	for _, ch := range []<-chan struct{}{svc.inv.Synced(), svc.monitor.Synced(), svc.drift.Synced(), svc.manager.Started()} {
		testenv.Eventually(t, time.Minute, "the cluster service synced", func() bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		})
	}
	want := map[string]int{
		"nodes": 1, "pods": 1, "persistentvolumeclaims": 1, "services": 1, "events": 1, // every provider's
		"apps/deployments": 1, "apps/statefulsets": 1, "namespaces": 1, "serviceaccounts": 1, // the owner's
		"networking.k8s.io/networkpolicies": 1, "secrets": 1,
		"berth.dev/manifests": 1, "berth.dev/providerhosts": 1, "berth.dev/providerleasedips": 1,
	}
	testenv.Eventually(t, 10*time.Second, "every watch open", func() bool { return maps.Equal(watches.Open(), want) })
	peak := watches.Peak()
	for _, what := range slices.Sorted(maps.Keys(peak)) {
		t.Logf("watches %s (at most %d at once)", what, peak[what])
	}
	if !maps.Equal(peak, want) {
		t.Errorf("watched %v, want %v", peak, want)
	}
}
