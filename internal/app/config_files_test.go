package app

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/config/crd"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/testenv"
)

// The manifests in config/rbac and config/deploy, read as `kubectl apply -k` reads
// them. TestRBAC (rbac_test.go) runs the provider with config/rbac's permissions;
// TestDeployExample checks config/deploy.

// configObject is one object of config/: its file, its JSON (what is applied) and its
// typed form (decoded strictly: an unknown or repeated field is an error).
type configObject struct {
	file string
	json []byte
	obj  runtime.Object
}

// kustomization is what config/'s kustomization.yaml files may hold. Read strictly, so
// a transformer added there (which these tests would not apply) fails them.
type kustomization struct {
	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace"`
		Files     []string `json:"files"`
	} `json:"configMapGenerator"`
}

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("%s/kustomization.yaml: kind %q, resources %v", dir, k.Kind, k.Resources)
	}
	return k
}

// readConfig returns the objects `kubectl apply -k dir` applies: those of the files and
// folders its kustomization lists, in order (generated ConfigMaps left out).
func readConfig(t *testing.T, dir string) []configObject {
	t.Helper()
	var out []configObject
	for _, r := range readKustomization(t, dir).Resources {
		path := filepath.Join(dir, r)
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			out = append(out, readConfig(t, path)...)
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeManifests(t, path, f)...)
		_ = f.Close()
	}
	return out
}

// decodeManifests reads the YAML documents of r (from file), strictly.
func decodeManifests(t *testing.T, file string, r io.Reader) []configObject {
	t.Helper()
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []configObject
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // comments only
		}
		obj, _, err := strict.Decode(j, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, configObject{file: file, json: j, obj: obj})
	}
}

// applyConfig server-side applies config objects as the cluster's admin (dryRun: the
// API server validates and admits them, and stores nothing).
func applyConfig(t *testing.T, cs kubernetes.Interface, objs []configObject, dryRun bool) {
	t.Helper()
	ctx := t.Context()
	force := true
	opts := metav1.PatchOptions{FieldManager: "berth-test", Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		var err error
		switch v := o.obj.(type) {
		case *corev1.Namespace:
			_, err = cs.CoreV1().Namespaces().Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *corev1.Service:
			_, err = cs.CoreV1().Services(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *corev1.PersistentVolumeClaim:
			_, err = cs.CoreV1().PersistentVolumeClaims(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		case *policyv1.PodDisruptionBudget:
			_, err = cs.PolicyV1().PodDisruptionBudgets(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, o.json, opts)
		default:
			t.Fatalf("%s: no test knows how to apply a %T", o.file, o.obj)
		}
		if err != nil {
			t.Fatalf("%s: apply: %v", o.file, err)
		}
	}
}

// providerAccount is config/rbac's service account; every binding there names it.
func providerAccount(t *testing.T, objs []configObject) *corev1.ServiceAccount {
	t.Helper()
	var sa *corev1.ServiceAccount
	for _, o := range objs {
		if v, ok := o.obj.(*corev1.ServiceAccount); ok {
			if sa != nil {
				t.Fatalf("%s: a second service account", o.file)
			}
			sa = v
		}
	}
	if sa == nil {
		t.Fatal("config/rbac has no service account")
	}
	for _, o := range objs {
		if b, ok := o.obj.(*rbacv1.ClusterRoleBinding); ok {
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind || b.Subjects[0].Name != sa.Name || b.Subjects[0].Namespace != sa.Namespace {
				t.Fatalf("%s: binding %s is not to %s/%s: %+v", o.file, b.Name, sa.Namespace, sa.Name, b.Subjects)
			}
		}
	}
	return sa
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdNames are the names of the CRDs in config/crd.
func crdNames(t *testing.T) []string {
	t.Helper()
	files, err := crd.Files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		b, err := crd.Files.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := yaml.Unmarshal(b, &c); err != nil || c.Metadata.Name == "" {
			t.Fatalf("config/crd/%s: %v", f.Name(), err)
		}
		names = append(names, c.Metadata.Name)
	}
	slices.Sort(names)
	return names
}

// TestDeployExample keeps config/deploy consistent with config/rbac and with berth: its
// provider.yaml is valid and is where the Deployment says; the home, the keyring file,
// the ports and the service account agree; and the API server accepts every object (a
// server-side dry run, after config/rbac is applied).
func TestDeployExample(t *testing.T) {
	const dir = "../../config/deploy"
	kz := readKustomization(t, dir)
	if !slices.Contains(kz.Resources, "../rbac") {
		t.Fatalf("config/deploy does not include config/rbac: %v", kz.Resources)
	}
	rbac := readConfig(t, "../../config/rbac")
	sa := providerAccount(t, rbac)
	if len(kz.ConfigMapGenerator) != 1 || !slices.Equal(kz.ConfigMapGenerator[0].Files, []string{"provider.yaml"}) || kz.ConfigMapGenerator[0].Namespace != sa.Namespace {
		t.Fatalf("config map generator %+v", kz.ConfigMapGenerator)
	}
	configMap := kz.ConfigMapGenerator[0].Name
	cfg, err := config.LoadProviderConfig(filepath.Join(dir, "provider.yaml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Kubeconfig != "" {
		t.Fatalf("kubeconfig %q: the example runs in-cluster", cfg.Kubeconfig)
	}

	all := readConfig(t, dir)
	var own []configObject // config/deploy's own, after config/rbac's
	var dep *appsv1.Deployment
	var services []*corev1.Service
	for _, o := range all {
		if strings.HasPrefix(o.file, dir+"/") {
			own = append(own, o)
		}
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			dep = v
		case *corev1.Service:
			services = append(services, v)
		}
		if m, ok := o.obj.(metav1.Object); ok && m.GetNamespace() != "" && m.GetNamespace() != sa.Namespace {
			t.Errorf("%s: %s in namespace %q, not %q", o.file, m.GetName(), m.GetNamespace(), sa.Namespace)
		}
	}
	if dep == nil {
		t.Fatal("config/deploy has no Deployment")
	}
	spec := dep.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name || dep.Namespace != sa.Namespace || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Fatalf("deployment: account %q in %q, replicas %v, strategy %q", spec.ServiceAccountName, dep.Namespace, dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	// mountedAt is the volume a container mounts at path.
	mountedAt := func(c corev1.Container, path string) corev1.Volume {
		for _, m := range c.VolumeMounts {
			if m.MountPath == path {
				return volumes[m.Name]
			}
		}
		t.Fatalf("container %s mounts nothing at %s", c.Name, path)
		return corev1.Volume{}
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
		t.Fatalf("%d containers, %d init containers", len(spec.Containers), len(spec.InitContainers))
	}
	berth, keyring := spec.Containers[0], spec.InitContainers[0]
	// The config file is the generated ConfigMap's provider.yaml.
	i := slices.Index(berth.Args, "--config")
	if i < 0 || i+1 >= len(berth.Args) || !slices.Equal(berth.Args[:2], []string{"provider", "run"}) {
		t.Fatalf("args %q", berth.Args)
	}
	if v := mountedAt(berth, filepath.Dir(berth.Args[i+1])); v.ConfigMap == nil || v.ConfigMap.Name != configMap || filepath.Base(berth.Args[i+1]) != "provider.yaml" {
		t.Fatalf("--config %s is not the config map %s's provider.yaml", berth.Args[i+1], configMap)
	}
	// The home is a persistent volume, and the init container puts the key there under
	// the name `from` says.
	if v := mountedAt(berth, cfg.Home); v.PersistentVolumeClaim == nil {
		t.Fatalf("home %s is not a persistent volume", cfg.Home)
	}
	if v := mountedAt(keyring, cfg.Home); v.PersistentVolumeClaim == nil {
		t.Fatalf("the init container does not mount the home %s", cfg.Home)
	}
	script := strings.Join(keyring.Command, " ")
	if dst := filepath.Join(cfg.Home, "keyring", cfg.From+".json"); !strings.Contains(script, " "+dst) || !strings.Contains(script, "/"+cfg.From+".json ") {
		t.Fatalf("the init container does not copy the key %q to %s: %s", cfg.From, dst, script)
	}
	// The ports are the ones berth listens on, and the Services' targets exist.
	ports := map[string]int32{}
	for _, p := range berth.Ports {
		ports[p.Name] = p.ContainerPort
	}
	metrics := berth.Args[slices.Index(berth.Args, "--metrics-listen")+1]
	for name, addr := range map[string]string{"gateway": cfg.Gateway.Listen, "grpc": cfg.Gateway.GRPCListen, "metrics": metrics} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port != strconv.Itoa(int(ports[name])) {
			t.Errorf("port %s: container %d, berth listens on %q", name, ports[name], addr)
		}
	}
	for _, s := range services {
		for _, p := range s.Spec.Ports {
			if _, ok := ports[p.TargetPort.StrVal]; !ok {
				t.Errorf("service %s: target port %q is not the container's", s.Name, p.TargetPort.String())
			}
		}
	}

	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	applyConfig(t, cs, rbac, false)
	applyConfig(t, cs, own, true)
}

// TestOperationsDefaults keeps the defaults block of docs/operations.md' configuration
// reference equal to config.DefaultProviderConfig.
func TestOperationsDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(doc), "## Configuration reference")
	if !ok {
		t.Fatal("docs/operations.md has no configuration reference")
	}
	_, block, ok := strings.Cut(ref, "```yaml\n")
	if !ok {
		t.Fatal("the configuration reference has no YAML block")
	}
	block, _, _ = strings.Cut(block, "```")
	got, err := config.LoadProviderConfig(testenv.WriteFile(t, "provider.yaml", block), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := config.DefaultProviderConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the documented defaults\n%+v\nare not berth's\n%+v", got, want)
	}
}
