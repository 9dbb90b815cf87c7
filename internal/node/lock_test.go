package node_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"berth.dev/berth/internal/node"
)

// TestLockHome: a part's lock is held once at a time; a refused attempt leaves the
// lock file as it was (content and modification time) and names the holder; parts are
// independent; a released lock can be taken again.
func TestLockHome(t *testing.T) {
	home := t.TempDir()
	l, err := node.LockHome(home, node.PartNode)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, node.LockFile(node.PartNode))
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	record, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(record), "pid "+strconv.Itoa(os.Getpid())+"\n") {
		t.Errorf("lock file %q does not name this process", record)
	}

	_, err = node.LockHome(home, node.PartNode)
	if !errors.Is(err, node.ErrHomeInUse) {
		t.Fatalf("second lock: %v, want ErrHomeInUse", err)
	}
	for _, want := range []string{"process " + strconv.Itoa(os.Getpid()), "runs the ledger node of " + home, "since ", "another --home"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second lock: %q lacks %q", err, want)
		}
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || !bytes.Equal(again, record) {
		t.Errorf("a refused lock changed the lock file: %q at %s, was %q at %s", again, after.ModTime(), record, before.ModTime())
	}

	p, err := node.LockHome(home, node.PartProvider)
	if err != nil {
		t.Fatalf("the provider's lock while the node's is held: %v", err)
	}
	p.Release()
	l.Release()
	l.Release() // twice is fine
	l, err = node.LockHome(home, node.PartNode)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l.Release()

	if _, err := node.LockHome(filepath.Join(home, "missing"), node.PartNode); err == nil {
		t.Error("locked a home that does not exist")
	}
}
