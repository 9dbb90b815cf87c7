// Package sdl reads tenants' deployment files (SDL v2.0 and v2.1) exactly as Akash
// does: the deployment groups the ledger records, the manifest the provider receives,
// the manifest version (its hash), and the reclamation settings. A file Akash accepts is
// accepted here with identical groups, manifest and version; a file Akash rejects is
// rejected here, with an error that names the field path and the line.
//
// Beyond Akash, keys that Akash silently ignores (typos, docker-compose habits) are
// reported as warnings, with a suggestion when a known key is close; Options.Strict
// makes them errors. Hostile input is bounded: size (MaxInputBytes), nesting, node
// count, alias expansion, merges, the size of the manifest a file may describe, and the
// number of warnings.
//
// Parse is a pure function, safe for concurrent use.
package sdl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/yaml"
)

// MaxInputBytes is the largest SDL accepted (real ones are a few KiB).
const MaxInputBytes = 1 << 20

// Options change how strictly a file is read.
type Options struct {
	// Strict makes warnings errors: a file with any warning is rejected (and all the
	// warnings are still returned).
	Strict bool
}

// Result is what an SDL file describes.
type Result struct {
	// SDLVersion is the version as written ("2.0", "2.1").
	SDLVersion string
	// Groups are the deployment groups the ledger records, sorted by name.
	Groups []market.GroupSpec
	// Manifest is what the provider receives, group by group.
	Manifest market.Manifest
	// Version is the manifest's version hash (sha256), which the deployment records.
	Version []byte
	// Reclamation is set when the file has a reclamation section.
	Reclamation *Reclamation
}

// Reclamation is how long a lease's resources are kept after the deployment is closed
// for lack of funds, so the tenant can top up.
type Reclamation struct {
	MinWindow time.Duration `json:"min_window"`
}

// Error is a problem at a place in the file: the field path as the tenant wrote it
// (services.web.expose[0].port) and the line, when known.
type Error struct {
	Path   string
	Line   int
	Column int // set for YAML syntax errors
	Msg    string
}

func (e *Error) Error() string { return formatProblem(e.Path, e.Line, e.Column, e.Msg) }

// Warning is something accepted but probably not meant, such as a key Akash ignores.
type Warning struct {
	Path string
	Line int
	Msg  string
}

func (w Warning) String() string { return formatProblem(w.Path, w.Line, 0, w.Msg) }

// MarshalJSON encodes the warning as {"path", "line", "message"}.
func (w Warning) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Path    string `json:"path,omitempty"`
		Line    int    `json:"line,omitempty"`
		Message string `json:"message"`
	}{w.Path, w.Line, w.Msg})
}

func formatProblem(path string, line, column int, msg string) string {
	var b strings.Builder
	switch {
	case path != "" && line > 0:
		fmt.Fprintf(&b, "%s (line %d): ", path, line)
	case path != "":
		b.WriteString(path + ": ")
	case line > 0 && column > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", line, column)
	case line > 0:
		fmt.Fprintf(&b, "line %d: ", line)
	}
	b.WriteString(msg)
	return b.String()
}

// document is an SDL file as read, before groups and manifest are built.
type document struct {
	version      sdlVersion
	versionNode  *yaml.Node
	services     map[string]*service
	servicesNode *yaml.Node
	computes     map[string]*computeProfile
	placements   map[string]*placementProfile
	deployments  []deployment // sorted by service, then placement
	deployNode   *yaml.Node
	// deployServices are the service names under deployment, sorted, including those
	// placed nowhere (they still count when numbering leased-IP endpoints).
	deployServices []string
	endpoints      map[string]*endpointDecl
	endpointNames  []string // sorted
	reclamation    *yaml.Node
	minWindow      string
	parsedWindow   time.Duration
}

var topKeys = fieldSet{
	known:          []string{"version", "include", "services", "profiles", "deployment", "endpoints", "reclamation"},
	unknownIsError: true,
	raw:            true,
}

// Parse reads an SDL file. It returns the warnings found even when it fails.
func Parse(data []byte, opts Options) (*Result, []Warning, error) {
	if len(data) > MaxInputBytes {
		return nil, nil, &Error{Msg: fmt.Sprintf("the file is %d bytes; the limit is %d (1 MiB)", len(data), MaxInputBytes)}
	}
	ydoc, err := yaml.Parse(data)
	if err != nil {
		return nil, nil, yamlError(err)
	}
	if ydoc.Root == nil || ydoc.Root.IsNull() {
		return nil, nil, &Error{Msg: "the file is empty: an SDL needs version, services, profiles and deployment"}
	}
	d := &decoder{root: ydoc.Root, budget: 2*ydoc.Nodes + maxAliasVisits}
	if ydoc.MoreLine > 0 {
		d.warnings = append(d.warnings, Warning{Line: ydoc.MoreLine,
			Msg: "the text from here on is not part of the SDL (a second YAML document, or lines indented less than the first); it is ignored, as Akash ignores it"})
	}
	doc, err := d.document(ydoc.Root)
	if err != nil {
		return nil, d.finishWarnings(), err
	}
	res, err := d.build(doc)
	if err != nil {
		return nil, d.finishWarnings(), err
	}
	if opts.Strict && len(d.warnings) > 0 {
		w := d.warnings[0]
		msg := "--strict makes this warning an error: " + w.Msg
		if n := len(d.warnings) - 1 + d.dropped; n > 0 {
			msg += fmt.Sprintf(" (and %d more warning(s))", n)
		}
		return nil, d.finishWarnings(), &Error{Path: w.Path, Line: w.Line, Msg: msg}
	}
	return res, d.finishWarnings(), nil
}

// yamlError turns a syntax error into an Error.
func yamlError(err error) error {
	var ye *yaml.Error
	if errors.As(err, &ye) {
		msg := "invalid YAML: " + ye.Msg
		if ye.Context != "" {
			msg += " (" + ye.Context + ")"
		}
		return &Error{Line: ye.Line, Column: ye.Column, Msg: msg}
	}
	return &Error{Msg: "invalid YAML: " + err.Error()}
}

func (d *decoder) document(root *yaml.Node) (*document, error) {
	r, err := d.deref(root)
	if err != nil {
		return nil, err
	}
	if r.Kind != yaml.MappingNode {
		return nil, d.errorf(r, "an SDL is a mapping of version, services, profiles and deployment; found %s", describe(r))
	}
	fs, err := d.fields(r, topKeys)
	if err != nil {
		return nil, err
	}
	doc := &document{}
	for _, f := range fs {
		if f.key == "version" && doc.versionNode == nil {
			if doc.version, err = d.version(f.val); err != nil {
				return nil, err
			}
			doc.versionNode = f.val
		}
	}
	if doc.versionNode == nil {
		return nil, d.errorf(r, "version is missing: the first line of an SDL is usually version: \"2.0\"")
	}
	for _, f := range fs {
		switch f.key {
		case "include":
			var inc []string
			if inc, err = d.strs(f.val); err == nil && len(inc) > 0 {
				d.warnf(f.keyNod, "include has no effect: Akash does not support including other files")
			}
		case "services":
			doc.servicesNode = f.val
			doc.services, err = d.services(f.val)
		case "profiles":
			err = d.profiles(f.val, doc)
		case "deployment":
			doc.deployNode = f.val
			err = d.deployments(f.val, doc)
		case "endpoints":
			err = d.endpoints(f.val, doc)
		case "reclamation":
			doc.minWindow, doc.reclamation, err = d.reclamation(f.val)
		}
		if err != nil {
			return nil, err
		}
	}
	return doc, nil
}
