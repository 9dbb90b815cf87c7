package sdl

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"

	"berth.dev/berth/api/market/v1"
)

// akashVersion computes a manifest's version the way Akash does: encoding/json, then
// Cosmos SDK's SortJSON (decode into generic values, encode again), then sha256.
func akashVersion(m market.Manifest) ([]byte, error) {
	first, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(first, &generic); err != nil {
		return nil, err
	}
	sorted, err := json.Marshal(generic)
	sum := sha256.Sum256(sorted)
	return sum[:], err
}

// checkSortedKeys reports whether every JSON object in v's encoding has its keys in
// sorted order, as the manifest's canonical form requires.
func checkSortedKeys(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object  bool
		wantKey bool
		last    string
	}
	stack := []frame{{}}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		top := &stack[len(stack)-1]
		if key, ok := tok.(string); ok && top.object && top.wantKey {
			if top.last != "" && key <= top.last {
				return fmt.Errorf("key %q after %q: not sorted", key, top.last)
			}
			top.last, top.wantKey = key, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			top.wantKey = true
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			top.wantKey = true
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			top.wantKey = true
		}
	}
}
