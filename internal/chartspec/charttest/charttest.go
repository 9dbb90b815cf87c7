// Package charttest renders berth's Helm chart (charts/berth) in tests, with the helm
// binary make test builds from the Go module proxy ($BERTH_HELM, hack/tool.sh helm).
package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/testenv"
)

// Release and Namespace are the release the tests render.
const (
	Release   = "rel"
	Namespace = "berth-system"
)

// Dir is the chart's directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "charts", "berth")
}

// Helm is the helm binary: $BERTH_HELM, else helm on the PATH; missing, the test is
// skipped (failed with CI=true).
func Helm(t *testing.T) string {
	t.Helper()
	return testenv.Tool(t, "BERTH_HELM", "helm", "set BERTH_HELM=$(hack/tool.sh helm) (make test does)")
}

// Values are the values every render starts from: what the chart requires.
func Values() map[string]any {
	return map[string]any{
		"image":    map[string]any{"repository": "registry.example.com/berth"},
		"owner":    map[string]any{"address": "akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq7cdc78", "chainID": "akashnet-2"},
		"provider": map[string]any{"settings": map[string]any{"node": "tcp://ledger.example.com:26657"}, "key": map[string]any{"json": `{"name":"provider"}`}},
	}
}

// ValuesFile writes Values with each of values merged over them into a file.
func ValuesFile(t *testing.T, values ...map[string]any) string {
	t.Helper()
	v := Values()
	for _, o := range values {
		Merge(v, o)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Render runs helm template for Release in Namespace with Values and then each of
// values merged over them, and returns the manifests (helm's error, with its message,
// when it refuses the values).
func Render(t *testing.T, values ...map[string]any) ([]byte, error) {
	t.Helper()
	file := ValuesFile(t, values...)
	cmd := exec.CommandContext(t.Context(), Helm(t), "template", Release, Dir(), "--namespace", Namespace, "--values", file) //nolint:gosec // G204: the helm the test environment names
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template: %w: %s", err, stderr.String())
	}
	return out, nil
}

// Merge sets o's leaves into v (maps merged, everything else replaced).
func Merge(v, o map[string]any) {
	for k, ov := range o {
		if om, ok := ov.(map[string]any); ok {
			if vm, ok := v[k].(map[string]any); ok {
				Merge(vm, om)
				continue
			}
			c := map[string]any{}
			Merge(c, om)
			v[k] = c
			continue
		}
		v[k] = ov
	}
}
