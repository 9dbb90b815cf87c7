package kube

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
)

// TestViews: each view holds what the inventory and the monitor compute from the whole
// object, and works in an informer's store (keys, namespace index, deep copies).
func TestViews(t *testing.T) {
	id := market.LeaseID{Owner: "akash1view", DSeq: 3, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	labels := testOwner.LeaseLabels(id)
	labels[LabelService] = "web"
	meta := metav1.ObjectMeta{
		Name: "web-1", Namespace: LeaseNamespace(id), Labels: labels, UID: "u1", ResourceVersion: "42",
		CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
		Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "berth", Operation: metav1.ManagedFieldsOperationApply}},
	}
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	pod := &corev1.Pod{ObjectMeta: meta,
		Spec: corev1.PodSpec{
			NodeName: "n1", Overhead: rl("10m", "1Mi"),
			Containers: []corev1.Container{
				{Name: "web", Image: "nginx", Resources: corev1.ResourceRequirements{Requests: rl("250m", "128Mi"), Limits: rl("1", "1Gi")}},
				{Name: "side", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")}},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl("2", "16Mi")}}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}},
		},
	}
	pv := mustView[*podView](t, pod)
	if pv.requests != podRequests(pod) || !reflect.DeepEqual(pv.errors, podErrors(pod)) || pv.node != "n1" || pv.finished ||
		pv.lease == nil || *pv.lease != id || pv.service != "web" || !pv.created.Equal(pod.CreationTimestamp.Time) {
		t.Fatalf("pod view %+v", pv)
	}
	if len(pv.errors) != 2 {
		t.Fatalf("pod errors %v, want unschedulable and image pull", pv.errors)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if !mustView[*podView](t, pod).finished {
		t.Fatal("a succeeded pod is not finished")
	}
	// Lease labels outside the lease's namespace are not the lease's.
	other := pod.DeepCopy()
	other.Namespace = "default"
	if mustView[*podView](t, other).lease != nil {
		t.Fatal("a pod outside its lease's namespace was taken for the lease's")
	}

	dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: new(int32(2))},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, ReadyReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}}}}
	dv := mustView[*workloadView](t, dep)
	if dv.total != 2 || dv.available != 1 || dv.ready != 1 || !reflect.DeepEqual(dv.errors, deploymentErrors(dep)) || len(dv.errors) != 1 {
		t.Fatalf("deployment view %+v", dv)
	}
	sts := &appsv1.StatefulSet{ObjectMeta: meta, Status: appsv1.StatefulSetStatus{AvailableReplicas: 0, ReadyReplicas: 1}}
	if sv := mustView[*workloadView](t, sts); sv.total != 1 || sv.available != 0 || sv.ready != 1 {
		t.Fatalf("statefulset view %+v (nil replicas means one)", sv)
	}

	svcMeta := meta
	svcMeta.Name = "web"
	svc := &corev1.Service{ObjectMeta: svcMeta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: 9000, NodePort: 31000}, {Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if v := mustView[*serviceView](t, svc); !v.nodePorts || !reflect.DeepEqual(v.ports, []servicePort{{9000, 31000, corev1.ProtocolUDP}, {80, 0, corev1.ProtocolTCP}}) {
		t.Fatalf("service view %+v", v)
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if mustView[*serviceView](t, svc).nodePorts {
		t.Fatal("a ClusterIP service takes node ports")
	}

	class := "beta3"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}}
	if v := mustView[*pvcView](t, pvc); v.class != class || v.size != 2<<30 {
		t.Fatalf("pvc view %+v (the provisioned 2Gi is larger than the request)", v)
	}
	pvc.Spec.StorageClassName = nil
	if v := mustView[*pvcView](t, pvc); v.class != "" {
		t.Fatalf("pvc without a class %+v", v)
	}

	gpuRes := rl("8", "32Gi")
	gpuRes[ResourceGPU] = resource.MustParse("4")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: gpuRes, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	// Without the capability labels GPU pods' affinity selects on, its GPUs are not
	// offered; with them, they are.
	if nv := mustView[*nodeView](t, node); nv.node.Allocatable.GPUs != 0 || nv.node.GPU != (gpu.Model{}) || nv.node.Allocatable.CPU != 8000 {
		t.Fatalf("unlabelled GPU node view %+v", nv.node)
	}
	wantGPU := gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}
	for _, k := range inventory.GPUAffinity(wantGPU) {
		node.Labels[k] = "true"
	}
	nv := mustView[*nodeView](t, node)
	if nv.node.Name != "n1" || nv.node.Schedulable || nv.node.Allocatable != amounts(gpuRes) || nv.node.GPU != wantGPU {
		t.Fatalf("node view %+v", nv.node)
	}
	node.Spec.Taints = nil
	if !mustView[*nodeView](t, node).node.Schedulable {
		t.Fatal("a ready node without taints is unschedulable")
	}

	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.abc", Namespace: LeaseNamespace(id)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1"}, Type: corev1.EventTypeWarning, Reason: "BackOff", Message: "back-off pulling",
		LastTimestamp: metav1.NewTime(time.Unix(1700000100, 0))}
	want := deploy.Event{Time: time.Unix(1700000100, 0), Type: "Warning", Reason: "BackOff", Object: "Pod/web-1", Message: "back-off pulling"}
	if v := mustView[*eventView](t, ev); v.event == nil || !v.event.Time.Equal(want.Time) || v.event.Object != want.Object || v.event.Message != want.Message {
		t.Fatalf("event view %+v", v.event)
	}
	ev.Namespace = "kube-system"
	if v := mustView[*eventView](t, ev); v.event != nil || v.Name != ev.Name {
		t.Fatalf("event outside lease namespaces kept %+v", v.event)
	}

	// Views in a store: keyed and indexed by namespace like the objects; copies are deep.
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pod.Status.Phase = corev1.PodPending
	for _, o := range []any{pv, mustView[*serviceView](t, svc), mustView[*podView](t, other)} {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := store.ByIndex(cache.NamespaceIndex, LeaseNamespace(id)); err != nil || len(got) != 2 {
		t.Fatalf("lease namespace holds %d views (%v)", len(got), err)
	}
	if _, ok, _ := store.GetByKey(LeaseNamespace(id) + "/web-1"); !ok {
		t.Fatal("the pod view is not under its key")
	}
	c, ok := pv.DeepCopyObject().(*podView)
	if !ok {
		t.Fatal("a pod view's copy is not one")
	}
	c.errors[0] = "changed"
	if pv.errors[0] == "changed" {
		t.Fatal("a copy shares its errors")
	}
	// A view given back to the transform, and other objects, pass through.
	if got, _ := toView(pv, testOwner); got != any(pv) {
		t.Fatal("a view was transformed again")
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta}
	if got, _ := toView(cm, testOwner); got != any(cm) {
		t.Fatal("a config map was changed")
	}
	var _ runtime.Object = pv
}

func mustView[T any](t *testing.T, o any) T {
	t.Helper()
	got, err := toView(o, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := got.(T)
	if !ok {
		t.Fatalf("toView returned %T", got)
	}
	return v
}
