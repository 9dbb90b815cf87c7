package yaml

import (
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

// Limits on what Parse accepts, so hostile input cannot exhaust the stack or memory.
const (
	// MaxDepth is the deepest nesting of collections.
	MaxDepth = 100
	// MaxNodes is the most nodes a document may have (real SDL files have hundreds).
	MaxNodes = 1 << 18
)

// Document is the first document of a YAML stream.
type Document struct {
	// Root is the document's root node; nil when the stream holds no document.
	Root *Node
	// MoreLine is the line where content after the first document starts (another
	// document, which Parse does not read, as yaml.v3's Unmarshal does not); 0 if none.
	MoreLine int
	// ContentLine is MoreLine past documents that hold nothing: the line of the first
	// token after the first document that is not a document marker ("---", "...");
	// comments are not tokens. 0 when everything after the first document is empty
	// documents (a trailing "---" is one: a null document). A directive counts as
	// content. Readers of files that must hold one document refuse ContentLine > 0.
	ContentLine int
	// Nodes is the number of nodes in the document.
	Nodes int
}

type tagDirective struct{ handle, prefix string }

type parser struct {
	s       scanner
	anchors map[string]*Node
	tags    []tagDirective
	depth   int
	slab    []Node
	made    int // nodes made so far
	// stack holds the children of the collections being parsed; each collection's
	// Content is carved, at its exact size, out of ptrs when it ends.
	stack []*Node
	ptrs  []*Node
}

// Parse reads the first document of data. The input must be UTF-8 (a leading byte order
// mark is allowed) and free of control characters. A mapping or sequence that contains
// an alias of itself is returned as it is written (a cycle), as yaml.v3 does: consumers
// that expand aliases must detect it.
func Parse(data []byte) (Document, error) {
	src, err := checkInput(data)
	if err != nil {
		return Document{}, err
	}
	sc, ok := scratchPool.Get().(*scratch)
	if !ok {
		sc = &scratch{}
	}
	defer sc.release()
	// Real documents have a node per 8 to 16 bytes; allocate for that up front.
	p := parser{
		s:     scanner{src: src, maxDepth: MaxDepth, tokens: sc.tokens[:0], byTok: sc.byTok[:0], keys: sc.keys[:0], indents: sc.indents[:0]},
		slab:  make([]Node, len(src)/12+8),
		ptrs:  make([]*Node, 0, len(src)/12+8),
		stack: sc.stack[:0],
	}
	doc, err := p.parseStream()
	sc.tokens, sc.byTok, sc.keys, sc.indents, sc.stack = p.s.tokens, p.s.byTok, p.s.keys, p.s.indents, p.stack
	return doc, err
}

// scratch is the parser's working memory that does not outlive a parse, reused across
// parses.
type scratch struct {
	tokens  []token
	byTok   []tokSlot
	keys    []simpleKey
	indents []int
	stack   []*Node
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{tokens: make([]token, 0, 16), stack: make([]*Node, 0, 64)}
}}

// release drops the scratch's references into the finished document and pools it.
func (sc *scratch) release() {
	clear(sc.tokens[:cap(sc.tokens)])
	clear(sc.stack[:cap(sc.stack)])
	if cap(sc.tokens) > 1024 || cap(sc.stack) > 1<<16 {
		return // a hostile document's worth; let it go
	}
	scratchPool.Put(sc)
}

// checkInput strips a UTF-8 byte order mark and rejects what libyaml's reader rejects:
// invalid UTF-8 and control characters. Unlike libyaml it checks the whole input, and it
// does not decode UTF-16.
func checkInput(data []byte) (string, error) {
	if len(data) >= 2 && (data[0] == 0xFE && data[1] == 0xFF || data[0] == 0xFF && data[1] == 0xFE) {
		return "", &Error{Line: 1, Column: 1, Msg: "the input is UTF-16; only UTF-8 is supported"}
	}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		data = data[3:]
	}
	line, lineStart := 1, 0
	for i := 0; i < len(data); {
		c := data[i]
		if c < 0x80 {
			switch {
			case c == '\n':
				line, lineStart = line+1, i+1
			case c == '\t' || c == '\r' || c >= 0x20 && c <= 0x7E:
			default:
				return "", inputError(data, line, lineStart, i, fmt.Sprintf("control character %#02x is not allowed", c))
			}
			i++
			continue
		}
		r, w := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && w <= 1:
			return "", inputError(data, line, lineStart, i, fmt.Sprintf("invalid UTF-8 byte %#02x", c))
		case r == 0x85 || r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000:
		default:
			return "", inputError(data, line, lineStart, i, fmt.Sprintf("control character U+%04X is not allowed", r))
		}
		i += w
	}
	return string(data), nil
}

func inputError(data []byte, line, lineStart, at int, msg string) error {
	return &Error{Line: line, Column: utf8.RuneCount(data[lineStart:at]) + 1, Msg: msg}
}

// peek returns the next token. The pointer is valid until the next peek.
func (p *parser) peek() (*token, error) {
	if p.s.available {
		return &p.s.tokens[p.s.head], nil
	}
	return p.s.peekToken()
}

func (p *parser) skip() { p.s.skipToken() }

func (p *parser) errorf(at mark, context, format string, args ...any) error {
	return p.s.errorf(at, context, format, args...)
}

// tooMany reports a document past MaxNodes, and errTooMany says so.
func (p *parser) tooMany() bool { return p.made > MaxNodes }

func errTooMany() error {
	return &Error{Msg: fmt.Sprintf("the document has more than %d nodes", MaxNodes)}
}

// newNode hands out a node from a slab, so a document costs a few allocations, not one
// per node.
func (p *parser) newNode(kind Kind, at mark) *Node {
	if len(p.slab) == 0 {
		p.slab = make([]Node, min(max(16, p.made/2), 1024))
	}
	n := &p.slab[0]
	p.slab = p.slab[1:]
	p.made++
	n.Kind = kind
	n.Line = at.line + 1
	n.Column = at.col + 1
	return n
}

func (p *parser) emptyScalar(at mark) *Node { return p.newNode(ScalarNode, at) }

// push adds a child of the collection being parsed.
func (p *parser) push(n ...*Node) { p.stack = append(p.stack, n...) }

// content sets n.Content to the children pushed since the stack had length from.
func (p *parser) content(n *Node, from int) {
	k := len(p.stack) - from
	if k == 0 {
		return
	}
	if cap(p.ptrs)-len(p.ptrs) < k {
		p.ptrs = make([]*Node, 0, max(k, 2*cap(p.ptrs), 64))
	}
	start := len(p.ptrs)
	p.ptrs = append(p.ptrs, p.stack[from:]...)
	n.Content = p.ptrs[start:len(p.ptrs):len(p.ptrs)]
	clear(p.stack[from:])
	p.stack = p.stack[:from]
}

func (p *parser) parseStream() (Document, error) {
	if _, err := p.peek(); err != nil { // STREAM-START
		return Document{}, err
	}
	p.skip()
	t, err := p.peek()
	if err != nil {
		return Document{}, err
	}
	var root *Node
	switch t.kind {
	case tokStreamEnd:
		return Document{}, nil
	case tokVersionDirective, tokTagDirective, tokDocumentStart:
		if err := p.directives(); err != nil {
			return Document{}, err
		}
		if t, err = p.peek(); err != nil {
			return Document{}, err
		}
		if t.kind != tokDocumentStart {
			return Document{}, p.errorf(t.start, "", "did not find expected <document start>")
		}
		p.skip()
		if t, err = p.peek(); err != nil {
			return Document{}, err
		}
		switch t.kind {
		case tokVersionDirective, tokTagDirective, tokDocumentStart, tokDocumentEnd, tokStreamEnd:
			root = p.emptyScalar(t.start)
		default:
			if root, err = p.parseNode(true, false); err != nil {
				return Document{}, err
			}
		}
	default:
		if err := p.directives(); err != nil {
			return Document{}, err
		}
		if root, err = p.parseNode(true, false); err != nil {
			return Document{}, err
		}
	}
	if p.tooMany() {
		return Document{}, errTooMany()
	}
	doc := Document{Root: root, Nodes: p.made}
	if t, err = p.peek(); err != nil {
		return Document{}, err
	}
	if t.kind == tokDocumentEnd {
		p.skip()
		doc.MoreLine = p.moreContent(tokDocumentEnd)
	} else if t.kind != tokStreamEnd {
		doc.MoreLine = t.start.line + 1
	}
	if doc.MoreLine > 0 {
		doc.ContentLine = p.moreContent(tokDocumentEnd, tokDocumentStart)
	}
	return doc, nil
}

// moreContent skips the tokens of the skipped kinds and returns the line where the
// next token starts, or 0 at the end of the stream. yaml.v3 reads no further than the
// first document, so what follows is looked at only to tell the caller it is there; a
// syntax error in it counts as content.
func (p *parser) moreContent(skipped ...tokenKind) int {
	for {
		t, err := p.s.peekToken()
		switch {
		case err != nil:
			return p.s.m.line + 1
		case slices.Contains(skipped, t.kind):
			p.skip()
		case t.kind == tokStreamEnd:
			return 0
		default:
			return t.start.line + 1
		}
	}
}

// directives reads %YAML and %TAG directives, then adds the default tag handles.
func (p *parser) directives() error {
	seenVersion := false
	for {
		t, err := p.peek()
		if err != nil {
			return err
		}
		switch t.kind {
		case tokVersionDirective:
			if seenVersion {
				return p.errorf(t.start, "", "found duplicate %%YAML directive")
			}
			if t.major != 1 || t.minor != 1 {
				return p.errorf(t.start, "", "found incompatible YAML document")
			}
			seenVersion = true
		case tokTagDirective:
			if _, dup := p.tagPrefix(t.value); dup {
				return p.errorf(t.start, "", "found duplicate %%TAG directive")
			}
			p.tags = append(p.tags, tagDirective{handle: t.value, prefix: t.suffix})
		default:
			for _, def := range [...]tagDirective{{"!", "!"}, {"!!", longTagPrefix}} {
				if _, ok := p.tagPrefix(def.handle); !ok {
					p.tags = append(p.tags, def)
				}
			}
			return nil
		}
		p.skip()
	}
}

// tagPrefix returns the prefix a tag handle stands for.
func (p *parser) tagPrefix(handle string) (string, bool) {
	for _, d := range p.tags {
		if d.handle == handle {
			return d.prefix, true
		}
	}
	return "", false
}

// parseNode reads one node: an alias, or optional properties (anchor, tag) and content.
func (p *parser) parseNode(block, indentlessSequence bool) (*Node, error) {
	if p.tooMany() {
		return nil, errTooMany()
	}
	t, err := p.peek()
	if err != nil {
		return nil, err
	}
	if t.kind == tokAlias {
		n := p.newNode(AliasNode, t.start)
		n.Value = t.value
		if n.Alias = p.anchors[t.value]; n.Alias == nil {
			return nil, p.errorf(t.start, "", "unknown anchor '%s' referenced", t.value)
		}
		p.skip()
		return n, nil
	}
	start := t.start
	// Properties: at most one anchor and one tag, in either order.
	var (
		anchor, tag string
		hasTag      bool
	)
	for t.kind == tokAnchor && anchor == "" || t.kind == tokTag && !hasTag {
		if t.kind == tokAnchor {
			anchor = t.value
		} else {
			hasTag, tag = true, t.suffix
			if t.value != "" {
				prefix, ok := p.tagPrefix(t.value)
				if !ok {
					return nil, p.errorf(t.start, fmt.Sprintf("while parsing a node that starts at line %d", start.line+1), "found undefined tag handle %q", t.value)
				}
				tag = prefix + t.suffix
			}
		}
		p.skip()
		if t, err = p.peek(); err != nil {
			return nil, err
		}
	}
	var n *Node
	switch {
	case indentlessSequence && t.kind == tokBlockEntry:
		n = p.newNode(SequenceNode, start)
	case t.kind == tokScalar:
		n = p.newNode(ScalarNode, start)
		n.Style = t.style
		n.Value = t.value
		p.skip()
	case t.kind == tokFlowSequenceStart:
		n = p.newNode(SequenceNode, start)
		n.Style = FlowStyle
	case t.kind == tokFlowMappingStart:
		n = p.newNode(MappingNode, start)
		n.Style = FlowStyle
	case block && t.kind == tokBlockSequenceStart:
		n = p.newNode(SequenceNode, start)
	case block && t.kind == tokBlockMappingStart:
		n = p.newNode(MappingNode, start)
	case anchor != "" || hasTag:
		n = p.emptyScalar(start)
	default:
		context := "while parsing a flow node"
		if block {
			context = "while parsing a block node"
		}
		return nil, p.errorf(t.start, fmt.Sprintf("%s that starts at line %d", context, start.line+1), "did not find expected node content")
	}
	if tag != "" && tag != "!" {
		n.Tag = shortTag(tag)
		n.Style |= TaggedStyle
	}
	if anchor != "" {
		n.Anchor = anchor
		if p.anchors == nil {
			p.anchors = make(map[string]*Node)
		}
		p.anchors[anchor] = n
	}
	if n.Kind == ScalarNode {
		return n, nil
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > MaxDepth {
		return nil, p.errorf(t.start, "", "collections are nested more than %d levels deep", MaxDepth)
	}
	from := len(p.stack)
	switch t.kind {
	case tokBlockEntry:
		err = p.indentlessSequence()
	case tokFlowSequenceStart:
		err = p.flowSequence()
	case tokFlowMappingStart:
		err = p.flowMapping()
	case tokBlockSequenceStart:
		err = p.blockSequence()
	default:
		err = p.blockMapping()
	}
	if err != nil {
		return nil, err
	}
	p.content(n, from)
	return n, nil
}

func within(what string, at mark) string {
	return fmt.Sprintf("while parsing %s that starts at line %d, column %d", what, at.line+1, at.col+1)
}

// entry reads the node after an indicator token (-, ? or :), or an empty scalar at the
// indicator's end when the node is omitted (the next token is one of stops).
func (p *parser) entry(indentless bool, stops ...tokenKind) (*Node, error) {
	ind, err := p.peek()
	if err != nil {
		return nil, err
	}
	end := ind.end
	p.skip()
	t, err := p.peek()
	if err != nil {
		return nil, err
	}
	for _, k := range stops {
		if t.kind == k {
			return p.emptyScalar(end), nil
		}
	}
	return p.parseNode(true, indentless)
}

// open consumes the token that opens a collection and returns where it starts.
func (p *parser) open() (mark, error) {
	t, err := p.peek()
	if err != nil {
		return mark{}, err
	}
	start := t.start
	p.skip()
	return start, nil
}

func (p *parser) blockSequence() error {
	start, err := p.open()
	if err != nil {
		return err
	}
	for {
		t, err := p.peek()
		if err != nil {
			return err
		}
		switch t.kind {
		case tokBlockEntry:
			item, err := p.entry(false, tokBlockEntry, tokBlockEnd)
			if err != nil {
				return err
			}
			p.push(item)
		case tokBlockEnd:
			p.skip()
			return nil
		default:
			return p.errorf(t.start, within("a block collection", start), "did not find expected '-' indicator")
		}
	}
}

func (p *parser) indentlessSequence() error {
	for {
		t, err := p.peek()
		if err != nil {
			return err
		}
		if t.kind != tokBlockEntry {
			return nil
		}
		item, err := p.entry(false, tokBlockEntry, tokKey, tokValue, tokBlockEnd)
		if err != nil {
			return err
		}
		p.push(item)
	}
}

func (p *parser) blockMapping() error {
	start, err := p.open()
	if err != nil {
		return err
	}
	for {
		t, err := p.peek()
		if err != nil {
			return err
		}
		var key *Node
		switch t.kind {
		case tokKey:
			if key, err = p.entry(true, tokKey, tokValue, tokBlockEnd); err != nil {
				return err
			}
		case tokBlockEnd:
			p.skip()
			return nil
		default:
			return p.errorf(t.start, within("a block mapping", start), "did not find expected key")
		}
		if t, err = p.peek(); err != nil {
			return err
		}
		var value *Node
		if t.kind == tokValue {
			if value, err = p.entry(true, tokKey, tokValue, tokBlockEnd); err != nil {
				return err
			}
		} else {
			value = p.emptyScalar(t.start)
		}
		p.push(key, value)
	}
}

// flowNext returns the first token of a flow collection's next entry, or its end token:
// entries after the first must be preceded by ','.
func (p *parser) flowNext(first bool, end tokenKind, start mark, what, closer string) (*token, error) {
	t, err := p.peek()
	if err != nil || first || t.kind == end {
		return t, err
	}
	if t.kind != tokFlowEntry {
		return nil, p.errorf(t.start, within(what, start), "did not find expected ',' or %s", closer)
	}
	p.skip()
	return p.peek()
}

func (p *parser) flowSequence() error {
	start, err := p.open()
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		t, err := p.flowNext(first, tokFlowSequenceEnd, start, "a flow sequence", "']'")
		if err != nil {
			return err
		}
		switch t.kind {
		case tokFlowSequenceEnd:
			p.skip()
			return nil
		case tokKey:
			pair, err := p.flowSequencePair(t.start)
			if err != nil {
				return err
			}
			p.push(pair)
		default:
			item, err := p.parseNode(false, false)
			if err != nil {
				return err
			}
			p.push(item)
		}
	}
}

// flowSequencePair reads "? key : value" (or "key: value") inside a flow sequence, a
// single-pair mapping. Like libyaml, an omitted key consumes the token that follows it.
func (p *parser) flowSequencePair(keyStart mark) (*Node, error) {
	m := p.newNode(MappingNode, keyStart)
	m.Style = FlowStyle
	p.skip()
	t, err := p.peek()
	if err != nil {
		return nil, err
	}
	var key *Node
	switch t.kind {
	case tokValue, tokFlowEntry, tokFlowSequenceEnd:
		p.skip()
		key = p.emptyScalar(t.end)
	default:
		if key, err = p.parseNode(false, false); err != nil {
			return nil, err
		}
	}
	if t, err = p.peek(); err != nil {
		return nil, err
	}
	valueMark := t.start
	var value *Node
	if t.kind == tokValue {
		p.skip()
		next, err := p.peek()
		if err != nil {
			return nil, err
		}
		if next.kind != tokFlowEntry && next.kind != tokFlowSequenceEnd {
			if value, err = p.parseNode(false, false); err != nil {
				return nil, err
			}
		}
	}
	if value == nil {
		value = p.emptyScalar(valueMark)
	}
	from := len(p.stack)
	p.push(key, value)
	p.content(m, from)
	return m, nil
}

func (p *parser) flowMapping() error {
	start, err := p.open()
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		t, err := p.flowNext(first, tokFlowMappingEnd, start, "a flow mapping", "'}'")
		if err != nil {
			return err
		}
		var key, value *Node
		switch t.kind {
		case tokFlowMappingEnd:
			p.skip()
			return nil
		case tokKey:
			p.skip()
			if t, err = p.peek(); err != nil {
				return err
			}
			switch t.kind {
			case tokValue, tokFlowEntry, tokFlowMappingEnd:
				key = p.emptyScalar(t.start)
			default:
				if key, err = p.parseNode(false, false); err != nil {
					return err
				}
			}
			if t, err = p.peek(); err != nil {
				return err
			}
			if t.kind == tokValue {
				p.skip()
				if t, err = p.peek(); err != nil {
					return err
				}
				if t.kind != tokFlowEntry && t.kind != tokFlowMappingEnd {
					if value, err = p.parseNode(false, false); err != nil {
						return err
					}
				}
			}
		default:
			if key, err = p.parseNode(false, false); err != nil {
				return err
			}
			if t, err = p.peek(); err != nil {
				return err
			}
		}
		if value == nil {
			value = p.emptyScalar(t.start)
		}
		p.push(key, value)
	}
}
