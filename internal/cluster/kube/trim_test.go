package kube

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/market"
)

// TestTrimKeepsWhatIsRead: what the inventory and the monitor compute from a trimmed
// object equals what they compute from the whole one, and the bulk is gone.
func TestTrimKeepsWhatIsRead(t *testing.T) {
	id := market.LeaseID{Owner: "akash1trim", DSeq: 3, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	labels := cluster.LeaseLabels(id)
	labels[LabelService] = "web"
	bulk := metav1.ObjectMeta{
		Name: "web-1", Namespace: LeaseNamespace(id), Labels: labels, UID: "u1", ResourceVersion: "42",
		CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
		Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "berth", Operation: metav1.ManagedFieldsOperationApply}},
		OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc"}},
	}
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	pod := &corev1.Pod{ObjectMeta: bulk,
		Spec: corev1.PodSpec{
			NodeName: "n1", Overhead: rl("10m", "1Mi"),
			Containers: []corev1.Container{
				{Name: "web", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Resources: corev1.ResourceRequirements{Requests: rl("250m", "128Mi"), Limits: rl("1", "1Gi")}},
				{Name: "side", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")}},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl("2", "16Mi")}}},
			Volumes:        []corev1.Volume{{Name: "v"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Image: "nginx", ImageID: "sha256:x",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}},
		},
	}
	tp := mustTrim[*corev1.Pod](t, pod)
	if podRequests(tp) != podRequests(pod) || !reflect.DeepEqual(podErrors(tp), podErrors(pod)) || podKey(tp) != podKey(pod) {
		t.Fatalf("pod: requests %+v / %+v, errors %v / %v", podRequests(tp), podRequests(pod), podErrors(tp), podErrors(pod))
	}
	if l, ok := cluster.LeaseFromLabels(tp.Labels); !ok || l != id || !tp.CreationTimestamp.Equal(&pod.CreationTimestamp) {
		t.Fatalf("pod meta %+v", tp.ObjectMeta)
	}
	if tp.ManagedFields != nil || tp.Annotations != nil || tp.OwnerReferences != nil || tp.Spec.Volumes != nil || tp.Spec.Containers[0].Env != nil || tp.Spec.Containers[0].Resources.Limits != nil {
		t.Fatalf("pod kept bulk: %+v", tp)
	}

	dep := &appsv1.Deployment{ObjectMeta: bulk, Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Template: pod2template(pod)},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, ReadyReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}}}}
	td := mustTrim[*appsv1.Deployment](t, dep)
	if replicas(td.Spec.Replicas) != 2 || td.Status.AvailableReplicas != 1 || !reflect.DeepEqual(deploymentErrors(td), deploymentErrors(dep)) || td.Spec.Template.Spec.Containers != nil {
		t.Fatalf("deployment %+v", td)
	}
	sts := &appsv1.StatefulSet{ObjectMeta: bulk, Spec: appsv1.StatefulSetSpec{Replicas: new(int32(3)), Template: pod2template(pod)}, Status: appsv1.StatefulSetStatus{AvailableReplicas: 2, ReadyReplicas: 3}}
	ts := mustTrim[*appsv1.StatefulSet](t, sts)
	if replicas(ts.Spec.Replicas) != 3 || !reflect.DeepEqual(ts.Status, sts.Status) || ts.Spec.Template.Spec.Containers != nil {
		t.Fatalf("statefulset %+v", ts)
	}

	svc := &corev1.Service{ObjectMeta: bulk, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: labels, ClusterIP: "10.96.0.9",
		Ports: []corev1.ServicePort{{Name: "p9000", Protocol: corev1.ProtocolUDP, Port: 9000, NodePort: 31000}}}}
	tsv := mustTrim[*corev1.Service](t, svc)
	if tsv.Spec.Type != svc.Spec.Type || !reflect.DeepEqual(tsv.Spec.Ports, svc.Spec.Ports) || tsv.Spec.Selector != nil {
		t.Fatalf("service %+v", tsv)
	}

	class := "beta3"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: bulk, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}}
	tc := mustTrim[*corev1.PersistentVolumeClaim](t, pvc)
	if *tc.Spec.StorageClassName != class || !reflect.DeepEqual(tc.Spec.Resources.Requests, pvc.Spec.Resources.Requests) || !reflect.DeepEqual(tc.Status.Capacity, pvc.Status.Capacity) {
		t.Fatalf("pvc %+v", tc)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"nvidia.com/gpu.product": "A100"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: rl("8", "32Gi"), Images: []corev1.ContainerImage{{Names: []string{"nginx"}}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is posting ready status"}}}}
	tn := mustTrim[*corev1.Node](t, node)
	if schedulable(tn) != schedulable(node) || amounts(tn.Status.Allocatable) != amounts(node.Status.Allocatable) || tn.Labels["nvidia.com/gpu.product"] != "A100" ||
		tn.Status.Images != nil || len(tn.Status.Conditions) != 1 {
		t.Fatalf("node %+v", tn)
	}
	node.Spec.Taints = nil
	if !schedulable(mustTrim[*corev1.Node](t, node)) {
		t.Fatal("a ready node without taints trimmed to unschedulable")
	}

	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.abc", Namespace: LeaseNamespace(id), ManagedFields: bulk.ManagedFields},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", UID: "u1"}, Type: corev1.EventTypeWarning, Reason: "BackOff", Message: "back-off pulling",
		LastTimestamp: metav1.NewTime(time.Unix(1700000100, 0)), Source: corev1.EventSource{Component: "kubelet"}}
	te := mustTrim[*corev1.Event](t, ev)
	if te.Reason != ev.Reason || te.Message != ev.Message || te.Type != ev.Type || te.InvolvedObject.Kind != "Pod" || te.InvolvedObject.Name != "web-1" ||
		!te.LastTimestamp.Equal(&ev.LastTimestamp) || te.ManagedFields != nil || te.Source.Component != "" {
		t.Fatalf("event %+v", te)
	}
	ev.Namespace = "kube-system"
	if te := mustTrim[*corev1.Event](t, ev); te.Message != "" || te.Name != ev.Name || te.Namespace != "kube-system" {
		t.Fatalf("event outside lease namespaces kept %+v", te)
	}
	// Other objects, and tombstones, pass through.
	cm := &corev1.ConfigMap{ObjectMeta: bulk}
	if got, _ := trim(cm); got != any(cm) {
		t.Fatal("a config map was changed")
	}
}

func mustTrim[T any](t *testing.T, o any) T {
	t.Helper()
	got, err := trim(o)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := got.(T)
	if !ok {
		t.Fatalf("trim returned %T", got)
	}
	return v
}

func pod2template(p *corev1.Pod) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
}
