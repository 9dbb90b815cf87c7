package kube

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// TestManagerOnTheCluster runs the deployment manager with the real deployer: a
// manifest becomes running pods; the manager is stopped mid-deploy and a new one
// converges from the Manifest resources; a lease that closed meanwhile is torn down at
// start; a closed lease's namespace goes away.
func TestManagerOnTheCluster(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube, localenv.NodeSpec{Name: "mgr-1", CPU: "8", Memory: "32Gi"})
	d := newTestDeployer(t, kube)
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	group := res.Manifest[0]
	keep := market.LeaseID{Owner: "akash1manager", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	gone := market.LeaseID{Owner: "akash1manager", DSeq: 2, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	var amu sync.Mutex
	activeSet := map[market.LeaseID]bool{keep: true, gone: true}
	active := func(_ context.Context, id market.LeaseID) (bool, error) {
		amu.Lock()
		defer amu.Unlock()
		return activeSet[id], nil
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func() (*deploy.Manager, func()) {
		m, err := deploy.NewManager(deploy.ManagerConfig{RetryMin: 50 * time.Millisecond, RetryMax: time.Second}, d, active, log)
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := m.Run(mctx); err != nil {
				t.Error(err)
			}
		})
		<-m.Started()
		return m, func() { cancel(); wg.Wait() }
	}
	for _, id := range []market.LeaseID{keep, gone} {
		t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	}
	m, stop := start()
	if err := m.ManifestReceived(t.Context(), keep, bytes.Repeat([]byte{1}, 32), group); err != nil {
		t.Fatal(err)
	}
	if err := m.ManifestReceived(t.Context(), gone, bytes.Repeat([]byte{1}, 32), group); err != nil {
		t.Fatal(err)
	}
	// Stop as soon as the Manifests are written: pods are still starting.
	eventually(t, "both manifests recorded", func() bool {
		ds, err := d.Deployed(ctx)
		return err == nil && countOwner(ds, "akash1manager") == 2
	})
	stop()

	// While it is down, one lease closes.
	amu.Lock()
	activeSet[gone] = false
	amu.Unlock()
	m, stop = start()
	defer stop()
	running := func(id market.LeaseID, n int) func() bool {
		return func() bool {
			pods, err := cs.CoreV1().Pods(LeaseNamespace(id)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			c := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					c++
				}
			}
			return c == n
		}
	}
	eventually(t, "the active lease running", running(keep, 2))
	nsGone := func(id market.LeaseID) func() bool {
		return func() bool {
			_, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(id), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	eventually(t, "the closed lease torn down at start", nsGone(gone))
	// Only this test's leases: the manager also sees other tests' in the shared cluster.
	var mine []deploy.DeploymentState
	for _, st := range m.States() {
		if st.Lease.Owner == keep.Owner {
			mine = append(mine, st)
		}
	}
	if len(mine) != 1 || mine[0].Lease != keep || mine[0].Phase != deploy.PhaseDeployed {
		t.Fatalf("states %+v", mine)
	}
	m.LeaseClosed(keep)
	eventually(t, "the closed lease's namespace gone", nsGone(keep))
}

func countOwner(ds []deploy.Deployed, owner string) int {
	n := 0
	for _, d := range ds {
		if d.Lease.Owner == owner {
			n++
		}
	}
	return n
}
