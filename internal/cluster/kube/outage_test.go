package kube

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// TestAPIServerOutage stops kube-apiserver for 60 s under a running lease: nothing is
// torn down, the manager keeps the lease deployed, and afterwards the informers
// recover: an update applied after the outage is seen rolling out through them. (This
// file sorts last so the outage does not disturb the package's other tests.)
func TestAPIServerOutage(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube, localenv.NodeSpec{Name: "outage-1", CPU: "8", Memory: "32Gi"})
	d := newTestDeployer(t, kube)
	id := market.LeaseID{Owner: "akash1outage", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	updates := make(chan deploy.LeaseStatus, 1024)
	mon, err := NewMonitor(startCache(t, cs, nil, testOwner), cs, log, func(s deploy.LeaseStatus) {
		if s.Lease == id {
			updates <- s
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := deploy.NewManager(deploy.ManagerConfig{RetryMin: 100 * time.Millisecond, RetryMax: 2 * time.Second}, d,
		func(context.Context, market.LeaseID) (bool, error) { return true, nil }, log)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = mon.Run(runCtx) })
	wg.Go(func() { _ = m.Run(runCtx) })
	defer wg.Wait()
	defer stop()
	<-mon.Synced()
	<-m.Started()

	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	group := res.Manifest[0]
	await := func(what string, timeout time.Duration, cond func(deploy.LeaseStatus) bool) {
		t.Helper()
		deadline := time.After(timeout)
		for {
			select {
			case s := <-updates:
				if cond(s) {
					return
				}
			case <-deadline:
				s, _ := mon.Status(id)
				t.Fatalf("timed out waiting for %s; last status %+v; manager %+v", what, s, m.States())
			}
		}
	}
	if err := m.ManifestReceived(ctx, id, bytes.Repeat([]byte{1}, 32), group); err != nil {
		t.Fatal(err)
	}
	await("the lease ready", time.Minute, func(s deploy.LeaseStatus) bool { return s.Ready })

	if err := kube.RestartAPIServer(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// Nothing was torn down, and the manager still holds the lease as deployed.
	if _, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(id), metav1.GetOptions{}); err != nil {
		t.Fatalf("the lease's namespace after the outage: %v", err)
	}
	// (The manager also rebuilds other tests' leases from the shared cluster: only this
	// one is the test's.)
	states := m.States()
	if i := slices.IndexFunc(states, func(s deploy.DeploymentState) bool { return s.Lease == id }); i < 0 || states[i].Phase != deploy.PhaseDeployed {
		t.Fatalf("manager states after the outage %+v", states)
	}
	// An update after the outage is applied and seen through the recovered informers.
	// (The control plane's own controllers take about a minute to reconnect here.)
	group.Services[0].Image = "nginx:1.28"
	if err := m.ManifestReceived(ctx, id, bytes.Repeat([]byte{2}, 32), group); err != nil {
		t.Fatal(err)
	}
	await("the update rolled out after the outage", 4*time.Minute, func(s deploy.LeaseStatus) bool {
		if !s.Ready {
			return false
		}
		pods, err := cs.CoreV1().Pods(LeaseNamespace(id)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "nginx:1.28" {
				return false
			}
		}
		return len(pods.Items) == 2
	})
}
