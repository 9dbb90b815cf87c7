package app

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	berthv1 "berth.dev/berth/api/v1"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chartspec/charttest"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// The lease the RBAC test runs: a Deployment with registry credentials, a hostname and a
// port on a leased IP; a second Deployment; a StatefulSet with a persistent volume.
//
//go:embed testdata/rbac.sdl.yaml
var rbacSDL string

// rbacSDLUpdate is the update: the web service alone, without credentials, hostname or
// leased IP, so that applying it prunes every other kind of object.
//
//go:embed testdata/rbac-update.sdl.yaml
var rbacSDLUpdate string

func parseGroup(t *testing.T, text string) market.ManifestGroup {
	t.Helper()
	res, _, err := sdl.Parse([]byte(text), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Manifest[0]
}

// TestRBAC proves config/rbac exactly what the provider needs. It applies config/rbac
// as `kubectl apply -k` would, then runs the provider's cluster service as the service
// account (impersonated): it installs the CRDs (removed first, so they are created),
// syncs the inventory (also fed by the inventory operator's report, with
// inventory.operator) and the status monitor, deploys two leases, reads status, rebuilds
// a lease from its Manifest and pull Secret, streams logs and events (listed and
// followed) and runs a command in a pod through the gateway's stream adapter, updates a
// lease so that every kind of object is pruned, removes an orphan, and tears a lease
// down. Every request berth makes is recorded as the API server authorizes it: none may
// be refused, and every verb on every resource the roles grant must have been used.
// What berth never does is checked to be forbidden.
func TestRBAC(t *testing.T) {
	runProviderRBAC(t, readConfig(t, "../../config/rbac"), "config/rbac")
}

// TestChartProviderRBAC is TestRBAC with the service account and roles the Helm chart
// installs (charts/berth, rendered by helm): the provider runs under them with no
// request refused, and uses every permission they grant.
func TestChartProviderRBAC(t *testing.T) {
	out, err := charttest.Render(t, map[string]any{"operators": map[string]any{
		"hostname": map[string]any{"enabled": false}, "inventory": map[string]any{"enabled": false}}})
	if err != nil {
		t.Fatal(err)
	}
	var objs []configObject
	for _, o := range decodeManifests(t, "charts/berth", bytes.NewReader(out)) {
		switch o.obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			objs = append(objs, o)
		}
	}
	// The release's namespace (helm install --create-namespace, or made by hand).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charttest.Namespace}}
	if _, err := testenv.Cluster(t).Clientset(t).CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	runProviderRBAC(t, objs, "the chart's roles")
}

// TestChartOnTheAPIServer: everything the chart renders (the provider, the three
// operators, the reference Redis) is accepted by the real API server (a server-side
// dry run of every object); its roles, applied, give each operator's service account
// exactly its rules — the cluster's, the leader-election Lease's in the release's
// namespace, the IP operator's MetalLB pools' — and not what it lacks.
func TestChartOnTheAPIServer(t *testing.T) {
	out, err := charttest.Render(t, map[string]any{"redis": map[string]any{"enabled": true}, "operators": map[string]any{
		"ip": map[string]any{"enabled": true, "settings": map[string]any{"pool": "leased-ips"}}},
		"provider": map[string]any{"settings": map[string]any{"inventory": map[string]any{"leased_ip_pool": "metallb-system/leased-ips"}}}})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeManifests(t, "charts/berth", bytes.NewReader(out))
	k := testenv.Cluster(t)
	admin := k.Clientset(t)
	ctx := t.Context()
	for _, ns := range []string{charttest.Namespace, "metallb-system"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	applyConfig(t, admin, objs, true)
	var rbac []configObject
	rules := map[string][]rbacv1.PolicyRule{} // by service account
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			rbac = append(rbac, o)
		case *rbacv1.ClusterRole:
			rbac = append(rbac, o)
			rules[v.Labels["app.kubernetes.io/component"]] = v.Rules
		}
	}
	applyConfig(t, admin, rbac, false)
	allowed := func(user string, attr authorizationv1.ResourceAttributes) bool {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + charttest.Namespace}, ResourceAttributes: &attr}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	// With inventory.leased_ip_pool the provider reads MetalLB's pools in their
	// namespace, and nowhere else.
	provider := "system:serviceaccount:" + charttest.Namespace + ":" + charttest.Release + "-provider"
	testenv.EventuallyNoError(t, 30*time.Second, "the provider's pool permissions in force", func() error {
		for _, verb := range []string{"list", "watch"} {
			if a := (authorizationv1.ResourceAttributes{Namespace: "metallb-system", Group: "metallb.io", Resource: "ipaddresspools", Verb: verb}); !allowed(provider, a) {
				return fmt.Errorf("%s may not %s MetalLB's pools", provider, verb)
			}
		}
		return nil
	})
	for _, a := range []authorizationv1.ResourceAttributes{
		{Namespace: charttest.Namespace, Group: "metallb.io", Resource: "ipaddresspools", Verb: "list"},
		{Namespace: "metallb-system", Group: "metallb.io", Resource: "ipaddresspools", Verb: "create"},
	} {
		if allowed(provider, a) {
			t.Errorf("%s may %s MetalLB's pools in %q: not in its rules", provider, a.Verb, a.Namespace)
		}
	}
	for _, name := range []string{"hostname", "ip", "inventory"} {
		component := name + "-operator"
		user := "system:serviceaccount:" + charttest.Namespace + ":" + charttest.Release + "-" + component
		want := []authorizationv1.ResourceAttributes{}
		for _, r := range rules[component] {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range r.Verbs {
					want = append(want, authorizationv1.ResourceAttributes{Group: r.APIGroups[0], Resource: resource, Subresource: sub, Verb: verb})
				}
			}
		}
		for _, verb := range []string{"get", "create", "update"} {
			want = append(want, authorizationv1.ResourceAttributes{Namespace: charttest.Namespace, Group: "coordination.k8s.io", Resource: "leases", Verb: verb})
		}
		if name == "ip" {
			want = append(want, authorizationv1.ResourceAttributes{Namespace: "metallb-system", Group: "metallb.io", Resource: "ipaddresspools", Verb: "list"})
		}
		if len(want) < 6 {
			t.Fatalf("%s: %d permissions rendered", component, len(want))
		}
		// The authorizer sees new bindings a moment after they are written.
		testenv.EventuallyNoError(t, 30*time.Second, component+"'s permissions in force", func() error {
			for _, a := range want {
				if !allowed(user, a) {
					return fmt.Errorf("%s may not %s %s/%s (%s) in %q", user, a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace)
				}
			}
			return nil
		})
		for _, a := range []authorizationv1.ResourceAttributes{
			{Resource: "secrets", Verb: "get", Namespace: charttest.Namespace},
			{Resource: "nodes", Verb: "delete"},
			{Group: "coordination.k8s.io", Resource: "leases", Verb: "delete", Namespace: charttest.Namespace},
		} {
			if allowed(user, a) {
				t.Errorf("%s may %s %s: not in its rules", user, a.Verb, a.Resource)
			}
		}
	}
}

// runProviderRBAC is TestRBAC with objs: the provider's service account and roles.
func runProviderRBAC(t *testing.T, objs []configObject, what string) {
	k := testenv.Cluster(t)
	ctx := t.Context()
	admin := k.Clientset(t)
	adminDyn, err := dynamic.NewForConfig(k.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	sa := providerAccount(t, objs)
	// The installer role names exactly the CRDs berth installs.
	for _, o := range objs {
		if r, ok := o.obj.(*rbacv1.ClusterRole); ok && slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.Resources, "customresourcedefinitions") }) {
			names := slices.Sorted(slices.Values(r.Rules[0].ResourceNames))
			if len(r.Rules) != 1 || !slices.Equal(names, crdNames(t)) {
				t.Fatalf("%s: role %s names CRDs %v, config/crd has %v", o.file, r.Name, names, crdNames(t))
			}
		}
	}
	// The config/ objects stay: the control plane is this package's and goes with it.
	applyConfig(t, admin, objs, false)

	rc := k.RESTConfig()
	rc.Impersonate = restclient.ImpersonationConfig{UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name}
	// as is the service account for the test's own checks; rc, for berth's components,
	// also records every request berth makes.
	as, asDyn := testenv.Clients(t, rc)
	calls := testenv.RecordAPICalls(rc)
	// The authorizer sees new bindings a moment after they are written. (Two rules are
	// asked about, so that a role lacking one still gets this far and fails on what
	// berth does.)
	testenv.Eventually(t, 30*time.Second, "the role in force", func() bool {
		for _, attr := range []authorizationv1.ResourceAttributes{{Verb: "get", Resource: "namespaces"}, {Verb: "list", Resource: "pods"}} {
			r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
			if err == nil && r.Status.Allowed {
				return true
			}
		}
		return false
	})

	// The CRDs go, so that installing them as the service account creates them. (Other
	// tests of the package install them again as they start.)
	names := crdNames(t)
	for _, n := range names {
		if err := adminDyn.Resource(crdResource).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testenv.EventuallyNoError(t, time.Minute, "berth's CRDs removed", func() error {
		for _, n := range names {
			_, err := adminDyn.Resource(crdResource).Get(ctx, n, metav1.GetOptions{})
			switch {
			case err == nil:
				return fmt.Errorf("CRD %s still there", n)
			case !apierrors.IsNotFound(err):
				return fmt.Errorf("CRD %s: %w", n, err)
			}
		}
		return nil
	})

	// The provider's cluster service, as NewProvider builds it, with the service
	// account's identity; its manager rebuilds only this test's leases (the cluster is
	// shared with the package's other tests).
	owner := fmt.Sprintf("akash1rbac%d", time.Now().UnixNano())
	me := ownership.Owner{Provider: fmt.Sprintf("akash1rbacprovider%d", time.Now().UnixNano()), ChainID: "berth-test"}
	a := market.LeaseID{Owner: owner, DSeq: 1, GSeq: 1, OSeq: 1, Provider: me.Provider}
	b := market.LeaseID{Owner: owner, DSeq: 2, GSeq: 1, OSeq: 1, Provider: me.Provider}
	var mu sync.Mutex
	closed := map[market.LeaseID]bool{}
	active := func(_ context.Context, id market.LeaseID) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return !closed[id], nil // other tests' leases too: never ours to remove
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := config.DefaultProviderConfig()
	cfg.Inventory.Storage = map[string]config.Quantity{"beta3": config.MustQuantity("100Gi")}
	svc, err := newClusterService(rc, cfg, me, active, nil, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []market.LeaseID{a, b} {
		t.Cleanup(func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := admin.CoreV1().Namespaces().Delete(dctx, kube.LeaseNamespace(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		})
	}
	runCtx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(runCtx)
	t.Cleanup(func() {
		stop()
		if err := g.Wait(); err != nil {
			t.Errorf("cluster service: %v", err)
		}
	})
	// The CRDs are installed as the service account (a refusal ends the group with the
	// reason); the manager starts once it can list Manifests.
	svc.start(gctx, g, true, log)
	for _, w := range []struct {
		what string
		ch   <-chan struct{}
	}{{"the inventory synced (nodes, pods, volume claims, services)", svc.inv.Synced()},
		{"the monitor synced (workloads, pods, services, events)", svc.monitor.Synced()},
		{"the manager rebuilt from the Manifests", svc.manager.Started()}} {
		testenv.Eventually(t, time.Minute, w.what, func() bool {
			select {
			case <-w.ch:
				return true
			default:
				return false
			}
		})
	}

	// Informers only prove their watches with what changes after they synced (they list
	// first): a node added now, and the leases' objects below.
	node := fmt.Sprintf("rbac-%d", time.Now().UnixNano())
	if err := k.AddNodes(ctx, localenv.NodeSpec{Name: node, CPU: "8", Memory: "32Gi"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := k.DeleteNodes(dctx, node); err != nil {
			t.Error(err)
		}
	})
	testenv.Eventually(t, time.Minute, "the inventory seeing the new node (watch nodes)", func() bool {
		return slices.ContainsFunc(svc.capacity.Snapshot().Nodes, func(n cluster.NodeSnapshot) bool { return n.Name == node })
	})
	// With the inventory operator (inventory.operator): the inventory watches the
	// operator's Inventory by name instead of the nodes. The report is written here as
	// the admin, after the watch started (the operator's own role is
	// config/operators/inventory's, checked in internal/operator/inventory).
	opCfg := config.DefaultProviderConfig()
	opCfg.Inventory.Operator = fmt.Sprintf("rbac-%d", time.Now().UnixNano())
	if err := opCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	opSvc, err := newClusterService(rc, opCfg, me, active, nil, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Go(func() error { return opSvc.cache.Run(gctx) })
	g.Go(func() error { return opSvc.inv.Run(gctx) })
	testenv.EventuallyNoError(t, time.Minute, "the inventory with the operator synced (services, the leases' pods and claims, the Inventory)", func() error {
		select {
		case <-opSvc.inv.Synced():
			return nil
		default:
			return fmt.Errorf("not synced (requests refused: %q)", calls.Refused())
		}
	})
	report, err := adminDyn.Resource(berthv1.InventoryResource).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "berth.dev/v1", "kind": "Inventory", "metadata": map[string]any{"name": opCfg.Inventory.Operator}, "spec": map[string]any{},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := adminDyn.Resource(berthv1.InventoryResource).Delete(dctx, opCfg.Inventory.Operator, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	report.Object["status"] = map[string]any{"updatedAt": time.Now().UTC().Format(time.RFC3339), "nodes": []any{map[string]any{
		"name": node, "schedulable": true, "allocatable": map[string]any{"cpu": "8", "memory": "32Gi", "pods": "110"},
	}}}
	if _, err := adminDyn.Resource(berthv1.InventoryResource).UpdateStatus(ctx, report, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, time.Minute, "the inventory fed by the operator's report (list, watch inventories)", func() error {
		if why := opSvc.capacity.Unavailable(); why != "" {
			return fmt.Errorf("%s (requests refused: %q)", why, calls.Refused())
		}
		if !slices.ContainsFunc(opSvc.capacity.Snapshot().Nodes, func(n cluster.NodeSnapshot) bool { return n.Name == node }) {
			return fmt.Errorf("node %s not placed from the report", node)
		}
		return nil
	})

	poolUsed := func(name string) int64 {
		for _, p := range svc.capacity.Snapshot().Pools {
			if p.Name == name {
				return p.Used
			}
		}
		return 0
	}
	podsBefore := svc.capacity.Totals().Used.Pods
	storageBefore, portsBefore := poolUsed(cluster.StoragePool("beta3")), poolUsed(cluster.PoolNodePorts)

	// Two leases deployed: every kind of object applied.
	v1, v2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	if err := svc.manager.ManifestReceived(ctx, a, v1, parseGroup(t, rbacSDL)); err != nil {
		t.Fatal(err)
	}
	if err := svc.manager.ManifestReceived(ctx, b, v1, parseGroup(t, rbacSDLUpdate)); err != nil {
		t.Fatal(err)
	}
	deployed := func(id market.LeaseID, version []byte) func() error {
		return func() error {
			st, ok := svc.manager.State(id)
			if !ok || st.Phase != deploy.PhaseDeployed || !bytes.Equal(st.Version, version) {
				return fmt.Errorf("lease %s: %s %d attempts, %s (requests refused: %q)", id, st.Phase, st.Attempts, st.Error, calls.Refused())
			}
			return nil
		}
	}
	testenv.EventuallyNoError(t, time.Minute, "both leases applied", func() error {
		return errors.Join(deployed(a, v1)(), deployed(b, v1)())
	})
	nsA := kube.LeaseNamespace(a)
	manifestPhase := func() string {
		m, err := adminDyn.Resource(berthv1.ManifestResource).Namespace(nsA).Get(ctx, kube.ManifestName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		return phase
	}
	if p := manifestPhase(); p != kube.PhaseApplied {
		t.Fatalf("manifest status %q (the status subresource)", p)
	}
	count := func(gvr schema.GroupVersionResource) int {
		l, err := adminDyn.Resource(gvr).Namespace(nsA).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	statefulSets := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	if h, ip, sts := count(berthv1.ProviderHostResource), count(berthv1.ProviderLeasedIPResource), count(statefulSets); h != 1 || ip != 1 || sts != 1 {
		t.Fatalf("%d provider hosts, %d leased IPs, %d statefulsets; want one each", h, ip, sts)
	}
	// The inventory counts the leases' pods, volume claim and node port as they come.
	testenv.EventuallyNoError(t, time.Minute, "the inventory counting the leases (watch pods, volume claims, services)", func() error {
		pods, storage, ports := svc.capacity.Totals().Used.Pods, poolUsed(cluster.StoragePool("beta3")), poolUsed(cluster.PoolNodePorts)
		if pods < podsBefore+3 || storage < storageBefore+(1<<30) || ports < portsBefore+1 {
			return fmt.Errorf("pods %d (from %d), beta3 storage %d (from %d), node ports %d (from %d)", pods, podsBefore, storage, storageBefore, ports, portsBefore)
		}
		return nil
	})
	// The monitor follows the workloads, the node port and the events.
	testenv.EventuallyNoError(t, time.Minute, "the lease's status (watch deployments, statefulsets, services, events)", func() error {
		st, _ := svc.monitor.Status(a)
		byName := map[string]deploy.ServiceStatus{}
		for _, s := range st.Services {
			byName[s.Name] = s
		}
		if byName["web"].Available != 1 || byName["cache"].Available != 1 || byName["db"].Total != 1 || len(byName["web"].Forwarded) != 1 || len(st.Events) == 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})

	// A restart's rebuild: the Manifests listed, the registry password read back from
	// the lease's pull Secret.
	all, err := svc.deploy.Deployed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var creds *market.ServiceCredentials
	for _, d := range all {
		for _, s := range d.Group.Services {
			if d.Lease == a && s.Name == "web" {
				creds = s.Credentials
			}
		}
	}
	if creds == nil || creds.Password != "s3cret" {
		t.Fatalf("rebuilt lease %s: credentials %+v", a, creds)
	}

	// The gateway's streams: logs, events, a command.
	streams, err := kube.NewStreams(rc, log)
	if err != nil {
		t.Fatal(err)
	}
	var ls rest.Streams = streams
	marker := fmt.Sprintf("rbac-%d", time.Now().UnixNano())
	k.AppendContainerLog(t, marker)
	errFound := errors.New("found")
	for _, follow := range []bool{false, true} {
		seen := false
		err := ls.Logs(ctx, a, deploy.LogOptions{Services: []string{"web"}, Follow: follow}, func(l deploy.LogLine) error {
			if l.Message == marker {
				seen = true
				return errFound
			}
			return nil
		})
		if !seen || !errors.Is(err, errFound) {
			t.Fatalf("logs (follow %v): marker seen %v, %v", follow, seen, err)
		}
	}
	testenv.EventuallyNoError(t, 30*time.Second, "the lease's events listed", func() error {
		switch err := ls.Events(ctx, a, deploy.EventOptions{}, func(deploy.Event) error { return errFound }); {
		case err == nil:
			return errors.New("no event yet")
		case !errors.Is(err, errFound):
			return err
		}
		return nil
	})
	if err := ls.Events(ctx, a, deploy.EventOptions{Follow: true}, func(deploy.Event) error { return errFound }); !errors.Is(err, errFound) {
		t.Fatalf("events followed: %v", err)
	}
	// A shell goes over a websocket (SPDY is only the fallback): "get pods/exec" is
	// among the requests used below, and a refused upgrade among those refused.
	var stdout, stderr bytes.Buffer
	code, err := ls.Exec(ctx, a, deploy.ExecRequest{Service: "web", Command: []string{"echo", marker}, Stdout: &stdout, Stderr: &stderr})
	if err != nil || code != 0 || stdout.String() != marker+"\n" {
		t.Fatalf("exec: exit %d, %v, stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}
	// What the gateway and the unhealthy-lease policy ask the API server itself.
	if _, err := svc.cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("version: %v", err)
	}
	if err := svc.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		t.Fatalf("readyz: %v", err)
	}

	// What berth never does is forbidden.
	tenantPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berth-escalates"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}}
	for what, call := range map[string]func() error{
		"delete a node": func() error { return as.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) },
		"list config maps": func() error {
			_, err := as.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
		"create a pod": func() error {
			_, err := as.CoreV1().Pods(nsA).Create(ctx, tenantPod, metav1.CreateOptions{})
			return err
		},
		"mint a tenant account's token": func() error {
			_, err := as.CoreV1().ServiceAccounts(nsA).CreateToken(ctx, kube.TenantServiceAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		},
		"bind a cluster role": func() error {
			_, err := as.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
		"read another CRD": func() error {
			_, err := asDyn.Resource(crdResource).Get(ctx, "foos.example.com", metav1.GetOptions{})
			return err
		},
		"update a deployment (PUT)": func() error {
			d, err := admin.AppsV1().Deployments(nsA).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = as.AppsV1().Deployments(nsA).Update(ctx, d, metav1.UpdateOptions{})
			return err
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: %v, want forbidden", what, sa.Name, err)
		}
	}

	// Drift: a label of the lease's namespace removed by hand is restored (as are the
	// lease's other objects; kube's TestDriftIsRepaired has them all).
	if _, err := admin.CoreV1().Namespaces().Patch(ctx, nsA, types.MergePatchType, []byte(`{"metadata":{"labels":{"berth.dev/dseq":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, time.Minute, "the namespace's labels restored", func() error {
		n, err := admin.CoreV1().Namespaces().Get(ctx, nsA, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels[ownership.LabelDSeq] != "1" {
			return fmt.Errorf("labels %v", n.Labels)
		}
		return nil
	})

	// An update prunes what it drops: a Deployment, a StatefulSet, Services, the pull
	// Secret, a network policy, the hostname and the leased IP.
	if err := svc.manager.ManifestReceived(ctx, a, v2, parseGroup(t, rbacSDLUpdate)); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, time.Minute, "the update applied and pruned", deployed(a, v2))
	if h, ip, sts := count(berthv1.ProviderHostResource), count(berthv1.ProviderLeasedIPResource), count(statefulSets); h != 0 || ip != 0 || sts != 0 {
		t.Fatalf("after the update: %d provider hosts, %d leased IPs, %d statefulsets", h, ip, sts)
	}
	if d, err := admin.AppsV1().Deployments(nsA).List(ctx, metav1.ListOptions{}); err != nil || len(d.Items) != 1 {
		t.Fatalf("deployments after the update: %v", err)
	}
	if s, err := admin.CoreV1().Secrets(nsA).List(ctx, metav1.ListOptions{LabelSelector: ownership.LabelManaged + "=true"}); err != nil || len(s.Items) != 0 {
		t.Fatalf("secrets after the update: %v", err)
	}
	if p := manifestPhase(); p != kube.PhaseApplied {
		t.Fatalf("manifest status %q after the update", p)
	}

	// A pod of the lease's Deployment that failed (evicted, after its container was
	// killed out of memory: the monitor records the kill as an event) is removed (its
	// ReplicaSet has replaced it); the running ones stay.
	var evicted string
	testenv.EventuallyNoError(t, time.Minute, "a pod of the lease failed", func() error {
		pods, err := admin.CoreV1().Pods(nsA).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "ReplicaSet" || p.Status.Phase != corev1.PodRunning {
				continue
			}
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
			if len(p.Status.ContainerStatuses) == 0 {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image}}
			}
			p.Status.ContainerStatuses[0].RestartCount = 1
			p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: kube.ReasonOOMKilled, ExitCode: 137, FinishedAt: metav1.Now(), ContainerID: "containerd://0123456789abcdef"}}
			if _, err := admin.CoreV1().Pods(nsA).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				return err // changed meanwhile: again
			}
			evicted = p.Name
			return nil
		}
		return errors.New("no running pod of a ReplicaSet")
	})
	testenv.EventuallyNoError(t, 30*time.Second, "the OOM kill recorded as an event", func() error {
		ev, err := admin.CoreV1().Events(nsA).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + kube.ReasonOOMKilled})
		if err == nil && len(ev.Items) != 1 {
			err = fmt.Errorf("%d OOMKilled events", len(ev.Items))
		}
		return err
	})
	removed, err := svc.deploy.RemoveFailedPods(ctx, 0)
	if err != nil || !slices.Equal(removed, []string{nsA + "/" + evicted}) {
		t.Fatalf("failed pods removed: %v, %v (want %s)", removed, err, evicted)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "the evicted pod gone", func() error {
		p, err := admin.CoreV1().Pods(nsA).Get(ctx, evicted, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})

	// The orphan check removes a lease the ledger no longer shows active.
	mu.Lock()
	closed[b] = true
	mu.Unlock()
	orphans, err := svc.deploy.RemoveOrphans(ctx, active, func(_ context.Context, id market.LeaseID) error {
		svc.manager.LeaseClosed(id)
		return nil
	})
	if err != nil || !slices.ContainsFunc(orphans, func(o kube.Orphan) bool { return o.Lease == b && o.Removed }) {
		t.Fatalf("orphans %+v: %v", orphans, err)
	}
	// Teardown: the workloads at once, then the namespace.
	mu.Lock()
	closed[a] = true
	mu.Unlock()
	svc.manager.LeaseClosed(a)
	for _, id := range []market.LeaseID{a, b} {
		testenv.EventuallyNoError(t, time.Minute, "lease "+id.String()+" torn down", func() error {
			ns := kube.LeaseNamespace(id)
			n, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil && n.DeletionTimestamp == nil {
				return fmt.Errorf("namespace %s not being deleted", ns)
			}
			d, err := admin.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(d.Items) != 0 {
				return fmt.Errorf("%d deployments left in %s", len(d.Items), ns)
			}
			return nil
		})
	}
	testenv.Eventually(t, time.Minute, "the manager done with the closed lease", func() bool {
		_, ok := svc.manager.State(a)
		return !ok
	})

	// Nothing berth asked was refused, and it used every permission config/rbac grants.
	granted := map[string]bool{}
	for _, o := range objs {
		if r, ok := o.obj.(*rbacv1.ClusterRole); ok {
			maps.Copy(granted, testenv.Granted(r.Rules...))
		}
	}
	if r := calls.Refused(); len(r) > 0 {
		t.Errorf("requests refused to %s: %q", sa.Name, r)
	}
	calls.CheckGrants(t, granted, what, false)
}
