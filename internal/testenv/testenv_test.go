package testenv_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func randomSuffix(t *testing.T) string {
	t.Helper()
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// TestClusterRunsWorkloads proves the environment end to end: kwok nodes become Ready,
// the scheduler places a Deployment's replicas on them, kwok makes the pods Running and
// Ready, and a GPU request lands on the only node with GPUs.
func TestClusterRunsWorkloads(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	pool := "pool-" + randomSuffix(t)
	poolLabel := map[string]string{"berth.dev/test-pool": pool}
	nodes := []localenv.NodeSpec{
		{Name: pool + "-cpu-1", CPU: "4", Memory: "16Gi", Labels: poolLabel},
		{Name: pool + "-cpu-2", CPU: "4", Memory: "16Gi", Labels: poolLabel},
		{Name: pool + "-gpu", CPU: "32", Memory: "256Gi", GPUs: 8, GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUMemoryMiB: 81920, Labels: poolLabel},
	}
	if err := kube.AddNodes(ctx, nodes...); err != nil {
		t.Fatalf("add nodes: %v", err)
	}
	t.Cleanup(func() { deleteNodes(t, cs, nodes) })

	gpuNode, err := cs.CoreV1().Nodes().Get(ctx, pool+"-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuNode.Status.Allocatable[localenv.ResourceGPU]; got.Value() != 8 {
		t.Errorf("GPU node allocatable %s = %s, want 8", localenv.ResourceGPU, got.String())
	}
	if got := gpuNode.Labels[localenv.LabelGPUProduct]; got != "NVIDIA-A100-SXM4-80GB" {
		t.Errorf("GPU node label %s = %q", localenv.LabelGPUProduct, got)
	}

	ns := kube.Namespace(t)
	replicas := int32(3)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					NodeSelector: poolLabel,
					Containers: []corev1.Container{{
						Name: "web", Image: "nginx:1.27",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("500m"),
							corev1.ResourceMemory: resource.MustParse("512Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	poolNodes := map[string]bool{}
	for _, n := range nodes {
		poolNodes[n.Name] = true
	}
	pods := waitPods(ctx, t, cs, ns, "app=web", 3)
	for _, p := range pods {
		if !poolNodes[p.Spec.NodeName] {
			t.Errorf("pod %s on node %q, want one of this test's kwok nodes", p.Name, p.Spec.NodeName)
		}
	}
	waitFor(ctx, t, "deployment web available", func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 3 && d.Status.ReadyReplicas == 3, nil
	})

	gpuPod := podWithGPUs("trainer", poolLabel, 2)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, gpuPod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GPU pod: %v", err)
	}
	got := waitPods(ctx, t, cs, ns, "app=trainer", 1)
	if got[0].Spec.NodeName != pool+"-gpu" {
		t.Errorf("GPU pod scheduled on %q, want %q", got[0].Spec.NodeName, pool+"-gpu")
	}
}

// TestUnsatisfiableGPURequestStaysPending checks the scheduler really accounts GPUs: a
// pod asking for more GPUs than any node has is never placed.
func TestUnsatisfiableGPURequestStaysPending(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pool := "pool-" + randomSuffix(t)
	poolLabel := map[string]string{"berth.dev/test-pool": pool}
	nodes := []localenv.NodeSpec{{Name: pool + "-gpu", GPUs: 1, GPUProduct: "NVIDIA-L4", Labels: poolLabel}}
	if err := kube.AddNodes(ctx, nodes...); err != nil {
		t.Fatalf("add nodes: %v", err)
	}
	t.Cleanup(func() { deleteNodes(t, cs, nodes) })
	ns := kube.Namespace(t)
	pod := podWithGPUs("greedy", poolLabel, 2)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The scheduler records its verdict as the PodScheduled=False condition.
	waitFor(ctx, t, "pod marked unschedulable", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "greedy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod was scheduled on %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestPodReadyAgain plays the node lifecycle controller after an API-server outage: it
// marks a running pod not Ready, as it does to every pod of a node whose heartbeats it
// missed. kwok, like the kubelet it stands in for, must report the pod Ready again;
// before berth's pod-ready-again stage the pod stayed not Ready for good and the rollouts
// of the chaos suite stalled.
func TestPodReadyAgain(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pool := "pool-" + randomSuffix(t)
	poolLabel := map[string]string{"berth.dev/test-pool": pool}
	nodes := []localenv.NodeSpec{{Name: pool + "-cpu", CPU: "2", Memory: "4Gi", Labels: poolLabel}}
	if err := kube.AddNodes(ctx, nodes...); err != nil {
		t.Fatalf("add nodes: %v", err)
	}
	t.Cleanup(func() { deleteNodes(t, cs, nodes) })
	ns := kube.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeSelector: poolLabel,
			Containers:   []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPods(ctx, t, cs, ns, "app=web", 1)[0]

	// What the node lifecycle controller's MarkPodsNotReady writes.
	p := running.DeepCopy()
	marked := false
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			marked = true
		}
	}
	if !marked {
		t.Fatalf("running pod has no Ready condition: %+v", p.Status.Conditions)
	}
	notReady, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("mark the pod not ready: %v", err)
	}
	waitFor(ctx, t, "pod Ready again", func() (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.ResourceVersion != notReady.ResourceVersion && got.Status.Phase == corev1.PodRunning && podReady(got), nil
	})
}

// TestRedisPubSub makes a publish/subscribe round trip through a real redis-server.
func TestRedisPubSub(t *testing.T) {
	srv := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer func() { _ = client.Close() }()

	sub := client.Subscribe(ctx, "berth.test")
	defer func() { _ = sub.Close() }()
	if _, err := sub.Receive(ctx); err != nil { // subscription confirmed
		t.Fatalf("subscribe: %v", err)
	}
	n, err := client.Publish(ctx, "berth.test", "lease-created").Result()
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if n != 1 {
		t.Fatalf("publish reached %d subscribers, want 1", n)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if msg.Channel != "berth.test" || msg.Payload != "lease-created" {
		t.Fatalf("received %s/%q, want berth.test/\"lease-created\"", msg.Channel, msg.Payload)
	}
}

// podWithGPUs is a pod labelled app=name requesting gpus nvidia.com/gpu on the
// nodes matching nodeSelector.
func podWithGPUs(name string, nodeSelector map[string]string, gpus int64) *corev1.Pod {
	n := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Containers: []corev1.Container{{
				Name: name, Image: "registry.example/" + name + ":1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{localenv.ResourceGPU: n},
					Limits:   corev1.ResourceList{localenv.ResourceGPU: n},
				},
			}},
		},
	}
}

func waitPods(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(ctx, t, fmt.Sprintf("%d running and ready pods (%s)", want, selector), func() (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for i := range list.Items {
			if p := &list.Items[i]; p.Status.Phase == corev1.PodRunning && podReady(p) {
				pods = append(pods, *p)
			}
		}
		return len(pods) == want && len(list.Items) == want, nil
	})
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitFor polls cond until it holds or ctx ends; an error from cond is reported only
// if the wait times out.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
		case <-tick.C:
		}
	}
}

func deleteNodes(t *testing.T, cs kubernetes.Interface, nodes []localenv.NodeSpec) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete node %s: %v", n.Name, err)
		}
	}
}
