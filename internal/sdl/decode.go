package sdl

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/yaml"
)

// decoder reads SDL values out of a YAML node tree with yaml.v3's decoding rules (which
// is what Akash's SDL package does): what a quoted number, a YAML 1.1 boolean, a null
// list item or a merge key become. It records warnings, and computes a node's field
// path only when it reports something about it.
type decoder struct {
	root     *yaml.Node
	warnings []Warning
	// visits counts nodes read, including every read through an alias; budget bounds
	// it, so an alias bomb (a few lines expanding to billions of nodes) fails fast.
	visits, budget int
	// arena holds the field lists of mappings, handed out in pieces.
	arena []field
	// merging are the mappings whose "<<" merges are being read, innermost last.
	merging []*yaml.Node
	// parents links every node of the tree to its parent, for paths in messages; built
	// on the first message.
	parents map[*yaml.Node]parentLink
	// warned dedupes warnings (a merged mapping is read once per merge); dropped counts
	// those past maxWarnings.
	warned  map[warning]bool
	dropped int
	// hosts are the hostnames accepted so far in the manifest being built.
	hosts map[string]bool
}

type parentLink struct {
	parent *yaml.Node
	index  int // in parent.Content
}

type warning struct {
	n   *yaml.Node
	msg string
}

// maxWarnings is the most warnings reported; the rest are counted.
const maxWarnings = 100

// maxMergeDepth bounds merges of merges ("<<" whose mapping has its own "<<").
const maxMergeDepth = 32

// fieldList returns an empty list with room for n fields, carved from the arena. Its
// capacity is capped, so growing it past n copies it out instead of overwriting.
func (d *decoder) fieldList(n int) []field {
	if cap(d.arena)-len(d.arena) < n {
		d.arena = make([]field, 0, max(n, 2*cap(d.arena), 32))
	}
	start := len(d.arena)
	d.arena = d.arena[:start+n]
	return d.arena[start : start : start+n]
}

// maxAliasVisits is how many node reads aliases may add to a document's own size.
const maxAliasVisits = 100_000

// errorf reports a problem at node n.
func (d *decoder) errorf(n *yaml.Node, format string, args ...any) *Error {
	path, line := d.locate(n)
	return &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// warnf records a warning at node n, once.
func (d *decoder) warnf(n *yaml.Node, format string, args ...any) {
	w := warning{n: n, msg: fmt.Sprintf(format, args...)}
	if d.warned[w] {
		return
	}
	if d.warned == nil {
		d.warned = make(map[warning]bool)
	}
	d.warned[w] = true
	if len(d.warnings) >= maxWarnings {
		d.dropped++
		return
	}
	path, line := d.locate(n)
	d.warnings = append(d.warnings, Warning{Path: path, Line: line, Msg: w.msg})
}

// finishWarnings returns the warnings, with a note of those not reported.
func (d *decoder) finishWarnings() []Warning {
	if d.dropped > 0 {
		return append(d.warnings, Warning{Msg: fmt.Sprintf("%d more warning(s) not shown", d.dropped)})
	}
	return d.warnings
}

// locate returns the field path of n (for a mapping key, the path of its entry) and its
// line. Paths follow the document as written, not aliases.
func (d *decoder) locate(n *yaml.Node) (string, int) {
	if n == nil {
		return "", 0
	}
	if d.parents == nil {
		d.parents = make(map[*yaml.Node]parentLink)
		if d.root != nil {
			d.linkChildren(d.root)
		}
	}
	var links []parentLink
	for at := n; ; {
		l, ok := d.parents[at]
		if !ok {
			break
		}
		links = append(links, l)
		at = l.parent
	}
	var b []byte
	for i := len(links) - 1; i >= 0; i-- {
		l := links[i]
		if l.parent.Kind == yaml.MappingNode {
			b = appendKey(b, l.parent.Content[l.index&^1])
		} else {
			b = append(append(append(b, '['), strconv.Itoa(l.index)...), ']')
		}
	}
	return string(b), n.Line
}

// linkChildren records the parent of every node under n (iteratively: documents may
// be deep).
func (d *decoder) linkChildren(n *yaml.Node) {
	stack := []*yaml.Node{n}
	for len(stack) > 0 {
		at := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if at.Kind != yaml.MappingNode && at.Kind != yaml.SequenceNode {
			continue
		}
		for i, c := range at.Content {
			d.parents[c] = parentLink{parent: at, index: i}
			stack = append(stack, c)
		}
	}
}

// appendKey appends ".key", quoting keys that would make the path ambiguous.
func appendKey(b []byte, k *yaml.Node) []byte {
	key := k.Value
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		key = k.Alias.Value
	}
	if len(b) > 0 {
		b = append(b, '.')
	}
	if key == "" || strings.ContainsAny(key, ".[]\" \t\n") {
		return strconv.AppendQuote(b, key)
	}
	return append(b, key...)
}

// deref follows aliases and counts the read against the budget.
func (d *decoder) deref(n *yaml.Node) (*yaml.Node, error) {
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > yaml.MaxNodes {
			return nil, d.errorf(n, "alias *%s refers to nothing usable", n.Value)
		}
		n = n.Alias
	}
	d.visits++
	if d.visits > d.budget {
		return nil, d.errorf(n, "aliases expand the document to more than %d nodes; refusing to read further", d.budget)
	}
	return n, nil
}

// describe says what a node is, for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.IsString() {
			return fmt.Sprintf("the string %q", n.Value)
		}
		return fmt.Sprintf("%q", n.Value)
	default:
		return "an alias"
	}
}

// field is one entry of a mapping.
type field struct {
	key    string
	keyNod *yaml.Node
	val    *yaml.Node
}

// composeHints say what to write instead of keys that docker-compose users bring along
// (the corpus has most of them); SDL has no equivalent for some.
var composeHints = map[string]string{
	"depends_on":     "SDL has no start order; services start together and must retry their dependencies",
	"depends-on":     "SDL has no start order; services start together and must retry their dependencies",
	"cmd":            `the SDL key is "command" (a list), with "args" for its arguments`,
	"entrypoint":     `the SDL key is "command" (a list), with "args" for its arguments`,
	"environment":    `the SDL key is "env", a list of NAME=value`,
	"ports":          `the SDL key is "expose", a list of {port, as, to}`,
	"volumes":        "declare a volume in the compute profile's storage and mount it with params.storage",
	"restart":        "providers always restart containers that exit",
	"links":          `services reach each other by name when one exposes a port "to" the other`,
	"container_name": "the service's name is its key under services",
	"build":          "providers pull images; build and push the image first",
}

// fieldSet describes the keys a mapping may have, for unknown-key reports.
type fieldSet struct {
	// known are the keys Akash reads; nil accepts any key (a map keyed by names).
	known []string
	// unknownIsError makes an unknown key an error, as Akash has it at the top level
	// and in the blocks its hand-written decoders read.
	unknownIsError bool
	// raw reads keys as written, as those hand-written decoders do: an alias key is its
	// anchor's name, "~" and "<<" are ordinary keys, !!binary is not decoded.
	raw bool
}

// isMerge reports a YAML merge key ("<<") as yaml.v3 recognises it.
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == yaml.MergeTag
}

// fields returns the entries of a mapping in file order, then those merged in with "<<"
// that the mapping does not set itself (yaml.v3's merge rules). A null node has no
// fields. Duplicate keys are errors; unknown keys are warnings, or errors where the set
// says so.
func (d *decoder) fields(n *yaml.Node, set fieldSet) ([]field, error) {
	n, err := d.deref(n)
	if err != nil || n.IsNull() {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errorf(n, "expected a mapping, found %s", describe(n))
	}
	if err := d.checkDuplicateKeys(n); err != nil {
		return nil, err
	}
	var (
		out    = d.fieldList(len(n.Content) / 2)
		seen   fieldIndex
		merges []*yaml.Node
	)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := n.Content[i], n.Content[i+1]
		key := kn.Value
		if !set.raw {
			if isMerge(kn) {
				merges = append(merges, v)
				continue
			}
			k, err := d.deref(kn)
			if err != nil {
				return nil, err
			}
			if k.Kind != yaml.ScalarNode {
				return nil, d.errorf(kn, "a key must be a single value, not %s", describe(k))
			}
			if k.IsNull() {
				d.warnf(kn, "an entry with an empty key is ignored, as Akash ignores it")
				continue
			}
			if key, err = d.scalarString(k); err != nil {
				return nil, err
			}
		}
		if first, dup := seen.find(out, key); dup {
			return nil, d.errorf(kn, "duplicate key %q (first at line %d)", key, first.keyNod.Line)
		}
		if set.known != nil && !slices.Contains(set.known, key) {
			msg := fmt.Sprintf("unknown key %q", key)
			hint := composeHints[key]
			if s := suggest(key, set.known); s != "" && hint == "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			if set.unknownIsError {
				if hint != "" {
					return nil, d.errorf(kn, "%s: %s", msg, hint)
				}
				return nil, d.errorf(kn, "%s; known keys: %s", msg, strings.Join(set.known, ", "))
			}
			if hint != "" {
				d.warnf(kn, "%s is ignored, as Akash ignores it: %s", msg, hint)
			} else {
				d.warnf(kn, "%s is ignored, as Akash ignores it", msg)
			}
			continue
		}
		out = seen.add(out, field{key: key, keyNod: kn, val: v})
	}
	if len(merges) > 0 {
		for _, outer := range d.merging {
			if outer == n {
				return nil, d.errorf(n, "this mapping merges itself (through an alias in a << key)")
			}
		}
		if len(d.merging) >= maxMergeDepth {
			return nil, d.errorf(n, "merges (<<) are nested more than %d deep", maxMergeDepth)
		}
		d.merging = append(d.merging, n)
		defer func() { d.merging = d.merging[:len(d.merging)-1] }()
	}
	for _, m := range merges {
		sources, err := d.mergeSources(m)
		if err != nil {
			return nil, err
		}
		for _, src := range sources {
			merged, err := d.fields(src, set)
			if err != nil {
				return nil, err
			}
			for _, f := range merged {
				if _, dup := seen.find(out, f.key); !dup {
					out = seen.add(out, f)
				}
			}
		}
	}
	return out, nil
}

// optionalFields reads a mapping that may be left out: present is false for null, so
// that an empty mapping ({}) and none at all can be told apart.
func (d *decoder) optionalFields(n *yaml.Node, set fieldSet) (fs []field, present bool, err error) {
	if v, err := d.deref(n); err != nil || v.IsNull() {
		return nil, false, err
	}
	fs, err = d.fields(n, set)
	return fs, err == nil, err
}

// fieldIndex finds fields by key: a scan while there are few, a map beyond that (a
// hostile mapping may have many thousands of keys).
type fieldIndex struct{ m map[string]int }

func (x *fieldIndex) find(fs []field, key string) (field, bool) {
	if x.m != nil {
		i, ok := x.m[key]
		if !ok {
			return field{}, false
		}
		return fs[i], true
	}
	for _, f := range fs {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

func (x *fieldIndex) add(fs []field, f field) []field {
	fs = append(fs, f)
	switch {
	case x.m != nil:
		x.m[f.key] = len(fs) - 1
	case len(fs) > 16:
		x.m = make(map[string]int, 2*len(fs))
		for i, g := range fs {
			x.m[g.key] = i
		}
	}
	return fs
}

// checkDuplicateKeys rejects a mapping with two keys written alike (same kind and
// text), as yaml.v3 does before decoding a mapping.
func (d *decoder) checkDuplicateKeys(n *yaml.Node) error {
	type rawKey struct {
		kind  yaml.Kind
		value string
	}
	if len(n.Content) <= 32 {
		for i := 2; i < len(n.Content); i += 2 {
			for j := 0; j < i; j += 2 {
				if a, b := n.Content[i], n.Content[j]; a.Kind == b.Kind && a.Value == b.Value {
					return d.errorf(a, "duplicate key %q (first at line %d)", a.Value, b.Line)
				}
			}
		}
		return nil
	}
	first := make(map[rawKey]*yaml.Node, len(n.Content)/2)
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i]
		if f, dup := first[rawKey{k.Kind, k.Value}]; dup {
			return d.errorf(k, "duplicate key %q (first at line %d)", k.Value, f.Line)
		}
		first[rawKey{k.Kind, k.Value}] = k
	}
	return nil
}

// mergeSources returns the mappings a "<<" key merges, in order (earlier ones win): its
// value is a mapping or a list of mappings.
func (d *decoder) mergeSources(v *yaml.Node) ([]*yaml.Node, error) {
	m, err := d.deref(v)
	if err != nil {
		return nil, err
	}
	switch m.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{m}, nil
	case yaml.SequenceNode:
		for _, item := range m.Content {
			it, err := d.deref(item)
			if err != nil {
				return nil, err
			}
			if it.Kind != yaml.MappingNode {
				return nil, d.errorf(item, "a merge (<<) list may hold only mappings, found %s", describe(it))
			}
		}
		return m.Content, nil
	default:
		return nil, d.errorf(v, "a merge (<<) needs a mapping or a list of mappings, found %s", describe(m))
	}
}

// scalarString is a scalar's text as yaml.v3 decodes it into a string: the value as
// written, except that !!binary is base64-decoded.
func (d *decoder) scalarString(n *yaml.Node) (string, error) {
	if n.Tag == yaml.BinaryTag {
		b, err := base64.StdEncoding.DecodeString(n.Value)
		if err != nil {
			return "", d.errorf(n, "!!binary value is not valid base64")
		}
		return string(b), nil
	}
	return n.Value, nil
}

// str reads a string field; null reads as "".
func (d *decoder) str(n *yaml.Node) (string, error) {
	n, err := d.deref(n)
	if err != nil || n.IsNull() {
		return "", err
	}
	if n.Kind != yaml.ScalarNode {
		return "", d.errorf(n, "expected a single value, found %s", describe(n))
	}
	return d.scalarString(n)
}

// eachItem calls fn with each item of a list and the item through its alias, if any.
// yaml.v3 drops null items when decoding a list, so they are dropped here, with a
// warning. isList is false when n is null (no list at all).
func (d *decoder) eachItem(n *yaml.Node, fn func(item, v *yaml.Node) error) (isList bool, err error) {
	n, err = d.deref(n)
	if err != nil || n.IsNull() {
		return false, err
	}
	if n.Kind != yaml.SequenceNode {
		return false, d.errorf(n, "expected a list, found %s", describe(n))
	}
	for _, item := range n.Content {
		v, err := d.deref(item)
		if err != nil {
			return false, err
		}
		if v.IsNull() {
			d.warnf(item, "an empty list item is ignored, as Akash ignores it")
			continue
		}
		if err := fn(item, v); err != nil {
			return false, err
		}
	}
	return true, nil
}

// strs reads a list of strings. Null reads as nil; an empty list stays an empty
// (non-nil) list, which the manifest encodes as [] rather than null.
func (d *decoder) strs(n *yaml.Node) ([]string, error) {
	var out []string
	isList, err := d.eachItem(n, func(item, v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode {
			return d.errorf(item, "expected a single value, found %s", describe(v))
		}
		s, err := d.scalarString(v)
		out = append(out, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	if isList && out == nil {
		out = []string{}
	}
	return out, nil
}

// uint32Field reads a whole number that fits in 32 bits; null reads as 0. Like yaml.v3
// it accepts hexadecimal, octal, binary and underscores, and truncates a fraction (with
// a warning); unlike it, it rejects a negative fraction (yaml.v3 truncates -0.5 to 0).
func (d *decoder) uint32Field(n *yaml.Node) (uint32, error) {
	n, err := d.deref(n)
	if err != nil || n.IsNull() {
		return 0, err
	}
	if n.Kind != yaml.ScalarNode {
		return 0, d.errorf(n, "expected a whole number, found %s", describe(n))
	}
	if n.IsString() {
		return 0, d.errorf(n, "expected a whole number, found the string %q (remove the quotes)", n.Value)
	}
	_, v, err := yaml.Resolve(n.Tag, n.Value)
	if err != nil {
		return 0, d.errorf(n, "%v", err)
	}
	switch v := v.(type) {
	case int:
		if v >= 0 && v <= math.MaxUint32 {
			return uint32(v), nil
		}
	case uint64:
		if v <= math.MaxUint32 {
			return uint32(v), nil
		}
	case float64:
		if v >= 0 && math.Trunc(v) <= math.MaxUint32 {
			if v != math.Trunc(v) {
				d.warnf(n, "%s is not a whole number; Akash reads it as %d", n.Value, uint32(v))
			}
			return uint32(v), nil
		}
	default:
		return 0, d.errorf(n, "expected a whole number, found %s", describe(n))
	}
	return 0, d.errorf(n, "%s is outside 0–%d", n.Value, uint32(math.MaxUint32))
}

// boolField reads true or false as yaml.v3 decodes into a bool: true/false in YAML
// 1.2's spellings, and, as strings, YAML 1.1's y/yes/on and n/no/off (so "yes" in
// quotes is true but "true" in quotes is an error, exactly as on Akash).
func (d *decoder) boolField(n *yaml.Node) (bool, error) {
	n, err := d.deref(n)
	if err != nil || n.IsNull() {
		return false, err
	}
	if n.Kind == yaml.ScalarNode {
		var v any = n.Value
		if !n.IsString() {
			if _, v, err = yaml.Resolve(n.Tag, n.Value); err != nil {
				return false, d.errorf(n, "%v", err)
			}
		}
		switch v := v.(type) {
		case bool:
			return v, nil
		case string:
			switch v {
			case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
				return true, nil
			case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
				return false, nil
			}
		}
	}
	return false, d.errorf(n, "expected true or false, found %s", describe(n))
}
