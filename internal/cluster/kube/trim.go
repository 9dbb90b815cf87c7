package kube

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Informer caches hold every watched object for as long as it exists, and berth
// watches every node and pod of the cluster. trim keeps of each object only what the
// inventory's handlers and the monitor's listers read — no managed fields,
// annotations, volumes, environment or probes — which is most of an object's memory.
// It is the transform of every informer factory here: a field read from an informer
// object must be kept by its trim function.
func trim(o any) (any, error) {
	switch v := o.(type) {
	case *corev1.Node:
		return trimNode(v), nil
	case *corev1.Pod:
		return trimPod(v), nil
	case *corev1.Service:
		return trimService(v), nil
	case *corev1.PersistentVolumeClaim:
		return trimPVC(v), nil
	case *appsv1.Deployment:
		return trimDeployment(v), nil
	case *appsv1.StatefulSet:
		return trimStatefulSet(v), nil
	case *corev1.Event:
		return trimEvent(v), nil
	}
	return o, nil
}

// trimMeta keeps identity, labels and the timestamps.
func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
}

func trimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: trimMeta(&n.ObjectMeta)}
	out.Spec.Unschedulable, out.Spec.Taints = n.Spec.Unschedulable, n.Spec.Taints
	out.Status.Allocatable = n.Status.Allocatable
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out
}

func trimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: trimMeta(&p.ObjectMeta)}
	out.Spec.NodeName, out.Spec.Overhead = p.Spec.NodeName, p.Spec.Overhead
	requests := func(cs []corev1.Container) []corev1.Container {
		if len(cs) == 0 {
			return nil
		}
		out := make([]corev1.Container, len(cs))
		for i := range cs {
			out[i] = corev1.Container{Name: cs[i].Name, Image: cs[i].Image, Resources: corev1.ResourceRequirements{Requests: cs[i].Resources.Requests}}
		}
		return out
	}
	out.Spec.Containers, out.Spec.InitContainers = requests(p.Spec.Containers), requests(p.Spec.InitContainers)
	out.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	if len(p.Status.ContainerStatuses) > 0 {
		out.Status.ContainerStatuses = make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
		for i := range p.Status.ContainerStatuses {
			s := &p.Status.ContainerStatuses[i]
			out.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount, State: corev1.ContainerState{Waiting: s.State.Waiting}}
		}
	}
	return out
}

func trimService(s *corev1.Service) *corev1.Service {
	out := &corev1.Service{ObjectMeta: trimMeta(&s.ObjectMeta)}
	out.Spec.Type = s.Spec.Type
	out.Spec.Ports = make([]corev1.ServicePort, len(s.Spec.Ports))
	for i, p := range s.Spec.Ports {
		out.Spec.Ports[i] = corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort}
	}
	return out
}

func trimPVC(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	out := &corev1.PersistentVolumeClaim{ObjectMeta: trimMeta(&c.ObjectMeta)}
	out.Spec.StorageClassName = c.Spec.StorageClassName
	out.Spec.Resources.Requests = c.Spec.Resources.Requests
	out.Status.Capacity = c.Status.Capacity
	return out
}

func trimDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	out := &appsv1.Deployment{ObjectMeta: trimMeta(&d.ObjectMeta)}
	out.Spec.Replicas = d.Spec.Replicas
	out.Status = d.Status
	return out
}

func trimStatefulSet(s *appsv1.StatefulSet) *appsv1.StatefulSet {
	out := &appsv1.StatefulSet{ObjectMeta: trimMeta(&s.ObjectMeta)}
	out.Spec.Replicas = s.Spec.Replicas
	out.Status = s.Status
	return out
}

// trimEvent keeps what a lease's recent events show; events outside lease namespaces
// (the monitor ignores them) keep only their names.
func trimEvent(e *corev1.Event) *corev1.Event {
	out := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, ResourceVersion: e.ResourceVersion}}
	if !strings.HasPrefix(e.Namespace, leaseNamespacePrefix) {
		return out
	}
	out.Type, out.Reason, out.Message = e.Type, e.Reason, e.Message
	out.InvolvedObject = corev1.ObjectReference{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name}
	out.LastTimestamp, out.EventTime = e.LastTimestamp, e.EventTime
	return out
}
