package dev

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/internal/sdl"
)

// The tests in this file check that every SDL file in examples/ deploys on berth dev,
// without a ledger or a cluster: what the ledger, the bid engine, the manifest service
// and the deployer would each say of it, given berth dev's nodes and its provider's
// configuration.

// exampleProvider is berth dev's provider as far as bidding and lease objects go: its
// bid engine over an inventory of berth dev's nodes, and its deployer's settings.
type exampleProvider struct {
	engine   *bidengine.Engine
	settings kube.Settings
	// nodes are berth dev's nodes as kwok reports them (Ready).
	nodes []*corev1.Node
}

// exampleProviderConfig is what berth dev's provider bids with (as startDevProvider
// configures it): the defaults, with a pool of 1Ti and a price for each of the
// cluster's storage classes, and the attributes it registers.
func exampleProviderConfig(t *testing.T, dev Config) config.ProviderConfig {
	t.Helper()
	pc := config.DefaultProviderConfig()
	attrs, err := devAttributes(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attrs {
		pc.Attributes = append(pc.Attributes, config.AttributeConfig{Key: a.Key, Value: a.Value})
	}
	pc.Inventory.Storage = map[string]config.Quantity{}
	for _, class := range localenv.DevStorageClasses {
		pc.Inventory.Storage[class] = config.MustQuantity("1Ti")
		pc.Bidding.Pricing.Scale.Storage[class] = market.MustParseDec("0.0003")
	}
	return pc
}

// newExampleProvider builds the bid engine from berth dev's provider configuration as
// NewProvider does (policy, pricer, bid timeout, overcommit; the attributes it
// registers), and fills its inventory as the kube inventory would from berth dev's
// nodes and the configured pools.
func newExampleProvider(t *testing.T) *exampleProvider {
	t.Helper()
	dev := DefaultConfig()
	pc := exampleProviderConfig(t, dev)
	if err := pc.Validate(); err != nil {
		t.Fatalf("dev provider configuration: %v", err)
	}
	ec, err := pc.EngineConfig(exampleAddress(t, 2), ledger.DefaultAddressPrefix, ledger.DefaultParams().BidMinDeposit)
	if err != nil {
		t.Fatal(err)
	}
	if ec.Policy.Attributes, err = pc.Registered(); err != nil {
		t.Fatal(err)
	}
	// The storage classes' sizes, as berth dev's inventory operator reports them.
	capacity := cluster.NewCapacity()
	for _, sc := range devInventoryConfig("", "").Storage {
		report, _ := inventory.Storage(sc, inventory.StorageInput{})
		capacity.SetPoolCapacity(cluster.StoragePool(sc.Class), report.Capacity.Value())
	}
	capacity.SetPoolCapacity(cluster.PoolLeasedIPs, pc.Inventory.LeasedIPs)
	capacity.SetPoolCapacity(cluster.PoolNodePorts, pc.Inventory.NodePorts)
	p := &exampleProvider{settings: pc.KubeSettings()}
	for _, spec := range dev.nodes() {
		n, err := spec.Object()
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		// The capability labels berth dev's inventory operator puts on it.
		labels, _ := inventory.Capabilities(inventory.DescribeGPU(n.Labels, n.Status.Allocatable, inventory.GPUOptions{}), localenv.DevStorageClasses)
		maps.Copy(n.Labels, labels)
		capacity.SetNode(kube.NodeOf(n))
		p.nodes = append(p.nodes, n)
	}
	history, err := bidengine.NewHistory(pc.Bidding.History, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.engine, err = bidengine.NewEngine(ec, capacity, history)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exampleAddress is an account address of the dev chain, made of byte b.
func exampleAddress(t *testing.T, b byte) string {
	t.Helper()
	a, err := ledger.AddressFromBytes(ledger.DefaultAddressPrefix, bytes.Repeat([]byte{b}, 20))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// exampleFiles are the SDL files of examples/.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("examples/ has %d SDL files, want at least 3 (web, wordpress, gpu)", len(files))
	}
	return files
}

// parseExample reads an SDL as `berth tenant deploy --strict` does: any warning is an
// error.
func parseExample(t *testing.T, name string, data []byte) *sdl.Result {
	t.Helper()
	res, warnings, err := sdl.Parse(data, sdl.Options{Strict: true})
	for _, w := range warnings {
		t.Errorf("%s: warning: %s", name, w)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// TestExamplesDeployOnDev takes each example through what `berth tenant deploy` does
// against berth dev: the ledger accepts the deployment, berth dev's provider bids on
// every group at a price within the tenant's, the provider accepts the manifest (as
// its gateway receives it), and every pod the deployer would create fits one of berth
// dev's nodes, with its volumes in the cluster's storage classes.
func TestExamplesDeployOnDev(t *testing.T) {
	p := newExampleProvider(t)
	tenant := exampleAddress(t, 1)
	params := ledger.DefaultParams()
	for _, file := range exampleFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			res := parseExample(t, file, data)

			// The ledger: MsgCreateDeployment with the minimum deposit.
			id := market.DeploymentID{Owner: tenant, DSeq: 1}
			msg := ledger.MsgCreateDeployment{ID: id, Groups: res.Groups, Version: res.Version, Deposit: params.DeploymentMinDeposit[0]}
			if err := msg.ValidateBasic(&params); err != nil {
				t.Fatalf("the ledger refuses the deployment: %v", err)
			}

			// The bid engine, on every group (the ledger opens one order per group).
			for _, g := range res.Groups {
				sc, err := p.engine.Screen(t.Context(), tenant, g)
				if err != nil {
					t.Fatal(err)
				}
				if !sc.Bid {
					t.Fatalf("group %s: berth dev's provider does not bid: %s: %s", g.Name, sc.Reason, sc.Detail)
				}
				if limit := groupPrice(g); sc.Price.Denom != ledger.DefaultDenom || sc.Price.Amount.Sign() <= 0 || sc.Price.Amount.Cmp(limit) > 0 {
					t.Fatalf("group %s: bid %s, want a positive price in %s of at most %s", g.Name, sc.Price, ledger.DefaultDenom, limit)
				}
				t.Logf("group %s: berth dev's provider bids %s per block", g.Name, sc.Price)
			}

			// The manifest service, on the manifest as the tenant sends it.
			wire, err := json.Marshal(res.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Decode(wire)
			if err != nil {
				t.Fatal(err)
			}
			if err := manifest.Validate(m); err != nil {
				t.Fatalf("the provider refuses the manifest: %v", err)
			}
			if err := manifest.CheckVersion(m, res.Version); err != nil {
				t.Fatal(err)
			}
			if err := manifest.CheckDeployment(m, res.Groups); err != nil {
				t.Fatalf("the manifest does not fit the deployment's groups: %v", err)
			}

			// The deployer: each group's objects, against berth dev's nodes.
			for gi := range m {
				lease := market.LeaseID{Owner: tenant, DSeq: 1, GSeq: uint32(gi + 1), OSeq: 1, Provider: exampleAddress(t, 2)}
				objs, err := kube.BuildLease(lease, m[gi], p.settings)
				if err != nil {
					t.Fatalf("group %s: %v", m[gi].Name, err)
				}
				p.checkSchedulable(t, objs)
			}
		})
	}
}

// groupPrice is the most a group's tenant pays per block: Σ price × count.
func groupPrice(g market.GroupSpec) market.Dec {
	var sum market.Dec
	for _, ru := range g.Resources {
		sum = sum.Add(ru.Price.Amount.MulUint(uint64(ru.Count)))
	}
	return sum
}

// checkSchedulable fails the test when a workload's pod would fit none of berth dev's
// nodes on its own (node affinity, resource requests against allocatable), or a
// volume claim names a storage class the cluster does not have.
func (p *exampleProvider) checkSchedulable(t *testing.T, objs *kube.LeaseObjects) {
	t.Helper()
	type workload struct {
		name   string
		pod    corev1.PodSpec
		claims []corev1.PersistentVolumeClaim
	}
	var ws []workload
	for _, d := range objs.Deployments {
		ws = append(ws, workload{d.Name, d.Spec.Template.Spec, nil})
	}
	for _, s := range objs.StatefulSets {
		ws = append(ws, workload{s.Name, s.Spec.Template.Spec, s.Spec.VolumeClaimTemplates})
	}
	if len(ws) == 0 {
		t.Fatal("the lease has no workloads")
	}
	for _, w := range ws {
		if !slices.ContainsFunc(p.nodes, func(n *corev1.Node) bool { return podFits(n, &w.pod) }) {
			t.Errorf("%s: its pod fits none of berth dev's nodes (%s)", w.name, describePod(&w.pod))
		}
		for _, c := range w.claims {
			if c.Spec.StorageClassName == nil || !slices.Contains(localenv.DevStorageClasses, *c.Spec.StorageClassName) {
				t.Errorf("%s: volume %s asks for storage class %v; berth dev has %v", w.name, c.Name, c.Spec.StorageClassName, localenv.DevStorageClasses)
			}
		}
	}
}

// describePod says what a pod asks of a node: its required node affinity and its
// containers' requests.
func describePod(pod *corev1.PodSpec) string {
	var parts []string
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				parts = append(parts, fmt.Sprintf("label %s %s %v", e.Key, e.Operator, e.Values))
			}
		}
	}
	for _, c := range pod.Containers {
		for name, q := range c.Resources.Requests {
			parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// podFits: n satisfies the pod's required node affinity (In and Exists expressions;
// anything else counts as unsatisfied) and has the allocatable resources its containers request.
func podFits(n *corev1.Node, pod *corev1.PodSpec) bool {
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if !slices.ContainsFunc(terms, func(term corev1.NodeSelectorTerm) bool {
			for _, e := range term.MatchExpressions {
				_, has := n.Labels[e.Key]
				switch e.Operator {
				case corev1.NodeSelectorOpIn:
					if !slices.Contains(e.Values, n.Labels[e.Key]) {
						return false
					}
				case corev1.NodeSelectorOpExists:
					if !has {
						return false
					}
				default:
					return false
				}
			}
			return true
		}) {
			return false
		}
	}
	want := corev1.ResourceList{}
	for _, c := range pod.Containers {
		for name, q := range c.Resources.Requests {
			sum := want[name]
			sum.Add(q)
			want[name] = sum
		}
	}
	for name, q := range want {
		if have, ok := n.Status.Allocatable[name]; !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// TestExamplesOversizedDeclined edits each example the way a tenant might, to ask for
// more than berth dev has, and checks that berth dev's provider then declines, for the
// reason expected: the bids of TestExamplesDeployOnDev come from checking what berth
// dev has, not from bidding on anything.
func TestExamplesOversizedDeclined(t *testing.T) {
	p := newExampleProvider(t)
	tenant := exampleAddress(t, 1)
	tests := []struct {
		name, file string
		edits      []string // old, new, …: every occurrence is replaced
		reason     string
	}{
		{"17 CPUs, nodes have 16", "web.yaml",
			[]string{"units: 0.5", "units: 17"}, bidengine.ReasonCapacityNodes},
		{"100 CPUs in all, berth dev has 64", "web.yaml",
			[]string{"count: 1", "count: 200"}, bidengine.ReasonCapacityNodes},
		{"2000Gi of beta3, the pool has 1Ti", "wordpress.yaml",
			[]string{"size: 10Gi", "size: 500Gi", "count: 1", "count: 2"}, bidengine.ReasonCapacityStorage},
		{"class default, berth dev offers beta1-3", "wordpress.yaml",
			[]string{"class: beta3", "class: default"}, bidengine.ReasonStorageCapability},
		{"9 GPUs, nodes have 8", "gpu.yaml",
			[]string{"gpu:\n          units: 1", "gpu:\n          units: 9"}, bidengine.ReasonCapacityGPU},
		{"rtx4090, berth dev has a100 and h100", "gpu.yaml",
			[]string{"model: a100", "model: rtx4090"}, bidengine.ReasonGPUCapability},
		{"68Gi with shm, the GPU node has 64Gi", "gpu.yaml",
			[]string{"size: 32Gi", "size: 60Gi"}, bidengine.ReasonCapacityGPU},
		{"a leased IP, berth dev has none", "web.yaml",
			[]string{"- global: true", "- global: true\n            ip: web", "deployment:", "endpoints:\n  web:\n    kind: ip\n\ndeployment:"},
			bidengine.ReasonCapacityLeasedIPs},
	}
	for _, tt := range tests {
		t.Run(tt.file+": "+tt.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "examples", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			src := string(data)
			for i := 0; i+1 < len(tt.edits); i += 2 {
				if !strings.Contains(src, tt.edits[i]) {
					t.Fatalf("%s no longer contains %q: update this test", tt.file, tt.edits[i])
				}
				src = strings.ReplaceAll(src, tt.edits[i], tt.edits[i+1])
			}
			res := parseExample(t, tt.file, []byte(src))
			sc, err := p.engine.Screen(t.Context(), tenant, res.Groups[0])
			if err != nil {
				t.Fatal(err)
			}
			if sc.Bid || sc.Reason != tt.reason {
				t.Fatalf("screening = %+v, want no bid for %s", sc, tt.reason)
			}
			t.Logf("declined: %s: %s", sc.Reason, sc.Detail)
		})
	}
}

// TestDevCapabilities pins the capability attributes berth dev's provider registers,
// and checks that the ledger accepts its registration.
func TestDevCapabilities(t *testing.T) {
	attrs, err := DefaultConfig().capabilities(localenv.DevStorageClasses)
	if err != nil {
		t.Fatal(err)
	}
	want := market.Attributes{
		{Key: "capabilities/storage/1/class", Value: "beta1"}, {Key: "capabilities/storage/1/persistent", Value: "true"},
		{Key: "capabilities/storage/2/class", Value: "beta2"}, {Key: "capabilities/storage/2/persistent", Value: "true"},
		{Key: "capabilities/storage/3/class", Value: "beta3"}, {Key: "capabilities/storage/3/persistent", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/a100", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/a100/ram/80Gi", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/a100/interface/sxm", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/a100/ram/80Gi/interface/sxm", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/h100", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/h100/ram/80Gi", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/h100/interface/sxm", Value: "true"},
		{Key: "capabilities/gpu/vendor/nvidia/model/h100/ram/80Gi/interface/sxm", Value: "true"},
	}
	if !slices.Equal(attrs, want) {
		t.Fatalf("capabilities:\n got %v\nwant %v", attrs, want)
	}

	// The provider registers them with the others (devAttributes), and the ledger
	// takes the registration.
	registered, err := devAttributes(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(registered) < len(want) || !slices.Equal(registered[len(registered)-len(want):], want) {
		t.Fatalf("registered attributes %v do not end with the capabilities", registered)
	}
	params := ledger.DefaultParams()
	reg := ledger.MsgCreateProvider{Owner: exampleAddress(t, 2), HostURI: "https://localhost:8443", Attributes: registered}
	if err := reg.ValidateBasic(&params); err != nil {
		t.Fatalf("the ledger refuses the registration: %v", err)
	}

	// Without GPU nodes, no GPU capability; several nodes of one model declare it once.
	cfg := DefaultConfig()
	cfg.GPUNodes = 0
	if attrs, err := cfg.capabilities(nil); err != nil || len(attrs) != 0 {
		t.Fatalf("no GPU nodes, no storage classes: %v, %v", attrs, err)
	}
	cfg.GPUNodes, cfg.GPUModels = 3, []string{"NVIDIA-A100-SXM4-80GB"}
	if attrs, err := cfg.capabilities(nil); err != nil || len(attrs) != 4 {
		t.Fatalf("three GPU nodes of one model: %v, %v", attrs, err)
	}
}

// TestDevNodesCarryOnlyDiscoveryLabels: berth dev's GPU nodes are described only as
// GPU feature discovery and node feature discovery describe them (no berth label: the
// inventory operator names the models), with two models, A100 and H100.
func TestDevNodesCarryOnlyDiscoveryLabels(t *testing.T) {
	var models []string
	for _, spec := range DefaultConfig().nodes() {
		n, err := spec.Object()
		if err != nil {
			t.Fatal(err)
		}
		for k := range n.Labels {
			if strings.HasPrefix(k, "berth.dev/") {
				t.Errorf("node %s: label %s", n.Name, k)
			}
		}
		if spec.GPUs > 0 {
			if n.Labels[inventory.LabelGFDProduct] == "" || n.Labels[inventory.LabelGFDMemory] == "" || n.Labels[inventory.LabelGFDCount] == "" {
				t.Errorf("node %s: GPU feature discovery's labels missing: %v", n.Name, n.Labels)
			}
			g := inventory.DescribeGPU(n.Labels, n.Status.Allocatable, inventory.GPUOptions{})
			if g == nil || g.Offered != int64(spec.GPUs) || g.Message != "" {
				t.Errorf("node %s: %+v", n.Name, g)
				continue
			}
			models = append(models, g.Model)
		}
	}
	if !slices.Equal(models, []string{"a100", "h100"}) {
		t.Errorf("GPU models %q, want a100 and h100", models)
	}
}
