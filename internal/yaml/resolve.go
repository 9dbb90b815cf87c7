package yaml

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// yamlFloat is the shape of a float in YAML 1.2's core schema.
var yamlFloat = regexp.MustCompile(`^[-+]?(\.\d+|\d+(\.\d*)?)([eE][-+]?\d+)?$`)

// Resolve returns the tag and value of a scalar as yaml.v3 resolves it. tag is the
// scalar's explicit short tag or "" (untagged plain scalar). The value is nil (!!null),
// bool, int, uint64 (integers above MaxInt64), float64, time.Time (!!timestamp) or string.
// An explicit core tag that does not fit the value (!!int "abc") is an error.
func Resolve(tag, in string) (string, any, error) {
	switch tag {
	case "", StrTag, BoolTag, IntTag, FloatTag, NullTag, TimestampTag:
	default:
		return tag, in, nil
	}
	if tag == StrTag {
		return StrTag, in, nil
	}
	rtag, out := resolvePlain(in, tag == "" || tag == TimestampTag)
	if tag == "" || tag == rtag {
		return rtag, out, nil
	}
	if tag == FloatTag && rtag == IntTag {
		switch v := out.(type) {
		case int:
			return FloatTag, float64(v), nil
		case uint64:
			return FloatTag, float64(v), nil
		}
	}
	return "", nil, fmt.Errorf("cannot decode %s `%s` as a %s", rtag, in, tag)
}

// resolvePlain resolves an untagged plain scalar.
func resolvePlain(in string, timestamps bool) (string, any) {
	if in == "" {
		return NullTag, nil
	}
	switch c := in[0]; {
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		switch in {
		case "+.inf", "+.Inf", "+.INF":
			return FloatTag, math.Inf(1)
		case "-.inf", "-.Inf", "-.INF":
			return FloatTag, math.Inf(-1)
		}
		return resolveNumber(in, timestamps)
	case c == '.':
		switch in {
		case ".nan", ".NaN", ".NAN":
			return FloatTag, math.NaN()
		case ".inf", ".Inf", ".INF":
			return FloatTag, math.Inf(1)
		}
		if f, err := strconv.ParseFloat(in, 64); err == nil {
			return FloatTag, f
		}
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		switch in {
		case "true", "True", "TRUE":
			return BoolTag, true
		case "false", "False", "FALSE":
			return BoolTag, false
		case "~", "null", "Null", "NULL":
			return NullTag, nil
		}
	}
	return StrTag, in
}

// resolveNumber resolves a plain scalar that starts with a sign or a digit: a timestamp,
// an integer (decimal, 0x, 0o, 0b or C-style octal, with underscores), or a float.
func resolveNumber(in string, timestamps bool) (string, any) {
	if timestamps {
		if t, ok := parseTimestamp(in); ok {
			return TimestampTag, t
		}
	}
	plain := strings.ReplaceAll(in, "_", "")
	if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return IntTag, int(i)
	}
	if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return IntTag, u
	}
	if yamlFloat.MatchString(plain) {
		if f, err := strconv.ParseFloat(plain, 64); err == nil {
			return FloatTag, f
		}
	}
	for _, p := range [...]struct {
		prefix string
		base   int
	}{{"0b", 2}, {"0o", 8}} {
		if digits, ok := strings.CutPrefix(plain, p.prefix); ok {
			if i, err := strconv.ParseInt(digits, p.base, 64); err == nil {
				return IntTag, int(i)
			}
			if u, err := strconv.ParseUint(digits, p.base, 64); err == nil {
				return IntTag, u
			}
		} else if digits, ok := strings.CutPrefix(plain, "-"+p.prefix); ok {
			if i, err := strconv.ParseInt("-"+digits, p.base, 64); err == nil {
				return IntTag, int(i)
			}
		}
	}
	return StrTag, in
}

var timestampFormats = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

// parseTimestamp reads the timestamp forms yaml.v3 resolves (they all start "YYYY-").
func parseTimestamp(s string) (time.Time, bool) {
	if len(s) < 5 || s[4] != '-' {
		return time.Time{}, false
	}
	for i := range 4 {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	for _, f := range timestampFormats {
		if t, err := time.Parse(f, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
