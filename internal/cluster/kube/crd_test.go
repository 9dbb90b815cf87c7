package kube

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/testenv"
)

// TestInstallCRDsRefusedRead: an identity that may apply CRDs but not read them gets
// an error saying so, instead of waiting forever for them to be established.
func TestInstallCRDsRefusedRead(t *testing.T) {
	k := testenv.Cluster(t)
	cs := k.Clientset(t)
	ctx := t.Context()
	const user = "crd-writer-only"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create", "patch"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, user, metav1.DeleteOptions{})
	})
	rc := k.RESTConfig()
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "the refusal is reported", func() error {
		err := InstallCRDs(ctx, dc)
		if err == nil || !strings.Contains(err.Error(), "needs get on customresourcedefinitions") {
			return fmt.Errorf("InstallCRDs = %w", err)
		}
		return nil
	})
}
