// Command chartgen writes the parts of charts/berth that follow from berth's code
// (make generate): values.yaml, from values.yaml.tmpl with each process's settings at
// the binary's own defaults; values.schema.json, whose settings' schemas come from
// the configuration types, so that a key the binary does not read (a typo) fails
// `helm install` instead of being silently ignored; and the Grafana dashboard
// (dashboards/berth.json); and docs/helm-values.md, the values' reference.
//
//	go run ./hack/chartgen -chart charts/berth
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"berth.dev/berth/internal/chartspec"
	"berth.dev/berth/internal/grafana"
	"berth.dev/berth/internal/yaml"
)

func main() {
	chart := flag.String("chart", "charts/berth", "the chart's directory")
	docs = flag.String("docs", "docs/helm-values.md", "the values reference to write")
	flag.Parse()
	if err := run(*chart); err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}

var docs *string

func run(dir string) error {
	tmpl, err := template.New("values.yaml.tmpl").Funcs(template.FuncMap{
		// settings NAME INDENT: the process's default settings as YAML, indented.
		"settings": func(name string, indent int) (string, error) {
			cfg, ok := chartspec.Defaults()[name]
			if !ok {
				return "", fmt.Errorf("no settings named %q", name)
			}
			b, err := yaml.Encode(cfg)
			if err != nil {
				return "", err
			}
			pad := strings.Repeat(" ", indent)
			return pad + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n"+pad), nil
		},
	}).ParseFiles(filepath.Join(dir, "values.yaml.tmpl"))
	if err != nil {
		return err
	}
	var values bytes.Buffer
	if err := tmpl.Execute(&values, nil); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), values.Bytes(), 0o644); err != nil { //nolint:gosec // a chart file, world-readable like the rest of the source
		return err
	}
	ref, err := chartspec.ValuesReference(values.Bytes())
	if err != nil {
		return err
	}
	if err := os.WriteFile(*docs, []byte(ref), 0o644); err != nil { //nolint:gosec // documentation
		return err
	}
	schema, err := json.MarshalIndent(chartspec.Schema(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "values.schema.json"), append(schema, '\n'), 0o644); err != nil { //nolint:gosec // as above
		return err
	}
	dash, err := json.MarshalIndent(grafana.Dashboard(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "dashboards"), 0o755); err != nil { //nolint:gosec // a source directory
		return err
	}
	return os.WriteFile(filepath.Join(dir, "dashboards", "berth.json"), append(dash, '\n'), 0o644) //nolint:gosec // as above
}
