package kube

import (
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/ownership"
)

// Informer caches hold every watched object for as long as it exists, and berth
// watches every node and pod of the cluster. toView is the transform of every typed
// informer of the Cache: it turns each object into a view holding what berth computes
// from it, worked out once for every reader, and the names the caches index by. A
// pod's view is a few hundred bytes where the pod is kilobytes (managed fields,
// annotations, volumes, environment). Handlers and indexers therefore see views, never
// Kubernetes objects. An object is a lease's only when it is owner's (its provider and
// chain): other providers' pods and volumes on a shared cluster are ordinary usage.
func toView(o any, owner ownership.Owner) (any, error) {
	switch v := o.(type) {
	case *corev1.Node:
		return newNodeView(v), nil
	case *corev1.Pod:
		return newPodView(v, owner), nil
	case *corev1.Service:
		sv := newServiceView(v, owner)
		sv.drift = driftOfObject(&sv.view, "service", v.Labels, v.Spec)
		return sv, nil
	case *corev1.PersistentVolumeClaim:
		return newPVCView(v, owner), nil
	case *appsv1.Deployment:
		w := newWorkloadView(&v.ObjectMeta, owner, v.Spec.Replicas, v.Status.AvailableReplicas, v.Status.ReadyReplicas)
		w.replicas, w.updated, w.observedGeneration = v.Status.Replicas, v.Status.UpdatedReplicas, v.Status.ObservedGeneration
		w.errors = deploymentErrors(v)
		w.drift = driftOfObject(&w.view, "deployment", v.Labels, v.Spec)
		return w, nil
	case *appsv1.StatefulSet:
		w := newWorkloadView(&v.ObjectMeta, owner, v.Spec.Replicas, v.Status.AvailableReplicas, v.Status.ReadyReplicas)
		w.replicas, w.updated, w.observedGeneration = v.Status.Replicas, v.Status.UpdatedReplicas, v.Status.ObservedGeneration
		w.drift = driftOfObject(&w.view, "statefulset", v.Labels, v.Spec)
		return w, nil
	case *corev1.Event:
		return newEventView(v), nil
	}
	if dv := newDriftView(o, owner); dv != nil {
		return dv, nil
	}
	return o, nil // already a view (a transform may see its own output again)
}

// view is what every view shares: the identity the informer's store keys and indexes
// by, and the lease and manifest service of a berth object (from its labels).
type view struct {
	objectMeta
	lease   *market.LeaseID // nil: not one of our leases' objects
	service string
}

func newView(m *metav1.ObjectMeta, owner ownership.Owner) view {
	v := view{objectMeta: objectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}}
	if id, ok := owner.LeaseOf(m.Labels); ok && m.Namespace == LeaseNamespace(id) {
		v.lease, v.service = &id, m.Labels[LabelService]
	}
	return v
}

func (v *view) key() string { return v.Namespace + "/" + v.Name }

func (v *view) base() *view { return v }

type nodeView struct {
	view
	node cluster.Node
}

func newNodeView(n *corev1.Node) *nodeView {
	return &nodeView{view: view{objectMeta: objectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}}, node: NodeOf(n)}
}

// NodeOf is a node as the inventory counts it: its allocatable resources, the model
// of its GPUs (inventory.DescribeGPU: from GPU and node feature discovery's labels,
// with only the GPUs it offers counted, and only when the node carries the capability
// labels GPU pods' affinity selects on), and whether it takes pods (Ready, not
// cordoned, no NoSchedule or NoExecute taint).
func NodeOf(n *corev1.Node) cluster.Node {
	ok, _ := inventory.Schedulable(n)
	node := cluster.Node{Name: n.Name, Schedulable: ok, GPUOnly: inventory.GPUOnly(n), Allocatable: amounts(n.Status.Allocatable)}
	if g := inventory.DescribeGPU(n.Labels, n.Status.Allocatable, inventory.GPUOptions{}); g != nil {
		node.Allocatable.GPUs = 0
		if g.Offered > 0 && inventory.GPULabelled(n.Labels, g) {
			node.Allocatable.GPUs, node.GPU = g.Offered, inventory.Model(g)
		}
	}
	return node
}

func (v *nodeView) DeepCopyObject() runtime.Object { c := *v; return &c }

type podView struct {
	view
	node     string
	requests cluster.Amounts
	// finished: Succeeded or Failed, holding nothing.
	finished bool
	created  time.Time
	// errors are why the pod is not running (podErrors).
	errors []string
	// restarts and exits are its containers' restarts and latest ended runs, for a
	// lease's pod not being deleted (containerRuns).
	restarts int32
	exits    []containerExit
}

// containerExit is how the latest ended run of a container of a pod did.
type containerExit struct {
	deploy.ContainerExit
	id    string // the runtime's ID of that run
	limit string // the container's memory limit ("" without one)
}

func newPodView(p *corev1.Pod, owner ownership.Owner) *podView {
	v := &podView{view: newView(&p.ObjectMeta, owner), node: p.Spec.NodeName, requests: podRequests(p),
		finished: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
		created:  p.CreationTimestamp.Time, errors: podErrors(p)}
	if v.lease != nil && p.DeletionTimestamp == nil {
		v.restarts, v.exits = containerRuns(p)
	}
	return v
}

// containerRuns sums the restarts of a pod's containers and reports how each one's
// latest ended run did: the run that just ended, else the one before the current.
func containerRuns(p *corev1.Pod) (restarts int32, exits []containerExit) {
	for i := range p.Status.ContainerStatuses {
		c := &p.Status.ContainerStatuses[i]
		restarts += c.RestartCount
		t := c.State.Terminated
		if t == nil {
			t = c.LastTerminationState.Terminated
		}
		if t == nil {
			continue
		}
		e := containerExit{ContainerExit: deploy.ContainerExit{Pod: p.Name, Container: c.Name, Reason: t.Reason, ExitCode: t.ExitCode, Time: t.FinishedAt.Time}, id: t.ContainerID}
		for j := range p.Spec.Containers {
			if sc := &p.Spec.Containers[j]; sc.Name == c.Name {
				if m, ok := sc.Resources.Limits[corev1.ResourceMemory]; ok {
					e.limit = m.String()
				}
			}
		}
		exits = append(exits, e)
	}
	return restarts, exits
}

func (v *podView) DeepCopyObject() runtime.Object {
	c := *v
	c.errors = slices.Clone(v.errors)
	c.exits = slices.Clone(v.exits)
	return &c
}

type servicePort struct {
	port, nodePort int32
	proto          corev1.Protocol
}

type serviceView struct {
	view
	drift
	// nodePorts: a NodePort or LoadBalancer service, whose ports with a node port
	// take from the node port pool.
	nodePorts bool
	ports     []servicePort
	// lbIPs are a LoadBalancer service's addresses (status.loadBalancer.ingress).
	lbIPs []string
}

func newServiceView(s *corev1.Service, owner ownership.Owner) *serviceView {
	v := &serviceView{view: newView(&s.ObjectMeta, owner), nodePorts: s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer}
	for _, p := range s.Spec.Ports {
		v.ports = append(v.ports, servicePort{port: p.Port, nodePort: p.NodePort, proto: p.Protocol})
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				v.lbIPs = append(v.lbIPs, in.IP)
			}
		}
	}
	return v
}

func (v *serviceView) DeepCopyObject() runtime.Object {
	c := *v
	c.ports = slices.Clone(v.ports)
	c.lbIPs = slices.Clone(v.lbIPs)
	return &c
}

type pvcView struct {
	view
	class string // "": no storage class, not counted
	size  int64  // the larger of the request and the provisioned capacity
}

func newPVCView(c *corev1.PersistentVolumeClaim, owner ownership.Owner) *pvcView {
	v := &pvcView{view: newView(&c.ObjectMeta, owner)}
	if c.Spec.StorageClassName == nil {
		return v
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if got, ok := c.Status.Capacity[corev1.ResourceStorage]; ok && got.Cmp(size) > 0 {
		size = got
	}
	v.class, v.size = *c.Spec.StorageClassName, size.Value()
	return v
}

func (v *pvcView) DeepCopyObject() runtime.Object { c := *v; return &c }

// workloadView is a Deployment or a StatefulSet.
type workloadView struct {
	view
	drift
	total, available, ready int32
	// replicas and updated are the workload's status counts: pods that exist, and
	// those of the current template.
	replicas, updated  int32
	observedGeneration int64
	errors             []string
}

func newWorkloadView(m *metav1.ObjectMeta, owner ownership.Owner, wanted *int32, available, ready int32) *workloadView {
	return &workloadView{view: newView(m, owner), total: replicas(wanted), available: available, ready: ready}
}

func (v *workloadView) DeepCopyObject() runtime.Object {
	c := *v
	c.errors = slices.Clone(v.errors)
	return &c
}

// eventView holds an event in a lease namespace; events elsewhere (the monitor
// ignores them) keep only their names.
type eventView struct {
	view
	event *deploy.Event
}

func newEventView(e *corev1.Event) *eventView {
	v := &eventView{view: view{objectMeta: objectMeta{Name: e.Name, Namespace: e.Namespace, ResourceVersion: e.ResourceVersion}}}
	if !strings.HasPrefix(e.Namespace, leaseNamespacePrefix) {
		return v
	}
	ev := newEvent(e)
	v.event = &ev
	return v
}

func (v *eventView) DeepCopyObject() runtime.Object {
	c := *v
	if v.event != nil {
		e := *v.event
		c.event = &e
	}
	return &c
}

// hostView is a ProviderHost as the monitor keeps it: its lease and its status.
type hostView struct {
	view
	drift
	status deploy.HostStatus
}

// newHostView reads a ProviderHost from the dynamic informer.
func newHostView(o any, owner ownership.Owner) any {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o // already a view
	}
	m := metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion(), Labels: u.GetLabels()}
	v := &hostView{view: newView(&m, owner)}
	v.drift = driftOfObject(&v.view, u.GetKind(), m.Labels, u.Object["spec"])
	v.status.Hostname, _, _ = unstructured.NestedString(u.Object, "spec", "hostname")
	v.status.Service, _, _ = unstructured.NestedString(u.Object, "spec", "service")
	v.status.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	v.status.Message, _, _ = unstructured.NestedString(u.Object, "status", "message")
	return v
}

func (v *hostView) DeepCopyObject() runtime.Object { c := *v; return &c }

// leasedIPView is a ProviderLeasedIP as the monitor keeps it.
type leasedIPView struct {
	view
	drift
	status deploy.LeasedIPStatus
}

// newLeasedIPView reads a ProviderLeasedIP from the dynamic informer.
func newLeasedIPView(o any, owner ownership.Owner) any {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o
	}
	m := metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion(), Labels: u.GetLabels()}
	v := &leasedIPView{view: newView(&m, owner)}
	v.drift = driftOfObject(&v.view, u.GetKind(), m.Labels, u.Object["spec"])
	str := func(f ...string) string { s, _, _ := unstructured.NestedString(u.Object, f...); return s }
	num := func(f ...string) int32 {
		n, _, _ := unstructured.NestedInt64(u.Object, f...)
		return int32(min(max(n, 0), 65535))
	}
	v.status = deploy.LeasedIPStatus{
		Service: str("spec", "service"), Endpoint: str("spec", "name"), Port: num("spec", "port"), ExternalPort: num("spec", "externalPort"),
		Protocol: str("spec", "protocol"), IP: str("status", "ip"), Phase: str("status", "phase"), Message: str("status", "message"),
	}
	return v
}

func (v *leasedIPView) DeepCopyObject() runtime.Object { c := *v; return &c }
