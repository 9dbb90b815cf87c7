// Package yaml reads YAML documents into a node tree, quickly and within bounds.
//
// It exists for SDL: tenants' deployment files must be read exactly as Akash reads them,
// and Akash reads them with gopkg.in/yaml.v3 (a port of libyaml). This package accepts
// and rejects the same inputs as that library, produces the same tree (kinds, resolved
// tags, values, lines and columns) and resolves plain scalars with the same rules
// (YAML 1.2 core schema plus yaml.v3's 1.1 leftovers), which the tests check against
// go.yaml.in/yaml/v3 on the SDL corpus and under a differential fuzzer. It is about three
// times faster and makes a twentieth of the allocations (BenchmarkParseCorpus against
// BenchmarkYAMLv3Corpus), because it scans the input in place instead of through
// libyaml's character buffers and event queue, and keeps values as slices of the input.
//
// Differences from yaml.v3, all on input no SDL file contains: only UTF-8 input is
// accepted (a UTF-16 byte order mark is an error), and invalid UTF-8 or a control
// character anywhere is an error (yaml.v3 checks only as far as it reads); nesting
// deeper than MaxDepth and more than MaxNodes nodes are errors; a byte order mark after
// the first character is an ordinary character; comments are skipped, not kept (so an
// omitted value that ends a block before comment lines is placed at the next token,
// where libyaml places it at a comment). Like
// yaml.v3, Parse does not expand aliases, and an anchored collection may contain an
// alias of itself: consumers that expand aliases must bound the work (see sdl).
//
// Parse is safe for concurrent use; a Node tree is immutable once returned.
package yaml
