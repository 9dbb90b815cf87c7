package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type env struct {
	k      *testenv.Kube
	cs     kubernetes.Interface
	dc     dynamic.Interface
	prefix string // of the test's nodes and classes
	cfg    Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	k, dc := operatortest.Cluster(t)
	sum := sha256.Sum256([]byte(t.Name()))
	prefix := fmt.Sprintf("inv%x", sum[:3])
	cfg := DefaultConfig()
	cfg.Name, cfg.Listen = prefix, ""
	cfg.LeaderElection.Disabled = true
	cfg.Heartbeat, cfg.MinInterval = 2*time.Second, 50*time.Millisecond
	return &env{k: k, cs: k.Clientset(t), dc: dc, prefix: prefix, cfg: cfg}
}

// addNodes adds kwok nodes named prefix-<name>, deleted when the test ends.
func (e *env) addNodes(t *testing.T, specs ...localenv.NodeSpec) {
	t.Helper()
	for i := range specs {
		specs[i].Name = e.prefix + "-" + specs[i].Name
	}
	if err := e.k.AddNodes(t.Context(), specs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range specs {
			_ = e.cs.CoreV1().Nodes().Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
	})
}

// start runs an operator with cfg until the test ends; stop ends it early.
func (e *env) start(t *testing.T, cfg Config) (stop func()) {
	t.Helper()
	c, err := New(cfg, NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	return e.run(t, c)
}

// run runs c, without leader election, until the test ends; stop ends it early.
func (e *env) run(t *testing.T, c *Controller) (stop func()) {
	t.Helper()
	_, stopRun := operatortest.Start(t, e.k.RESTConfig(), operator.Options{Name: "inventory", LeaderElection: operator.LeaderElection{Disabled: true}, Resync: c.cfg.Resync}, c)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := stopRun(); err != nil {
				t.Errorf("operator: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// inventoryOf reads the Inventory resource.
func (e *env) inventoryOf(ctx context.Context, name string) (*berthv1.Inventory, error) {
	u, err := e.dc.Resource(berthv1.InventoryResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var inv berthv1.Inventory
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &inv); err != nil {
		return nil, err
	}
	return &inv, nil
}

// waitReport waits until the Inventory satisfies cond (nil error), which says what is
// missing otherwise.
func (e *env) waitReport(t *testing.T, name, what string, cond func(*berthv1.InventoryStatus) error) *berthv1.InventoryStatus {
	t.Helper()
	var st *berthv1.InventoryStatus
	testenv.EventuallyNoError(t, 30*time.Second, what, func() error {
		inv, err := e.inventoryOf(t.Context(), name)
		if err != nil {
			return err
		}
		if err := cond(&inv.Status); err != nil {
			return err
		}
		st = &inv.Status
		return nil
	})
	return st
}

func nodeOf(st *berthv1.InventoryStatus, name string) *berthv1.InventoryNode {
	for i := range st.Nodes {
		if st.Nodes[i].Name == name {
			return &st.Nodes[i]
		}
	}
	return nil
}

func storageOf(st *berthv1.InventoryStatus, class string) *berthv1.InventoryStorage {
	for i := range st.Storage {
		if st.Storage[i].Class == class {
			return &st.Storage[i]
		}
	}
	return nil
}

func gpuIs(n *berthv1.InventoryNode, model, ram, iface string, offered int64) error {
	switch {
	case n == nil:
		return fmt.Errorf("node not reported")
	case n.GPU == nil:
		return fmt.Errorf("node %s: no GPU reported", n.Name)
	case n.GPU.Model != model || n.GPU.RAM != ram || n.GPU.Interface != iface || n.GPU.Offered != offered:
		return fmt.Errorf("node %s: GPU %+v, want %s/%s/%s × %d", n.Name, *n.GPU, model, ram, iface, offered)
	}
	q := n.Allocatable[inventory.ResourceGPU]
	if q.Value() != offered {
		return fmt.Errorf("node %s: allocatable nvidia.com/gpu %s, want %d", n.Name, q.String(), offered)
	}
	return nil
}

func (e *env) labels(t *testing.T, node string) map[string]string {
	t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return inventory.CapabilityLabelsOf(n.Labels)
}

// leasePod runs a pod of owner's lease on node, requesting cpu.
func (e *env) leasePod(t *testing.T, ns, name, node, cpu string, owner *ownership.Owner) {
	t.Helper()
	var labels map[string]string
	if owner != nil {
		labels = ownership.LeaseLabels(market.LeaseID{Owner: "akash1tenant", DSeq: 7, GSeq: 1, OSeq: 1, Provider: owner.Provider}, owner.ChainID)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	if _, err := e.cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDiscovery: on the real API server, kwok nodes labelled as GPU feature discovery
// and node feature discovery label them (A100 SXM 80GB, H100 PCIe, RTX 4090, a card
// the driver does not name) are reported with the SDL's names, offered and labelled
// with berth's capabilities; the unknown card is reported, not offered, and named by
// an override once configured; storage classes are sized from CSIStorageCapacity and
// from a per-node size, with the claims of each provider's leases apart; a node going
// NotReady, and one deleted, leave the report and lose nothing else.
func TestDiscovery(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	zone := map[string]string{"topology.berth.dev/zone": e.prefix + "-a"}
	withZone := func(l map[string]string) map[string]string {
		for k, v := range zone {
			l[k] = v
		}
		return l
	}
	e.addNodes(t,
		localenv.NodeSpec{Name: "a100", CPU: "64", Memory: "512Gi", GPUs: 8, GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUMemoryMiB: 81920, Labels: withZone(map[string]string{})},
		localenv.NodeSpec{Name: "h100", CPU: "32", Memory: "256Gi", GPUs: 4, GPUProduct: "NVIDIA-H100-PCIe", GPUMemoryMiB: 81559, Labels: withZone(map[string]string{})},
		localenv.NodeSpec{Name: "rtx", CPU: "16", Memory: "64Gi", GPUs: 2, GPUProduct: "NVIDIA-GeForce-RTX-4090", GPUMemoryMiB: 24564},
		localenv.NodeSpec{Name: "odd", CPU: "16", Memory: "64Gi", GPUs: 1, GPUProduct: "NVIDIA-Graphics-Device",
			Labels: map[string]string{"feature.node.kubernetes.io/pci-0302_10de_2330.present": "true"}},
		localenv.NodeSpec{Name: "cpu", CPU: "8", Memory: "32Gi"},
	)
	ns := e.k.Namespace(t)
	csiClass, localClass := e.prefix+"-csi", e.prefix+"-local"
	// The CSI driver's report: 100Gi free in zone a.
	if _, err := e.cs.StorageV1().CSIStorageCapacities(ns).Create(ctx, &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-a"}, StorageClassName: csiClass,
		NodeTopology: &metav1.LabelSelector{MatchLabels: zone}, Capacity: new(resource.MustParse("100Gi")),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One without a topology: reachable from no node, not counted.
	if _, err := e.cs.StorageV1().CSIStorageCapacities(ns).Create(ctx, &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}, StorageClassName: csiClass, Capacity: new(resource.MustParse("1Ti")),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another operator's class's label on a node is left alone.
	otherClass := inventory.StorageLabel(e.prefix + "-elsewhere")
	testenv.EditNode(ctx, t, e.cs, e.prefix+"-rtx", false, func(n *corev1.Node) { n.Labels[otherClass] = "true" })
	// A 10Gi claim of a lease of provider x, bound by the PV controller to a volume of
	// the class; a 5Gi one of no lease.
	owner := ownership.Owner{Provider: "akash1" + e.prefix + "x", ChainID: "berth-test-1"}
	e.boundClaim(t, ns, "lease-claim", csiClass, "10Gi", ownership.LeaseLabels(market.LeaseID{Owner: "akash1tenant", DSeq: 7, GSeq: 1, OSeq: 1, Provider: owner.Provider}, owner.ChainID))
	e.boundClaim(t, ns, "other-claim", csiClass, "5Gi", nil)
	// A 20Gi claim without labels in a namespace of x's lease (a StatefulSet's claim
	// made before berth labelled claim templates): x's, by its namespace.
	leaseNS := e.k.Namespace(t)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": ownership.LeaseLabels(market.LeaseID{Owner: "akash1tenant", DSeq: 8, GSeq: 1, OSeq: 1, Provider: owner.Provider}, owner.ChainID)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Namespaces().Patch(ctx, leaseNS, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.boundClaim(t, leaseNS, "unlabelled", csiClass, "20Gi", nil)
	e.leasePod(t, ns, "lease-pod", e.prefix+"-a100", "2", &owner)
	e.leasePod(t, ns, "other-pod", e.prefix+"-a100", "1", nil)

	cfg := e.cfg
	cfg.Storage = []inventory.StorageClass{
		{Class: csiClass, Source: inventory.SourceCSI},
		{Class: localClass, Source: inventory.SourceLocal, SizePerNode: "50Gi"},
	}
	stop := e.start(t, cfg)
	name := func(n string) string { return e.prefix + "-" + n }
	st := e.waitReport(t, cfg.Name, "GPUs, storage and usage reported", func(st *berthv1.InventoryStatus) error {
		for _, c := range []struct {
			node, model, ram, iface string
			n                       int64
		}{{"a100", "a100", "80Gi", "sxm", 8}, {"h100", "h100", "80Gi", "pcie", 4}, {"rtx", "rtx4090", "24Gi", "pcie", 2}, {"odd", "", "", "", 0}} {
			if err := gpuIs(nodeOf(st, name(c.node)), c.model, c.ram, c.iface, c.n); err != nil {
				return err
			}
		}
		if n := nodeOf(st, name("cpu")); n == nil || n.GPU != nil || !n.Schedulable {
			return fmt.Errorf("cpu node: %+v", n)
		}
		a := nodeOf(st, name("a100"))
		used, leases := a.Used[corev1.ResourceCPU], a.Leases
		if used.MilliValue() != 3000 || len(leases) != 1 || leases[0].Provider != owner.Provider {
			return fmt.Errorf("a100 node: used %s, leases %+v; want 3 CPUs, 2 of them x's", used.String(), leases)
		}
		if l := leases[0].Used[corev1.ResourceCPU]; l.MilliValue() != 2000 {
			return fmt.Errorf("a100 node: x's leases use %s CPUs, want 2", l.String())
		}
		csi := storageOf(st, csiClass)
		if csi == nil || csi.Used.Value() != 35<<30 || csi.Capacity.Value() != 135<<30 || len(csi.Leases) != 1 || csi.Leases[0].Used.Value() != 30<<30 {
			return fmt.Errorf("csi class: %+v; want capacity 135Gi (100Gi free + 35Gi bound), used 35Gi, x's 30Gi", csi)
		}
		schedulable := 0
		for _, n := range st.Nodes {
			if n.Schedulable {
				schedulable++
			}
		}
		if l := storageOf(st, localClass); l == nil || l.Capacity.Value() != int64(schedulable)*50<<30 {
			return fmt.Errorf("local class: %+v; want 50Gi × %d schedulable nodes", l, schedulable)
		}
		return nil
	})
	if n := nodeOf(st, name("odd")); n.GPU.PCIDevice != "10de:2330" || !slices.ContainsFunc(st.Problems, func(p string) bool {
		return strings.Contains(p, name("odd")) && strings.Contains(p, "gpu.models")
	}) {
		t.Errorf("the unknown card: %+v, problems %q; want PCI 10de:2330 and a problem naming the node and gpu.models", *n.GPU, st.Problems)
	}
	// Only nodes in the CSI driver's topology can use its class.
	if a, r := nodeOf(st, name("a100")), nodeOf(st, name("rtx")); !slices.Equal(a.StorageClasses, []string{csiClass, localClass}) || !slices.Equal(r.StorageClasses, []string{localClass}) {
		t.Errorf("storage classes: a100 %q, rtx %q", a.StorageClasses, r.StorageClasses)
	}

	// Capability labels, as Akash's, under berth's prefix.
	testenv.EventuallyNoError(t, 20*time.Second, "capability labels", func() error {
		want := map[string]map[string]string{
			"a100": {inventory.GPULabel("nvidia", "a100", "", ""): "true", inventory.GPULabel("nvidia", "a100", "80Gi", ""): "true",
				inventory.GPULabel("nvidia", "a100", "", "sxm"): "true", inventory.StorageLabel(csiClass): "true", inventory.StorageLabel(localClass): "true"},
			"rtx": {inventory.GPULabel("nvidia", "rtx4090", "", ""): "true", inventory.GPULabel("nvidia", "rtx4090", "24Gi", ""): "true",
				inventory.GPULabel("nvidia", "rtx4090", "", "pcie"): "true", inventory.StorageLabel(localClass): "true", otherClass: "true"},
			"odd": {inventory.StorageLabel(localClass): "true"},
		}
		for node, w := range want {
			if got := e.labels(t, name(node)); !mapsEqual(got, w) {
				return fmt.Errorf("node %s: %v, want %v", node, got, w)
			}
		}
		return nil
	})
	// A capability label someone adds by hand is the operator's to remove.
	testenv.EditNode(ctx, t, e.cs, name("cpu"), false, func(n *corev1.Node) {
		n.Labels[inventory.GPULabel("nvidia", "h200", "", "")] = "true"
	})
	testenv.Eventually(t, 20*time.Second, "a stray capability label removed", func() bool {
		_, ok := e.labels(t, name("cpu"))[inventory.GPULabel("nvidia", "h200", "", "")]
		return !ok
	})

	// The unknown card named by its PCI id.
	stop()
	cfg.GPU.Models = map[string]inventory.GPUModelOverride{"10de:2330": {Model: "h100", RAM: "80Gi", Interface: "sxm"}}
	e.start(t, cfg)
	e.waitReport(t, cfg.Name, "the unknown card named by the override", func(st *berthv1.InventoryStatus) error {
		return gpuIs(nodeOf(st, name("odd")), "h100", "80Gi", "sxm", 1)
	})
	testenv.Eventually(t, 20*time.Second, "the overridden card labelled", func() bool {
		return e.labels(t, name("odd"))[inventory.GPULabel("nvidia", "h100", "", "sxm")] == "true"
	})

	// The H100 node goes NotReady: reported unschedulable, its GPUs no longer in the
	// class's nodes; the A100's node deleted: gone from the report and its labels with it.
	testenv.EditNode(ctx, t, e.cs, name("h100"), false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute})
	})
	if err := e.cs.CoreV1().Nodes().Delete(ctx, name("a100"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReport(t, cfg.Name, "h100 unschedulable, a100 gone", func(st *berthv1.InventoryStatus) error {
		h := nodeOf(st, name("h100"))
		if h == nil || h.Schedulable || !strings.Contains(h.NotSchedulable, "taint") || len(h.StorageClasses) != 0 {
			return fmt.Errorf("h100: %+v", h)
		}
		if nodeOf(st, name("a100")) != nil {
			return fmt.Errorf("a100 still reported")
		}
		return nil
	})
	testenv.Eventually(t, 20*time.Second, "the NotReady node's storage labels removed", func() bool {
		_, ok := e.labels(t, name("h100"))[inventory.StorageLabel(localClass)]
		return !ok
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// boundClaim creates a claim and a volume of class, size, bound to each other.
func (e *env) boundClaim(t *testing.T, ns, name, class, size string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	pvName := ns + "-" + name
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/" + pvName}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	if _, err := e.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.cs.CoreV1().PersistentVolumes().Delete(dctx, pvName, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class, VolumeName: pvName, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestProviderBidsOnTheReport: a provider's inventory fed by the operator's report
// (kube.Inventory.FromOperator) places what the report offers — GPU models by node,
// CPU less what others run — counts its own leases' pods once (not once from the
// report and once from its own watch), follows a node going NotReady and one deleted
// within seconds, keeps the last report while the operator is briefly gone and stops
// bidding, with the reason, once the report is older than max_age; it bids again when
// the operator is back.
func TestProviderBidsOnTheReport(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.addNodes(t,
		localenv.NodeSpec{Name: "a100", CPU: "16", Memory: "64Gi", GPUs: 4, GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUMemoryMiB: 81920},
		localenv.NodeSpec{Name: "h100", CPU: "16", Memory: "64Gi", GPUs: 2, GPUProduct: "NVIDIA-H100-PCIe", GPUMemoryMiB: 81559},
	)
	name := func(n string) string { return e.prefix + "-" + n }
	ns := e.k.Namespace(t)
	owner := ownership.Owner{Provider: "akash1" + e.prefix + "p", ChainID: "berth-test-1"}
	lease := market.LeaseID{Owner: "akash1tenant", DSeq: 7, GSeq: 1, OSeq: 1, Provider: owner.Provider}
	// Others' pod (4 CPUs) and one of our lease's (in the lease's namespace, as the
	// provider deploys it: 3 CPUs) on the A100 node.
	e.leasePod(t, ns, "others", name("a100"), "4", nil)
	leaseNS := kube.LeaseNamespace(lease)
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.cs.CoreV1().Namespaces().Delete(dctx, leaseNS, metav1.DeleteOptions{})
	})
	e.leasePod(t, leaseNS, "web-0", name("a100"), "3", &owner)
	// A pod (1 CPU) of the same provider's lease on another chain: another's, for
	// this chain's provider, counted once.
	e.leasePod(t, ns, "other-chain", name("a100"), "1", &ownership.Owner{Provider: owner.Provider, ChainID: "berth-test-2"})

	cfg := e.cfg
	stopOp := e.start(t, cfg)

	maxAge := 3 * time.Second
	capacity, inv := e.providerInventory(t, owner, cfg.Name, maxAge)
	gpus := func(model string, n uint32) cluster.Demand {
		return cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: cluster.Amounts{CPU: 1000, Memory: 1 << 30, GPUs: int64(n), Pods: 1},
			GPUs: []gpu.Model{{Vendor: "nvidia", Model: model}}}}}
	}
	cpus := func(millis int64) cluster.Demand {
		return cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: cluster.Amounts{CPU: millis, Memory: 1 << 30, Pods: 1}}}}
	}
	fits := func(d cluster.Demand) error {
		_, err := capacity.Fit(d)
		return err
	}
	available := func(node string) cluster.Amounts {
		for _, n := range capacity.Snapshot().Nodes {
			if n.Name == node {
				return n.Available
			}
		}
		return cluster.Amounts{}
	}
	testenv.EventuallyNoError(t, 20*time.Second, "the report's GPUs placed", func() error {
		if err := fits(gpus("a100", 4)); err != nil {
			return err
		}
		if err := fits(gpus("h100", 2)); err != nil {
			return err
		}
		if err := fits(gpus("h100", 3)); err == nil {
			return fmt.Errorf("3 H100s fit on a node of 2")
		}
		// 16 CPUs less others' 4, the other chain's 1 and our lease's 3, each counted once.
		if a := available(name("a100")); a.CPU != 8000 {
			return fmt.Errorf("a100 node: %d mCPU available, want 8000", a.CPU)
		}
		return nil
	})

	// The H100 node goes NotReady, the A100 node is deleted.
	testenv.EditNode(ctx, t, e.cs, name("h100"), false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute})
	})
	notReady := time.Now()
	testenv.Eventually(t, 10*time.Second, "no H100 once its node is NotReady", func() bool { return fits(gpus("h100", 1)) != nil })
	t.Logf("NotReady node out of the bids in %s", time.Since(notReady).Round(time.Millisecond))
	deleted := time.Now()
	if err := e.cs.CoreV1().Nodes().Delete(ctx, name("a100"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "no A100 once its node is deleted", func() bool { return fits(gpus("a100", 1)) != nil })
	t.Logf("deleted node out of the bids in %s", time.Since(deleted).Round(time.Millisecond))

	// The operator gone: the last report holds for max_age, then no bids, with why.
	e.addNodes(t, localenv.NodeSpec{Name: "cpu", CPU: "8", Memory: "32Gi"})
	testenv.EventuallyNoError(t, 10*time.Second, "the new node placed", func() error { return fits(cpus(7000)) })
	stopOp()
	if err := fits(cpus(7000)); err != nil {
		t.Fatalf("the last report is dropped at once: %v", err)
	}
	var stale *cluster.Insufficient
	testenv.Eventually(t, 4*maxAge, "bidding stops once the report is older than max_age", func() bool {
		err := fits(cpus(1000))
		return errors.As(err, &stale) && stale.Resource == "inventory"
	})
	if !strings.Contains(stale.Detail, "max_age") || !strings.Contains(stale.Detail, cfg.Name) || inv.Stale() == "" {
		t.Errorf("the reason: %q", stale.Detail)
	}
	e.start(t, cfg)
	testenv.EventuallyNoError(t, 10*time.Second, "bidding again once the operator reports", func() error { return fits(cpus(7000)) })

	// The report deleted (by hand): no bids, saying the Inventory is missing, until the
	// operator writes it again (it does, at once).
	if err := e.dc.Resource(berthv1.InventoryResource).Delete(ctx, cfg.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 10*time.Second, "the report written again", func() error {
		_, err := e.inventoryOf(ctx, cfg.Name)
		return err
	})
	testenv.EventuallyNoError(t, 10*time.Second, "bidding on the rewritten report", func() error { return fits(cpus(7000)) })
}

// TestBusTopics: the operator publishes its reports on inventory.cluster (every write,
// heartbeats too), a node's changes on inventory.nodes (added with its GPUs, then
// deleted), and its storage classes on inventory.storage; its metrics carry the report.
func TestBusTopics(t *testing.T) {
	e := newEnv(t)
	cfg := e.cfg
	cfg.Storage = []inventory.StorageClass{{Class: e.prefix + "-local", Source: inventory.SourceLocal, Size: "1Ti"}}
	reg := prometheus.NewRegistry()
	c, err := New(cfg, NewMetrics(reg), nil)
	if err != nil {
		t.Fatal(err)
	}
	clusterSub, err := c.ClusterEvents().Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodeSub, err := c.NodeEvents().Subscribe(1024, func(ev inventory.NodeEvent) bool { return strings.HasPrefix(ev.Node.Name, e.prefix) })
	if err != nil {
		t.Fatal(err)
	}
	storageSub, err := c.StorageEvents().Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, c)
	timeout := time.After(30 * time.Second)
	next := func(what string, ch <-chan inventory.NodeEvent) inventory.NodeEvent {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: subscription ended: %v", what, nodeSub.Err())
			}
			return ev
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
		return inventory.NodeEvent{}
	}
	select {
	case ev := <-clusterSub.Events():
		if ev.Inventory != cfg.Name || ev.At.IsZero() {
			t.Errorf("cluster event %+v", ev)
		}
	case <-timeout:
		t.Fatal("no inventory.cluster event")
	}
	select {
	case ev := <-storageSub.Events():
		if ev.Storage.Class != e.prefix+"-local" || ev.Storage.Capacity.Value() != 1<<40 {
			t.Errorf("storage event %+v", ev)
		}
	case <-timeout:
		t.Fatal("no inventory.storage event")
	}
	e.addNodes(t, localenv.NodeSpec{Name: "h100", CPU: "16", Memory: "64Gi", GPUs: 2, GPUProduct: "NVIDIA-H100-PCIe", GPUMemoryMiB: 81559})
	node := e.prefix + "-h100"
	for {
		ev := next("the new node's event", nodeSub.Events())
		if ev.Node.Name == node && ev.Node.Schedulable && ev.Node.GPU != nil && ev.Node.GPU.Model == "h100" {
			break
		}
	}
	if err := e.cs.CoreV1().Nodes().Delete(t.Context(), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if ev := next("the deleted node's event", nodeSub.Events()); ev.Deleted && ev.Node.Name == node {
			break
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
	}
	for _, m := range []string{"berth_inventory_operator_nodes", "berth_inventory_operator_resource", "berth_inventory_operator_storage_bytes", "berth_inventory_operator_syncs_total",
		"berth_inventory_operator_object_writes_total", "berth_inventory_operator_last_report_timestamp_seconds", "berth_bus_published_total"} {
		if !seen[m] {
			t.Errorf("metric %s missing", m)
		}
	}
}

// TestWatchFailureStopsHeartbeats: while one of the operator's watches fails (client-go
// retries it; the cache is frozen meanwhile) the report says so, /readyz fails once it
// has lasted two heartbeats, and the heartbeats stop, so that providers stop bidding on
// a frozen picture of the cluster; when the watch works again, they resume.
func TestWatchFailureStopsHeartbeats(t *testing.T) {
	e := newEnv(t)
	cfg := e.cfg
	cfg.Heartbeat = time.Second
	c, err := New(cfg, NewMetrics(prometheus.NewRegistry()), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, c)
	capacity, _ := e.providerInventory(t, ownership.Owner{Provider: "akash1" + e.prefix, ChainID: "berth-test-1"}, cfg.Name, 3*time.Second)
	testenv.Eventually(t, 20*time.Second, "the provider bids on the report", func() bool { return capacity.Unavailable() == "" && c.Ready() == nil })

	// The pods' watch fails, as client-go reports it (to the handler the operator set).
	failing := func(since time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.watchErrs["pods"] = &watchError{since: since, last: time.Now(), err: "pods is forbidden"}
	}
	since := time.Now().Add(-time.Minute)
	failing(since)
	e.waitReport(t, cfg.Name, "the failure in the report", func(st *berthv1.InventoryStatus) error {
		for _, p := range st.Problems {
			if strings.Contains(p, "watching pods fails") && strings.Contains(p, "pods is forbidden") {
				return nil
			}
		}
		return fmt.Errorf("problems %q", st.Problems)
	})
	if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "watching pods fails") {
		t.Errorf("Ready: %v", err)
	}
	testenv.EventuallyNoError(t, 20*time.Second, "the provider stops bidding", func() error {
		failing(since) // client-go keeps retrying
		if why := capacity.Unavailable(); !strings.Contains(why, "max_age") {
			return fmt.Errorf("unavailable: %q", why)
		}
		return nil
	})

	// The watch works again: heartbeats, and bids, resume.
	c.mu.Lock()
	delete(c.watchErrs, "pods")
	c.mu.Unlock()
	testenv.Eventually(t, 20*time.Second, "the provider bids again", func() bool { return capacity.Unavailable() == "" && c.Ready() == nil })
}

// providerInventory runs, until the test ends, a provider's inventory for owner fed
// by the Inventory name, and waits until it has synced.
func (e *env) providerInventory(t *testing.T, owner ownership.Owner, name string, maxAge time.Duration) (*cluster.Capacity, *kube.Inventory) {
	t.Helper()
	capacity := cluster.NewCapacity()
	kc, err := kube.NewCache(e.cs, nil, owner)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := kube.NewInventory(kc, e.cs, capacity, kube.InventoryConfig{}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	inv.FromOperator(e.dc, name, maxAge)
	// Before the report is first read, nothing is bid on, and /status says why.
	if why := inv.Stale(); why == "" || capacity.Unavailable() != why {
		t.Fatalf("before Run: stale %q, capacity unavailable %q; want both to say the report is not read yet", why, capacity.Unavailable())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	go func() { done <- kc.Run(ctx) }()
	go func() { done <- inv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("provider inventory: %v", err)
			}
		}
	})
	if err := inv.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	return capacity, inv
}

// TestGPUNodePool: a node tainted nvidia.com/gpu (managed Kubernetes' GPU pools) is
// reported schedulable for GPU workloads only, and a provider places GPU replicas
// there and no others.
func TestGPUNodePool(t *testing.T) {
	e := newEnv(t)
	e.addNodes(t, localenv.NodeSpec{Name: "pool", CPU: "96", Memory: "512Gi", GPUs: 4, GPUProduct: "NVIDIA-L40S", GPUMemoryMiB: 46068})
	node := e.prefix + "-pool"
	testenv.EditNode(t.Context(), t, e.cs, node, false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: inventory.TaintGPU, Value: "present", Effect: corev1.TaintEffectNoSchedule})
	})
	e.start(t, e.cfg)
	e.waitReport(t, e.cfg.Name, "the GPU pool node", func(st *berthv1.InventoryStatus) error {
		if n := nodeOf(st, node); n == nil || !n.Schedulable || !n.GPUOnly || n.GPU == nil || n.GPU.Model != "l40s" || !n.GPU.Labelled {
			return fmt.Errorf("node %+v", n)
		}
		return nil
	})
	capacity, _ := e.providerInventory(t, ownership.Owner{Provider: "akash1" + e.prefix, ChainID: "berth-test-1"}, e.cfg.Name, time.Minute)
	big := cluster.Amounts{CPU: 90000, Memory: 1 << 30, Pods: 1}
	testenv.EventuallyNoError(t, 20*time.Second, "a 90-CPU GPU replica placed on the pool node", func() error {
		each := big
		each.GPUs = 1
		_, err := capacity.Fit(cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: each, GPUs: []gpu.Model{{Vendor: "nvidia", Model: "l40s"}}}}})
		return err
	})
	var ins *cluster.Insufficient
	if _, err := capacity.Fit(cluster.Demand{Units: []cluster.Unit{{ID: 1, Count: 1, Each: big}}}); !errors.As(err, &ins) || ins.Resource != "nodes" {
		t.Fatalf("a 90-CPU replica without GPUs: %v, want no room", err)
	}
}

// TestTopicsOverRedis: with bus.redis, the operator's topics reach another process's
// subscribers over the real redis-server, in the seeds' names.
func TestTopicsOverRedis(t *testing.T) {
	e := newEnv(t)
	r := testenv.Redis(t)
	cfg := e.cfg
	cfg.Bus.Redis = "redis://" + r.Addr
	cfg.Storage = []inventory.StorageClass{{Class: e.prefix + "-local", Source: inventory.SourceLocal, Size: "1Ti"}}

	other, err := redisbus.Connect(redisbus.Options{URL: cfg.Bus.Redis})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	local, err := bus.New[inventory.ClusterEvent](inventory.TopicCluster, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := local.Subscribe(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	bridge := redisbus.NewBridge(other, inventory.TopicCluster, local)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- bridge.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-bridge.Subscribed()

	e.start(t, cfg)
	select {
	case ev := <-sub.Events():
		if ev.Inventory != cfg.Name || ev.At.IsZero() {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no inventory.cluster event over Redis")
	}
}
