package yaml

import (
	"strings"
	"unicode/utf8"
)

// Scalar, tag and directive scanning. Values are slices of the input when they can be
// (a single-line plain or quoted scalar without escapes); otherwise they are built in the
// scanner's scratch buffer with libyaml's folding rules.

// value returns b as a string, keeping b's storage for reuse.
func (s *scanner) value(b []byte) string {
	v := string(b)
	s.buf = b[:0]
	return v
}

// fold appends what the line breaks between two parts of a flow or plain scalar become:
// a single LF becomes a space, further breaks are kept; LS and PS are kept.
func fold(b []byte, leadingBreak string, trailingBreaks []byte) []byte {
	if leadingBreak == "\n" {
		if len(trailingBreaks) == 0 {
			return append(b, ' ')
		}
		return append(b, trailingBreaks...)
	}
	b = append(b, leadingBreak...)
	return append(b, trailingBreaks...)
}

// plainSafe marks the ASCII characters that can neither end a word of a plain scalar
// nor start a line break; plainSafeFlow also excludes the flow indicators.
var plainSafe, plainSafeFlow = func() (block, flow [256]bool) {
	for c := 0x21; c < 0x7F; c++ {
		block[c] = c != ':'
		flow[c] = block[c] && !strings.ContainsRune(",?[]{}", rune(c))
	}
	return block, flow
}()

func (s *scanner) atDocumentIndicator() bool {
	return s.m.col == 0 && (s.at(0) == '-' && s.at(1) == '-' && s.at(2) == '-' ||
		s.at(0) == '.' && s.at(1) == '.' && s.at(2) == '.') && s.isBlankz(3)
}

// scanPlainScalar scans an unquoted scalar, which may continue on more-indented lines.
func (s *scanner) scanPlainScalar() (token, error) {
	start, end := s.m, s.m
	indent := s.indent + 1
	var (
		b             []byte // nil while the value is src[start.off:end.off]
		wsFrom, wsTo  int    // blanks seen since the last word, on its line
		leadingBlanks bool   // a line break was seen since the last word
		leadingBreak  string
		trailing      []byte
	)
	for !s.atDocumentIndicator() && s.at(0) != '#' {
		for !s.isBlankz(0) {
			c := s.at(0)
			if c == ':' && s.isBlankz(1) ||
				s.flowLevel > 0 && (c == ',' || c == '?' || c == '[' || c == ']' || c == '{' || c == '}') {
				break
			}
			if leadingBlanks {
				if b == nil {
					b = s.buf[:0]
					b = append(b, s.src[start.off:end.off]...)
				}
				b = fold(b, leadingBreak, trailing)
				trailing = trailing[:0]
				leadingBlanks = false
			} else if wsTo > wsFrom && b != nil {
				b = append(b, s.src[wsFrom:wsTo]...)
			}
			wsFrom, wsTo = 0, 0
			// Take this character and the run of ASCII characters after it that cannot
			// end a word.
			from := s.m.off
			j := from + width(c)
			safe := &plainSafe
			if s.flowLevel > 0 {
				safe = &plainSafeFlow
			}
			for j < len(s.src) && safe[s.src[j]] {
				j++
			}
			if b != nil {
				b = append(b, s.src[from:j]...)
			}
			s.advance(j, 1+j-from-width(c))
			end = s.m
		}
		if !s.isBlank(0) && !s.isBreak(0) {
			break
		}
		for s.isBlank(0) || s.isBreak(0) {
			if s.isBlank(0) {
				if leadingBlanks && s.m.col < indent && s.at(0) == '\t' {
					return token{}, s.errorf(s.m, contextAt("a plain scalar", start), "found a tab character that violates indentation")
				}
				if !leadingBlanks && wsTo == 0 {
					wsFrom = s.m.off
				}
				s.skip()
				if !leadingBlanks {
					wsTo = s.m.off
				}
				continue
			}
			if !leadingBlanks {
				wsFrom, wsTo = 0, 0
				leadingBreak = s.takeBreak()
				leadingBlanks = true
			} else {
				trailing = s.readLine(trailing)
			}
		}
		if s.flowLevel == 0 && s.m.col < indent {
			break
		}
	}
	if leadingBlanks {
		s.keyAllowed = true
	}
	t := token{kind: tokScalar, start: start, end: end}
	if b != nil {
		t.value = s.value(b)
	} else {
		t.value = s.src[start.off:end.off]
	}
	return t, nil
}

// scanFlowScalar scans a single- or double-quoted scalar.
func (s *scanner) scanFlowScalar(single bool) (token, error) {
	start := s.m
	s.skip()
	from := s.m.off
	quote := byte('"')
	if single {
		quote = '\''
	}
	// Fast path: the closing quote on the same line, with no escapes in between (a
	// line break, possibly NEL, LS or PS, or an escape sends it to the slow path).
	for i := from; i < len(s.src); i++ {
		switch c := s.src[i]; {
		case c == '\\' && !single, c == '\r', c == '\n', c == 0xC2, c == 0xE2:
		case c != quote:
			continue
		case single && i+1 < len(s.src) && s.src[i+1] == quote: // '' is an escaped quote
		default:
			s.advance(i+1, utf8.RuneCountInString(s.src[s.m.off:i])+1)
			return token{kind: tokScalar, style: quoteStyle(single), start: start, end: s.m, value: s.src[from:i]}, nil
		}
		break
	}
	return s.scanFlowScalarSlow(start, single)
}

func quoteStyle(single bool) Style {
	if single {
		return SingleQuotedStyle
	}
	return DoubleQuotedStyle
}

func (s *scanner) scanFlowScalarSlow(start mark, single bool) (token, error) {
	b := s.buf[:0]
	var (
		ws           []byte
		leadingBreak string
		trailing     []byte
	)
	context := contextAt("a quoted scalar", start)
	for {
		if s.atDocumentIndicator() {
			return token{}, s.errorf(s.m, context, "found unexpected document indicator")
		}
		if s.atEnd() {
			return token{}, s.errorf(s.m, context, "found unexpected end of stream")
		}
		leadingBlanks := false
		for !s.isBlankz(0) {
			c := s.at(0)
			switch {
			case single && c == '\'' && s.at(1) == '\'':
				b = append(b, '\'')
				s.skip()
				s.skip()
				continue
			case single && c == '\'' || !single && c == '"':
			case !single && c == '\\' && s.isBreak(1):
				s.skip()
				s.skipLine()
				leadingBlanks = true
			case !single && c == '\\':
				var err error
				if b, err = s.scanEscape(b, context); err != nil {
					return token{}, err
				}
				continue
			default:
				b = s.read(b)
				continue
			}
			break
		}
		if c := s.at(0); single && c == '\'' || !single && c == '"' {
			break
		}
		for s.isBlank(0) || s.isBreak(0) {
			switch {
			case s.isBlank(0) && !leadingBlanks:
				ws = s.read(ws)
			case s.isBlank(0):
				s.skip()
			case !leadingBlanks:
				ws = ws[:0]
				leadingBreak = s.takeBreak()
				leadingBlanks = true
			default:
				trailing = s.readLine(trailing)
			}
		}
		if leadingBlanks {
			b = fold(b, leadingBreak, trailing)
			trailing = trailing[:0]
			leadingBreak = ""
		} else {
			b = append(b, ws...)
			ws = ws[:0]
		}
	}
	s.skip()
	return token{kind: tokScalar, style: quoteStyle(single), start: start, end: s.m, value: s.value(b)}, nil
}

// scanEscape reads one escape sequence of a double-quoted scalar.
func (s *scanner) scanEscape(b []byte, context string) ([]byte, error) {
	codeLength := 0
	switch s.at(1) {
	case '0':
		b = append(b, 0)
	case 'a':
		b = append(b, '\a')
	case 'b':
		b = append(b, '\b')
	case 't', '\t':
		b = append(b, '\t')
	case 'n':
		b = append(b, '\n')
	case 'v':
		b = append(b, '\v')
	case 'f':
		b = append(b, '\f')
	case 'r':
		b = append(b, '\r')
	case 'e':
		b = append(b, 0x1B)
	case ' ':
		b = append(b, ' ')
	case '"':
		b = append(b, '"')
	case '\'':
		b = append(b, '\'')
	case '\\':
		b = append(b, '\\')
	case 'N':
		b = append(b, "\u0085"...)
	case '_':
		b = append(b, "\u00a0"...)
	case 'L':
		b = append(b, "\u2028"...)
	case 'P':
		b = append(b, "\u2029"...)
	case 'x':
		codeLength = 2
	case 'u':
		codeLength = 4
	case 'U':
		codeLength = 8
	default:
		return nil, s.errorf(s.m, context, "found unknown escape character")
	}
	s.skip()
	s.skip()
	if codeLength == 0 {
		return b, nil
	}
	value := rune(0)
	for k := range codeLength {
		d, ok := hexDigit(s.at(k))
		if !ok {
			return nil, s.errorf(s.m, context, "did not find expected hexadecimal number")
		}
		value = value<<4 + rune(d)
	}
	if value >= 0xD800 && value <= 0xDFFF || value > 0x10FFFF {
		return nil, s.errorf(s.m, context, "found invalid Unicode character escape code")
	}
	b = utf8.AppendRune(b, value)
	for range codeLength {
		s.skip()
	}
	return b, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// scanBlockScalar scans a literal (|) or folded (>) block scalar.
func (s *scanner) scanBlockScalar(literal bool) (token, error) {
	start := s.m
	context := contextAt("a block scalar", start)
	s.skip()
	chomping, increment := 0, 0
	chomp := func() {
		switch s.at(0) {
		case '+':
			chomping = 1
			s.skip()
		case '-':
			chomping = -1
			s.skip()
		}
	}
	indicator := func() error {
		if c := s.at(0); c >= '0' && c <= '9' {
			if c == '0' {
				return s.errorf(s.m, context, "found an indentation indicator equal to 0")
			}
			increment = int(c - '0')
			s.skip()
		}
		return nil
	}
	if c := s.at(0); c == '+' || c == '-' {
		chomp()
		if err := indicator(); err != nil {
			return token{}, err
		}
	} else {
		if err := indicator(); err != nil {
			return token{}, err
		}
		chomp()
	}
	if err := s.finishLine(context); err != nil {
		return token{}, err
	}
	end := s.m
	indent := 0
	if increment > 0 {
		if s.indent >= 0 {
			indent = s.indent + increment
		} else {
			indent = increment
		}
	}
	var (
		b                            = s.buf[:0]
		leadingBreak, trailingBreaks []byte
		leadingBlank, trailingBlank  bool
	)
	var err error
	if trailingBreaks, err = s.blockScalarBreaks(&indent, trailingBreaks, context, &end); err != nil {
		return token{}, err
	}
	for s.m.col == indent && !s.atEnd() {
		trailingBlank = s.isBlank(0)
		if !literal && !leadingBlank && !trailingBlank && len(leadingBreak) > 0 && leadingBreak[0] == '\n' {
			if len(trailingBreaks) == 0 {
				b = append(b, ' ')
			}
		} else {
			b = append(b, leadingBreak...)
		}
		leadingBreak = leadingBreak[:0]
		b = append(b, trailingBreaks...)
		trailingBreaks = trailingBreaks[:0]
		leadingBlank = s.isBlank(0)
		from := s.m.off
		s.skipToBreak()
		b = append(b, s.src[from:s.m.off]...)
		leadingBreak = s.readLine(leadingBreak)
		if trailingBreaks, err = s.blockScalarBreaks(&indent, trailingBreaks, context, &end); err != nil {
			return token{}, err
		}
	}
	if chomping != -1 {
		b = append(b, leadingBreak...)
	}
	if chomping == 1 {
		b = append(b, trailingBreaks...)
	}
	style := LiteralStyle
	if !literal {
		style = FoldedStyle
	}
	return token{kind: tokScalar, style: style, start: start, end: end, value: s.value(b)}, nil
}

// blockScalarBreaks skips the indentation and empty lines before a block scalar's next
// content line, and settles the indentation when it was not given.
func (s *scanner) blockScalarBreaks(indent *int, breaks []byte, context string, end *mark) ([]byte, error) {
	*end = s.m
	maxIndent := 0
	for {
		for (*indent == 0 || s.m.col < *indent) && s.at(0) == ' ' {
			s.skip()
		}
		maxIndent = max(maxIndent, s.m.col)
		if (*indent == 0 || s.m.col < *indent) && s.at(0) == '\t' {
			return nil, s.errorf(s.m, context, "found a tab character where an indentation space is expected")
		}
		if !s.isBreak(0) {
			break
		}
		breaks = s.readLine(breaks)
		*end = s.m
	}
	if *indent == 0 {
		*indent = max(maxIndent, s.indent+1, 1)
	}
	return breaks, nil
}

// finishLine skips what may end a block scalar's header or a directive: blanks and a
// comment, then the line break.
func (s *scanner) finishLine(context string) error {
	s.skipBlanks()
	if s.at(0) == '#' {
		s.skipToBreak()
	}
	if !s.isBreakz(0) {
		return s.errorf(s.m, context, "did not find expected comment or line break")
	}
	if s.isBreak(0) {
		s.skipLine()
	}
	return nil
}

// fetchDirective scans a %YAML or %TAG directive line.
func (s *scanner) fetchDirective() error {
	s.unrollIndent(-1)
	if err := s.removeKey(); err != nil {
		return err
	}
	s.keyAllowed = false
	start := s.m
	context := contextAt("a directive", start)
	s.skip()
	from := s.m.off
	for isAlpha(s.at(0)) {
		s.skip()
	}
	name := s.src[from:s.m.off]
	switch {
	case name == "":
		return s.errorf(s.m, context, "could not find expected directive name")
	case !s.isBlankz(0):
		return s.errorf(s.m, context, "found unexpected non-alphabetical character")
	}
	t := token{start: start}
	switch name {
	case "YAML":
		t.kind = tokVersionDirective
		s.skipBlanks()
		var err error
		if t.major, err = s.versionNumber(context); err != nil {
			return err
		}
		if s.at(0) != '.' {
			return s.errorf(s.m, context, "did not find expected digit or '.' character")
		}
		s.skip()
		if t.minor, err = s.versionNumber(context); err != nil {
			return err
		}
	case "TAG":
		t.kind = tokTagDirective
		s.skipBlanks()
		handle, err := s.tagHandle(true, context)
		if err != nil {
			return err
		}
		if !s.isBlank(0) {
			return s.errorf(s.m, context, "did not find expected whitespace")
		}
		s.skipBlanks()
		prefix, err := s.tagURI("", context)
		if err != nil {
			return err
		}
		if !s.isBlankz(0) {
			return s.errorf(s.m, context, "did not find expected whitespace or line break")
		}
		t.value, t.suffix = handle, prefix
	default:
		return s.errorf(start, context, "found unknown directive name")
	}
	t.end = s.m
	if err := s.finishLine(context); err != nil {
		return err
	}
	s.queue(t, -1)
	return nil
}

func (s *scanner) versionNumber(context string) (int, error) {
	v, n := 0, 0
	for c := s.at(0); c >= '0' && c <= '9'; c = s.at(0) {
		n++
		if n > 2 {
			return 0, s.errorf(s.m, context, "found extremely long version number")
		}
		v = v*10 + int(c-'0')
		s.skip()
	}
	if n == 0 {
		return 0, s.errorf(s.m, context, "did not find expected version number")
	}
	return v, nil
}

// fetchTag scans a tag: !<verbatim>, !suffix, !!suffix or !handle!suffix.
func (s *scanner) fetchTag() error {
	if err := s.saveKey(); err != nil {
		return err
	}
	s.keyAllowed = false
	start := s.m
	context := contextAt("a tag", start)
	var handle, suffix string
	if s.at(1) == '<' {
		s.skip()
		s.skip()
		var err error
		if suffix, err = s.tagURI("", context); err != nil {
			return err
		}
		if s.at(0) != '>' {
			return s.errorf(s.m, context, "did not find the expected '>'")
		}
		s.skip()
	} else {
		var err error
		if handle, err = s.tagHandle(false, context); err != nil {
			return err
		}
		if len(handle) > 1 && handle[0] == '!' && handle[len(handle)-1] == '!' {
			if suffix, err = s.tagURI("", context); err != nil {
				return err
			}
		} else {
			// "!name" is the primary handle "!" followed by the suffix "name"; a lone "!"
			// is the non-specific tag.
			if suffix, err = s.tagURI(handle, context); err != nil {
				return err
			}
			handle = "!"
			if suffix == "" {
				handle, suffix = "", "!"
			}
		}
	}
	if !s.isBlankz(0) {
		return s.errorf(s.m, context, "did not find expected whitespace or line break")
	}
	s.queue(token{kind: tokTag, start: start, end: s.m, value: handle, suffix: suffix}, -1)
	return nil
}

func (s *scanner) tagHandle(directive bool, context string) (string, error) {
	if s.at(0) != '!' {
		return "", s.errorf(s.m, context, "did not find expected '!'")
	}
	from := s.m.off
	s.skip()
	for isAlpha(s.at(0)) {
		s.skip()
	}
	if s.at(0) == '!' {
		s.skip()
	} else if directive && s.m.off-from != 1 {
		return "", s.errorf(s.m, context, "did not find expected '!'")
	}
	return s.src[from:s.m.off], nil
}

// tagURI scans the URI part of a tag, decoding %-escapes. head is what tagHandle already
// read when the handle turned out to be part of the suffix ("!name").
func (s *scanner) tagURI(head, context string) (string, error) {
	var b []byte
	hasTag := head != ""
	if len(head) > 1 {
		b = append(b, head[1:]...)
	}
	for isURIChar(s.at(0)) {
		if s.at(0) == '%' {
			var err error
			if b, err = s.uriEscapes(b, context); err != nil {
				return "", err
			}
		} else {
			b = s.read(b)
		}
		hasTag = true
	}
	if !hasTag {
		return "", s.errorf(s.m, context, "did not find expected tag URI")
	}
	return string(b), nil
}

func isURIChar(c byte) bool {
	if isAlpha(c) {
		return true
	}
	switch c {
	case ';', '/', '?', ':', '@', '&', '=', '+', '$', ',', '.', '!', '~', '*', '\'', '(', ')', '[', ']', '%':
		return true
	}
	return false
}

// uriEscapes decodes a run of %XX escapes that must form one UTF-8 character.
func (s *scanner) uriEscapes(b []byte, context string) ([]byte, error) {
	w := 1024
	for w > 0 {
		hi, ok1 := hexDigit(s.at(1))
		lo, ok2 := hexDigit(s.at(2))
		if s.at(0) != '%' || !ok1 || !ok2 {
			return nil, s.errorf(s.m, context, "did not find URI escaped octet")
		}
		octet := hi<<4 + lo
		if w == 1024 {
			w = utf8Width(octet)
			if w == 0 {
				return nil, s.errorf(s.m, context, "found an incorrect leading UTF-8 octet")
			}
		} else if octet&0xC0 != 0x80 {
			return nil, s.errorf(s.m, context, "found an incorrect trailing UTF-8 octet")
		}
		b = append(b, octet)
		s.skip()
		s.skip()
		s.skip()
		w--
	}
	return b, nil
}

// utf8Width is the length of the UTF-8 sequence a leading octet announces, 0 if invalid.
func utf8Width(c byte) int {
	switch {
	case c&0x80 == 0:
		return 1
	case c&0xE0 == 0xC0:
		return 2
	case c&0xF0 == 0xE0:
		return 3
	case c&0xF8 == 0xF0:
		return 4
	}
	return 0
}
