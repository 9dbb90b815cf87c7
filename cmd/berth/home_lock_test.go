package main

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestHomeInUseIsRefused: with berth dev running on a home, a second berth dev (also
// with --reset), berth chain start and berth provider run on that home are refused
// before any file of the home changes, saying which process holds it and what to do;
// the running marketplace still answers the CLI.
//
// It also checks that berth dev starts cleanly: nothing logged at error, klog's lines
// (client-go's watches, leader election) included. It is not parallel, so that the
// process's one klog logs to this berth dev's logger alone.
func TestHomeInUseIsRefused(t *testing.T) {
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	home := filepath.Join(t.TempDir(), "home")
	var log testenv.Buffer
	startDevLogging(t, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn})), "--home", home, "--nodes", "1", "--gpu-nodes", "0")
	if errs := linesWith(log.String(), "level=ERROR"); len(errs) > 0 {
		t.Errorf("berth dev logged errors while it started:\n%s", strings.Join(errs, "\n"))
	}
	_, must := cliWith(t, "--home", home)
	must("tenant", "deployment", "list")

	before := homeFiles(t, home)
	for _, args := range [][]string{
		{"dev", "--home", home, "--nodes", "1", "--gpu-nodes", "0"},
		{"chain", "start", "--home", home},
		{"provider", "run", "--home", home},
		{"dev", "--home", home, "--nodes", "1", "--gpu-nodes", "0", "--reset"},
	} {
		name := strings.Join(args, " ")
		err := runWithin(t, time.Minute, args...)
		if err == nil {
			t.Fatalf("berth %s on a home in use: no error", strings.Join(args, " "))
		}
		t.Logf("berth %s: %v", name, err)
		for _, want := range []string{"home in use: process " + strconv.Itoa(os.Getpid()), "of " + home, "another --home"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("berth %s: error %q lacks %q", name, err, want)
			}
		}
		if diff := diffFiles(before, homeFiles(t, home)); diff != "" {
			t.Fatalf("berth %s on a home in use changed the home:\n%s", name, diff)
		}
	}
	// The CLI still finds the running node where the home says it is.
	must("tenant", "deployment", "list")
}

// runWithin runs berth with args, giving up after d (a command that does not refuse
// would run until then).
func runWithin(t *testing.T, d time.Duration, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	root := newRootCommand(slog.New(slog.DiscardHandler))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

type homeFile struct {
	data  []byte
	mtime time.Time
}

// homeFiles reads every file of the home (content and modification time) except those
// the running berth dev itself keeps writing: the chain's databases (data/), the
// cluster (cluster/) and the provider's state (provider/).
func homeFiles(t *testing.T, home string) map[string]homeFile {
	t.Helper()
	files := map[string]homeFile{}
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(home, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "data" || rel == "cluster" || rel == "provider" {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[rel] = homeFile{data: b, mtime: info.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files[filepath.Join("config", "config.toml")]; !ok {
		t.Fatalf("no config/config.toml among the home's files %v", files)
	}
	return files
}

func diffFiles(before, after map[string]homeFile) string {
	var b strings.Builder
	for name, f := range before {
		g, ok := after[name]
		switch {
		case !ok:
			b.WriteString("  removed " + name + "\n")
		case !bytes.Equal(f.data, g.data):
			b.WriteString("  content of " + name + " changed\n")
		case !f.mtime.Equal(g.mtime):
			b.WriteString("  " + name + " modified at " + g.mtime.String() + "\n")
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			b.WriteString("  new file " + name + "\n")
		}
	}
	return b.String()
}

// linesWith are the lines of s that contain sub.
func linesWith(s, sub string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return out
}
