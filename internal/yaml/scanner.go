package yaml

import "fmt"

// The scanner turns the input into tokens. It follows libyaml's model, because that
// model decides what yaml.v3 (and so Akash) accepts: block structure comes from an
// indentation stack (BLOCK-*-START and BLOCK-END tokens), and a "simple key" (a key
// written without "?") is only recognised when its ":" arrives, at which point a KEY
// token, and maybe a BLOCK-MAPPING-START, are inserted before the tokens already queued.

// mark is a position in the input.
type mark struct {
	off  int // byte offset
	idx  int // characters from the start (the simple-key length limit counts these)
	line int // 0-based
	col  int // 0-based, in characters
}

type tokenKind uint8

const (
	tokStreamStart tokenKind = iota + 1
	tokStreamEnd
	tokVersionDirective
	tokTagDirective
	tokDocumentStart
	tokDocumentEnd
	tokBlockSequenceStart
	tokBlockMappingStart
	tokBlockEnd
	tokFlowSequenceStart
	tokFlowSequenceEnd
	tokFlowMappingStart
	tokFlowMappingEnd
	tokBlockEntry
	tokFlowEntry
	tokKey
	tokValue
	tokAlias
	tokAnchor
	tokTag
	tokScalar
)

type token struct {
	kind  tokenKind
	style Style // scalars: 0 for plain, else the quoted or block style
	start mark
	end   mark
	// value is a scalar's value, an anchor or alias name, a tag's handle, or a %TAG
	// directive's handle; suffix is a tag's suffix or a %TAG directive's prefix.
	value, suffix string
	major, minor  int // %YAML directive
}

// simpleKey is a place where a simple key may start.
type simpleKey struct {
	possible bool
	required bool // it must become a key (it starts a line at the block's indentation)
	tokenNum int  // the number of the token the key would be inserted before
	mark     mark
}

const (
	// maxSimpleKeyLength is libyaml's limit on a simple key, in characters.
	maxSimpleKeyLength = 1024
	// maxPeekComment is how far libyaml looks past a token for a comment on its line.
	maxPeekComment = 512
)

type tokSlot struct{ num, slot int }

type scanner struct {
	src string
	m   mark

	tokens    []token
	head      int // index in tokens of the next token to hand out
	parsed    int // tokens handed out so far
	available bool

	started   bool
	flowLevel int
	indent    int
	indents   []int
	// keyAllowed says whether a simple key may start at the current position.
	keyAllowed bool
	keys       []simpleKey // one per flow level, plus one for the block context
	// byTok maps a token number to the slot in keys of the simple key that would be
	// inserted before it, with yaml.v3's exact bookkeeping: closing a flow collection
	// drops the entry of the key saved at its opening bracket, so such a key can be
	// recognised after the parser has consumed its token (the KEY is then appended),
	// which decides what yaml.v3 makes of input like "{}x: y".
	byTok    []tokSlot
	lastKind tokenKind // the kind of the last token fetched

	maxDepth int
	buf      []byte // scratch for scalars that are not a plain slice of src
}

func (s *scanner) errorf(at mark, context string, format string, args ...any) error {
	return &Error{Line: at.line + 1, Column: at.col + 1, Context: context, Msg: fmt.Sprintf(format, args...)}
}

// contextAt describes the construct that started at m, for error messages.
func contextAt(what string, m mark) string {
	return fmt.Sprintf("while scanning %s that starts at line %d, column %d", what, m.line+1, m.col+1)
}

// at returns the byte i bytes ahead, or 0 past the end (the input holds no NUL).
func (s *scanner) at(i int) byte {
	if p := s.m.off + i; p < len(s.src) {
		return s.src[p]
	}
	return 0
}

func (s *scanner) isBlank(i int) bool { c := s.at(i); return c == ' ' || c == '\t' }

// isBreak reports a line break: CR, LF, NEL, LS or PS.
func (s *scanner) isBreak(i int) bool {
	switch s.at(i) {
	case '\r', '\n':
		return true
	case 0xC2:
		return s.at(i+1) == 0x85
	case 0xE2:
		return s.at(i+1) == 0x80 && (s.at(i+2) == 0xA8 || s.at(i+2) == 0xA9)
	}
	return false
}

func (s *scanner) isBreakz(i int) bool { return s.at(i) == 0 || s.isBreak(i) }

func (s *scanner) isBlankz(i int) bool { c := s.at(i); return c == ' ' || c == '\t' || s.isBreakz(i) }

func (s *scanner) atEnd() bool { return s.m.off >= len(s.src) }

// width is the length of the UTF-8 sequence that starts with c (the input is valid
// UTF-8, so c is a leading byte; 1 otherwise, so that scanning always advances).
func width(c byte) int { return max(utf8Width(c), 1) }

// advance moves to byte offset to, past chars characters of the current line.
func (s *scanner) advance(to, chars int) {
	s.m.off, s.m.idx, s.m.col = to, s.m.idx+chars, s.m.col+chars
}

// skipBlanks moves past spaces and tabs.
func (s *scanner) skipBlanks() {
	for s.isBlank(0) {
		s.skip()
	}
}

// skipToBreak moves to the end of the line (a comment's text, say).
func (s *scanner) skipToBreak() {
	for !s.isBreakz(0) {
		s.skip()
	}
}

// takeBreak moves past a line break and returns it as it counts when folding: LF, or
// LS or PS as written.
func (s *scanner) takeBreak() string {
	lb := "\n"
	if s.at(0) == 0xE2 {
		lb = s.src[s.m.off : s.m.off+3]
	}
	s.skipLine()
	return lb
}

// skip moves past one character that is not a line break.
func (s *scanner) skip() {
	s.m.off += width(s.src[s.m.off])
	s.m.idx++
	s.m.col++
}

// skipLine moves past one line break (CR LF counts as one).
func (s *scanner) skipLine() {
	if s.at(0) == '\r' && s.at(1) == '\n' {
		s.m.off += 2
		s.m.idx += 2
	} else {
		s.m.off += width(s.src[s.m.off])
		s.m.idx++
	}
	s.m.col = 0
	s.m.line++
}

// readLine appends the line break at the current position, normalised as libyaml does
// (CR, LF, CR LF and NEL become LF; LS and PS are kept), and moves past it.
func (s *scanner) readLine(b []byte) []byte {
	switch {
	case !s.isBreak(0):
		return b
	case s.at(0) == 0xE2:
		b = append(b, s.src[s.m.off:s.m.off+3]...)
	default:
		b = append(b, '\n')
	}
	s.skipLine()
	return b
}

// read appends the character at the current position and moves past it.
func (s *scanner) read(b []byte) []byte {
	w := width(s.src[s.m.off])
	b = append(b, s.src[s.m.off:s.m.off+w]...)
	s.m.off += w
	s.m.idx++
	s.m.col++
	return b
}

// peekToken returns the next token, scanning as far as needed to know it is complete.
func (s *scanner) peekToken() (*token, error) {
	if !s.available {
		if err := s.fetchMore(); err != nil {
			return nil, err
		}
	}
	return &s.tokens[s.head], nil
}

// skipToken hands out the next token.
func (s *scanner) skipToken() {
	s.available = false
	s.parsed++
	s.head++
}

// fetchMore queues tokens until the head token can no longer turn into a key. Like
// yaml.v3 it keeps at least three tokens queued.
func (s *scanner) fetchMore() error {
	for {
		if s.head < len(s.tokens)-2 {
			slot, ok := s.slotFor(s.parsed)
			if !ok || slot >= len(s.keys) {
				break
			}
			valid, err := s.keyValid(&s.keys[slot])
			if err != nil {
				return err
			}
			if !valid {
				break
			}
		}
		if err := s.fetchNext(); err != nil {
			return err
		}
	}
	s.available = true
	return nil
}

// slotFor returns the slot recorded for token number n.
func (s *scanner) slotFor(n int) (int, bool) {
	for _, e := range s.byTok {
		if e.num == n {
			return e.slot, true
		}
	}
	return 0, false
}

// setSlot records slot for token number n. Entries for tokens already handed out can
// never be looked up again, so they are dropped to keep the list short.
func (s *scanner) setSlot(n, slot int) {
	keep := s.byTok[:0]
	for _, e := range s.byTok {
		if e.num >= s.parsed && e.num != n {
			keep = append(keep, e)
		}
	}
	keep = append(keep, tokSlot{num: n, slot: slot})
	s.byTok = keep
}

func (s *scanner) dropSlot(n int) {
	for i, e := range s.byTok {
		if e.num == n {
			s.byTok = append(s.byTok[:i], s.byTok[i+1:]...)
			return
		}
	}
}

// keyValid reports whether k can still become a key: a simple key must fit on one line
// and within 1024 characters.
func (s *scanner) keyValid(k *simpleKey) (bool, error) {
	if !k.possible {
		return false, nil
	}
	if k.mark.line < s.m.line || k.mark.idx+maxSimpleKeyLength < s.m.idx {
		if k.required {
			return false, s.errorf(k.mark, contextAt("a simple key", k.mark), "could not find expected ':'")
		}
		k.possible = false
		return false, nil
	}
	return true, nil
}

// saveKey records that a simple key may start here.
func (s *scanner) saveKey() error {
	if !s.keyAllowed {
		return nil
	}
	k := simpleKey{
		possible: true,
		required: s.flowLevel == 0 && s.indent == s.m.col,
		tokenNum: s.parsed + len(s.tokens) - s.head,
		mark:     s.m,
	}
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keys[len(s.keys)-1] = k
	s.setSlot(k.tokenNum, len(s.keys)-1)
	return nil
}

// removeKey drops the current level's possible key; a required one is an error.
func (s *scanner) removeKey() error {
	k := &s.keys[len(s.keys)-1]
	if k.possible {
		if k.required {
			return s.errorf(k.mark, contextAt("a simple key", k.mark), "could not find expected ':'")
		}
		k.possible = false
		s.dropSlot(k.tokenNum)
	}
	return nil
}

func (s *scanner) depth() int { return s.flowLevel + len(s.indents) }

func (s *scanner) increaseFlowLevel() error {
	s.keys = append(s.keys, simpleKey{tokenNum: s.parsed + len(s.tokens) - s.head, mark: s.m})
	s.flowLevel++
	if s.depth() > s.maxDepth {
		return s.errorf(s.m, "", "collections are nested more than %d levels deep", s.maxDepth)
	}
	return nil
}

func (s *scanner) decreaseFlowLevel() {
	if s.flowLevel > 0 {
		s.flowLevel--
		s.dropSlot(s.keys[len(s.keys)-1].tokenNum)
		s.keys = s.keys[:len(s.keys)-1]
	}
}

// queue appends a token (n < 0), or inserts it before the token numbered n; if that
// token was already handed out, the token is appended, as yaml.v3 does.
func (s *scanner) queue(t token, n int) {
	if s.head > 0 && len(s.tokens) == cap(s.tokens) {
		// Reuse the space of tokens already handed out.
		k := copy(s.tokens, s.tokens[s.head:])
		s.tokens = s.tokens[:k]
		s.head = 0
	}
	if n >= 0 {
		n -= s.parsed
	}
	if n < 0 {
		s.tokens = append(s.tokens, t)
	} else {
		pos := s.head + n
		s.tokens = append(s.tokens, token{})
		copy(s.tokens[pos+1:], s.tokens[pos:])
		s.tokens[pos] = t
	}
	s.lastKind = s.tokens[len(s.tokens)-1].kind
}

// rollIndent opens a block collection at column when it is deeper than the current one.
func (s *scanner) rollIndent(column, n int, kind tokenKind, at mark) error {
	if s.flowLevel > 0 || s.indent >= column {
		return nil
	}
	s.indents = append(s.indents, s.indent)
	s.indent = column
	if s.depth() > s.maxDepth {
		return s.errorf(at, "", "collections are nested more than %d levels deep", s.maxDepth)
	}
	s.queue(token{kind: kind, start: at, end: at}, n)
	return nil
}

// unrollIndent closes the block collections deeper than column.
func (s *scanner) unrollIndent(column int) {
	if s.flowLevel > 0 {
		return
	}
	for s.indent > column {
		s.queue(token{kind: tokBlockEnd, start: s.m, end: s.m}, -1)
		s.indent = s.indents[len(s.indents)-1]
		s.indents = s.indents[:len(s.indents)-1]
	}
}

// fetchNext scans the next token.
func (s *scanner) fetchNext() error {
	if !s.started {
		s.started = true
		s.indent = -1
		s.keys = append(s.keys, simpleKey{})
		s.keyAllowed = true
		s.queue(token{kind: tokStreamStart, start: s.m, end: s.m}, -1)
		return nil
	}
	s.scanToNextToken()
	s.unrollIndent(s.m.col)
	if s.atEnd() {
		return s.fetchStreamEnd()
	}
	c := s.at(0)
	if s.m.col == 0 {
		switch {
		case c == '%':
			return s.fetchDirective()
		case c == '-' && s.at(1) == '-' && s.at(2) == '-' && s.isBlankz(3):
			return s.fetchDocumentIndicator(tokDocumentStart)
		case c == '.' && s.at(1) == '.' && s.at(2) == '.' && s.isBlankz(3):
			return s.fetchDocumentIndicator(tokDocumentEnd)
		}
	}
	err := s.fetchToken(c)
	if err == nil && s.lastKind != tokBlockEntry {
		s.skipLineComment()
	}
	return err
}

func (s *scanner) fetchToken(c byte) error {
	switch {
	case c == '[':
		return s.fetchFlowCollectionStart(tokFlowSequenceStart)
	case c == '{':
		return s.fetchFlowCollectionStart(tokFlowMappingStart)
	case c == ']':
		return s.fetchFlowCollectionEnd(tokFlowSequenceEnd)
	case c == '}':
		return s.fetchFlowCollectionEnd(tokFlowMappingEnd)
	case c == ',':
		return s.fetchFlowEntry()
	case c == '-' && s.isBlankz(1):
		return s.fetchBlockEntry()
	case c == '?' && (s.flowLevel > 0 || s.isBlankz(1)):
		return s.fetchKey()
	case c == ':' && (s.flowLevel > 0 || s.isBlankz(1)):
		return s.fetchValue()
	case c == '*':
		return s.fetchAnchor(tokAlias)
	case c == '&':
		return s.fetchAnchor(tokAnchor)
	case c == '!':
		return s.fetchTag()
	case c == '|' && s.flowLevel == 0:
		return s.fetchBlockScalar(true)
	case c == '>' && s.flowLevel == 0:
		return s.fetchBlockScalar(false)
	case c == '\'' || c == '"':
		return s.fetchScalar(func() (token, error) { return s.scanFlowScalar(c == '\'') })
	case s.canStartPlain(c):
		return s.fetchScalar(s.scanPlainScalar)
	}
	return s.errorf(s.m, "while scanning for the next token", "found character that cannot start any token")
}

// canStartPlain reports whether a plain scalar can start with c here.
func (s *scanner) canStartPlain(c byte) bool {
	switch c {
	case '-':
		return !s.isBlank(1)
	case '?', ':':
		return s.flowLevel == 0 && !s.isBlankz(1)
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	}
	return !s.isBlankz(0)
}

// scanToNextToken skips white space, comments and line breaks. Tabs are white space in
// flow context and where no simple key may start; elsewhere (the start of a block line)
// they are not, and the caller reports them.
func (s *scanner) scanToNextToken() {
	for {
		tabs := s.flowLevel > 0 || !s.keyAllowed
		j := s.m.off
		for j < len(s.src) && (s.src[j] == ' ' || tabs && s.src[j] == '\t') {
			j++
		}
		s.advance(j, j-s.m.off)
		if s.at(0) == '#' {
			s.skipToBreak()
		}
		if !s.isBreak(0) {
			return
		}
		s.skipLine()
		if s.flowLevel == 0 {
			s.keyAllowed = true
		}
	}
}

// skipLineComment consumes a comment that follows a token on its line, as libyaml does
// right after each token (which lets a tab precede that comment where a tab could not
// otherwise appear).
func (s *scanner) skipLineComment() {
	for i := 0; i < maxPeekComment; i++ {
		if s.isBlank(i) {
			continue
		}
		if s.at(i) == '#' {
			s.skipToBreak()
		}
		return
	}
}

func (s *scanner) fetchStreamEnd() error {
	if s.m.col != 0 {
		s.m.col = 0
		s.m.line++
	}
	s.unrollIndent(-1)
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = false
	s.queue(token{kind: tokStreamEnd, start: s.m, end: s.m}, -1)
	return nil
}

func (s *scanner) fetchDocumentIndicator(kind tokenKind) error {
	s.unrollIndent(-1)
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = false
	start := s.m
	s.skip()
	s.skip()
	s.skip()
	s.queue(token{kind: kind, start: start, end: s.m}, -1)
	return nil
}

func (s *scanner) fetchFlowCollectionStart(kind tokenKind) error {
	if err := s.saveKey(); err != nil {
		return err
	}
	if err := s.increaseFlowLevel(); err != nil {
		return err
	}
	s.keyAllowed = true
	return s.fetchIndicator(kind)
}

func (s *scanner) fetchFlowCollectionEnd(kind tokenKind) error {
	if err := s.removeKey(); err != nil {
		return err
	}
	s.decreaseFlowLevel()
	s.keyAllowed = false
	return s.fetchIndicator(kind)
}

func (s *scanner) fetchFlowEntry() error {
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = true
	return s.fetchIndicator(tokFlowEntry)
}

// fetchIndicator queues a one-character token.
func (s *scanner) fetchIndicator(kind tokenKind) error {
	start := s.m
	s.skip()
	s.queue(token{kind: kind, start: start, end: s.m}, -1)
	return nil
}

func (s *scanner) fetchBlockEntry() error {
	if s.flowLevel == 0 {
		if !s.keyAllowed {
			return s.errorf(s.m, "", "block sequence entries are not allowed in this context")
		}
		if err := s.rollIndent(s.m.col, -1, tokBlockSequenceStart, s.m); err != nil {
			return err
		}
	}
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = true
	return s.fetchIndicator(tokBlockEntry)
}

func (s *scanner) fetchKey() error {
	if s.flowLevel == 0 {
		if !s.keyAllowed {
			return s.errorf(s.m, "", "mapping keys are not allowed in this context")
		}
		if err := s.rollIndent(s.m.col, -1, tokBlockMappingStart, s.m); err != nil {
			return err
		}
	}
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = s.flowLevel == 0
	return s.fetchIndicator(tokKey)
}

func (s *scanner) fetchValue() error {
	k := &s.keys[len(s.keys)-1]
	valid, err := s.keyValid(k)
	if err != nil {
		return err
	}
	if valid {
		// The saved simple key is a key after all: insert KEY before it, and open a
		// block mapping there if this is a new indentation level.
		s.queue(token{kind: tokKey, start: k.mark, end: k.mark}, k.tokenNum)
		if err := s.rollIndent(k.mark.col, k.tokenNum, tokBlockMappingStart, k.mark); err != nil {
			return err
		}
		k.possible = false
		s.dropSlot(k.tokenNum)
		s.keyAllowed = false
	} else {
		if s.flowLevel == 0 {
			if !s.keyAllowed {
				return s.errorf(s.m, "", "mapping values are not allowed in this context")
			}
			if err := s.rollIndent(s.m.col, -1, tokBlockMappingStart, s.m); err != nil {
				return err
			}
		}
		s.keyAllowed = s.flowLevel == 0
	}
	return s.fetchIndicator(tokValue)
}

func (s *scanner) fetchAnchor(kind tokenKind) error {
	if err := s.saveKey(); err != nil {
		return err
	}
	s.keyAllowed = false
	start := s.m
	s.skip()
	from := s.m.off
	for isAlpha(s.at(0)) {
		s.skip()
	}
	name := s.src[from:s.m.off]
	if name == "" || !s.isBlankz(0) && !isAnchorEnd(s.at(0)) {
		what := "an alias"
		if kind == tokAnchor {
			what = "an anchor"
		}
		return s.errorf(start, contextAt(what, start), "did not find expected alphabetic or numeric character")
	}
	s.queue(token{kind: kind, start: start, end: s.m, value: name}, -1)
	return nil
}

// isAnchorEnd reports the indicators that may follow an anchor or alias name.
func isAnchorEnd(c byte) bool {
	switch c {
	case '?', ':', ',', ']', '}', '%', '@', '`':
		return true
	}
	return false
}

// isAlpha reports the characters of anchor names, directive names and tag handles.
func isAlpha(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-'
}

func (s *scanner) fetchBlockScalar(literal bool) error {
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = true
	t, err := s.scanBlockScalar(literal)
	if err != nil {
		return err
	}
	s.queue(t, -1)
	return nil
}

// fetchScalar queues a quoted or plain scalar, which may turn out to be a simple key.
func (s *scanner) fetchScalar(scan func() (token, error)) error {
	if err := s.saveKey(); err != nil {
		return err
	}
	s.keyAllowed = false
	t, err := scan()
	if err != nil {
		return err
	}
	s.queue(t, -1)
	return nil
}
