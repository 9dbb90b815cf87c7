package kube

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/testenv"
)

// TestSweeper: nothing is swept before the deployment manager has started; then a
// pass runs at once. In a dry run an orphan is only logged; otherwise it is handed to
// Close and its namespace goes.
func TestSweeper(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	d := newTestDeployer(t, kube)
	dead := market.LeaseID{Owner: "akash1sweeper", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace(dead), Labels: testOwner.LeaseLabels(dead)}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), dead) })
	active := func(_ context.Context, id market.LeaseID) (bool, error) { return id != dead, nil }
	var log testenv.Buffer
	s := &Sweeper{Deployer: d, Active: active, Every: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}
	s.Sweep(ctx) // dry run
	if out := log.String(); !strings.Contains(out, "orphan lease namespace") || !strings.Contains(out, "removed=false") {
		t.Fatalf("dry run log:\n%s", out)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("a dry run removed the namespace: %v", err)
	}

	closed := make(chan market.LeaseID, 1)
	s.Close = func(ctx context.Context, id market.LeaseID) error {
		closed <- id
		return d.Teardown(ctx, id)
	}
	runCtx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(runCtx, started) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	select {
	case id := <-closed:
		t.Fatalf("lease %s swept before the manager started", id)
	case <-time.After(200 * time.Millisecond): // a pass, had one run, takes a few ms
	}
	close(started)
	select {
	case id := <-closed:
		if id != dead {
			t.Fatalf("closed %s, want %s", id, dead)
		}
	case <-time.After(time.Minute):
		t.Fatal("no pass after the manager started")
	}
	eventually(t, "the orphan's namespace gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
