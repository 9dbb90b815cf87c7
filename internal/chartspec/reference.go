package chartspec

import (
	"encoding/json"
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// opaque are values passed to Kubernetes as they are: listed whole, not key by key.
var opaque = map[string]bool{
	"podSecurityContext": true, "securityContext": true, "resources": true, "nodeSelector": true,
	"tolerations": true, "affinity": true, "podAnnotations": true, "annotations": true, "labels": true,
	"imagePullSecrets": true,
}

// settingsRef says where each process's settings are documented.
var settingsRef = map[string]string{
	"provider.settings":            "`provider.yaml`, every key at `berth provider run`'s default: [configuration reference](operations.md#configuration-reference). `node` is required; `inventory.operator` is filled in with the inventory operator's name when that operator is enabled and it is empty",
	"operators.hostname.settings":  "`hostname-operator.yaml`: [operators.md](operators.md#settings-hostname-operatoryaml); `provider` and `chain_id` default to `owner`'s, `leader_election.namespace` to the release's",
	"operators.ip.settings":        "`ip-operator.yaml`: [operators.md](operators.md#settings-ip-operatoryaml); `provider` and `chain_id` default to `owner`'s, `leader_election.namespace` to the release's",
	"operators.inventory.settings": "`inventory-operator.yaml`: [operators.md](operators.md#settings-inventory-operatoryaml); `leader_election.namespace` defaults to the release's, `bus.redis` to the reference Redis when enabled",
}

// ValuesReference is the Markdown reference of the chart's values, from values.yaml:
// a section per top-level value (its comment), a row per value with its default and
// its comment.
func ValuesReference(values []byte) (string, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(values, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.MappingNode {
		return "", fmt.Errorf("values.yaml: want a mapping")
	}
	var b strings.Builder
	b.WriteString("# Helm chart values\n\n<!-- Generated from charts/berth/values.yaml by hack/chartgen (make generate): do not edit. -->\n\n")
	b.WriteString("The values of `charts/berth` ([install with Helm](operations.md#install-with-helm)). `values.schema.json` refuses any other key.\n")
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		fmt.Fprintf(&b, "\n## `%s`\n\n", k.Value)
		head := k.HeadComment
		if i == 0 { // the file's own comment comes first: the value's is the last paragraph
			parts := strings.Split(head, "\n\n")
			head = parts[len(parts)-1]
		}
		if c := comment(head); c != "" {
			b.WriteString(c + "\n\n")
		}
		b.WriteString("| value | default | meaning |\n|---|---|---|\n")
		var rows []string
		if err := walkValues(k.Value, k, v, &rows); err != nil {
			return "", err
		}
		b.WriteString(strings.Join(rows, ""))
	}
	return b.String(), nil
}

func walkValues(path string, k, v *yamlv3.Node, rows *[]string) error {
	name := path[strings.LastIndex(path, ".")+1:]
	if ref, ok := settingsRef[path]; ok {
		*rows = append(*rows, fmt.Sprintf("| %#q | the binary's | %s |\n", path, ref))
		return nil
	}
	if v.Kind == yamlv3.MappingNode && len(v.Content) > 0 && !opaque[name] && v.Style&yamlv3.FlowStyle == 0 {
		if c := comment(k.HeadComment); c != "" && strings.Contains(path, ".") {
			*rows = append(*rows, fmt.Sprintf("| `%s.*` | | %s |\n", path, strings.ReplaceAll(c, "|", "\\|")))
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			if err := walkValues(path+"."+v.Content[i].Value, v.Content[i], v.Content[i+1], rows); err != nil {
				return err
			}
		}
		return nil
	}
	var val any
	if err := v.Decode(&val); err != nil {
		return err
	}
	def, err := json.Marshal(val)
	if err != nil {
		return err
	}
	meaning := strings.TrimSpace(comment(k.HeadComment) + " " + comment(v.LineComment))
	*rows = append(*rows, fmt.Sprintf("| %#q | %#q | %s |\n", path, strings.ReplaceAll(string(def), "|", "\\|"), strings.ReplaceAll(meaning, "|", "\\|")))
	return nil
}

// comment is a YAML comment's text on one line.
func comment(c string) string {
	var out []string
	for line := range strings.Lines(c) {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, " ")
}
