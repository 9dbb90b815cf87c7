package testenv

import (
	"bytes"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// configResources are the kinds of config/'s RBAC files.
var configResources = map[string]schema.GroupVersionResource{
	"Namespace":          {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
	"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
}

// ApplyFile server-side applies every object of a multi-document YAML file of config/
// (namespaces, service accounts and RBAC), as kubectl apply would.
func ApplyFile(t testing.TB, dc dynamic.Interface, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range bytes.SplitSeq(b, []byte("\n---\n")) {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r, ok := configResources[u.GetKind()]
		if !ok {
			t.Fatalf("%s: no resource for kind %s", path, u.GetKind())
		}
		opts := metav1.PatchOptions{FieldManager: "berth-test", Force: new(true)}
		if ns := u.GetNamespace(); ns != "" {
			_, err = dc.Resource(r).Namespace(ns).Patch(t.Context(), u.GetName(), types.ApplyPatchType, j, opts)
		} else {
			_, err = dc.Resource(r).Patch(t.Context(), u.GetName(), types.ApplyPatchType, j, opts)
		}
		if err != nil {
			t.Fatalf("%s: apply %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}
