package sdl

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// checkSortedKeys reports whether v's JSON encoding is canonical: re-encoding it through
// a generic value (which sorts object keys, as Akash's SortJSON does) changes nothing.
func checkSortedKeys(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return err
	}
	sorted, err := json.Marshal(generic)
	if err != nil {
		return err
	}
	if !bytes.Equal(b, sorted) {
		return fmt.Errorf("JSON keys are not in sorted order:\n%s\n%s", b, sorted)
	}
	return nil
}
