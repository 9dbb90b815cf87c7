package kube

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// withCRDs installs berth's CRDs in the test cluster and returns a dynamic client of it.
func withCRDs(t *testing.T, kube *testenv.Kube) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := InstallCRDs(t.Context(), dc); err != nil {
		t.Fatal(err)
	}
	return dc
}

// deployerOf is a deployer playing owner on the test cluster.
func deployerOf(t *testing.T, kube *testenv.Kube, owner ownership.Owner) *Deployer {
	t.Helper()
	d, err := NewDeployer(kube.Clientset(t), withCRDs(t, kube), Settings{Owner: owner}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func leasesOf(t *testing.T, d *Deployer) map[market.LeaseID]bool {
	t.Helper()
	ds, err := d.Deployed(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[market.LeaseID]bool{}
	for _, x := range ds {
		out[x.Lease] = true
	}
	return out
}

// TestProvidersShareACluster: two providers on one chain and the first provider's key
// on a second chain share a cluster. Each rebuilds, removes orphans, tears down and
// watches only its own leases; a lease of the same ID on the other chain (the same
// namespace name) is refused rather than written over, and left alone at teardown.
func TestProvidersShareACluster(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube, localenv.NodeSpec{Name: "shared-1", CPU: "8", Memory: "32Gi"})
	a := ownership.Owner{Provider: "akash1sharea", ChainID: "chain-one"}
	b := ownership.Owner{Provider: "akash1shareb", ChainID: "chain-one"}
	a2 := ownership.Owner{Provider: a.Provider, ChainID: "chain-two"} // a's key on another chain
	da, db, da2 := deployerOf(t, kube, a), deployerOf(t, kube, b), deployerOf(t, kube, a2)
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	group := res.Manifest[0]
	v := bytes.Repeat([]byte{1}, 32)
	idA := market.LeaseID{Owner: "akash1sharetenant", DSeq: 1, GSeq: 1, OSeq: 1, Provider: a.Provider}
	idB := market.LeaseID{Owner: "akash1sharetenant", DSeq: 1, GSeq: 1, OSeq: 1, Provider: b.Provider}
	for _, c := range []struct {
		d  *Deployer
		id market.LeaseID
	}{{da, idA}, {db, idB}} {
		t.Cleanup(func() { _ = c.d.Teardown(context.WithoutCancel(ctx), c.id) })
		if err := c.d.Record(ctx, c.id, v, group, deploy.Routes{}); err != nil {
			t.Fatal(err)
		}
		if err := c.d.Deploy(ctx, c.id, v, group, deploy.Routes{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each rebuilds from its own Manifests only.
	if got := leasesOf(t, da); !got[idA] || got[idB] {
		t.Fatalf("provider a rebuilds %v", got)
	}
	if got := leasesOf(t, db); !got[idB] || got[idA] {
		t.Fatalf("provider b rebuilds %v", got)
	}
	if got := leasesOf(t, da2); got[idA] || got[idB] {
		t.Fatalf("provider a on chain two rebuilds %v", got)
	}
	// a's key on chain two has a lease of the same ID: the same namespace name. It may
	// not write there, nor delete it.
	before, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(idA), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{da2.Record(ctx, idA, v, group, deploy.Routes{}), da2.Deploy(ctx, idA, v, group, deploy.Routes{})} {
		if !errors.Is(err, ErrForeign) {
			t.Fatalf("writing into another chain's lease namespace: %v, want ErrForeign", err)
		}
	}
	if err := da2.Teardown(ctx, idA); err != nil {
		t.Fatal(err)
	}
	if err := db.Deploy(ctx, idA, v, group, deploy.Routes{}); !errors.Is(err, ErrForeign) {
		t.Fatalf("provider b deploying provider a's lease: %v", err)
	}
	after, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(idA), metav1.GetOptions{})
	if err != nil || after.DeletionTimestamp != nil || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("another chain's provider touched the namespace: %v %+v", err, after.ObjectMeta)
	}
	// Orphan passes: the ledger of each shows none of the leases active. Each removes
	// its own only.
	none := func(context.Context, market.LeaseID) (bool, error) { return false, nil }
	if _, err := da2.RemoveOrphans(ctx, none, da2.Teardown); err != nil {
		t.Fatal(err)
	}
	orphans, err := db.RemoveOrphans(ctx, none, db.Teardown)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].Lease != idB || !orphans[0].Removed {
		t.Fatalf("provider b's orphans %+v", orphans)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(idA), metav1.GetOptions{})
	if err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("another provider's orphan pass deleted provider a's lease: %v %v", err, ns.DeletionTimestamp)
	}
	// Provider a's monitor reports its lease, never b's.
	mon, err := NewMonitor(startCache(t, cs, nil, a), cs, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Go(t, mon.Run)()
	eventually(t, "provider a's lease status", func() bool { _, ok := mon.Status(idA); return ok })
	if _, ok := mon.Status(idB); ok {
		t.Fatal("provider a reports provider b's lease")
	}
}

// TestStatefulClaimsBelongToTheLease: the claims a StatefulSet makes carry the lease's
// labels, so the inventory counts their volumes against the lease's reservation
// rather than on top of it (20 GiB claimed used to take 40 GiB from the pool).
func TestStatefulClaimsBelongToTheLease(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube, localenv.NodeSpec{Name: "claims-1", CPU: "8", Memory: "32Gi"})
	d := newTestDeployer(t, kube)
	// A cluster storage class of the test's own: other tests' claims are not counted.
	d.settings.StorageClasses = map[string]string{"beta3": "claims-ssd"}
	res, _, err := sdl.Parse([]byte(persistentSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := market.LeaseID{Owner: "akash1claims", DSeq: 1, GSeq: 1, OSeq: 1, Provider: testOwner.Provider}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	capacity := cluster.NewCapacity()
	inv, err := NewInventory(startCache(t, cs, nil, testOwner), cs, capacity, InventoryConfig{Storage: map[string]int64{"beta3": 30 * gi}, NodePorts: 10,
		StorageClasses: d.settings.StorageClasses}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Go(t, inv.Run)()
	if err := inv.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	demand, err := cluster.DemandOf(res.Groups[0], cluster.Overcommit{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := capacity.Reserve(id.Order(), demand); err != nil {
		t.Fatal(err)
	}
	defer capacity.Unreserve(id.Order())
	if err := d.Deploy(ctx, id, bytes.Repeat([]byte{1}, 32), res.Manifest[0], deploy.Routes{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim made, with the lease's labels", func() bool {
		l, err := cs.CoreV1().PersistentVolumeClaims(LeaseNamespace(id)).List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			return false
		}
		got, ok := testOwner.LeaseOf(l.Items[0].Labels)
		return ok && got == id
	})
	// 20 GiB of the 30 are the lease's: 10 are free, whether or not its claim exists.
	probe := market.OrderID{Owner: "akash1probe", DSeq: 1, GSeq: 1, OSeq: 1}
	testenv.EventuallyNoError(t, 30*time.Second, "the claim counted against the lease", func() error {
		_, err := capacity.Reserve(probe, cluster.Demand{Storage: map[string]int64{"beta3": 10 * gi}})
		if err == nil {
			capacity.Unreserve(probe)
			return nil
		}
		var claims []string
		if l, lerr := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{}); lerr == nil {
			for i := range l.Items {
				c := &l.Items[i]
				claims = append(claims, fmt.Sprintf("%s/%s class %v labels %v", c.Namespace, c.Name, ptr.Deref(c.Spec.StorageClassName, ""), c.Labels))
			}
		}
		return fmt.Errorf("%w; pools %+v; claims %q", err, capacity.Snapshot().Pools, claims)
	})
	if err := capacity.Check(); err != nil {
		t.Fatal(err)
	}
}

//go:embed testdata/persistent.sdl.yaml
var persistentSDL string

// TestDriftIsRepaired runs the manager with the drift watcher: objects of a deployed
// lease edited or deleted by hand come back within seconds, the namespace included.
func TestDriftIsRepaired(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube, localenv.NodeSpec{Name: "drift-1", CPU: "8", Memory: "32Gi"})
	owner := ownership.Owner{Provider: "akash1driftprovider", ChainID: "berth-test"}
	d := deployerOf(t, kube, owner)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := deploy.NewManager(deploy.ManagerConfig{RetryMin: 100 * time.Millisecond, RetryMax: 2 * time.Second}, d,
		func(context.Context, market.LeaseID) (bool, error) { return true, nil }, log)
	if err != nil {
		t.Fatal(err)
	}
	drift, err := NewDrift(startCache(t, cs, d.dc, owner), m.Drifted, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Go(t, m.Run, drift.Run)()
	<-m.Started()
	<-drift.Synced()
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := market.LeaseID{Owner: "akash1drifttenant", DSeq: 1, GSeq: 1, OSeq: 1, Provider: owner.Provider}
	ns := LeaseNamespace(id)
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	if err := m.ManifestReceived(ctx, id, bytes.Repeat([]byte{1}, 32), res.Manifest[0]); err != nil {
		t.Fatal(err)
	}
	deployed := func() bool {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		s, _ := m.State(id)
		return err == nil && *dep.Spec.Replicas == 2 && dep.DeletionTimestamp == nil && s.Phase == deploy.PhaseDeployed
	}
	eventually(t, "deployed", deployed)
	repaired := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		// A deleted namespace is gone only once the namespace controller has emptied
		// it (its pace, not berth's: seconds, longer on a loaded machine).
		timeout := 30 * time.Second
		if what == "namespace deleted" {
			timeout = 2 * time.Minute
		}
		testenv.Eventually(t, timeout, what+" repaired", cond)
		t.Logf("%s repaired in %v", what, time.Since(start).Round(time.Millisecond))
	}

	// Scaled by hand.
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired("replicas edited", func() bool {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && *dep.Spec.Replicas == 2
	})
	// Deleted by hand: the workload, a service, a network policy, the Manifest.
	uid := dep.UID
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired("deployment deleted", func() bool {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && dep.UID != uid
	})
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(svcs.Items) == 0 {
		t.Fatalf("services: %v", err)
	}
	svc := svcs.Items[0]
	if err := cs.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired("service deleted", func() bool {
		s, err := cs.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		return err == nil && s.UID != svc.UID
	})
	if err := cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "default-deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired("network policy deleted", func() bool {
		_, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, "default-deny", metav1.GetOptions{})
		return err == nil
	})
	if err := d.dc.Resource(berthv1.ManifestResource).Namespace(ns).Delete(ctx, ManifestName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired("manifest resource deleted", func() bool {
		got := leasesOf(t, d)
		return got[id]
	})
	// The whole namespace: created again once the namespace controller has emptied it.
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Should the namespace controller not finish in time, say what it waited for: its
	// conditions on the namespace, and the pods left in it.
	t.Cleanup(func() {
		if t.Failed() {
			logNamespaceDeletion(t, cs, ns)
		}
	})
	repaired("namespace deleted", func() bool {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp != nil {
			return false
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		running := 0
		for i := range pods.Items {
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return err == nil && running == 2
	})
	// A closed lease is not brought back by its teardown's deletions.
	m.LeaseClosed(id)
	eventually(t, "torn down", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, ok := m.State(id); ok {
		t.Fatal("a torn-down lease is still managed")
	}
}

// logNamespaceDeletion logs why the namespace is not gone yet: the namespace
// controller's conditions on it, and each pod left with its node, phase, deletion
// time and finalizers.
func logNamespaceDeletion(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := context.WithoutCancel(t.Context())
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Logf("namespace %s: %v", ns, err)
		return
	}
	t.Logf("namespace %s: phase %s, deletion %v, finalizers %v", ns, n.Status.Phase, n.DeletionTimestamp, n.Spec.Finalizers)
	for _, c := range n.Status.Conditions {
		t.Logf("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("pods of %s: %v", ns, err)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		t.Logf("  pod %s on %s: %s, deletion %v, finalizers %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp, p.Finalizers)
	}
}
