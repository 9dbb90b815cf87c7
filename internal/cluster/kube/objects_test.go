package kube

import (
	"context"
	_ "embed"
	"encoding/json"
	"regexp"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/inventory/invtest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// leaseSDL has the shapes the cluster service must run: a web service with global
// port 80 and a hostname, registry credentials, a UDP random port, a worker with
// persistent storage and a memory-backed /dev/shm, and a GPU service.
//
//go:embed testdata/lease.sdl.yaml
var leaseSDL string

var testLease = market.LeaseID{Owner: "akash1tenant", DSeq: 42, GSeq: 1, OSeq: 1, Provider: "akash1provider"}

func buildTestLease(t *testing.T) *LeaseObjects {
	t.Helper()
	res, _, err := sdl.Parse([]byte(leaseSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := BuildLease(testLease, res.Manifest[0], Settings{Owner: testOwner, StorageClasses: map[string]string{"beta3": "fast-ssd"}, GPURuntimeClass: "nvidia"})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestBuildLease(t *testing.T) {
	o := buildTestLease(t)
	ns := o.Namespace.Name
	if !regexp.MustCompile(`^lease-[0-9a-v]{32}$`).MatchString(ns) || ns != LeaseNamespace(testLease) {
		t.Fatalf("namespace %q", ns)
	}
	// Every object carries the lease's labels and lives in its namespace.
	var metas []metav1.ObjectMeta
	metas = append(metas, o.Namespace.ObjectMeta, o.ServiceAccount.ObjectMeta)
	for _, x := range o.NetworkPolicies {
		metas = append(metas, x.ObjectMeta)
	}
	for _, x := range o.Secrets {
		metas = append(metas, x.ObjectMeta)
	}
	for _, x := range o.Deployments {
		metas = append(metas, x.ObjectMeta, x.Spec.Template.ObjectMeta)
	}
	for _, x := range o.StatefulSets {
		metas = append(metas, x.ObjectMeta, x.Spec.Template.ObjectMeta)
	}
	for _, x := range o.Services {
		metas = append(metas, x.ObjectMeta)
	}
	for _, m := range metas {
		if id, ok := ownership.LeaseFromLabels(m.Labels); !ok || id != testLease {
			t.Errorf("%s: labels %v", m.Name, m.Labels)
		}
		if m.Namespace != ns && m.Name != ns && m.Name != "" {
			t.Errorf("%s in namespace %q", m.Name, m.Namespace)
		}
	}
	if *o.ServiceAccount.AutomountServiceAccountToken {
		t.Error("the tenant service account mounts its token")
	}
	var policies []string
	for _, p := range o.NetworkPolicies {
		policies = append(policies, p.Name)
	}
	if want := []string{"default-deny", "allow-namespace", "allow-dns", "allow-internet", "allow-ingress-controller", "allow-global-ports"}; !slices.Equal(policies, want) {
		t.Errorf("network policies %v, want %v", policies, want)
	}
	if except := o.NetworkPolicies[3].Spec.Egress[0].To[0].IPBlock.Except; !slices.Contains(except, "10.0.0.0/8") {
		t.Errorf("internet egress except %v", except)
	}

	// web: a Deployment of 2 with no surge, the pull secret, env, limits = requests.
	if len(o.Deployments) != 2 || len(o.StatefulSets) != 1 {
		t.Fatalf("%d deployments, %d statefulsets", len(o.Deployments), len(o.StatefulSets))
	}
	web := o.Deployments[slices.IndexFunc(o.Deployments, func(d *appsv1.Deployment) bool { return d.Name == "web" })]
	if *web.Spec.Replicas != 2 || web.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 0 {
		t.Errorf("web replicas %d, strategy %+v", *web.Spec.Replicas, web.Spec.Strategy)
	}
	c := web.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Cpu().MilliValue() != 500 || c.Resources.Limits.Memory().Value() != 512<<20 || c.Resources.Requests.StorageEphemeral().Value() != 1<<30 {
		t.Errorf("web resources %+v", c.Resources)
	}
	if len(c.Env) != 2 || c.Env[0] != (corev1.EnvVar{Name: "MODE", Value: "prod"}) || c.Env[1].Name != "EMPTY" {
		t.Errorf("env %+v", c.Env)
	}
	if *c.SecurityContext.Privileged || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Error("privileged container")
	}
	if pod := web.Spec.Template.Spec; *pod.AutomountServiceAccountToken || pod.ServiceAccountName != TenantServiceAccount ||
		len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "web-pull" {
		t.Errorf("web pod %+v", pod)
	}
	var auths map[string]map[string]map[string]string
	if err := json.Unmarshal(o.Secrets[0].Data[corev1.DockerConfigJsonKey], &auths); err != nil || auths["auths"]["registry.example.com"]["username"] != "u" {
		t.Errorf("pull secret %v %v", auths, err)
	}
	// worker: a StatefulSet with a beta3 → fast-ssd claim; /dev/shm from memory,
	// counted in its memory.
	w := o.StatefulSets[0]
	if w.Name != "worker" || len(w.Spec.VolumeClaimTemplates) != 1 || *w.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "fast-ssd" ||
		w.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().Value() != 10<<30 {
		t.Errorf("worker %+v", w.Spec.VolumeClaimTemplates)
	}
	wc := w.Spec.Template.Spec.Containers[0]
	if wc.Resources.Limits.Memory().Value() != 1<<30+256<<20 || len(wc.VolumeMounts) != 2 {
		t.Errorf("worker container %+v", wc)
	}
	if v := w.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].EmptyDir == nil || v[0].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("worker volumes %+v", v)
	}
	// llm: one GPU, node affinity on the model label, the runtime class.
	llm := o.Deployments[slices.IndexFunc(o.Deployments, func(d *appsv1.Deployment) bool { return d.Name == "llm" })]
	lp := llm.Spec.Template.Spec
	if q := lp.Containers[0].Resources.Limits[ResourceGPU]; q.Value() != 1 || *lp.RuntimeClassName != "nvidia" {
		t.Errorf("llm %+v", lp)
	}
	if terms := lp.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 || len(terms[0].MatchExpressions) != 1 ||
		terms[0].MatchExpressions[0].Key != inventory.GPULabel("nvidia", "a100", "", "") || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpExists {
		t.Errorf("llm affinity %+v", terms)
	}
	if tol := lp.Tolerations; len(tol) != 1 || tol[0].Key != inventory.TaintGPU || tol[0].Operator != corev1.TolerationOpExists || tol[0].Effect != "" {
		t.Errorf("llm tolerations %+v, want nvidia.com/gpu's", tol)
	}
	// Services: web has ClusterIP (80, udp 5000) and NodePort (udp 5000 only); llm is
	// internal only; worker exposes nothing.
	var names []string
	for _, s := range o.Services {
		names = append(names, s.Name+"/"+string(s.Spec.Type))
	}
	if want := []string{"llm/ClusterIP", "web/ClusterIP", "web-np/NodePort"}; !slices.Equal(names, want) {
		t.Errorf("services %v, want %v", names, want)
	}
	if np := o.Services[2]; len(np.Spec.Ports) != 2 || np.Spec.Ports[0].Protocol != corev1.ProtocolUDP || np.Spec.Ports[0].Port != 5000 || np.Spec.Ports[1].Port != 6000 {
		t.Errorf("node port service %+v", np.Spec.Ports)
	}
	// The accepted hostname and the leased-IP port become resources for the operators.
	if len(o.Hosts) != 1 || o.Hosts[0].Name != "www.example.com" || o.Hosts[0].Spec.Service != "web" || o.Hosts[0].Spec.ExternalPort != 80 ||
		o.Hosts[0].Spec.Lease.DSeq != "42" {
		t.Errorf("hosts %+v", o.Hosts)
	}
	if len(o.LeasedIPs) != 1 || o.LeasedIPs[0].Name != "web-tcp-6000" || o.LeasedIPs[0].Spec.Name != "pub" || o.LeasedIPs[0].Spec.Port != 6000 {
		t.Errorf("leased IPs %+v", o.LeasedIPs)
	}
}

// TestApplyLease applies a lease's objects to the real API server twice (server-side
// apply is idempotent) and watches kwok run its pods, the GPU pod on the GPU node.
func TestApplyLease(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube,
		localenv.NodeSpec{Name: "apply-cpu", CPU: "16", Memory: "64Gi"},
		invtest.Labelled(t, localenv.NodeSpec{Name: "apply-gpu", CPU: "32", Memory: "128Gi", GPUs: 4, GPUProduct: "NVIDIA-A100-SXM4-80GB"}),
	)
	nvidiaRuntimeClass(t, cs)
	dc := withCRDs(t, kube)
	o := buildTestLease(t)
	for range 2 {
		if err := Apply(ctx, cs, dc, o); err != nil {
			t.Fatal(err)
		}
	}
	ns := o.Namespace.Name
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{})
	})
	eventually(t, "web and llm pods running", func() bool {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		running := map[string]int{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running[p.Labels[LabelService]]++
				if p.Labels[LabelService] == "llm" && p.Spec.NodeName != "apply-gpu" {
					t.Errorf("the GPU pod runs on %s", p.Spec.NodeName)
				}
			}
		}
		if running["web"] == 2 && running["llm"] == 1 {
			return true
		}
		return false
	})
	// The worker's claim exists with the mapped class (no provisioner here binds it).
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-worker-0", metav1.GetOptions{})
	if err != nil || *pvc.Spec.StorageClassName != "fast-ssd" {
		t.Fatalf("worker claim: %v", err)
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web-np", metav1.GetOptions{})
	if err != nil || svc.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("node port service: %+v %v", svc, err)
	}
	if _, err := dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Get(ctx, "www.example.com", metav1.GetOptions{}); err != nil {
		t.Fatalf("provider host: %v", err)
	}
	if _, err := dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns).Get(ctx, "web-tcp-6000", metav1.GetOptions{}); err != nil {
		t.Fatalf("provider leased IP: %v", err)
	}
	// Every object is managed by berth's field manager.
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !slices.ContainsFunc(d.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == FieldManager }) {
		t.Fatalf("web deployment managed fields: %v", err)
	}
}

// TestOvercommitMatchesDemand: with overcommit, every container requests exactly what
// the bid engine reserved for its resource unit (so running pods take their
// reservation's place), while its limits stay what the tenant asked.
func TestOvercommitMatchesDemand(t *testing.T) {
	res, _, err := sdl.Parse([]byte(leaseSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	oc := cluster.Overcommit{CPU: 100, Memory: 30, Storage: 200}
	objs, err := BuildLease(testLease, res.Manifest[0], Settings{Owner: testOwner, Overcommit: oc})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cluster.DemandOf(res.Groups[0], oc)
	if err != nil {
		t.Fatal(err)
	}
	var containers []corev1.Container
	for _, x := range objs.Deployments {
		containers = append(containers, x.Spec.Template.Spec.Containers...)
	}
	for _, x := range objs.StatefulSets {
		containers = append(containers, x.Spec.Template.Spec.Containers...)
	}
	if len(containers) != 3 {
		t.Fatalf("%d containers", len(containers))
	}
	for _, c := range containers {
		gpus := c.Resources.Requests[ResourceGPU]
		req := cluster.Amounts{CPU: c.Resources.Requests.Cpu().MilliValue(), Memory: c.Resources.Requests.Memory().Value(),
			EphemeralStorage: c.Resources.Requests.StorageEphemeral().Value(), GPUs: gpus.Value(), Pods: 1}
		if !slices.ContainsFunc(d.Units, func(u cluster.Unit) bool { return u.Each == req }) {
			t.Errorf("%s requests %s, which no unit of the demand reserves (%+v)", c.Name, req, d.Units)
		}
		if c.Resources.Limits.Cpu().MilliValue() <= req.CPU || c.Resources.Limits.Memory().Value() <= req.Memory {
			t.Errorf("%s: limits %v are not above the requests", c.Name, c.Resources.Limits)
		}
	}
}

// nvidiaRuntimeClass creates the GPU runtime class the test settings name (on a real
// cluster, the GPU operator does).
func nvidiaRuntimeClass(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"}
	if _, err := cs.NodeV1().RuntimeClasses().Create(t.Context(), rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestStorageAffinity: with StorageAffinity, a pod with persistent volumes is placed
// only on nodes labelled for their StorageClasses — in every alternative of its GPU
// affinity; without, nothing is added.
func TestStorageAffinity(t *testing.T) {
	claims := []corev1.PersistentVolumeClaim{
		{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: new("beta3")}},
		{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: new("beta3")}},
		{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: new("fast")}},
	}
	want := []string{inventory.StorageLabel("beta3"), inventory.StorageLabel("fast")}
	keys := func(term corev1.NodeSelectorTerm) []string {
		var out []string
		for _, e := range term.MatchExpressions {
			if e.Operator != corev1.NodeSelectorOpExists {
				t.Errorf("requirement %+v", e)
			}
			out = append(out, e.Key)
		}
		return out
	}
	a := withStorageAffinity(nil, claims)
	if terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 || !slices.Equal(keys(terms[0]), want) {
		t.Fatalf("terms %+v", terms)
	}
	onGPU := gpuAffinity([]gpu.Model{{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}, {Vendor: "nvidia", Model: "h100"}})
	a = withStorageAffinity(onGPU, claims)
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 ||
		!slices.Equal(keys(terms[0]), append(inventory.GPUAffinity(gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi"}), want...)) ||
		!slices.Equal(keys(terms[1]), append(inventory.GPUAffinity(gpu.Model{Vendor: "nvidia", Model: "h100"}), want...)) {
		t.Fatalf("terms %+v", terms)
	}
	if withStorageAffinity(nil, nil) != nil {
		t.Fatal("affinity without claims")
	}
}
