package localenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// GPU node labels, as NVIDIA GPU feature discovery publishes them on real clusters.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory" // MiB per GPU
	LabelGPUCount   = "nvidia.com/gpu.count"
	// ResourceGPU is the extended resource NVIDIA's device plugin advertises.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// NodeSpec describes one simulated node.
type NodeSpec struct {
	Name string
	// CPU and Memory are quantities ("8", "32Gi"); empty means 8 CPUs and 32Gi.
	CPU, Memory string
	// EphemeralStorage is a quantity; empty means 200Gi.
	EphemeralStorage string
	// Pods is the pod capacity; zero means 110.
	Pods int
	// GPUs is the number of nvidia.com/gpu devices; GPUProduct and GPUMemoryMiB label them.
	GPUs         int
	GPUProduct   string
	GPUMemoryMiB int
	Labels       map[string]string
	// Resources are more allocatable resources, quantities by name (extended resources
	// such as MIG devices: "nvidia.com/mig-1g.10gb": "7"); they override the above.
	Resources map[corev1.ResourceName]string
}

// Object is the Node object AddNodes creates for s (without the status conditions kwok
// adds once the node runs), validating quantities. Pure: callers may use it to see the
// simulated nodes as the cluster will report them.
func (s NodeSpec) Object() (*corev1.Node, error) {
	if s.Name == "" {
		return nil, errors.New("node spec: name is empty")
	}
	qty := func(field, v, def string) (resource.Quantity, error) {
		if v == "" {
			v = def
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return q, fmt.Errorf("node %s: %s %q: %w", s.Name, field, v, err)
		}
		if q.Sign() <= 0 {
			return q, fmt.Errorf("node %s: %s %q must be positive", s.Name, field, v)
		}
		return q, nil
	}
	cpu, err := qty("cpu", s.CPU, "8")
	if err != nil {
		return nil, err
	}
	mem, err := qty("memory", s.Memory, "32Gi")
	if err != nil {
		return nil, err
	}
	eph, err := qty("ephemeral storage", s.EphemeralStorage, "200Gi")
	if err != nil {
		return nil, err
	}
	pods := s.Pods
	if pods == 0 {
		pods = 110
	}
	if pods < 0 || s.GPUs < 0 || s.GPUMemoryMiB < 0 {
		return nil, fmt.Errorf("node %s: pods, GPUs and GPU memory must not be negative", s.Name)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:              cpu,
		corev1.ResourceMemory:           mem,
		corev1.ResourceEphemeralStorage: eph,
		corev1.ResourcePods:             *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	labels := map[string]string{
		corev1.LabelHostname:   s.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "kwok",
	}
	if s.GPUs > 0 {
		if s.GPUProduct == "" {
			return nil, fmt.Errorf("node %s: %d GPUs need a GPU product", s.Name, s.GPUs)
		}
		res[ResourceGPU] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
		labels[LabelGPUProduct] = s.GPUProduct
		labels[LabelGPUCount] = strconv.Itoa(s.GPUs)
		if s.GPUMemoryMiB > 0 {
			labels[LabelGPUMemory] = strconv.Itoa(s.GPUMemoryMiB)
		}
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for name, v := range s.Resources {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("node %s: resource %s %q: want a quantity, 0 or more", s.Name, name, v)
		}
		res[name] = q
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue},
		},
		// Nodes accept status on create: kwok keeps capacity and allocatable as given.
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}, nil
}

// AddNodes creates simulated nodes (16 at a time), or makes existing ones of the same
// names match their specs (a persistent control plane's nodes of an earlier start), and
// waits until each is Ready and schedulable (kwok reports Ready and the node lifecycle
// controller has lifted the not-ready taint).
func (cp *ControlPlane) AddNodes(ctx context.Context, specs ...NodeSpec) error {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	nodes := make([]*corev1.Node, 0, len(specs))
	want := make(map[string]bool, len(specs))
	for _, s := range specs {
		n, err := s.Object()
		if err != nil {
			return err
		}
		if want[n.Name] {
			return fmt.Errorf("node %s: named twice", n.Name)
		}
		nodes = append(nodes, n)
		want[n.Name] = true
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, n := range nodes {
		g.Go(func() error {
			return putNode(gctx, cs, n)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var missing string
	interval := 100 * time.Millisecond
	if len(nodes) > 100 {
		interval = time.Second // a list of many nodes is megabytes
	}
	err = waitFor(ctx, fmt.Sprintf("%d nodes ready", len(nodes)), interval, cp.Err, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if want[list.Items[i].Name] && nodeSchedulable(&list.Items[i]) {
				ready++
			}
		}
		if ready == len(want) {
			return true, nil
		}
		missing = fmt.Sprintf("%d of %d not ready", len(want)-ready, len(want))
		return false, nil
	})
	if err != nil && missing != "" {
		return fmt.Errorf("%w (%s)", err, missing)
	}
	return err
}

func nodeSchedulable(n *corev1.Node) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready || n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return true
}

// DeleteNodes deletes simulated nodes by name; nodes already gone are not an error.
func (cp *ControlPlane) DeleteNodes(ctx context.Context, names ...string) error {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	var errs []error
	for _, n := range names {
		if err := cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete node %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// putNode creates n, or, when a node of its name exists (kept by a persistent control
// plane), gives that one n's labels, annotations, capacity and allocatable, keeping what
// Kubernetes added (taints, conditions, its addresses).
func putNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	_, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		cur.Labels = n.Labels
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		maps.Copy(cur.Annotations, n.Annotations)
		if cur, err = cs.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node %s: %w", n.Name, err)
		}
		cur.Status.Capacity, cur.Status.Allocatable = n.Status.Capacity, n.Status.Allocatable
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node %s status: %w", n.Name, err)
		}
		return nil
	})
}

// SetNodes makes the simulated nodes exactly specs: AddNodes, then every other node kwok
// simulates here deleted (a persistent control plane's nodes that an earlier start had
// and this one does not; their pods go elsewhere or wait). Real nodes are left alone.
func (cp *ControlPlane) SetNodes(ctx context.Context, specs ...NodeSpec) error {
	if err := cp.AddNodes(ctx, specs...); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range list.Items {
		n := &list.Items[i]
		if n.Annotations[kwokNodeAnnotation] != kwokNodeValue || slices.ContainsFunc(specs, func(s NodeSpec) bool { return s.Name == n.Name }) {
			continue
		}
		err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node %s: %w", n.Name, err)
		}
		cp.log.InfoContext(ctx, "deleted a simulated node the cluster no longer has", slog.String("node", n.Name))
	}
	return nil
}
