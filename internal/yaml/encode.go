package yaml

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
)

// Encode writes v (a struct, or a pointer to one) as a YAML document that Decode reads
// back into the same value when it decodes over the same defaults: every field with a
// yaml tag, in declaration order, at its value — except nil slices, maps and pointers,
// which are left out (so a list left out keeps its default when read). Durations are
// written as Go durations without zero tail units ("1m30s", "5m", "1h"), an
// encoding.TextMarshaler as its text, map keys in order. It is how berth writes the
// configuration files of the processes it starts.
func Encode(v any) ([]byte, error) {
	n, err := encodeValue(reflect.ValueOf(v), "")
	if err != nil {
		return nil, err
	}
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil, fmt.Errorf("yaml: encode %T: want a struct", v)
	}
	var b strings.Builder
	enc := yamlv3.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("yaml: encode %T: %w", v, err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func scalar(tag, value string) *yamlv3.Node {
	return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: tag, Value: value}
}

// encodeValue is v's node; nil for a nil slice, map or pointer (left out).
func encodeValue(v reflect.Value, path string) (*yamlv3.Node, error) {
	if v.Type() == reflect.TypeFor[time.Duration]() {
		return scalar("!!str", FormatDuration(time.Duration(v.Int()))), nil
	}
	if m, ok := v.Interface().(encoding.TextMarshaler); ok && v.Kind() != reflect.Pointer {
		b, err := m.MarshalText()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return scalar("!!str", string(b)), nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return encodeValue(v.Elem(), path)
	case reflect.Struct:
		m := &yamlv3.Node{Kind: yamlv3.MappingNode}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			n, err := encodeValue(v.Field(i), join(path, name))
			if err != nil {
				return nil, err
			}
			if n != nil {
				m.Content = append(m.Content, scalar("!!str", name), n)
			}
		}
		return m, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("yaml: %s: unsupported map key type %s", path, v.Type().Key())
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		m := &yamlv3.Node{Kind: yamlv3.MappingNode}
		for _, k := range keys {
			n, err := encodeValue(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())), join(path, k))
			if err != nil {
				return nil, err
			}
			if n == nil {
				n = scalar("!!null", "null")
			}
			m.Content = append(m.Content, scalar("!!str", k), n)
		}
		return m, nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		s := &yamlv3.Node{Kind: yamlv3.SequenceNode}
		for i := range v.Len() {
			n, err := encodeValue(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			if n == nil {
				n = scalar("!!null", "null")
			}
			s.Content = append(s.Content, n)
		}
		return s, nil
	case reflect.String:
		return scalar("!!str", v.String()), nil
	case reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool())), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar("!!int", strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float32, reflect.Float64:
		f := strconv.FormatFloat(v.Float(), 'g', -1, v.Type().Bits())
		if !strings.ContainsAny(f, ".eEnN") {
			f += ".0" // "100" would read as an integer
		}
		return scalar("!!float", f), nil
	}
	return nil, fmt.Errorf("yaml: %s: cannot encode a %s", path, v.Type())
}

// FormatDuration writes d as Go does, without its zero tail units, as Encode writes
// durations (and as a person would): 5m, 1h, 1h30m, 90s, 0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
