// Package provider holds what a provider declares about itself: for now the attributes
// file it registers on the ledger (the attributes section of an Akash provider.yaml).
// Values are plain data; functions are safe for concurrent use.
package provider

import (
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/yaml"
)

// MaxAttributesFileBytes bounds an attributes file.
const MaxAttributesFileBytes = 64 << 10

// ParseAttributes reads provider attributes from YAML (JSON is YAML too) in either of
// two shapes: a provider.yaml-style mapping with an "attributes" list, or the list
// itself. Each entry is {key: K, value: V}; keys must be unique. Other top-level keys
// of a provider.yaml (host, info, …) are ignored; a second YAML document is an error.
//
//	attributes:
//	  - key: region
//	    value: us-west
//	  - key: capabilities/gpu/vendor/nvidia/model/a100
//	    value: "true"
func ParseAttributes(data []byte) (market.Attributes, error) {
	if len(data) > MaxAttributesFileBytes {
		return nil, fmt.Errorf("attributes file is %d bytes, at most %d", len(data), MaxAttributesFileBytes)
	}
	doc, err := yaml.Parse(data)
	if err == nil {
		err = yaml.OneDocument(doc)
	}
	if err != nil {
		return nil, fmt.Errorf("attributes file: %w", err)
	}
	root := deref(doc.Root)
	if root == nil || root.IsNull() {
		return nil, fmt.Errorf("attributes file is empty")
	}
	list := root
	if root.Kind == yaml.MappingNode {
		list = nil
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "attributes" {
				list = deref(root.Content[i+1])
			}
		}
		if list == nil {
			return nil, fmt.Errorf("attributes file line %d: no \"attributes\" key", root.Line)
		}
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("attributes file line %d: attributes must be a list of {key, value}", list.Line)
	}
	out := make(market.Attributes, 0, len(list.Content))
	for i, item := range list.Content {
		item = deref(item)
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("attributes file line %d: attributes[%d] must be a mapping {key, value}", item.Line, i)
		}
		var a market.Attribute
		var haveKey, haveValue bool
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], deref(item.Content[j+1])
			if v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("attributes file line %d: attributes[%d].%s must be a scalar", v.Line, i, k.Value)
			}
			switch k.Value {
			case "key":
				a.Key, haveKey = v.Value, true
			case "value":
				a.Value, haveValue = v.Value, true
			default:
				return nil, fmt.Errorf("attributes file line %d: attributes[%d]: unknown field %q (want key and value)", k.Line, i, k.Value)
			}
		}
		if !haveKey || strings.TrimSpace(a.Key) == "" || !haveValue {
			return nil, fmt.Errorf("attributes file line %d: attributes[%d] needs a non-empty key and a value", item.Line, i)
		}
		if slices.ContainsFunc(out, func(o market.Attribute) bool { return o.Key == a.Key }) {
			return nil, fmt.Errorf("attributes file line %d: attributes[%d]: key %q is listed twice", item.Line, i, a.Key)
		}
		out = append(out, a)
	}
	return out, nil
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}
