package kube

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory/invtest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testOwner is the provider the package's tests play (their leases name it).
var testOwner = ownership.Owner{Provider: "akash1provider", ChainID: "berth-test"}

const gi = 1 << 30

// addNodes adds kwok nodes for one test and deletes them when it ends, so tests that
// count the cluster's nodes do not see each other's.
func addNodes(t *testing.T, kube *testenv.Kube, specs ...localenv.NodeSpec) {
	t.Helper()
	if err := kube.AddNodes(t.Context(), specs...); err != nil {
		t.Fatal(err)
	}
	cs := kube.Clientset(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		for _, s := range specs {
			_ = cs.CoreV1().Nodes().Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// TestInventoryFollowsTheCluster runs the inventory against the real API server with
// kwok nodes: nodes (with their GPU model), a lease's pod, PVC and NodePort service,
// and a pod outside berth, each counted where it belongs; deletions give capacity back.
// TestInventoryPoolOfAClaim: a claim counts against the pool of its cluster class's
// SDL class; a cluster class named like an SDL class mapped elsewhere fills no pool
// (found when another test's unmapped beta3 claims used a mapped beta3's room).
func TestInventoryPoolOfAClaim(t *testing.T) {
	inv, err := NewInventory(idleCache(t), fake.NewClientset(), cluster.NewCapacity(), InventoryConfig{StorageClasses: map[string]string{"beta3": "fast-ssd", "beta2": "beta2"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for class, want := range map[string]string{
		"fast-ssd": cluster.StoragePool("beta3"), "beta3": "", "beta2": cluster.StoragePool("beta2"), "beta1": cluster.StoragePool("beta1"),
	} {
		if got := inv.pool(class); got != want {
			t.Errorf("claims of cluster class %q count against %q, want %q", class, got, want)
		}
	}
}

func TestInventoryStorageClassesMapOneToOne(t *testing.T) {
	_, err := NewInventory(idleCache(t), fake.NewClientset(), cluster.NewCapacity(), InventoryConfig{StorageClasses: map[string]string{"beta2": "ssd", "beta3": "ssd"}}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `"beta2" and "beta3" both map to the cluster's "ssd"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestInventoryFollowsTheCluster(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube,
		localenv.NodeSpec{Name: "inv-cpu", CPU: "4", Memory: "16Gi"},
		invtest.Labelled(t, localenv.NodeSpec{Name: "inv-gpu", CPU: "32", Memory: "256Gi", GPUs: 8, GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUMemoryMiB: 81920}),
	)
	capacity := cluster.NewCapacity()
	// SDL class beta3 is the cluster's fast-ssd: claims of fast-ssd fill beta3's pool.
	inv, err := NewInventory(startCache(t, cs, nil, testOwner), cs, capacity, InventoryConfig{Storage: map[string]int64{"beta3": 100 * gi}, NodePorts: 10,
		StorageClasses: map[string]string{"beta3": "fast-ssd"}}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Go(t, inv.Run)()
	if err := inv.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both nodes", func() bool {
		tot := capacity.Totals()
		return tot.Nodes == 2 && tot.Allocatable.CPU == 36000 && tot.Allocatable.GPUs == 8
	})
	// The GPU node's model comes from its labels: an a100 80Gi order is placed.
	order := market.OrderID{Owner: "akash1tenant", DSeq: 1, GSeq: 1, OSeq: 1}
	gpuDemand := cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: cluster.Amounts{CPU: 1000, Memory: gi, GPUs: 2, Pods: 1},
		GPUs: []gpu.Model{{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}}}}}
	p, err := capacity.Reserve(order, gpuDemand)
	if err != nil || p[0].GPU != (gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}) {
		t.Fatalf("reserve %+v: %v", p, err)
	}
	capacity.Unreserve(order)

	// A lease reserves, then its objects appear: pod, PVC and NodePort service.
	lease := order.Bid("akash1provider").Lease()
	d := cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: cluster.Amounts{CPU: 2000, Memory: 2 * gi, Pods: 1}}},
		Storage: map[string]int64{"beta3": 10 * gi}, NodePorts: 1}
	if _, err := capacity.Reserve(order, d); err != nil {
		t.Fatal(err)
	}
	// A lease's objects are its own in its namespace only.
	ns := LeaseNamespace(lease)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(dctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	labels := testOwner.LeaseLabels(lease)
	class := "fast-ssd"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "inv-cpu", Containers: []corev1.Container{{Name: "web", Image: "nginx", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		}}}},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-np", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "udp", Port: 5000, Protocol: corev1.ProtocolUDP}}},
	}
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "inv-cpu", Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The lease pod materializes its replica (used, no longer reserved); the other pod
	// is plain usage; the lease's PVC and node port stay covered by its reservation.
	eventually(t, "the pods counted", func() bool {
		tot := capacity.Totals()
		return tot.Used.CPU == 3000 && tot.Reserved.CPU == 0
	})
	if err := capacity.Check(); err != nil {
		t.Fatal(err)
	}
	// 90Gi of beta3 are free, 9 node ports: a demand for 91Gi fails, 90Gi fits.
	if _, err := capacity.Reserve(market.OrderID{Owner: "akash1x", DSeq: 2, GSeq: 1, OSeq: 1}, cluster.Demand{Storage: map[string]int64{"beta3": 91 * gi}}); err == nil {
		t.Fatal("the lease's volume was not reserved")
	}
	// The lease ends: its objects now count as usage until they are deleted.
	capacity.Unreserve(order)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lease pod gone", func() bool { return capacity.Totals().Used.CPU == 1000 })
	eventually(t, "the PVC gone", func() bool {
		_, err := capacity.Reserve(market.OrderID{Owner: "akash1x", DSeq: 3, GSeq: 1, OSeq: 1}, cluster.Demand{Storage: map[string]int64{"beta3": 100 * gi}, NodePorts: 9})
		return err == nil
	})
}

// TestInventoryNodesThatTakeNoPods: against the real API server, a node that is not
// Ready, one cordoned and one tainted NoExecute offer nothing — to bids and in the
// snapshot /status shows — whether they are so from the start or become so later, and
// a reservation planned on a node that goes NotReady moves to one that takes pods.
func TestInventoryNodesThatTakeNoPods(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube,
		localenv.NodeSpec{Name: "inv-take-a", CPU: "4", Memory: "16Gi"},
		localenv.NodeSpec{Name: "inv-take-b", CPU: "4", Memory: "16Gi"},
	)
	// Two nodes kwok does not manage (no kwok annotation), whose Ready condition the
	// test sets: one Ready that goes NotReady later, one NotReady from the start.
	for _, n := range []struct {
		name  string
		ready corev1.ConditionStatus
	}{{"inv-take-later", corev1.ConditionTrue}, {"inv-take-never", corev1.ConditionFalse}} {
		spec, err := localenv.NodeSpec{Name: n.name, CPU: "16", Memory: "64Gi"}.Object()
		if err != nil {
			t.Fatal(err)
		}
		delete(spec.Annotations, "kwok.x-k8s.io/node")
		spec.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: n.ready, Reason: "Test",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, spec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = cs.CoreV1().Nodes().Delete(dctx, n.name, metav1.DeleteOptions{})
		})
	}
	capacity := cluster.NewCapacity()
	inv, err := NewInventory(startCache(t, cs, nil, testOwner), cs, capacity, InventoryConfig{}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Go(t, inv.Run)()
	if err := inv.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	// node is the named node in the inventory's snapshot.
	node := func(name string) (cluster.NodeSnapshot, bool) {
		for _, n := range capacity.Snapshot().Nodes {
			if n.Name == name {
				return n, true
			}
		}
		return cluster.NodeSnapshot{}, false
	}
	eventually(t, "the four nodes, inv-take-never offering nothing", func() bool {
		_, a := node("inv-take-a")
		_, b := node("inv-take-b")
		l, later := node("inv-take-later")
		n, never := node("inv-take-never")
		return a && b && later && l.Schedulable && never && !n.Schedulable && n.Available == (cluster.Amounts{}) && n.Allocatable.CPU == 16000
	})

	// A 3-CPU replica is planned on the node with the most free CPU: inv-take-later.
	order := market.OrderID{Owner: "akash1tenant", DSeq: 9, GSeq: 1, OSeq: 1}
	if _, err := capacity.Reserve(order, cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: cluster.Amounts{CPU: 3000, Memory: gi, Pods: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := node("inv-take-later"); n.Available.CPU != 13000 {
		t.Fatalf("the replica is not on inv-take-later: %+v", n)
	}

	// It goes NotReady (as the node lifecycle controller marks a node whose kubelet, or
	// kwok, stopped): it offers nothing, and the replica moves to a node that takes pods.
	testenv.EditNode(ctx, t, cs, "inv-take-later", true, func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	})
	eventually(t, "inv-take-later NotReady, its replica elsewhere", func() bool {
		n, _ := node("inv-take-later")
		a, _ := node("inv-take-a")
		b, _ := node("inv-take-b")
		return !n.Schedulable && n.Available == (cluster.Amounts{}) && a.Available.CPU+b.Available.CPU == 5000
	})
	if err := capacity.Check(); err != nil {
		t.Fatal(err)
	}

	// inv-take-a cordoned, inv-take-b tainted NoExecute: nothing takes pods; the
	// reservation stands without a node, and no order fits.
	testenv.EditNode(ctx, t, cs, "inv-take-a", false, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	testenv.EditNode(ctx, t, cs, "inv-take-b", false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "berth.dev/test-drain", Effect: corev1.TaintEffectNoExecute})
	})
	eventually(t, "no node of this test takes pods", func() bool {
		for _, name := range []string{"inv-take-a", "inv-take-b", "inv-take-later", "inv-take-never"} {
			if n, ok := node(name); !ok || n.Schedulable || n.Available != (cluster.Amounts{}) {
				return false
			}
		}
		return true
	})
	if err := capacity.Check(); err != nil {
		t.Fatal(err)
	}
	// Unless other tests' nodes take pods in the shared cluster, nothing fits.
	others := slices.ContainsFunc(capacity.Snapshot().Nodes, func(n cluster.NodeSnapshot) bool {
		return n.Schedulable && !strings.HasPrefix(n.Name, "inv-take-")
	})
	if _, err := capacity.Fit(cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: cluster.Amounts{CPU: 1000, Memory: gi, Pods: 1}}}}); err == nil && !others {
		t.Fatal("an order fits with no node taking pods")
	}
	if tot := capacity.Totals(); !others && (tot.Nodes != 0 || tot.Unplaced != 1) {
		t.Fatalf("totals %+v, want no node and the replica unplaced", tot)
	}
}
