package yaml

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Decode reads a YAML document into v (a pointer to a struct) strictly: every mapping
// key must name a field (by its `yaml:"name"` tag), every value must have the field's
// type, and keys may not repeat. Errors name the line and the key's path
// ("line 7: bidding.pricing.scale.cpu: …"). Fields absent from the document keep the
// values v already holds, so defaults can be set before decoding. Supported field
// types: structs, pointers to them, map[string]T, []T, string, bool, integers,
// float64, time.Duration ("30s"), and any type whose pointer is an
// encoding.TextUnmarshaler (it reads the scalar's text; its error is reported with the
// line and path). The data must hold one document: content after it (a second document, or
// lines indented less than the first) is an error naming its line, not ignored; a
// leading "---" and trailing empty documents ("---" or "..." with only comments after)
// are allowed.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("yaml.Decode: want a non-nil pointer")
	}
	doc, err := Parse(data)
	if err != nil {
		return err
	}
	if err := OneDocument(doc); err != nil {
		return err
	}
	if doc.Root == nil || deref(doc.Root).IsNull() {
		return nil
	}
	return decodeNode(deref(doc.Root), rv.Elem(), "")
}

// OneDocument refuses a parsed stream with content after its first document (see
// Document.ContentLine), for files that must hold one document.
func OneDocument(doc Document) error {
	if doc.ContentLine > 0 {
		return &Error{Line: doc.ContentLine, Msg: "a second YAML document (or text indented less than the first line): the file must hold one document, and this would be ignored"}
	}
	return nil
}

func deref(n *Node) *Node {
	for i := 0; n != nil && n.Kind == AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func decodeErr(n *Node, path, format string, args ...any) error {
	if path == "" {
		path = "(top level)"
	}
	return fmt.Errorf("line %d: %s: %s", n.Line, path, fmt.Sprintf(format, args...))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func decodeNode(n *Node, v reflect.Value, path string) error {
	n = deref(n)
	if n == nil || n.IsNull() {
		return nil
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() {
		if _, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
			if n.Kind != ScalarNode {
				return decodeErr(n, path, "want a single value, got a %s", n.Kind)
			}
			return decodeScalar(n, v, path)
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeNode(n, v.Elem(), path)
	case reflect.Struct:
		return decodeStruct(n, v, path)
	case reflect.Map:
		if n.Kind != MappingNode {
			return decodeErr(n, path, "want a mapping, got a %s", n.Kind)
		}
		if v.Type().Key().Kind() != reflect.String {
			return decodeErr(n, path, "unsupported map key type %s", v.Type().Key())
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i]).Value
			if seen[k] {
				return decodeErr(n.Content[i], join(path, k), "listed twice")
			}
			seen[k] = true
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := decodeNode(n.Content[i+1], elem, join(path, k)); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), elem)
		}
		return nil
	case reflect.Slice:
		if n.Kind != SequenceNode {
			return decodeErr(n, path, "want a list, got a %s", n.Kind)
		}
		out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := decodeNode(item, out.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	if n.Kind != ScalarNode {
		return decodeErr(n, path, "want a single value, got a %s", n.Kind)
	}
	return decodeScalar(n, v, path)
}

func decodeStruct(n *Node, v reflect.Value, path string) error {
	if n.Kind != MappingNode {
		return decodeErr(n, path, "want a mapping, got a %s", n.Kind)
	}
	fields := map[string]int{}
	var names []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fields[name] = i
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := deref(n.Content[i])
		k := kn.Value
		idx, ok := fields[k]
		if !ok {
			return decodeErr(kn, join(path, k), "unknown key (known here: %s)", strings.Join(names, ", "))
		}
		if seen[k] {
			return decodeErr(kn, join(path, k), "listed twice")
		}
		seen[k] = true
		if err := decodeNode(n.Content[i+1], v.Field(idx), join(path, k)); err != nil {
			return err
		}
	}
	return nil
}

func decodeScalar(n *Node, v reflect.Value, path string) error {
	s := n.Value
	if v.CanAddr() {
		if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
			if err := u.UnmarshalText([]byte(s)); err != nil {
				return decodeErr(n, path, "%v", err)
			}
			return nil
		}
	}
	if v.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(s)
		if err != nil {
			return decodeErr(n, path, "%q is not a duration (such as 30s, 5m or 1h30m)", s)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			v.SetBool(true)
		case "false", "no", "off":
			v.SetBool(false)
		default:
			return decodeErr(n, path, "%q is not true or false", s)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return decodeErr(n, path, "%q is not a whole number that fits (%d bits)", s, v.Type().Bits())
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return decodeErr(n, path, "%q is not a non-negative whole number that fits (%d bits)", s, v.Type().Bits())
		}
		v.SetUint(x)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return decodeErr(n, path, "%q is not a number", s)
		}
		v.SetFloat(x)
	default:
		return decodeErr(n, path, "unsupported field type %s", v.Type())
	}
	return nil
}
