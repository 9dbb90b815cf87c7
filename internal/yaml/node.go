package yaml

import (
	"fmt"
	"strings"
)

// Kind is the kind of a node.
type Kind uint8

// Node kinds, numbered as in yaml.v3 (DocumentNode is not used: Parse returns the
// document's root).
const (
	ScalarNode   Kind = 8
	MappingNode  Kind = 4
	SequenceNode Kind = 2
	AliasNode    Kind = 16
)

func (k Kind) String() string {
	switch k {
	case ScalarNode:
		return "scalar"
	case MappingNode:
		return "mapping"
	case SequenceNode:
		return "sequence"
	case AliasNode:
		return "alias"
	default:
		return fmt.Sprintf("Kind(%d)", uint8(k))
	}
}

// Style is how a node was written.
type Style uint8

// Style flags, as in yaml.v3.
const (
	TaggedStyle Style = 1 << iota
	DoubleQuotedStyle
	SingleQuotedStyle
	LiteralStyle
	FoldedStyle
	FlowStyle
)

// Short forms of the core schema's tags.
const (
	NullTag      = "!!null"
	BoolTag      = "!!bool"
	StrTag       = "!!str"
	IntTag       = "!!int"
	FloatTag     = "!!float"
	TimestampTag = "!!timestamp"
	SeqTag       = "!!seq"
	MapTag       = "!!map"
	BinaryTag    = "!!binary"
	MergeTag     = "!!merge"
)

const longTagPrefix = "tag:yaml.org,2002:"

// Node is one node of a document.
type Node struct {
	Kind  Kind
	Style Style
	// Tag is the node's explicit tag in short form ("!!str", "!local"), or "" when the
	// document gave none (ShortTag then tells the resolved one).
	Tag string
	// Value is a scalar's value, or an alias's anchor name.
	Value string
	// Anchor is the anchor defined on this node, if any.
	Anchor string
	// Alias is the node an alias refers to.
	Alias *Node
	// Content holds a sequence's items, or a mapping's keys and values interleaved.
	Content []*Node
	// Line and Column are 1-based; Column counts characters.
	Line, Column int
}

// quotedStyles are the scalar styles that make a value a string regardless of how it looks.
const quotedStyles = DoubleQuotedStyle | SingleQuotedStyle | LiteralStyle | FoldedStyle

// ShortTag returns the node's tag, resolving an implicit one as yaml.v3 does: quoted and
// block scalars are strings, plain scalars are resolved by their value.
func (n *Node) ShortTag() string {
	if n.Tag != "" {
		return n.Tag
	}
	switch n.Kind {
	case MappingNode:
		return MapTag
	case SequenceNode:
		return SeqTag
	case AliasNode:
		if n.Alias != nil {
			return n.Alias.ShortTag()
		}
		return ""
	case ScalarNode:
		if n.Style&quotedStyles != 0 {
			return StrTag
		}
		if n.Value == "<<" {
			return MergeTag
		}
		tag, _, _ := Resolve("", n.Value)
		return tag
	default:
		return ""
	}
}

// IsNull reports a null scalar: an explicit !!null, or an untagged plain "", "~" or
// "null" in any of its spellings. It does not follow aliases.
func (n *Node) IsNull() bool {
	if n.Kind != ScalarNode {
		return false
	}
	if n.Tag != "" {
		return n.Tag == NullTag
	}
	if n.Style&quotedStyles != 0 {
		return false
	}
	switch n.Value {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// IsString reports a scalar that reads as a string whatever it looks like: quoted or
// block style without a tag, or tagged !!str (yaml.v3's "indicated string").
func (n *Node) IsString() bool {
	return n.Kind == ScalarNode && (n.Tag == StrTag || n.Tag == "" && n.Style&quotedStyles != 0)
}

// shortTag turns "tag:yaml.org,2002:x" into "!!x"; other tags are kept.
func shortTag(tag string) string {
	if rest, ok := strings.CutPrefix(tag, longTagPrefix); ok {
		return "!!" + rest
	}
	return tag
}

// Error is a syntax error with the position where it was found.
type Error struct {
	Line, Column int // 1-based; 0 when unknown
	// Context says what was being read, e.g. "while scanning a quoted scalar that
	// starts at line 3"; may be empty.
	Context string
	Msg     string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ", column %d", e.Column)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Context != "" {
		b.WriteString(" (" + e.Context + ")")
	}
	return b.String()
}
