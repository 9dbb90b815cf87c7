package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"berth.dev/berth/internal/inventory"
)

// ownsLabel: the GPU capability labels are the operator's (the cluster's GPUs are one
// fact, whoever describes them), and the storage labels of the classes it offers;
// another operator's classes' labels are left alone.
func (c *Controller) ownsLabel(key string) bool {
	if inventory.IsGPULabel(key) {
		return true
	}
	return slices.ContainsFunc(c.cfg.Storage, func(s inventory.StorageClass) bool { return inventory.StorageLabel(s.Class) == key })
}

// labelNodes brings every node's capability labels to want; labelled are the nodes
// whose labels are now as wanted.
func (c *Controller) labelNodes(ctx context.Context, want map[string]map[string]string) (labelled map[string]bool, _ error) {
	labelled = map[string]bool{}
	var errs []error
	for _, o := range c.nodes.GetStore().List() {
		n, ok := o.(*corev1.Node)
		if !ok {
			continue
		}
		patch := inventory.LabelChanges(n.Labels, want[n.Name], c.ownsLabel)
		if len(patch) == 0 {
			labelled[n.Name] = true
			continue
		}
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
		if err != nil {
			return labelled, err
		}
		_, err = c.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: FieldManager})
		c.m.ObserveWrite("label", err)
		switch {
		case apierrors.IsNotFound(err):
			// Gone since the cache saw it: its event follows.
		case err != nil:
			errs = append(errs, fmt.Errorf("label node %s: %w", n.Name, err))
		default:
			labelled[n.Name] = true
			c.log.InfoContext(ctx, "node capability labels updated", slog.String("node", n.Name), slog.Int("changes", len(patch)))
		}
	}
	return labelled, errors.Join(errs...)
}
