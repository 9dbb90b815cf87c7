package kube

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/config/crd"
	"berth.dev/berth/internal/wait"
)

// ErrCRDRefused reports CRDs the API server refuses to let berth read back (RBAC):
// retrying cannot help.
var ErrCRDRefused = errors.New("refused")

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs server-side applies berth's CustomResourceDefinitions and waits until
// the API server serves them (condition Established).
func InstallCRDs(ctx context.Context, dc dynamic.Interface) error {
	files, err := fs.Glob(crd.Files, "*.yaml")
	if err != nil {
		return err
	}
	return ApplyCRDs(ctx, dc, crd.Files, files...)
}

// ApplyCRDs server-side applies the CustomResourceDefinitions in files of fsys, one
// per file, and waits until the API server serves them.
func ApplyCRDs(ctx context.Context, dc dynamic.Interface, fsys fs.FS, files ...string) error {
	force := true
	var names []string
	for _, f := range files {
		y, err := fs.ReadFile(fsys, f)
		if err != nil {
			return err
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			return fmt.Errorf("CRD %s: %w", f, err)
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(j); err != nil {
			return fmt.Errorf("CRD %s: %w", f, err)
		}
		if _, err := dc.Resource(crdResource).Patch(ctx, u.GetName(), types.ApplyPatchType, j, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("install CRD %s: %w", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	for _, name := range names {
		if err := waitEstablished(ctx, dc, name); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, dc dynamic.Interface, name string) error {
	err := wait.Until(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		u, err := dc.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		// Retrying cannot help a refusal: say what is missing (RBAC, usually).
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return wait.Abort(fmt.Errorf("CRD %s installed, but reading it back is %w (the provider needs get on customresourcedefinitions): %w", name, ErrCRDRefused, err))
		}
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return errors.New("no Established condition yet")
	})
	if _, ended := errors.AsType[*wait.Ended](err); ended {
		return fmt.Errorf("CRD %s not established (%w): %w", name, ctx.Err(), err)
	}
	return err
}
