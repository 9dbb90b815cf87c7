package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// EditNode applies edit to the named node and writes it back (its status when status is
// true), reading it again and retrying when the write conflicts: kwok and the node
// lifecycle controller write nodes all the time, so a plain get-then-update loses races.
func EditNode(ctx context.Context, t testing.TB, cs kubernetes.Interface, name string, status bool, edit func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(n)
		if status {
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		} else {
			_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		t.Fatalf("edit node %s: %v", name, err)
	}
}
