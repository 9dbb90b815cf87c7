// Package invtest helps tests that run no inventory operator: their nodes as it would
// label them.
package invtest

import (
	"maps"
	"testing"

	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
)

// Labelled is spec with the capability labels the inventory operator would put on the
// node (its offered GPUs'), as tests that run no operator need for GPU pods to be
// placed and GPUs to be offered.
func Labelled(t testing.TB, spec localenv.NodeSpec) localenv.NodeSpec {
	t.Helper()
	n, err := spec.Object()
	if err != nil {
		t.Fatal(err)
	}
	labels, invalid := inventory.Capabilities(inventory.DescribeGPU(n.Labels, n.Status.Allocatable, inventory.GPUOptions{}), nil)
	if len(invalid) > 0 {
		t.Fatalf("node %s: labels %q are not valid", spec.Name, invalid)
	}
	spec.Labels = maps.Clone(spec.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	maps.Copy(spec.Labels, labels)
	return spec
}
