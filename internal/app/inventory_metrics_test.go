package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestStatusCountsOnlyNodesThatTakePods: a cordoned node, one tainted NoExecute and
// one not Ready are in GET /status with nothing available and flagged unschedulable,
// and the inventory metrics agree with /status.
func TestStatusCountsOnlyNodesThatTakePods(t *testing.T) {
	k := testenv.Cluster(t)
	ctx := t.Context()
	names := []string{"app-take-ok", "app-take-cordoned", "app-take-tainted"}
	for _, name := range names {
		if err := k.AddNodes(ctx, localenv.NodeSpec{Name: name, CPU: "4", Memory: "16Gi"}); err != nil {
			t.Fatal(err)
		}
	}
	cs := k.Clientset(t)
	// Not Ready: a node kwok does not manage, with no Ready condition.
	notReady, err := localenv.NodeSpec{Name: "app-take-notready", CPU: "4", Memory: "16Gi"}.Object()
	if err != nil {
		t.Fatal(err)
	}
	delete(notReady.Annotations, "kwok.x-k8s.io/node")
	if _, err := cs.CoreV1().Nodes().Create(ctx, notReady, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range append(names, notReady.Name) {
			_ = cs.CoreV1().Nodes().Delete(dctx, name, metav1.DeleteOptions{})
		}
	})
	testenv.EditNode(ctx, t, cs, "app-take-cordoned", false, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	testenv.EditNode(ctx, t, cs, "app-take-tainted", false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "berth.dev/test-drain", Effect: corev1.TaintEffectNoExecute})
	})

	l := testenv.Ledger(t, testenv.LedgerOptions{})
	p, _ := startTestProvider(t, l, k, "gateway: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\"}\n", "", nil)
	// /status is public; the client signs with the provider's key, which the ledger knows.
	gw := newGatewayClient(t, l, p.Gateway(), "provider")

	type node struct {
		Name          string
		Allocatable   struct{ CPU int64 }
		Available     struct{ CPU, Memory, GPU int64 }
		Unschedulable bool
	}
	var st struct {
		Cluster struct {
			Inventory struct {
				Available struct{ Nodes []node }
			}
		}
	}
	byName := map[string]node{}
	testenv.EventuallyNoError(t, 30*time.Second, "the nodes in /status", func() error {
		code, body := gw.do(t, "GET", "/status", nil)
		if code != 200 {
			return fmt.Errorf("GET /status: %d %s", code, body)
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return err
		}
		clear(byName)
		for _, n := range st.Cluster.Inventory.Available.Nodes {
			byName[n.Name] = n
		}
		if n := byName["app-take-ok"]; n.Unschedulable || n.Available.CPU != 4000 {
			return fmt.Errorf("app-take-ok: %+v", n)
		}
		for _, name := range []string{"app-take-cordoned", "app-take-tainted", "app-take-notready"} {
			n, ok := byName[name]
			if !ok || !n.Unschedulable || n.Available.CPU != 0 || n.Available.Memory != 0 || n.Allocatable.CPU != 4000 {
				return fmt.Errorf("%s: %+v (in status: %v), want unschedulable with nothing available", name, n, ok)
			}
		}
		return nil
	})

	// The metrics say what /status says (both read the inventory: poll until a
	// /status and a scrape see the same one).
	testenv.EventuallyNoError(t, 30*time.Second, "the metrics agreeing with /status", func() error {
		code, body := gw.do(t, "GET", "/status", nil)
		if code != 200 || json.Unmarshal(body, &st) != nil {
			return fmt.Errorf("GET /status: %d %s", code, body)
		}
		var schedulable, unschedulable, cpu int64
		for _, n := range st.Cluster.Inventory.Available.Nodes {
			if n.Unschedulable {
				unschedulable++
			} else {
				schedulable++
				cpu += n.Available.CPU
			}
		}
		code, body = gw.do(t, "GET", "/metrics", nil)
		if code != 200 {
			return fmt.Errorf("GET /metrics: %d", code)
		}
		want := map[string]float64{
			`berth_inventory_nodes{schedulable="true"}`:  float64(schedulable),
			`berth_inventory_nodes{schedulable="false"}`: float64(unschedulable),
			`berth_inventory_available_cpu_cores`:        float64(cpu) / 1000,
		}
		for name, v := range want {
			got, ok := metricValue(string(body), name)
			if !ok || got != v {
				return fmt.Errorf("%s = %v (found %v), /status says %v", name, got, ok, v)
			}
		}
		if unschedulable < 3 {
			return fmt.Errorf("%d unschedulable nodes in /status", unschedulable)
		}
		return nil
	})
}

// metricValue finds the sample named name (with its labels) in a Prometheus text page.
func metricValue(page, name string) (float64, bool) {
	for line := range strings.Lines(page) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}
