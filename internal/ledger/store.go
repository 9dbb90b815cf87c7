package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	dbm "github.com/cometbft/cometbft-db"
	"github.com/google/btree"
)

// kv is one state entry. Values are never mutated once stored.
type kv struct {
	k string
	v []byte
}

func kvLess(a, b kv) bool { return a.k < b.k }

// reader is read access to a state: the working state of the block being executed, or
// a committed view that queries read.
type reader interface {
	get(key string) ([]byte, bool)
	// ascend calls fn for each key with the prefix, from the first key ≥ from (from ""
	// means the start of the prefix), in key order, until fn returns false.
	ascend(prefix, from string, fn func(k string, v []byte) bool)
}

// view is a committed state: an immutable copy-on-write clone of the tree, safe to read
// from any goroutine while the next block executes.
type view struct {
	tree    *btree.BTreeG[kv]
	height  int64
	appHash []byte
}

func (v *view) get(key string) ([]byte, bool) { return treeGet(v.tree, key) }
func (v *view) ascend(prefix, from string, fn func(string, []byte) bool) {
	treeAscend(v.tree, prefix, from, fn)
}

func treeGet(t *btree.BTreeG[kv], key string) ([]byte, bool) {
	e, ok := t.Get(kv{k: key})
	return e.v, ok
}

func treeAscend(t *btree.BTreeG[kv], prefix, from string, fn func(string, []byte) bool) {
	start := prefix
	if from > start {
		start = from
	}
	t.AscendGreaterOrEqual(kv{k: start}, func(e kv) bool {
		if !strings.HasPrefix(e.k, prefix) {
			return false
		}
		return fn(e.k, e.v)
	})
}

// undoRec restores one key when a transaction fails.
type undoRec struct {
	key     string
	old     []byte
	existed bool
}

// store is the application state: an ordered in-memory map of every entry, written to
// disk at each commit and loaded whole at start. It keeps the set hash of its entries
// up to date on every write, an undo log for the transaction being executed, and the
// last committed view for queries.
//
// Writes happen on the consensus connection only (FinalizeBlock, Commit); committed()
// may be called from any goroutine.
type store struct {
	db    dbm.DB
	work  *btree.BTreeG[kv]
	hash  ltHash
	dirty map[string]struct{}
	undo  []undoRec
	inTx  bool
	view  atomic.Pointer[view]
}

// Keys in the database: state entries under "s", metadata under "m".
const (
	dbStatePrefix = "s"
	dbMetaHeight  = "m/height"
	dbMetaLtHash  = "m/lthash"
)

func openStore(db dbm.DB) (*store, error) {
	s := &store{db: db, work: btree.NewG(32, kvLess), dirty: map[string]struct{}{}}
	it, err := db.Iterator([]byte(dbStatePrefix), []byte{dbStatePrefix[0] + 1})
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	for ; it.Valid(); it.Next() {
		k := string(it.Key()[len(dbStatePrefix):])
		v := bytes.Clone(it.Value())
		s.work.ReplaceOrInsert(kv{k: k, v: v})
	}
	err = it.Error()
	_ = it.Close()
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var height int64
	if b, err := db.Get([]byte(dbMetaHeight)); err != nil {
		return nil, fmt.Errorf("read state height: %w", err)
	} else if b != nil {
		if len(b) != 8 {
			return nil, fmt.Errorf("state height record is %d bytes, want 8", len(b))
		}
		height = int64(binary.BigEndian.Uint64(b)) //nolint:gosec // written from a positive height
	}
	if b, err := db.Get([]byte(dbMetaLtHash)); err != nil {
		return nil, fmt.Errorf("read state hash: %w", err)
	} else if b != nil && !s.hash.setBytes(b) {
		return nil, fmt.Errorf("state hash record is %d bytes, want %d", len(b), 2*ltLanes)
	}
	s.view.Store(&view{tree: s.work.Clone(), height: height, appHash: s.appHash(height)})
	return s, nil
}

// appHash is the state's hash; the empty state before the first block hashes to nothing,
// as CometBFT expects of a new chain.
func (s *store) appHash(height int64) []byte {
	if height == 0 && s.work.Len() == 0 {
		return nil
	}
	return s.hash.sum()
}

func (s *store) committed() *view { return s.view.Load() }

func (s *store) get(key string) ([]byte, bool) { return treeGet(s.work, key) }

func (s *store) ascend(prefix, from string, fn func(string, []byte) bool) {
	treeAscend(s.work, prefix, from, fn)
}

func (s *store) set(key string, value []byte) {
	if cur, ok := s.work.Get(kv{k: key}); ok && bytes.Equal(cur.v, value) {
		return
	}
	old, existed := s.work.ReplaceOrInsert(kv{k: key, v: value})
	if existed {
		s.hash.add([]byte(key), old.v, -1)
	}
	s.hash.add([]byte(key), value, +1)
	s.dirty[key] = struct{}{}
	if s.inTx {
		s.undo = append(s.undo, undoRec{key: key, old: old.v, existed: existed})
	}
}

func (s *store) del(key string) {
	old, existed := s.work.Delete(kv{k: key})
	if !existed {
		return
	}
	s.hash.add([]byte(key), old.v, -1)
	s.dirty[key] = struct{}{}
	if s.inTx {
		s.undo = append(s.undo, undoRec{key: key, old: old.v, existed: true})
	}
}

// begin starts recording writes so that rollback can undo them.
func (s *store) begin() {
	s.inTx = true
	s.undo = s.undo[:0]
}

// rollback undoes every write since begin, newest first.
func (s *store) rollback() {
	s.inTx = false
	for i := len(s.undo) - 1; i >= 0; i-- {
		u := s.undo[i]
		if u.existed {
			s.set(u.key, u.old)
		} else {
			s.del(u.key)
		}
	}
	s.undo = s.undo[:0]
}

// keep ends the transaction, keeping its writes.
func (s *store) keep() {
	s.inTx = false
	s.undo = s.undo[:0]
}

// commit writes the block's changes and the metadata in one synced batch, then
// publishes the new view to queries.
func (s *store) commit(height int64) error {
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }() // after Write, Close only releases memory
	keys := make([]string, 0, len(s.dirty))
	for k := range s.dirty {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dk := []byte(dbStatePrefix + k)
		var err error
		if v, ok := s.get(k); ok {
			err = b.Set(dk, v)
		} else {
			err = b.Delete(dk)
		}
		if err != nil {
			return fmt.Errorf("commit height %d: %w", height, err)
		}
	}
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], uint64(height)) //nolint:gosec // heights are positive
	if err := b.Set([]byte(dbMetaHeight), h[:]); err != nil {
		return fmt.Errorf("commit height %d: %w", height, err)
	}
	if err := b.Set([]byte(dbMetaLtHash), s.hash.bytes()); err != nil {
		return fmt.Errorf("commit height %d: %w", height, err)
	}
	if err := b.WriteSync(); err != nil {
		return fmt.Errorf("commit height %d: %w", height, err)
	}
	clear(s.dirty)
	s.view.Store(&view{tree: s.work.Clone(), height: height, appHash: s.appHash(height)})
	return nil
}

// getJSON decodes the entry at key into v and reports whether it exists.
func getJSON(r reader, key string, v any) bool {
	b, ok := r.get(key)
	if ok {
		decodeEntry(key, b, v)
	}
	return ok
}

// decodeEntry decodes the value of a state entry (as an ascend callback receives it).
func decodeEntry(key string, b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		// State is written only by setJSON; a record that does not decode is corruption.
		panic(fmt.Sprintf("ledger: state entry %q does not decode: %v", key, err))
	}
}

func (s *store) setJSON(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ledger: encode state entry %q: %v", key, err))
	}
	s.set(key, b)
}
