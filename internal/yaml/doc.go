// Package yaml reads YAML documents into a node tree, quickly and within bounds.
//
// It exists for SDL: tenants' deployment files must be read exactly as Akash reads them,
// and Akash reads them with gopkg.in/yaml.v3 (a port of libyaml). This package accepts
// and rejects the same inputs as that library, produces the same tree (kinds, resolved
// tags, values, lines and columns) and resolves plain scalars with the same rules
// (YAML 1.2 core schema plus yaml.v3's 1.1 leftovers), which the tests check against
// go.yaml.in/yaml/v3 on the SDL corpus and under a differential fuzzer. It is about ten
// times faster, because it scans the input in place instead of through libyaml's
// character buffers and event queue.
//
// Differences from yaml.v3, all on input no SDL file contains: only UTF-8 input is
// accepted (a UTF-16 byte order mark is an error); nesting deeper than MaxDepth, an
// anchor that refers to itself and alias expansion beyond MaxNodes are errors here
// (yaml.v3 fails on them later, when decoding); comments are skipped, not kept.
//
// Parse is safe for concurrent use; a Node tree is immutable once returned.
package yaml
