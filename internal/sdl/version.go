package sdl

import (
	"errors"
	"strconv"
	"strings"

	"berth.dev/berth/internal/yaml"
)

// sdlVersion is the SDL's version field, read with the tolerant semantic-version rules
// Akash uses ("2", "2.0", "v2.1.0" are all fine).
type sdlVersion struct {
	text                string
	major, minor, patch uint64
	prerelease          bool
}

// v21 reports that the 2.1 grouping rules apply: any version from 2.1.0 on.
func (v sdlVersion) v21() bool {
	switch {
	case v.major != 2:
		return v.major > 2
	case v.minor != 1:
		return v.minor > 1
	case v.patch != 0:
		return true
	}
	return !v.prerelease
}

// v20 reports exactly 2.0.0 (build metadata ignored, as semantic versions compare).
func (v sdlVersion) v20() bool {
	return v.major == 2 && v.minor == 0 && v.patch == 0 && !v.prerelease
}

// version reads the version field as Akash does, from the node's text as written (an
// alias reads as its anchor's name, which is no version).
func (d *decoder) version(n *yaml.Node) (sdlVersion, error) {
	text := n.Value
	sv, err := parseTolerantVersion(text)
	if err != nil {
		return sv, d.errorf(n, "%q is not a version number (use \"2.0\" or \"2.1\"): %v", text, err)
	}
	switch {
	case sv.v20():
	case sv.v21():
		if sv.major != 2 || sv.minor != 1 || sv.patch != 0 {
			d.warnf(n, "SDL version %s is read with the 2.1 rules, as Akash reads it", text)
		}
	default:
		return sv, d.errorf(n, "unsupported SDL version %q: Akash reads 2.0 and 2.1", text)
	}
	return sv, nil
}

// parseTolerantVersion reads a semantic version leniently: surrounding space and a "v"
// prefix are dropped, leading zeros removed, and a missing minor or patch is 0.
func parseTolerantVersion(s string) (sdlVersion, error) {
	v := sdlVersion{text: s}
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	parts := strings.SplitN(s, ".", 3)
	for i, p := range parts {
		if len(p) > 1 {
			p = strings.TrimLeft(p, "0")
			if p == "" || p[0] < '0' || p[0] > '9' {
				p = "0" + p
			}
			parts[i] = p
		}
	}
	if len(parts) < 3 {
		if strings.ContainsAny(parts[len(parts)-1], "+-") {
			return v, errors.New("a short version cannot carry pre-release or build data")
		}
		for len(parts) < 3 {
			parts = append(parts, "0")
		}
	}
	patch := parts[2]
	if i := strings.IndexByte(patch, '+'); i >= 0 {
		for _, b := range strings.Split(patch[i+1:], ".") {
			if b == "" || !onlyChars(b, alnum) {
				return v, errors.New("invalid build metadata")
			}
		}
		patch = patch[:i]
	}
	if i := strings.IndexByte(patch, '-'); i >= 0 {
		for _, p := range strings.Split(patch[i+1:], ".") {
			if p == "" || !onlyChars(p, alnum) {
				return v, errors.New("invalid pre-release")
			}
			if onlyChars(p, digitsOnly) {
				if _, err := strconv.ParseUint(p, 10, 64); err != nil || len(p) > 1 && p[0] == '0' {
					return v, errors.New("invalid numeric pre-release")
				}
			}
		}
		v.prerelease = true
		patch = patch[:i]
	}
	var err error
	for i, p := range []string{parts[0], parts[1], patch} {
		if !onlyChars(p, digitsOnly) || len(p) > 1 && p[0] == '0' {
			return v, errors.New("major, minor and patch must be numbers")
		}
		var n uint64
		if n, err = strconv.ParseUint(p, 10, 64); err != nil {
			return v, errors.New("major, minor and patch must be numbers")
		}
		switch i {
		case 0:
			v.major = n
		case 1:
			v.minor = n
		default:
			v.patch = n
		}
	}
	return v, nil
}

const (
	digitsOnly = "0123456789"
	alnum      = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789"
)

func onlyChars(s, set string) bool {
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}
