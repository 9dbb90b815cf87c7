// Package keys is a file keyring: one JSON file per named account key in a directory,
// readable only by its owner (directory 0700, files 0600). Private keys leave the
// keyring only through Export and Signer; nothing else prints or logs them.
//
// The files are plain (not encrypted): protect the directory as you would an SSH key.
// A Keyring is safe for concurrent use by one process; two processes adding the same
// name race on the file (the second write fails, never overwrites).
package keys

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"berth.dev/berth/api/ledger/v1"
)

// Keyring is a directory of key files.
type Keyring struct {
	dir    string
	prefix string
}

// Info is a key's public side.
type Info struct {
	Name    string        `json:"name"`
	Type    string        `json:"type"`
	Address string        `json:"address"`
	PubKey  ledger.PubKey `json:"pub_key"`
}

// file is the on-disk form of a key.
type file struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	PrivKey []byte `json:"priv_key"`
}

// ErrNotFound reports a key name the keyring does not have.
var ErrNotFound = errors.New("no such key")

// ErrExists reports a name that is taken.
var ErrExists = errors.New("key already exists")

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Open opens (creating if needed) the keyring in dir; addresses use the bech32 prefix.
func Open(dir, prefix string) (*Keyring, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("keyring %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", dir, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // G302: a directory needs its x bit
			return nil, fmt.Errorf("keyring %s: make it private: %w", dir, err)
		}
	}
	return &Keyring{dir: dir, prefix: prefix}, nil
}

// Dir is the keyring's directory.
func (k *Keyring) Dir() string { return k.dir }

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("key name %q: want 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

func (k *Keyring) path(name string) string { return filepath.Join(k.dir, name+".json") }

// Add generates a key of the type (ledger.KeySecp256k1 or ledger.KeyEd25519).
func (k *Keyring) Add(name, typ string) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	priv, err := ledger.NewPrivKey(typ)
	if err != nil {
		return Info{}, err
	}
	return k.Import(name, priv)
}

// Import stores an existing private key under name.
func (k *Keyring) Import(name string, priv ledger.PrivKey) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	b, err := json.MarshalIndent(file{Name: name, Type: priv.Type(), PrivKey: priv.Bytes()}, "", "  ")
	if err != nil {
		return Info{}, err
	}
	// Write a temporary file in full, then link it under the name: the name appears
	// complete or not at all, and an existing key is never overwritten.
	f, err := os.CreateTemp(k.dir, ".new-key-*")
	if err != nil {
		return Info{}, fmt.Errorf("key %q: %w", name, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	_, werr := f.Write(append(b, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return Info{}, fmt.Errorf("key %q: write: %w", name, err)
	}
	if err := os.Link(tmp, k.path(name)); errors.Is(err, fs.ErrExist) {
		return Info{}, fmt.Errorf("key %q: %w in %s", name, ErrExists, k.dir)
	} else if err != nil {
		return Info{}, fmt.Errorf("key %q: %w", name, err)
	}
	return k.info(name, priv)
}

func (k *Keyring) info(name string, priv ledger.PrivKey) (Info, error) {
	pub := priv.PubKey()
	addr, err := pub.Address(k.prefix)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: name, Type: priv.Type(), Address: addr, PubKey: pub}, nil
}

func (k *Keyring) load(name string) (ledger.PrivKey, error) {
	if err := checkName(name); err != nil {
		return ledger.PrivKey{}, err
	}
	b, err := os.ReadFile(k.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return ledger.PrivKey{}, fmt.Errorf("key %q: %w in %s", name, ErrNotFound, k.dir)
	}
	if err != nil {
		return ledger.PrivKey{}, fmt.Errorf("key %q: %w", name, err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return ledger.PrivKey{}, fmt.Errorf("key file %s: %w", k.path(name), err)
	}
	priv, err := ledger.PrivKeyFromBytes(f.Type, f.PrivKey)
	if err != nil {
		return ledger.PrivKey{}, fmt.Errorf("key file %s: %w", k.path(name), err)
	}
	return priv, nil
}

// Show returns a key's public side.
func (k *Keyring) Show(name string) (Info, error) {
	priv, err := k.load(name)
	if err != nil {
		return Info{}, err
	}
	return k.info(name, priv)
}

// List returns every key, sorted by name.
func (k *Keyring) List() ([]Info, error) {
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", k.dir, err)
	}
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && validName.MatchString(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]Info, 0, len(names))
	for _, n := range names {
		i, err := k.Show(n)
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, nil
}

// Signer returns the private key, for signing transactions.
func (k *Keyring) Signer(name string) (ledger.PrivKey, error) { return k.load(name) }

// Export is the key as JSON (type and private key): whoever holds it controls the
// account.
func (k *Keyring) Export(name string) ([]byte, error) {
	priv, err := k.load(name)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(file{Name: name, Type: priv.Type(), PrivKey: priv.Bytes()}, "", "  ")
}

// ImportExported stores a key written by Export under name.
func (k *Keyring) ImportExported(name string, data []byte) (Info, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return Info{}, fmt.Errorf("exported key: %w", err)
	}
	priv, err := ledger.PrivKeyFromBytes(f.Type, f.PrivKey)
	if err != nil {
		return Info{}, fmt.Errorf("exported key: %w", err)
	}
	return k.Import(name, priv)
}
