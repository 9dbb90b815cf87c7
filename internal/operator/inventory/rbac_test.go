package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/testenv"
)

const configDir = "../../../config/operators/inventory"

// serviceAccount is rbac.yaml's service account, as the API server names it.
const serviceAccount = "system:serviceaccount:berth-system:berth-inventory-operator"

// TestRBAC runs the operator as its service account with exactly config/operators/
// inventory/rbac.yaml's permissions, from the example configuration file (its
// gpu.models names a card the driver does not): it elects a leader on its Lease in
// berth-system, sizes a csi class from a CSIStorageCapacity, a local class per node and
// a ceph class from a Rook CephCluster (a CRD of the test's own), creates and writes its
// Inventory, rewrites it once deleted by hand, labels the nodes, serves /readyz and
// /inventory, and releases its Lease on stop. Every request it makes is recorded as the
// API server authorizes it: none may be refused, and every verb on every resource the
// roles grant must have been used. What it never does is checked to be forbidden.
func TestRBAC(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	installCephClusterCRD(t, e)
	testenv.ApplyFile(t, e.dc, filepath.Join(configDir, "namespace.yaml"))
	testenv.ApplyFile(t, e.dc, filepath.Join(configDir, "rbac.yaml"))

	plain := rest.CopyConfig(e.k.RESTConfig())
	plain.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	// as is the service account for the test's own checks; rc, for the operator, also
	// records every request it makes.
	as, asDyn := testenv.Clients(t, plain)
	rc := rest.CopyConfig(plain)
	calls := testenv.RecordAPICalls(rc)
	// The authorizer sees new bindings a moment after they are written. Two rules of
	// each binding's role are asked about, so that a role lacking one still gets this
	// far and fails on what the operator does.
	for _, rules := range [][]authorizationv1.ResourceAttributes{
		{{Verb: "list", Resource: "nodes"}, {Verb: "list", Resource: "pods"}},
		{{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "berth-system"}, {Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "berth-system"}},
	} {
		testenv.EventuallyNoError(t, 30*time.Second, "the roles in force", func() error {
			for _, attr := range rules {
				r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
					Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
				if err == nil && r.Status.Allowed {
					return nil
				}
			}
			return fmt.Errorf("neither %+v allowed yet", rules)
		})
	}

	file := exampleConfig(t)
	if file.Name != "cluster" || file.Listen != "0.0.0.0:8087" || file.LeaderElection.Namespace != "berth-system" || !file.LabelNodes {
		t.Fatalf("the example configuration: %+v", file)
	}
	if _, ok := file.GPU.Models["10de:2330"]; !ok {
		t.Fatalf("the example configuration names no card by PCI id 10de:2330: %+v", file.GPU.Models)
	}
	for _, source := range []string{inventory.SourceCSI, inventory.SourceLocal, inventory.SourceCeph} {
		if !slices.ContainsFunc(file.Storage, func(s inventory.StorageClass) bool { return s.Source == source }) {
			t.Errorf("the example configuration has no storage class of source %s", source)
		}
	}

	// Nodes: an A100 node and a card the driver does not name (the example names it by
	// its PCI id) in zone a, where the CSI driver reports capacity; a CPU node outside.
	zone := map[string]string{"topology.berth.dev/zone": e.prefix + "-rbac"}
	e.addNodes(t,
		localenv.NodeSpec{Name: "a100", CPU: "16", Memory: "64Gi", GPUs: 2, GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUMemoryMiB: 81920, Labels: maps.Clone(zone)},
		localenv.NodeSpec{Name: "odd", CPU: "16", Memory: "64Gi", GPUs: 1, GPUProduct: "NVIDIA-Graphics-Device",
			Labels: map[string]string{"feature.node.kubernetes.io/pci-0302_10de_2330.present": "true", "topology.berth.dev/zone": zone["topology.berth.dev/zone"]}},
		localenv.NodeSpec{Name: "cpu", CPU: "8", Memory: "32Gi"},
	)
	name := func(n string) string { return e.prefix + "-" + n }
	ns := e.k.Namespace(t)
	csiClass, localClass, cephClass := e.prefix+"-csi", e.prefix+"-local", e.prefix+"-ceph"
	if _, err := e.cs.StorageV1().CSIStorageCapacities(ns).Create(ctx, &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-a"}, StorageClassName: csiClass,
		NodeTopology: &metav1.LabelSelector{MatchLabels: zone}, Capacity: new(resource.MustParse("100Gi")),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Rook's report: 3Ti raw free, 1Ti with three replicas.
	var ceph *unstructured.Unstructured
	testenv.EventuallyNoError(t, 20*time.Second, "the CephCluster created", func() error {
		var err error
		ceph, err = e.dc.Resource(CephClusterResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "metadata": map[string]any{"name": "rook-ceph"},
		}}, metav1.CreateOptions{})
		return err
	})
	ceph.Object["status"] = map[string]any{"ceph": map[string]any{"capacity": map[string]any{"bytesAvailable": int64(3 << 40)}}}
	if _, err := e.dc.Resource(CephClusterResource).Namespace(ns).UpdateStatus(ctx, ceph, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.boundClaim(t, ns, "claim", localClass, "10Gi", nil)
	e.leasePod(t, ns, "pod", name("a100"), "3", nil)

	cfg := file
	cfg.Name, cfg.Listen = e.prefix, "127.0.0.1:0"
	cfg.Heartbeat, cfg.MinInterval = 2*time.Second, 50*time.Millisecond
	cfg.LeaderElection.Name = "berth-inventory-" + e.prefix
	cfg.Storage = []inventory.StorageClass{
		{Class: csiClass, Source: inventory.SourceCSI},
		{Class: localClass, Source: inventory.SourceLocal, SizePerNode: "50Gi"},
		{Class: cephClass, Source: inventory.SourceCeph, CephCluster: ns + "/rook-ceph", Replicas: 3},
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.dc.Resource(berthv1.InventoryResource).Delete(dctx, cfg.Name, metav1.DeleteOptions{})
	})
	base, stop := startAs(t, rc, cfg)

	waitReportAs(t, e, calls, cfg.Name, "the report written as the service account", func(st *berthv1.InventoryStatus) error {
		if err := gpuIs(nodeOf(st, name("a100")), "a100", "80Gi", "sxm", 2); err != nil {
			return err
		}
		if err := gpuIs(nodeOf(st, name("odd")), "h100", "80Gi", "sxm", 1); err != nil {
			return fmt.Errorf("the example's gpu.models: %w", err)
		}
		if a := nodeOf(st, name("a100")); a.Used.Cpu().MilliValue() != 3000 {
			return fmt.Errorf("a100 node: %s CPUs used, want 3", a.Used.Cpu().String())
		}
		if s := storageOf(st, csiClass); s == nil || s.Capacity.Value() != 100<<30 || s.Message != "" {
			return fmt.Errorf("csi class: %+v", s)
		}
		if s := storageOf(st, localClass); s == nil || s.Used.Value() != 10<<30 || s.Capacity.Value() < 3*50<<30 {
			return fmt.Errorf("local class: %+v", s)
		}
		if s := storageOf(st, cephClass); s == nil || s.Capacity.Value() != 1<<40 || s.Message != "" {
			return fmt.Errorf("ceph class: %+v", s)
		}
		return nil
	})
	testenv.EventuallyNoError(t, 20*time.Second, "the nodes labelled as the service account", func() error {
		if err := calls.RefusedErr(); err != nil {
			return err
		}
		all := []string{inventory.StorageLabel(localClass), inventory.StorageLabel(cephClass)}
		want := map[string][]string{
			"a100": append([]string{inventory.GPULabel("nvidia", "a100", "", ""), inventory.StorageLabel(csiClass)}, all...),
			"odd":  append([]string{inventory.GPULabel("nvidia", "h100", "", "sxm"), inventory.StorageLabel(csiClass)}, all...),
			"cpu":  all,
		}
		for node, keys := range want {
			got := e.labels(t, name(node))
			for _, k := range keys {
				if got[k] != "true" {
					return fmt.Errorf("node %s: %v, lacks %s", node, got, k)
				}
			}
		}
		if _, ok := e.labels(t, name("cpu"))[inventory.StorageLabel(csiClass)]; ok {
			return errors.New("the CPU node, outside the CSI driver's topology, has the csi class's label")
		}
		return nil
	})

	// The probes and /inventory, as the Deployment's kubelet and users reach them.
	testenv.EventuallyNoError(t, 20*time.Second, "/readyz of the leader", func() error {
		code, body, err := httpGet(ctx, base+"/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(body, "leading") {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if code, body, err := httpGet(ctx, base+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz: %d %s, %v", code, body, err)
	}
	code, body, err := httpGet(ctx, base+"/inventory")
	var served berthv1.InventoryStatus
	if err == nil && code == http.StatusOK {
		err = json.Unmarshal([]byte(body), &served)
	}
	if err != nil || code != http.StatusOK || nodeOf(&served, name("a100")) == nil {
		t.Errorf("/inventory: %d, %v, %.200s", code, err, body)
	}

	// Deleted by hand, the Inventory is created and written again (its watch, create).
	if err := e.dc.Resource(berthv1.InventoryResource).Delete(ctx, cfg.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReportAs(t, e, calls, cfg.Name, "the Inventory rewritten", func(st *berthv1.InventoryStatus) error {
		if st.UpdatedAt.IsZero() || nodeOf(st, name("a100")) == nil {
			return fmt.Errorf("report %+v", st)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("operator as its service account: %v", err)
	}
	// The Lease was released on stop (an update).
	l, err := e.cs.CoordinationV1().Leases("berth-system").Get(ctx, cfg.LeaderElection.Name, metav1.GetOptions{})
	if err != nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
		t.Errorf("Lease after stop: %+v, %v", l, err)
	}

	// What the roles must not allow.
	for what, call := range map[string]func() error{
		"list Secrets": func() error {
			_, err := as.CoreV1().Secrets("berth-system").List(ctx, metav1.ListOptions{})
			return err
		},
		"delete a node": func() error { return as.CoreV1().Nodes().Delete(ctx, name("cpu"), metav1.DeleteOptions{}) },
		"update a node (PUT)": func() error {
			n, err := e.cs.CoreV1().Nodes().Get(ctx, name("cpu"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = as.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		},
		"patch a node's status": func() error {
			_, err := as.CoreV1().Nodes().Patch(ctx, name("cpu"), types.MergePatchType, []byte(`{"status":{"capacity":{"cpu":"1000"}}}`), metav1.PatchOptions{}, "status")
			return err
		},
		"patch the Inventory's spec": func() error {
			_, err := asDyn.Resource(berthv1.InventoryResource).Patch(ctx, cfg.Name, types.MergePatchType, []byte(`{"spec":{}}`), metav1.PatchOptions{})
			return err
		},
		"delete the Inventory": func() error {
			return asDyn.Resource(berthv1.InventoryResource).Delete(ctx, cfg.Name, metav1.DeleteOptions{})
		},
		"create a pod": func() error {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			_, err := as.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		},
		"list Leases outside berth-system": func() error {
			_, err := as.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
		"write a CSIStorageCapacity": func() error {
			return as.StorageV1().CSIStorageCapacities(ns).Delete(ctx, "zone-a", metav1.DeleteOptions{})
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the operator: %v, want forbidden", what, err)
		}
	}

	// Nothing the operator asked was refused, and it used every permission rbac.yaml
	// grants.
	if err := calls.RefusedErr(); err != nil {
		t.Error(err)
	}
	calls.CheckGrants(t, grantedBy(t, filepath.Join(configDir, "rbac.yaml")), "rbac.yaml", true)
}

// waitReportAs waits as waitReport does, and fails at once with the requests refused
// to the service account when there are any (the operator retries them forever).
func waitReportAs(t *testing.T, e *env, calls *testenv.APICalls, name, what string, cond func(*berthv1.InventoryStatus) error) {
	t.Helper()
	testenv.EventuallyNoError(t, 30*time.Second, what, func() error {
		if len(calls.Refused()) > 0 {
			return nil // reported below
		}
		inv, err := e.inventoryOf(t.Context(), name)
		if err != nil {
			return err
		}
		return cond(&inv.Status)
	})
	if err := calls.RefusedErr(); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// exampleConfig decodes and checks config/operators/inventory/inventory-operator.yaml.
func exampleConfig(t *testing.T) Config {
	t.Helper()
	return operatortest.ExampleConfig(t, filepath.Join(configDir, "inventory-operator.yaml"), DecodeConfig)
}

// startAs runs the operator as operator.Run runs it in its Deployment (leader
// election, probes, /inventory) with the configuration rc until the test ends; base
// is the URL of its probes, and stop ends it early and returns Run's error.
func startAs(t *testing.T, rc *rest.Config, cfg Config) (base string, stop func() error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := New(cfg, NewMetrics(reg), log)
	if err != nil {
		t.Fatal(err)
	}
	return operatortest.Start(t, rc, operator.Options{Name: "inventory", Listen: cfg.Listen, Resync: cfg.Resync, LeaderElection: cfg.LeaderElection.WithDefaults("berth-inventory-test"),
		Registry: reg, Log: log, Handlers: map[string]http.Handler{"/inventory": c.ReportHandler()}}, c)
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	code, b, err := testenv.Do(client, req)
	return code, string(b), err
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCephClusterCRD installs the stand-in for Rook's CephCluster CRD (ceph_test.go)
// unless another test's is there, waits until discovery serves it, and removes it when
// the test ends (waiting until it is gone: TestCephClass starts without it).
func installCephClusterCRD(t *testing.T, e *env) {
	t.Helper()
	crd := cephClusterCRD()
	gone := func(ctx context.Context) error {
		switch _, err := e.dc.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{}); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("CRD %s still there", crd.GetName())
	}
	// Another test's (TestCephClass leaves its own) serves as well, unless it is going.
	testenv.EventuallyNoError(t, time.Minute, "the CephCluster CRD of another test gone or kept", func() error {
		old, err := e.dc.Resource(crdResource).Get(t.Context(), crd.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = e.dc.Resource(crdResource).Create(t.Context(), crd, metav1.CreateOptions{})
			return err
		case err != nil:
			return err
		case old.GetDeletionTimestamp() != nil:
			return fmt.Errorf("CRD %s being deleted", crd.GetName())
		}
		return nil
	})
	t.Cleanup(func() {
		// t.Context has ended: poll with a context of the cleanup's own.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.dc.Resource(crdResource).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete the CephCluster CRD: %v", err)
			return
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			err := gone(ctx)
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				t.Errorf("the CephCluster CRD not removed: %v", err)
				return
			case <-tick.C:
			}
		}
	})
	testenv.EventuallyNoError(t, 30*time.Second, "the CephCluster CRD served", func() error {
		return operator.CheckServed(e.cs.Discovery(), operator.Served{GroupVersion: CephClusterResource.GroupVersion().String(), Resource: CephClusterResource.Resource})
	})
}

// grantedBy is what the roles of an RBAC file grant: "verb group/resource" (the
// ClusterRole's and the Roles' rules alike).
func grantedBy(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{}
	for doc := range bytes.SplitSeq(b, []byte("\n---\n")) {
		var r struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &r); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if r.Kind != "ClusterRole" && r.Kind != "Role" {
			continue
		}
		for _, rule := range r.Rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Fatalf("%s: a rule this test does not read: %+v", file, rule)
			}
		}
		maps.Copy(granted, testenv.Granted(r.Rules...))
	}
	return granted
}

// TestExampleDeployment: the Deployment runs `berth operator inventory` as rbac.yaml's
// service account with the ConfigMap kustomization.yaml generates from the example
// file, and probes the port that file listens on; the example's Lease is in the
// namespace where rbac.yaml grants Leases.
func TestExampleDeployment(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(configDir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &dep); err != nil {
		t.Fatalf("deployment.yaml: %v", err)
	}
	k, err := os.ReadFile(filepath.Join(configDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kz struct {
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Name      string   `json:"name"`
			Namespace string   `json:"namespace"`
			Files     []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	if err := yaml.Unmarshal(k, &kz); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if !slices.Equal(kz.Resources, []string{"namespace.yaml", "rbac.yaml", "deployment.yaml"}) || len(kz.ConfigMapGenerator) != 1 {
		t.Fatalf("kustomization.yaml: resources %v, config maps %+v", kz.Resources, kz.ConfigMapGenerator)
	}
	gen := kz.ConfigMapGenerator[0]
	cfg := exampleConfig(t)

	spec := dep.Spec.Template.Spec
	if dep.Namespace != "berth-system" || gen.Namespace != dep.Namespace || cfg.LeaderElection.Namespace != dep.Namespace {
		t.Errorf("namespaces: deployment %q, config map %q, Lease %q", dep.Namespace, gen.Namespace, cfg.LeaderElection.Namespace)
	}
	if spec.ServiceAccountName != "berth-inventory-operator" || !strings.HasSuffix(serviceAccount, ":"+dep.Namespace+":"+spec.ServiceAccountName) {
		t.Errorf("service account %q in %q, rbac.yaml binds %s", spec.ServiceAccountName, dep.Namespace, serviceAccount)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 || cfg.LeaderElection.Disabled {
		t.Errorf("replicas %v, leader election disabled %v: two replicas elect a leader", dep.Spec.Replicas, cfg.LeaderElection.Disabled)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) != 4 || !slices.Equal(c.Args[:3], []string{"operator", "inventory", "--config"}) {
		t.Fatalf("args %q", c.Args)
	}
	// --config is the generated ConfigMap's file.
	mounted := ""
	for _, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(c.Args[3]) {
			mounted = m.Name
		}
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == mounted {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != gen.Name || !slices.Equal(gen.Files, []string{filepath.Base(c.Args[3])}) {
		t.Errorf("--config %s is not in the config map kustomization.yaml generates (%+v), mounted: %+v", c.Args[3], gen, vol)
	}
	// The probes reach the port the file listens on, on every interface.
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil || host != "0.0.0.0" {
		t.Errorf("listen %q: the kubelet reaches the probes on the pod's address", cfg.Listen)
	}
	if len(c.Ports) != 1 || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
		t.Errorf("ports %+v, the file listens on %s", c.Ports, cfg.Listen)
	}
	for probe, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != probe || len(c.Ports) != 1 || p.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("probe %s: %+v", probe, p)
		}
	}
	if p := c.LivenessProbe; p != nil && p.FailureThreshold < 3 {
		t.Errorf("liveness failure threshold %d: one slow answer restarts the operator", p.FailureThreshold)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("pod security context %+v: not non-root", sc)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", sc)
	}
}
