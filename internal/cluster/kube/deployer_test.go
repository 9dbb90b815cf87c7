package kube

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

func newTestDeployer(t *testing.T, kube *testenv.Kube) *Deployer {
	t.Helper()
	return deployerOf(t, kube, testOwner)
}

//go:embed testdata/web.sdl.yaml
var webSDL string

// TestDeployUpdateTeardown deploys a lease, updates it in place, rebuilds it from its
// Manifest resource, and tears it down until its namespace is gone.
func TestDeployUpdateTeardown(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube, localenv.NodeSpec{Name: "deploy-1", CPU: "8", Memory: "32Gi"})
	d := newTestDeployer(t, kube)
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := market.LeaseID{Owner: "akash1deploy", DSeq: 7, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	ns := LeaseNamespace(id)
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	v1 := bytes.Repeat([]byte{1}, 32)
	// Version 1 has a second service, and a hostname on the web port.
	g1 := res.Manifest[0]
	g1.Services = append(slices.Clone(g1.Services), g1.Services[0])
	g1.Services[0].Expose = slices.Clone(g1.Services[0].Expose)
	g1.Services[0].Expose[0].Hosts = []string{"web.example.com"}
	g1.Services[1].Name, g1.Services[1].Count = "worker", 1
	g1.Services[1].Expose = []market.ServiceExpose{{Port: 6379, Proto: market.ProtoTCP}}
	if err := d.Deploy(ctx, id, v1, g1, routesOf(g1)); err != nil {
		t.Fatal(err)
	}
	hosts := func() int {
		l, err := d.dc.Resource(berthv1.ProviderHostResource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "worker", metav1.GetOptions{}); err != nil || hosts() != 1 {
		t.Fatalf("version 1: worker %v, %d provider hosts", err, hosts())
	}
	// The hostname withheld (another of the tenant's deployments holds it): its
	// ProviderHost goes, the recorded group keeps it; routed again, it comes back.
	if err := d.Deploy(ctx, id, v1, g1, deploy.Routes{}); err != nil {
		t.Fatal(err)
	}
	if n := hosts(); n != 0 {
		t.Fatalf("%d provider hosts for a withheld hostname", n)
	}
	deployed, err := d.Deployed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range deployed {
		if dl.Lease == id && (len(dl.Routes.Hosts) != 0 || len(deploy.RoutesOf(&dl.Group).Hosts) != 1) {
			t.Fatalf("recorded routes %+v, group hosts %v", dl.Routes, deploy.RoutesOf(&dl.Group).Hosts)
		}
	}
	if err := d.Deploy(ctx, id, v1, g1, routesOf(g1)); err != nil {
		t.Fatal(err)
	}
	if n := hosts(); n != 1 {
		t.Fatalf("%d provider hosts once routed again", n)
	}
	running := func(image string, n int) func() bool {
		return func() bool {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			c := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image {
					c++
				}
			}
			return c == n && len(pods.Items) == n
		}
	}
	eventually(t, "3 replicas running", running("nginx:1.27", 3))

	// A new version is applied in place and rolls out.
	g := res.Manifest[0]
	g.Services[0].Image = "nginx:1.28"
	if err := d.Deploy(ctx, id, bytes.Repeat([]byte{2}, 32), g, routesOf(g)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update rolled out", running("nginx:1.28", 2))
	// What version 2 dropped is gone: the worker's workload and service, the hostname.
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dropped service's deployment: %v", err)
	}
	if svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=worker"}); err != nil || len(svcs.Items) != 0 {
		t.Fatalf("the dropped service's services: %v %v", svcs, err)
	}
	if n := hosts(); n != 0 {
		t.Fatalf("%d provider hosts after the hostname was dropped", n)
	}

	// The Manifest resource records the latest version, applied.
	ms, err := d.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		gotID, v, gg, err := ManifestLease(m)
		if err == nil && gotID == id {
			found = true
			if v[0] != 2 || gg.Services[0].Image != "nginx:1.28" || m.Status.Phase != PhaseApplied || m.Status.ObservedGeneration != m.Generation {
				t.Fatalf("manifest %x %+v, status %+v (generation %d)", v, gg.Services[0], m.Status, m.Generation)
			}
		}
	}
	if !found {
		t.Fatal("no Manifest resource for the lease")
	}

	// Two more versions: the deployment controller keeps one old ReplicaSet, not a pile.
	for i, image := range []string{"nginx:1.29", "nginx:1.30"} {
		g.Services[0].Image = image
		if err := d.Deploy(ctx, id, bytes.Repeat([]byte{byte(3 + i)}, 32), g, routesOf(g)); err != nil {
			t.Fatal(err)
		}
		eventually(t, image+" rolled out", running(image, 2))
	}
	eventually(t, "one old ReplicaSet kept", func() bool {
		rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=web"})
		return err == nil && len(rs.Items) == 2
	})

	if err := d.Teardown(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The workloads go at once, without waiting for the namespace controller.
	if deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil || len(deps.Items) != 0 {
		t.Fatalf("deployments left after teardown: %v (%v)", deps, err)
	}
	if err := d.Teardown(ctx, id); err != nil { // nothing left: not an error
		t.Fatal(err)
	}
	eventually(t, "the namespace gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestRemoveOrphans: namespaces of leases the ledger no longer shows active are
// removed; an active lease's stays; when the ledger cannot answer nothing is removed;
// a dry run removes nothing.
func TestRemoveOrphans(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	d := newTestDeployer(t, kube)
	lease := func(dseq uint64) market.LeaseID {
		return market.LeaseID{Owner: "akash1orphan", DSeq: dseq, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	}
	alive, dead, unknown := lease(1), lease(2), lease(3)
	for _, id := range []market.LeaseID{alive, dead, unknown} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace(id), Labels: testOwner.LeaseLabels(id)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	}
	outage := errors.New("ledger unreachable")
	active := func(_ context.Context, id market.LeaseID) (bool, error) {
		switch {
		case id.Owner != "akash1orphan":
			return true, nil // other tests' leases
		case id == unknown:
			return false, outage
		}
		return id == alive, nil
	}
	orphans, err := d.RemoveOrphans(ctx, active, nil)
	if !errors.Is(err, outage) || len(orphans) != 1 || orphans[0].Lease != dead || orphans[0].Removed {
		t.Fatalf("dry run: %+v %v", orphans, err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(dead), metav1.GetOptions{}); err != nil {
		t.Fatalf("a dry run removed a namespace: %v", err)
	}
	orphans, _ = d.RemoveOrphans(ctx, active, d.Teardown)
	if len(orphans) != 1 || !orphans[0].Removed {
		t.Fatalf("orphans %+v", orphans)
	}
	eventually(t, "the orphan's namespace gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(dead), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	for _, id := range []market.LeaseID{alive, unknown} {
		if ns, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(id), metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
			t.Fatalf("lease %s's namespace was removed: %v", id, err)
		}
	}
}

// TestDeployFailureIsRecorded: when the API server refuses an object part-way, the
// Manifest (written first) records the failure and why, so the lease is known and
// retried after a restart; teardown removes what was applied.
func TestDeployFailureIsRecorded(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	d := newTestDeployer(t, kube)
	d.settings = Settings{Owner: testOwner, EgressDeny: []string{"not-a-cidr"}} // the network policy is refused
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := market.LeaseID{Owner: "akash1failing", DSeq: 9, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	err = d.Deploy(ctx, id, bytes.Repeat([]byte{1}, 32), res.Manifest[0], routesOf(res.Manifest[0]))
	if err == nil || !strings.Contains(err.Error(), "network policy allow-internet") {
		t.Fatalf("deploy: %v", err)
	}
	ms, err := d.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m *berthv1.Manifest) bool { return m.Spec.Lease.Owner == "akash1failing" })
	if i < 0 || ms[i].Status.Phase != PhaseFailed || !strings.Contains(ms[i].Status.Message, "allow-internet") {
		t.Fatalf("manifest status: %+v", ms)
	}
	if err := d.Teardown(ctx, id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, LeaseNamespace(id), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestRebuildRestoresRegistryPasswords: the Manifest resource keeps no registry
// password, so a lease rebuilt after a restart takes it back from its pull Secret and
// applies again; with the Secret gone it is refused with the reason, not run without.
func TestRebuildRestoresRegistryPasswords(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	d := newTestDeployer(t, kube)
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	group := res.Manifest[0]
	group.Services[0].Credentials = &market.ServiceCredentials{Host: "registry.example.com", Username: "u", Password: "s3cret"}
	id := market.LeaseID{Owner: "akash1pull", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	if err := d.Deploy(ctx, id, bytes.Repeat([]byte{1}, 32), group, routesOf(group)); err != nil {
		t.Fatal(err)
	}
	rebuilt := func() market.ManifestGroup {
		t.Helper()
		ds, err := d.Deployed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ds {
			if x.Lease == id {
				return x.Group
			}
		}
		t.Fatal("the lease is not among those deployed")
		return market.ManifestGroup{}
	}
	g := rebuilt()
	if c := g.Services[0].Credentials; c == nil || c.Password != "s3cret" || c.Username != "u" {
		t.Fatalf("rebuilt credentials %+v", c)
	}
	if err := d.Deploy(ctx, id, bytes.Repeat([]byte{1}, 32), g, routesOf(g)); err != nil {
		t.Fatalf("the rebuilt lease was not applied again: %v", err)
	}
	if err := cs.CoreV1().Secrets(LeaseNamespace(id)).Delete(ctx, "web-pull", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g = rebuilt()
	if c := g.Services[0].Credentials; c == nil || c.Password != "" {
		t.Fatalf("credentials without their secret %+v", c)
	}
	if err := d.Deploy(ctx, id, bytes.Repeat([]byte{1}, 32), g, routesOf(g)); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("applied without a password: %v", err)
	}
}

// routesOf routes everything the group asks for (a lease alone with its hostnames).
func routesOf(g market.ManifestGroup) deploy.Routes { return deploy.RoutesOf(&g) }

// TestRecordThenDeployWritesOnce: a manifest accepted (Record) and then applied
// (Deploy) reads the namespace and writes the Manifest resource once; a later Deploy of
// the same manifest (a resync, a drift repair) checks both again.
func TestRecordThenDeployWritesOnce(t *testing.T) {
	kube := testenv.Cluster(t)
	newTestDeployer(t, kube) // the CRDs
	rc := rest.CopyConfig(kube.RESTConfig())
	var mu sync.Mutex
	calls := map[string]int{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			verb, what := testenv.AuthorizedAs(req)
			mu.Lock()
			calls[verb+" "+what]++
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	count := func(call string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[call]
	}
	cs, dc := testenv.Clients(t, rc)
	d, err := NewDeployer(cs, dc, Settings{Owner: testOwner}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := sdl.Parse([]byte(webSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Manifest[0]
	id := market.LeaseID{Owner: "akash1once", DSeq: 1, GSeq: 1, OSeq: 1, Provider: testOwner.Provider}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(t.Context()), id) })
	v := bytes.Repeat([]byte{7}, 32)
	if err := d.Record(t.Context(), id, v, g, routesOf(g)); err != nil {
		t.Fatal(err)
	}
	if err := d.Deploy(t.Context(), id, v, g, routesOf(g)); err != nil {
		t.Fatal(err)
	}
	if n, m := count("get namespaces"), count("patch berth.dev/manifests"); n != 1 || m != 1 {
		t.Errorf("record and deploy: namespace read %d times, Manifest written %d times; want once each", n, m)
	}
	if err := d.Deploy(t.Context(), id, v, g, routesOf(g)); err != nil {
		t.Fatal(err)
	}
	if n, m := count("get namespaces"), count("patch berth.dev/manifests"); n != 2 || m != 2 {
		t.Errorf("a second deploy: namespace read %d times, Manifest written %d times in all; want twice each", n, m)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
